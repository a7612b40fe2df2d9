// The importance and prune stages of a Nemotron-H checkpoint (model/nemotron_h_model.h) as
// functions of explicit inputs, the counterparts of pipeline/steps.h importance_step and
// prune_step that `autocompress importance` and `prune` call for a hybrid checkpoint
// (io/nemotron_h_checkpoint.h is_nemotron_h_checkpoint). Distillation and evaluation take every
// kind already (steps.h distill_step, eval_step; model/trainable.h).
//
// What the files hold:
//   importance  nemotron_h_importance.safetensors (importance/nemotron_h_importance.h
//               save_nemotron_h_importance): "block_influence" [L] and per layer i its kind's
//               scores "layers.i.<name>", fp32, metadata format
//               "autocompress.nemotron_h_importance.v1", num_layers, num_tokens;
//   prune       the pruned model as the HF checkpoint folder of export/nemotron_h_export.h
//               (nemotron_h when every layer of a kind is alike, else nemotron_h_puzzle with
//               block_configs; removed blocks left out), with the parent's tokenizer files.
#pragma once
#include <string>

#include "data/dataset.h"
#include "importance/nemotron_h_importance.h"
#include "model/nemotron_h_model.h"

namespace ac {

/// The calibration windows of the Nemotron-H importance stage (the same windows as
/// ImportanceStep's: [batch_size, seq_len] int64, in stream order).
struct NemotronHImportanceStep {
  int64_t batch_size = 8;    // windows per batch
  int64_t seq_len = 256;     // tokens per window
  int64_t max_batches = -1;  // < 0 = every window of the calibration set
  c10::Device device = c10::kCPU;  // where the forwards run; the scores come back fp32 on the CPU
};

/// compute_nemotron_h_importance of `teacher` on the calibration windows. Throws ConfigError
/// naming `who` when the set makes no window, and whatever compute_nemotron_h_importance throws.
NemotronHImportance nemotron_h_importance_step(const NemotronHModel& teacher,
                                               const TokenDataset& calibration,
                                               const NemotronHImportanceStep& opt,
                                               const char* who);

/// Names of the inputs of a prune, for its errors: the flag and file of each.
struct NemotronHPruneInputs {
  std::string importance = "importance";  // e.g. "--importance imp.safetensors"
  std::string target = "the target";      // e.g. "--arch arch.json"
  std::string parent = "the parent";      // e.g. "parent/config.json"
};

/// `parent` pruned to `target` (the parent's layer count, removed layers marked; prune/arch.h
/// read_arch) keeping the most important structures (prune/nemotron_h_prune.h). Both inputs are
/// checked against the parent before any slicing: ConfigError("[who] ...") naming the
/// importance file and tensor when `imp` was computed for another model
/// (check_nemotron_h_importance_matches), and naming the target and the parent with
/// validate_nemotron_h_target's list of problems (layer, field, expected, found) when the
/// pruning cannot build `target`. The result has its own storage where sliced.
NemotronHModel nemotron_h_prune_step(const NemotronHModel& parent, const NemotronHImportance& imp,
                                     const ModelConfig& target, const NemotronHPruneInputs& names,
                                     const char* who);

}  // namespace ac
