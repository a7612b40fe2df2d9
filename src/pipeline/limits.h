// The limits of a run, from the scenario file to the verdict, in one type. A scenario writes
// limits as absolute values (ms, bytes, tokens/s) or as fractions of the teacher's cost
// ("TPOT <= 0.6 x the teacher's"). Along one run they take four forms:
//
//   as written     the scenario's, fractions included                    (report: limits_as_written)
//   for search     fractions x the teacher's *prediction*: the search    (report: limits_for_search)
//                  compares predictions with predictions, so an offset
//                  between profile and measurement cancels out; the fit
//                  to the measurement tightens them (tightened)
//   with margin    for search x (1 - safety_margin) (a throughput          what the algorithms receive
//                  minimum x (1 + margin)): the cost model's error is
//                  absorbed by the search, not by the user
//   measured       fractions x the teacher's *measurement* on the         (report: limits)
//                  scenario's engine: what the measured verdict checks
//
// Nothing outside this type turns a fraction into an absolute limit.
#pragma once
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "hardware/cost_model.h"
#include "hardware/scenario.h"

namespace ac {

/// Absolute limits: each relative one becomes fraction x the teacher's value (`teacher`: its
/// predicted or measured cost; ms, bytes, tokens/s); absolute ones are kept. The result has no
/// relative limits. A memory fraction saturates at 2^62 bytes.
Limits resolve_limits(const Limits& as_written, const CostEstimate& teacher);

/// Multiplies the limit called `name` (ttft_ms, tpot_ms, peak_memory_bytes,
/// min_throughput_tokens_per_s; Limits::to_json's keys) by `scale` in place; peak memory is
/// truncated to whole bytes. Returns false when `l` has no such limit. Throws ConfigError on
/// another name.
bool scale_limit(Limits& l, const std::string& name, double scale);

/// `absolute` x (1 - margin) for maxima (TTFT, TPOT, peak memory), x (1 + margin) for the
/// throughput minimum. Throws ConfigError if `absolute` holds relative limits or margin is
/// outside [0, 1).
Limits with_safety_margin(const Limits& absolute, double margin);

/// The limits of one run in each of their forms (file comment).
struct RunLimits {
  Limits as_written;          // the scenario's (may hold fractions of the teacher)
  double safety_margin = 0;   // the search meets for_search x (1 - margin) by the cost model
  Limits for_search;          // absolute: against the teacher's prediction, maybe tightened
  Limits measured;            // absolute: against the teacher's measurement (= for_search's
                              // resolution when nothing is measured)

  /// Resolves `as_written` against the teacher's prediction (for the search) and, when given,
  /// its measurement (for the verdict; else the prediction). Throws ConfigError on a margin
  /// outside [0, 1).
  static RunLimits resolve(const Limits& as_written, double safety_margin,
                           const CostEstimate& teacher_predicted,
                           const std::optional<CostEstimate>& teacher_measured = std::nullopt);

  /// Limits that are already absolute (a test, a search given absolute limits): for_search =
  /// measured = as_written. Throws ConfigError if `absolute` holds relative limits or on a margin
  /// outside [0, 1).
  static RunLimits absolute(const Limits& absolute, double safety_margin);

  /// What the search algorithms hold predictions to: for_search with the margin.
  Limits search_with_margin() const { return with_safety_margin(for_search, safety_margin); }

  /// `as_written` against another measurement of the teacher (a later round of measurements).
  Limits measured_against(const CostEstimate& teacher_measured) const {
    return resolve_limits(as_written, teacher_measured);
  }

  /// The same run limits with `measured` resolved against a new measurement of the teacher.
  RunLimits remeasured(const CostEstimate& teacher_measured) const;

  /// The same run limits searching under `search_limits` (absolute; the fit to the measurement
  /// tightened them). Throws ConfigError if they hold relative limits.
  RunLimits searching(const Limits& search_limits) const;

  /// report.json's scenario keys: {"limits": measured, "limits_for_search": for_search,
  /// "limits_as_written": as_written} (Limits::to_json each) and "safety_margin".
  nlohmann::json to_json() const;
};

/// The search limits for the next attempt of the fit to the measurement: every limit broken in
/// `measured_slack` (slack < 0, the measured candidate against the measured limits) is scaled by
/// the measured overshoot and then by a further `margin`:
///   maxima (ttft_ms, tpot_ms, peak_memory_bytes): L' = L / (1 - slack) x (1 - margin)
///   the throughput minimum:                       L' = L / (1 + slack) x (1 + margin)
/// Limits that held are kept. Throws ConfigError if `search_limits` holds relative limits, lacks
/// a limit that is broken in `measured_slack`, or margin is outside [0, 0.5).
Limits tighten_search_limits(const Limits& search_limits,
                             const std::vector<LimitSlack>& measured_slack, double margin);

}  // namespace ac
