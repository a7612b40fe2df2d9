// The importance and prune stages of a Qwen3-MoE or Mixtral checkpoint (model/moe_model.h) as
// functions of explicit inputs, the counterparts of pipeline/steps.h importance_step and
// prune_step that `autocompress importance` and `prune` call for such a checkpoint
// (io/checkpoint.h is_moe_family_checkpoint). Distillation and evaluation take every kind
// already (steps.h distill_step, eval_step; model/trainable.h).
//
// What the files hold:
//   importance  moe_importance.safetensors (importance/moe_importance.h save_moe_importance): per
//               sparse layer i "layers.i.routing_share", "layers.i.output_norm",
//               "layers.i.experts" [E] and "layers.i.expert_ffn" [E, Fe], fp32, metadata format
//               "autocompress.moe_importance.v1", num_layers, num_tokens. Attention and dense
//               layers are not scored: the pruning shrinks the experts alone;
//   prune       the pruned model as the HF checkpoint folder of export/moe_hf_export.h (its
//               parent's class; every sparse layer with one expert count, k and width).
#pragma once
#include <string>

#include "data/dataset.h"
#include "importance/moe_importance.h"
#include "model/moe_model.h"

namespace ac {

/// The calibration windows of the MoE importance stage (ImportanceStep's: [batch_size, seq_len]
/// int64, in stream order).
struct MoeImportanceStep {
  int64_t batch_size = 8;    // windows per batch
  int64_t seq_len = 256;     // tokens per window
  int64_t max_batches = -1;  // < 0 = every window of the calibration set
};

/// compute_moe_importance of `teacher` on the calibration windows, on the CPU. Throws
/// ConfigError naming `who` when the set makes no window, and whatever compute_moe_importance
/// throws.
MoeImportance moe_importance_step(const MoeModel& teacher, const TokenDataset& calibration,
                                  const MoeImportanceStep& opt, const char* who);

/// Names of the inputs of a prune, for its errors: the flag and file of each.
struct MoePruneInputs {
  std::string importance = "importance";  // e.g. "--importance imp.safetensors"
  std::string target = "the target";      // e.g. "--arch arch.json"
  std::string parent = "the parent";      // e.g. "parent/config.json"
};

/// `parent` with its experts pruned to `target` (prune/moe_prune.h). Both inputs are checked
/// against the parent before any slicing: ConfigError("[who] ...") naming the importance file
/// and tensor when `imp` was computed for another model (check_moe_importance_matches), and
/// validate_moe_target's list of problems naming the target and the parent.
MoeModel moe_prune_step(const MoeModel& parent, const MoeImportance& imp,
                        const ModelConfig& target, const MoePruneInputs& names, const char* who);

}  // namespace ac
