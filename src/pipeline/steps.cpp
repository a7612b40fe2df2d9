#include "pipeline/steps.h"

#include <fmt/format.h>

#include "common/error.h"
#include "hardware/granularity.h"
#include "io/checkpoint.h"
#include "model/trainable.h"
#include "prune/arch.h"
#include "prune/depth.h"

namespace ac {

Importance importance_step(const LlamaModel& teacher, const TokenDataset& calibration,
                           const ImportanceStep& opt, const char* who) {
  const std::vector<at::Tensor> batches =
      calibration.sequential_batches(opt.batch_size, opt.seq_len, opt.max_batches);
  if (batches.empty())
    throw ConfigError(msg(who, "the calibration set's {} tokens make no window of --seq-len {}",
                          calibration.num_tokens(), opt.seq_len));
  return compute_importance(teacher, batches, opt.importance);
}

std::vector<WidthRepeatability> repeatability_that_matters(std::vector<WidthRepeatability> rep,
                                                           const Limits& limits) {
  const bool ttft = limits.ttft_ms || limits.min_throughput_tokens_per_s;
  const bool tpot = limits.tpot_ms || limits.min_throughput_tokens_per_s;
  for (auto& r : rep) {
    if (!ttft) r.ttft_spread = 0;
    if (!tpot) r.tpot_spread = 0;
  }
  return rep;
}

SearchOutcome search_step(const std::string& method, const LlamaModel& teacher,
                          const Importance& imp, const Scenario& scenario, const Profile* profile,
                          const RunLimits& limits, const TokenDataset& calibration,
                          int64_t seq_len, SearchSettings settings, const TokenDataset* train) {
  // Unset (0): the profile's width step, else the device's; < 0 is refused by the search.
  int64_t& g = settings.autocompress.space.width_granularity;
  if (g == 0) g = width_granularity_for(profile, scenario.device_spec);
  settings.minitron.width_granularity = g;
  // Widths whose profile predictions moved more than twice the safety margin between its
  // passes are left out of AutoCompress's space (search_space.h max_width_spread), counting the
  // spread of the latencies the limits bound only: TTFT for a TTFT limit, TPOT for a TPOT limit,
  // both for a throughput minimum (a request's TTFT and its decode steps).
  if (profile && !profile->width_repeatability.empty() && limits.safety_margin > 0) {
    settings.autocompress.space.width_repeatability =
        repeatability_that_matters(profile->width_repeatability, limits.for_search);
    settings.autocompress.space.max_width_spread = 2 * limits.safety_margin;
  }
  return run_search_method(method, teacher, imp, scenario, profile, limits, calibration, seq_len,
                           settings, train);
}

PrunedModel prune_step(const LlamaModel& teacher, const Importance& imp, const ModelConfig& target,
                       bool keep_removed_blocks) {
  const PrunePlan plan = plan_pruning(teacher.config, imp, target);
  PrunedModel p;
  p.model = apply_plan(teacher, plan);
  if (!keep_removed_blocks) p.model = drop_removed_blocks(p.model);
  p.map = pruning_map_from_plan(teacher.config, plan, /*blocks_dropped=*/!keep_removed_blocks);
  check_pruning_map(p.map, teacher.config, p.model.config, kPruningMapFile);
  return p;
}

void write_pruned(const fs::path& dir, const PrunedModel& pruned, const fs::path& tokenizer_from) {
  save_checkpoint(dir, pruned.model, tokenizer_from);
  write_pruning_map(dir / kPruningMapFile, pruned.map);
}

namespace {

template <class M>
DistillResult distill_any(const M& teacher, M& student, const TokenDataset& train,
                          const DistillOptions& opt, const char* who,
                          const std::string& resume_hint) {
  DistillResult r = distill(teacher, student, train, opt);
  stop_if_interrupted(r, who, fmt::format("its state is in {}: {}", opt.state_dir.string(),
                                          resume_hint));
  return r;
}

}  // namespace

DistillResult distill_step(const LlamaModel& teacher, LlamaModel& student,
                           const TokenDataset& train, const DistillOptions& opt, const char* who,
                           const std::string& resume_hint) {
  return distill_any(teacher, student, train, opt, who, resume_hint);
}

DistillResult distill_step(const NemotronHModel& teacher, NemotronHModel& student,
                           const TokenDataset& train, const DistillOptions& opt, const char* who,
                           const std::string& resume_hint) {
  return distill_any(teacher, student, train, opt, who, resume_hint);
}

DistillResult distill_step(const MoeModel& teacher, MoeModel& student, const TokenDataset& train,
                           const DistillOptions& opt, const char* who,
                           const std::string& resume_hint) {
  return distill_any(teacher, student, train, opt, who, resume_hint);
}

EvalResult eval_step(const LlamaModel& model, const LlamaModel* teacher,
                     const TokenDataset& heldout, const EvalOptions& opt, int64_t stride) {
  if (stride > 0)
    return sliding_window_evaluate(model, teacher, heldout.ids(), opt.seq_len, stride, opt);
  return evaluate(model, teacher, heldout, opt);
}

namespace {

template <class M>
EvalResult eval_packed(const M& model, const M* teacher, const TokenDataset& heldout,
                       const EvalOptions& opt, int64_t stride) {
  if (stride > 0)
    throw ConfigError(msg("eval", "--stride {}: the sliding-window evaluation runs the Llama "
                          "family's forward only; a {} model is scored in packed windows of "
                          "--seq-len (leave --stride out)", stride, model_kind_name(model)));
  return evaluate(model, teacher, heldout, opt);
}

}  // namespace

EvalResult eval_step(const NemotronHModel& model, const NemotronHModel* teacher,
                     const TokenDataset& heldout, const EvalOptions& opt, int64_t stride) {
  return eval_packed(model, teacher, heldout, opt, stride);
}

EvalResult eval_step(const MoeModel& model, const MoeModel* teacher, const TokenDataset& heldout,
                     const EvalOptions& opt, int64_t stride) {
  return eval_packed(model, teacher, heldout, opt, stride);
}

}  // namespace ac
