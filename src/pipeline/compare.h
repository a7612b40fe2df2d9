// `compress --method both`: every search method's architecture pruned, distilled with the SAME
// token budget and data, evaluated on the SAME held-out data and measured on this device, so that
// report.json's "comparison" (and report.md's table) shows the methods side by side: quality,
// measured cost, search tokens.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "data/dataset.h"
#include "distill/distill.h"
#include "eval/eval.h"
#include "hardware/measure.h"
#include "hardware/paired_measure.h"
#include "hardware/profile.h"
#include "pipeline/story_tasks.h"
#include "search/outcome.h"

namespace ac {

/// What every method's run shares with the main one.
struct CompareContext {
  const LlamaModel* teacher = nullptr;
  const Importance* imp = nullptr;
  const Scenario* scenario = nullptr;
  const Profile* profile = nullptr;
  const TokenDataset* train = nullptr;    // distillation data (the main run's)
  const TokenDataset* heldout = nullptr;  // evaluation data (the main run's)
  Limits limits;         // resolved against the teacher's measurement (measured check)
  Limits search_limits;  // resolved against the teacher's prediction (what the search met)
  DistillOptions distill;  // the main run's options (budget, batch, lr, seed); log_path replaced
  EvalOptions eval;
  PairedOptions measure;  // each method's model is measured beside the teacher in paired
                          // rounds (hardware/paired_measure.h)
  std::string not_measured;  // non-empty: the scenario cannot be measured here (why), and no
                             // method's model is measured (not_measurable_reason)
  fs::path teacher_dir;  // tokenizer files copied into each saved model
  // The main run's in-domain tasks stage (same seed and items, so the same tasks); out_dir is
  // replaced by tasks-METHOD beside model_dir. max_items 0 = no tasks.
  StoryTasksStageOptions tasks;
  // How the teacher and a method's model are measured in paired rounds in the scenario's
  // engine (the main run's: the native engine, or llama.cpp); empty = the native engine.
  std::function<PairedRounds(const LlamaModel& teacher, const LlamaModel& student,
                             PairedRounds prior)> measure_pair;
};

/// One row of report.json's "comparison" from results at hand:
///   {"method", "config", "parameters", "search_tokens", "search_seconds", "model",
///    "predicted", "measured", "limits_predicted", "limits_measured",
///    "eval_after_prune", "eval", "distill": {"tokens", "steps", "wall_s", "last_loss"}}
/// (run_method_for_comparison adds "tasks": the tasks stage's JSON for that model.)
/// `measured` null: not measured (ctx.not_measured says why); "measured" and "limits_measured"
/// are then null.
nlohmann::json comparison_row(const SearchOutcome& o, const ModelConfig& student,
                              const CostEstimate& predicted, const Measurement* measured,
                              const EvalResult& after_prune, const EvalResult& eval,
                              const DistillResult& distilled, const CompareContext& ctx,
                              const std::string& model_path);

/// Prunes `o`'s architecture from the teacher, evaluates it on the held-out data, distils it
/// with ctx.distill (log at `distill_log`), evaluates it again, saves it in `model_dir` (created)
/// and measures it; returns its comparison_row (model path given as `model_name`).
/// Throws what prune, distill, eval and save throw.
nlohmann::json run_method_for_comparison(const SearchOutcome& o, const CompareContext& ctx,
                                         const fs::path& model_dir, const std::string& model_name,
                                         const fs::path& distill_log);

}  // namespace ac
