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

Limits tighten_search_limits(const Limits& search_limits,
                             const std::vector<LimitSlack>& measured_slack, double margin) {
  if (search_limits.has_relative())
    throw ConfigError(msg("fit", "the search limits hold fractions of the teacher's cost: "
                                 "resolve them first"));
  if (!(margin >= 0 && margin < 0.5))
    throw ConfigError(msg("fit", "margin: expected a value in [0, 0.5), found {}", margin));
  Limits out = search_limits;
  auto missing = [](const std::string& name) {
    return ConfigError(msg("fit", "the measured limit {} is broken but the search had no {} "
                                  "limit to tighten", name, name));
  };
  for (const LimitSlack& s : measured_slack) {
    if (s.holds()) continue;
    const double max_scale = (1 - margin) / (1 - s.slack);  // slack < 0: scale < 1
    if (s.name == "ttft_ms") {
      if (!out.ttft_ms) throw missing(s.name);
      *out.ttft_ms *= max_scale;
    } else if (s.name == "tpot_ms") {
      if (!out.tpot_ms) throw missing(s.name);
      *out.tpot_ms *= max_scale;
    } else if (s.name == "peak_memory_bytes") {
      if (!out.peak_memory_bytes) throw missing(s.name);
      *out.peak_memory_bytes = int64_t(double(*out.peak_memory_bytes) * max_scale);
    } else if (s.name == "min_throughput_tokens_per_s") {
      if (!out.min_throughput_tokens_per_s) throw missing(s.name);
      *out.min_throughput_tokens_per_s *= (1 + margin) / (1 + s.slack);  // slack < 0: > 1
    } else {
      throw ConfigError(msg("fit", "unknown limit '{}'", s.name));
    }
  }
  return out;
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
    a.limits = scenario_limits.resolve(a.teacher_measured);
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
