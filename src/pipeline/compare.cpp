#include "pipeline/compare.h"

#include <fmt/format.h>

#include <optional>

#include "common/runtime.h"
#include "io/checkpoint.h"
#include "prune/depth.h"
#include "prune/prune.h"
#include "prune/pruning_map.h"

namespace ac {

nlohmann::json comparison_row(const SearchOutcome& o, const ModelConfig& student,
                              const CostEstimate& predicted, const Measurement* measured,
                              const EvalResult& after_prune, const EvalResult& eval,
                              const DistillResult& d, const CompareContext& ctx,
                              const std::string& model_path) {
  return {{"method", o.method},
          {"config", describe(student)},
          {"parameters", student.num_parameters()},
          {"search_tokens", o.search_tokens},
          {"search_seconds", o.seconds},
          {"model", model_path},
          {"predicted", predicted.to_json()},
          {"measured", measured ? measured->to_json() : nlohmann::json(nullptr)},
          {"limits_predicted", check_limits(predicted, ctx.search_limits)},
          {"limits_measured", measured ? nlohmann::json(check_limits(measured->as_estimate(), ctx.limits))
                                       : nlohmann::json(nullptr)},
          {"eval_after_prune", after_prune.to_json()},
          {"eval", eval.to_json()},
          {"distill", {{"tokens", d.tokens}, {"steps", d.steps_done}, {"wall_s", d.wall_s},
                       {"last_loss", d.loss_curve.empty() ? 0.0 : d.loss_curve.back()}}}};
}

nlohmann::json run_method_for_comparison(const SearchOutcome& o, const CompareContext& ctx,
                                         const fs::path& model_dir, const std::string& model_name,
                                         const fs::path& distill_log) {
  log_info(fmt::format("[compress] {}: prune, distill, evaluate and measure {}", o.method,
                       describe(o.best.config)));
  PrunePlan plan = plan_pruning(ctx.teacher->config, *ctx.imp, o.best.target);
  LlamaModel student = drop_removed_blocks(apply_plan(*ctx.teacher, plan));
  student.weights = clone(student.config, student.weights);
  EvalResult after_prune = evaluate(student, ctx.teacher, *ctx.heldout, ctx.eval);
  DistillOptions dopt = ctx.distill;
  dopt.log_path = distill_log;
  dopt.state_dir.clear();
  dopt.hidden_map = pruning_map_from_plan(ctx.teacher->config, plan, /*blocks_dropped=*/true);
  DistillResult d = distill(*ctx.teacher, student, *ctx.train, dopt);
  stop_if_interrupted(d, "compress");
  EvalResult eval = evaluate(student, ctx.teacher, *ctx.heldout, ctx.eval);
  StoryTasksStageOptions topt = ctx.tasks;
  topt.out_dir = model_dir.parent_path() / ("tasks-" + o.method);
  topt.files_prefix = "tasks-" + o.method;
  topt.score_teacher = false;  // the same items as the main result's: its teacher scores stand
  const nlohmann::json tasks = run_story_tasks_stage(*ctx.teacher, student, ctx.heldout->ids(), topt);
  fs::create_directories(model_dir);
  save_checkpoint(model_dir, student, ctx.teacher_dir);
  // Measured beside the teacher in paired rounds, as the main result: the same protocol and
  // the same verdict for every row of the comparison.
  std::optional<Measurement> measured;
  std::optional<PairedVerdict> verdict;
  if (ctx.not_measured.empty()) {
    PairedRounds rounds;
    if (ctx.measure_pair) {
      rounds = ctx.measure_pair(*ctx.teacher, student, PairedRounds{});
    } else {
      const c10::Device dev = measurement_device(*ctx.scenario);
      rounds = measure_paired(
          LlamaModel{ctx.teacher->config, to_device(ctx.teacher->config, ctx.teacher->weights, dev)},
          LlamaModel{student.config, to_device(student.config, student.weights, dev)},
          ctx.scenario->workload, ctx.scenario->limits, ctx.measure);
    }
    measured = rounds.student_pooled();
    verdict = judge_paired(rounds, ctx.scenario->limits);
  }
  CostEstimate predicted = predict(student.config, *ctx.scenario, ctx.profile);
  nlohmann::json row = comparison_row(o, student.config, predicted, measured ? &*measured : nullptr,
                                      after_prune, eval, d, ctx, model_name);
  if (verdict) {
    row["limits_measured"] = verdict->failures();
    row["measured_verdict"] = verdict->to_json();
  }
  row["tasks"] = tasks;
  return row;
}

}  // namespace ac
