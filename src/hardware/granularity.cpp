#include "hardware/granularity.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "common/error.h"

namespace ac {

std::vector<int64_t> granularity_scan_widths(int64_t anchor) {
  std::vector<int64_t> w{anchor};
  for (int64_t step = 1; step <= 128; step *= 2) w.push_back(anchor + step);
  return w;
}

int64_t scan_granularity(int64_t w, int64_t anchor) {
  int64_t d = w - anchor;
  if (d <= 0 || d >= 128) return 128;
  int64_t g = 1;
  while (g < 128 && d % (2 * g) == 0) g *= 2;
  return g;
}

std::vector<std::pair<int64_t, double>> granularity_levels(const OpTable& scan) {
  const std::vector<std::string> dims{"M", "N", "K", "A", "O"};
  if (scan.entries.empty() || scan.dim_names != dims)
    throw ConfigError(msg("width_granularity", "the gemm_width_scan table must have dims (M, N, "
                                               "K, A, O) and entries: re-run `autocompress "
                                               "profile`"));
  // Best throughput (width / ms) per group (M, A, O).
  std::map<std::tuple<int64_t, int64_t, int64_t>, double> best;
  auto width = [](const OpTiming& e) { return e.dims[4] == 0 ? e.dims[1] : e.dims[2]; };
  auto thr = [&](const OpTiming& e) {
    return e.ms > 0 ? double(width(e)) / e.ms : 0.0;
  };
  for (const auto& e : scan.entries) {
    double& b = best[{e.dims[0], e.dims[3], e.dims[4]}];
    b = std::max(b, thr(e));
  }
  std::map<int64_t, std::pair<double, int>> sum;  // granularity -> (sum of efficiency, count)
  for (const auto& e : scan.entries) {
    double b = best[{e.dims[0], e.dims[3], e.dims[4]}];
    if (b <= 0) continue;
    auto& s = sum[scan_granularity(width(e), e.dims[3])];
    s.first += thr(e) / b;
    s.second += 1;
  }
  std::vector<std::pair<int64_t, double>> out;
  for (const auto& [g, s] : sum) out.push_back({g, s.first / s.second});
  return out;
}

int64_t derive_width_granularity(const OpTable& scan, const GranularityRule& rule) {
  auto levels = granularity_levels(scan);
  // The bar is relative to the coarsest level (the anchors, multiples of 128): timing noise
  // lowers every efficiency alike (each group's best is its luckiest sample), and must not read
  // as "only multiples of 128 are fast".
  double reference = 1.0;
  for (const auto& [level, eff] : levels)
    if (level == rule.max_granularity && eff > 0) reference = eff;
  int64_t g = rule.max_granularity;
  // Walk down from the coarsest level while every level at and above still reaches the bar.
  for (auto it = levels.rbegin(); it != levels.rend(); ++it) {
    if (it->first > rule.max_granularity) continue;
    if (it->second < rule.min_efficiency * reference) break;
    g = it->first;
  }
  return std::clamp(g, rule.min_granularity, rule.max_granularity);
}

int64_t width_granularity_for(const Profile* profile, const DeviceSpec& device) {
  if (profile && profile->width_granularity > 0) return profile->width_granularity;
  return std::max<int64_t>(1, int64_t(device.width_granularity.value));
}

}  // namespace ac
