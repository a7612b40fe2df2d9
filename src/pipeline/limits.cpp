#include "pipeline/limits.h"

#include <algorithm>

#include "common/error.h"

namespace ac {

bool scale_limit(Limits& l, const std::string& name, double scale) {
  auto scale_value = [&](std::optional<double>& v) {
    if (v) *v *= scale;
    return v.has_value();
  };
  if (name == "ttft_ms") return scale_value(l.ttft_ms);
  if (name == "tpot_ms") return scale_value(l.tpot_ms);
  if (name == "min_throughput_tokens_per_s") return scale_value(l.min_throughput_tokens_per_s);
  if (name == "peak_memory_bytes") {
    if (l.peak_memory_bytes) l.peak_memory_bytes = int64_t(double(*l.peak_memory_bytes) * scale);
    return l.peak_memory_bytes.has_value();
  }
  throw ConfigError(msg("limits", "unknown limit '{}' (expected ttft_ms, tpot_ms, "
                                  "peak_memory_bytes or min_throughput_tokens_per_s)", name));
}

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
  for (const char* name : {"ttft_ms", "tpot_ms", "peak_memory_bytes"})
    scale_limit(t, name, 1 - margin);
  scale_limit(t, "min_throughput_tokens_per_s", 1 + margin);
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
  for (const LimitSlack& s : measured_slack) {
    if (s.holds()) continue;
    // slack < 0: a maximum scales below 1, the throughput minimum above 1.
    const double scale = s.name == "min_throughput_tokens_per_s" ? (1 + margin) / (1 + s.slack)
                                                                 : (1 - margin) / (1 - s.slack);
    if (!scale_limit(out, s.name, scale))
      throw ConfigError(msg("fit", "the measured limit {} is broken but the search had no {} "
                                   "limit to tighten", s.name, s.name));
  }
  return out;
}

}  // namespace ac
