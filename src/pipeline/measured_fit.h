#pragma once
// Fit to the measurement: the search holds *predictions* to the limits; the deployment sees
// *measurements*. Before minutes of distillation are spent on it, the searched architecture is
// measured (its latency does not depend on the weights' values) beside the teacher, in the same
// interleaved rounds. When a measured limit is broken, the limit the search was held to is
// tightened by the measured overshoot and the search runs again, up to `max_attempts` times.
//
//   search(L_1) -> candidate_1 -> measured: breaks by 8%  -> L_2 = L_1 / 1.08 x (1 - margin)
//   search(L_2) -> candidate_2 -> measured: holds          -> distil candidate_2
//
// This closes the loop the cost model's own error leaves open (docs/benchmarks.md: the main
// job's TPOT ratio, predicted 0.563, measured 0.649 before this existed).

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "hardware/cost_model.h"
#include "hardware/paired_measure.h"
#include "hardware/scenario.h"
#include "model/config.h"
#include "pipeline/limits.h"

namespace ac {

/// One search + measurement round.
struct FitAttempt {
  Limits search_limits;    // absolute limits the search held predictions to
  ModelConfig config;      // the search's result
  CostEstimate predicted;  // cost model
  CostEstimate teacher_measured, measured;  // the teacher and the candidate, pooled over rounds
  Limits limits;           // scenario limits resolved against teacher_measured
  PairedVerdict verdict;   // every limit judged on the paired rounds (hardware/paired_measure.h)
  std::string broken;      // verdict.failures(): "" = every measured limit holds with 95%
                           // confidence; a limit "not yet certain" counts as broken
  PairedRounds rounds;     // the measured rounds (not written to JSON): the final check of the
                           // same architecture pools them with its own
  std::string search_error;  // set when this attempt's search found nothing (InfeasibleError):
                             // config/measurements are then empty and the loop stopped

  nlohmann::json to_json() const;
};

/// What the loop needs from its caller. `search` returns the candidate for absolute limits
/// (and may throw InfeasibleError when nothing meets them); `measure` returns the teacher and
/// the candidate measured in the same rounds (measure_paired); `predict` the cost model's
/// estimate of a config.
struct FitCallbacks {
  std::function<ModelConfig(const Limits& search_limits)> search;
  std::function<PairedRounds(const ModelConfig& candidate)> measure;
  std::function<CostEstimate(const ModelConfig& config)> predict;
};

/// Runs search -> measure up to `max_attempts` times (see the file comment) and returns every
/// attempt in order. Each attempt's limits are judged on its paired rounds (judge_paired); a
/// limit broken or not yet certain is tightened by the unfavourable end of its 95% interval
/// (PairedVerdict::conservative_slack). The last attempt with a config is the result: the first
/// that holds every measured limit, or the last tried. A search that finds nothing under tightened limits
/// (InfeasibleError) ends the loop and is recorded as an attempt with search_error set; on the
/// first attempt it is rethrown (nothing meets the scenario at all). `scenario_limits` may be
/// relative (resolved per attempt against the teacher measured in that attempt's rounds).
/// Throws ConfigError if max_attempts < 1.
std::vector<FitAttempt> fit_to_measurement(const Limits& scenario_limits,
                                           const Limits& first_search_limits,
                                           const FitCallbacks& callbacks, int max_attempts,
                                           double margin);

/// The attempt whose architecture is the loop's result (the last one with a config).
const FitAttempt& fitted_attempt(const std::vector<FitAttempt>& attempts);

}  // namespace ac
