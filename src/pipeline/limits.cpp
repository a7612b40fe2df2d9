#include "pipeline/limits.h"

#include <algorithm>

#include "common/error.h"

namespace ac {

Limits resolve_limits(const Limits& as_written, const CostEstimate& teacher) {
  Limits r = as_written;
  if (as_written.ttft_fraction) r.ttft_ms = *as_written.ttft_fraction * teacher.ttft_ms;
  if (as_written.tpot_fraction) r.tpot_ms = *as_written.tpot_fraction * teacher.tpot_ms;
  if (as_written.throughput_fraction)
    r.min_throughput_tokens_per_s =
        *as_written.throughput_fraction * teacher.throughput_tokens_per_s;
  if (as_written.memory_fraction)
    r.peak_memory_bytes = int64_t(std::min(
        *as_written.memory_fraction * double(teacher.peak_memory_bytes), 0x1p62));  // fits int64
  r.ttft_fraction = r.tpot_fraction = r.throughput_fraction = r.memory_fraction = std::nullopt;
  return r;
}

Limits with_safety_margin(const Limits& l, double margin) {
  if (l.has_relative())
    throw ConfigError(msg("limits", "the margin applies to absolute limits: resolve the "
                                    "fractions of the teacher first"));
  if (!(margin >= 0 && margin < 1))
    throw ConfigError(msg("limits", "safety margin: expected a value in [0, 1), found {}", margin));
  Limits t = l;
  if (t.ttft_ms) *t.ttft_ms *= 1 - margin;
  if (t.tpot_ms) *t.tpot_ms *= 1 - margin;
  if (t.peak_memory_bytes)
    t.peak_memory_bytes = int64_t(double(*t.peak_memory_bytes) * (1 - margin));
  if (t.min_throughput_tokens_per_s) *t.min_throughput_tokens_per_s *= 1 + margin;
  return t;
}

RunLimits RunLimits::resolve(const Limits& as_written, double safety_margin,
                             const CostEstimate& teacher_predicted,
                             const std::optional<CostEstimate>& teacher_measured) {
  RunLimits r;
  r.as_written = as_written;
  r.safety_margin = safety_margin;
  r.for_search = resolve_limits(as_written, teacher_predicted);
  r.measured = teacher_measured ? resolve_limits(as_written, *teacher_measured) : r.for_search;
  r.teacher_measured = teacher_measured.has_value();
  with_safety_margin(r.for_search, safety_margin);  // ConfigError on a bad margin, now
  return r;
}

RunLimits RunLimits::absolute(const Limits& absolute, double safety_margin) {
  if (absolute.has_relative())
    throw ConfigError(msg("limits", "expected absolute limits, found fractions of the teacher's "
                                    "cost: {}", absolute.to_json().dump()));
  return resolve(absolute, safety_margin, CostEstimate{});
}

RunLimits RunLimits::remeasured(const CostEstimate& teacher) const {
  RunLimits r = *this;
  r.measured = resolve_limits(as_written, teacher);
  r.teacher_measured = true;
  return r;
}

RunLimits RunLimits::searching(const Limits& search_limits) const {
  if (search_limits.has_relative())
    throw ConfigError(msg("limits", "search limits must be absolute"));
  RunLimits r = *this;
  r.for_search = search_limits;
  return r;
}

nlohmann::json RunLimits::to_json() const {
  return {{"limits", measured.to_json()},
          {"limits_for_search", for_search.to_json()},
          {"limits_as_written", as_written.to_json()},
          {"safety_margin", safety_margin}};
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

}  // namespace ac
