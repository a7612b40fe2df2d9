// The work of the stages that a subcommand also runs on its own, each a function of explicit
// inputs: `autocompress importance`, `search`, `prune`, `distill` and `eval` call these with
// their flags and write --out; `compress` calls the same functions from its stages
// (pipeline/stages.h), which record the result in the run folder. So a stage run on its own
// does what the same stage does inside `compress` (the same batches, the same pruning with the
// same map, the same interruption handling, the same evaluation).
//
//   step             compress stage     subcommand
//   importance_step  importance         importance
//   search_step      search             search
//   prune_step       search, finish     prune
//   distill_step     finish             distill
//   eval_step        finish, eval       eval
//
// The profile and export stages call the library functions their subcommands call
// (run_profile, export_model, engine_load_errors) directly.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "distill/distill.h"
#include "eval/eval.h"
#include "hardware/profile.h"
#include "hardware/scenario.h"
#include "importance/importance.h"
#include "model/llama.h"
#include "model/moe_model.h"
#include "model/nemotron_h_model.h"
#include "pipeline/limits.h"
#include "prune/prune.h"
#include "prune/pruning_map.h"
#include "search/outcome.h"

namespace ac {

/// The calibration windows of the importance stage.
struct ImportanceStep {
  int64_t batch_size = 8;    // windows per batch
  int64_t seq_len = 256;     // tokens per window
  int64_t max_batches = -1;  // < 0 = every window of the calibration set
  ImportanceOptions importance;
};

/// Minitron's activation importance of `teacher` on the calibration set, in stream order
/// ([batch_size, seq_len] int64 windows). Throws ConfigError naming `who` when the set makes no
/// window, and whatever compute_importance throws.
Importance importance_step(const LlamaModel& teacher, const TokenDataset& calibration,
                           const ImportanceStep& opt, const char* who);

/// The profile's repeatability per width with only the spreads `limits` bind kept: TTFT's for a
/// TTFT limit, TPOT's for a TPOT limit, both for a throughput minimum; the others 0.
std::vector<WidthRepeatability> repeatability_that_matters(std::vector<WidthRepeatability> rep,
                                                           const Limits& limits);

/// One method's search under `limits` (the algorithms hold predictions to
/// limits.search_with_margin()): run_search_method with the width step of both searches set to
/// settings.autocompress.space.width_granularity when set (not 0: a flag), else the profile's
/// derived granularity, else the device's default (hardware/granularity.h). With a profile
/// that says how repeatable it is per width, AutoCompress leaves out the reduced widths whose
/// passes disagree by more than twice limits.safety_margin in a latency the limits bind
/// (repeatability_that_matters; search_space.h max_width_spread).
/// `train`: the text of the retraining (null when no retraining is asked for).
SearchOutcome search_step(const std::string& method, const LlamaModel& teacher,
                          const Importance& imp, const Scenario& scenario, const Profile* profile,
                          const RunLimits& limits, const TokenDataset& calibration,
                          int64_t seq_len, SearchSettings settings, const TokenDataset* train);

/// A pruned student and how it maps onto its teacher.
struct PrunedModel {
  LlamaModel model;  // the slice (new storage; the teacher is untouched)
  PruningMap map;    // student layer -> teacher layer (the hidden-state loss of distill)
};

/// `teacher` sliced to `target` (the parent's layer count, removed parts marked: prune/arch.h)
/// keeping the most important channels (prune/prune.h). A block whose attention and FFN are
/// both removed is the identity and is dropped, unless `keep_removed_blocks`. Throws
/// ConfigError as plan_pruning and check_pruning_map do.
PrunedModel prune_step(const LlamaModel& teacher, const Importance& imp, const ModelConfig& target,
                       bool keep_removed_blocks = false);

/// The pruned checkpoint (io/checkpoint.h, the tokenizer copied from `tokenizer_from`) and its
/// pruning_map.json into the existing folder `dir` (a staging folder: the caller commits it).
void write_pruned(const fs::path& dir, const PrunedModel& pruned, const fs::path& tokenizer_from);

/// distill() of `student` toward `teacher` on `train`. A distillation stopped by SIGINT /
/// SIGTERM keeps its state in opt.state_dir and throws Error naming `who`, the step, the state
/// folder and `resume_hint` (how to continue); everything else as distill() throws.
DistillResult distill_step(const LlamaModel& teacher, LlamaModel& student,
                           const TokenDataset& train, const DistillOptions& opt, const char* who,
                           const std::string& resume_hint);

/// The same for a Nemotron-H or a Qwen3-MoE / Mixtral student (distill/distill.h, the kinds'
/// overloads: what reads the Llama forward's hidden states is refused there).
DistillResult distill_step(const NemotronHModel& teacher, NemotronHModel& student,
                           const TokenDataset& train, const DistillOptions& opt, const char* who,
                           const std::string& resume_hint);
DistillResult distill_step(const MoeModel& teacher, MoeModel& student, const TokenDataset& train,
                           const DistillOptions& opt, const char* who,
                           const std::string& resume_hint);

/// The held-out evaluation of `model` (and its agreement with `teacher` when not null):
/// packed windows of opt.seq_len, or, with stride > 0, windows of opt.seq_len sliding by
/// `stride` (eval/eval.h). Bits per byte when opt.token_bytes is set. Throws as evaluate does.
EvalResult eval_step(const LlamaModel& model, const LlamaModel* teacher,
                     const TokenDataset& heldout, const EvalOptions& opt, int64_t stride = 0);

/// The same for a Nemotron-H or a Qwen3-MoE / Mixtral model in packed windows. Throws
/// ConfigError naming --stride when `stride` > 0 (the sliding-window evaluation runs the Llama
/// family's forward only).
EvalResult eval_step(const NemotronHModel& model, const NemotronHModel* teacher,
                     const TokenDataset& heldout, const EvalOptions& opt, int64_t stride = 0);
EvalResult eval_step(const MoeModel& model, const MoeModel* teacher, const TokenDataset& heldout,
                     const EvalOptions& opt, int64_t stride = 0);

}  // namespace ac
