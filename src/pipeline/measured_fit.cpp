#include "pipeline/measured_fit.h"

#include <fmt/format.h>

#include "common/error.h"
#include "common/runtime.h"

namespace ac {

using json = nlohmann::json;

json FitAttempt::to_json() const {
  json j = {{"search_limits", search_limits.to_json()}};
  if (!search_error.empty()) {
    j["search_error"] = search_error;
    return j;
  }
  j["config"] = describe(config);
  j["parameters"] = config.num_parameters();
  j["predicted"] = predicted.to_json();
  j["teacher_measured"] = teacher_measured.to_json();
  j["measured"] = measured.to_json();
  j["limits"] = limits.to_json();
  j["verdict"] = verdict.to_json();
  j["broken"] = broken;
  return j;
}

std::vector<FitAttempt> fit_to_measurement(const Limits& scenario_limits,
                                           const Limits& first_search_limits,
                                           const FitCallbacks& cb, int max_attempts,
                                           double margin) {
  if (max_attempts < 1)
    throw ConfigError(msg("fit", "max_attempts: expected >= 1, found {}", max_attempts));
  std::vector<FitAttempt> attempts;
  Limits search_limits = first_search_limits;
  for (int i = 0; i < max_attempts; ++i) {
    FitAttempt a;
    a.search_limits = search_limits;
    try {
      a.config = cb.search(search_limits);
    } catch (const InfeasibleError& e) {
      if (attempts.empty()) throw;
      a.search_error = e.what();
      log_warn(fmt::format("[fit] attempt {}: the search found nothing under the tightened "
                           "limits; keeping attempt {} ({})", i + 1, i, e.what()));
      attempts.push_back(std::move(a));
      break;
    }
    a.predicted = cb.predict(a.config);
    a.rounds = cb.measure(a.config);
    a.teacher_measured = a.rounds.teacher_pooled().as_estimate();
    a.measured = a.rounds.student_pooled().as_estimate();
    a.limits = resolve_limits(scenario_limits, a.teacher_measured);
    a.verdict = judge_paired(a.rounds, scenario_limits);
    a.broken = a.verdict.failures();
    log_info(fmt::format("[fit] attempt {}: {} measured: {}", i + 1, describe(a.config),
                         a.broken.empty() ? "every limit holds" : a.broken));
    const std::vector<LimitSlack> slack = a.verdict.conservative_slack();
    attempts.push_back(std::move(a));
    if (attempts.back().broken.empty()) break;
    search_limits = tighten_search_limits(search_limits, slack, margin);
  }
  return attempts;
}

const FitAttempt& fitted_attempt(const std::vector<FitAttempt>& attempts) {
  for (auto it = attempts.rbegin(); it != attempts.rend(); ++it)
    if (it->search_error.empty()) return *it;
  throw InternalError("[fit] no attempt has an architecture");
}

}  // namespace ac
