// Width granularity: the width step at which a device runs GEMMs efficiently, derived from a
// profile's "gemm_width_scan" table (docs/design.md, "Width granularity"; Model-Optimizer's
// `hidden_size_divisor`).
//
// The scan times at::linear at widths a + 2^k (k = 0..7) and a + 128 for anchors a that are
// multiples of 128, with the width as N (K = the model's hidden size) and as K (N = hidden),
// at M = B (decode) and M = B*T (prefill). Width a + 2^k has exact granularity 2^k (its largest
// power-of-two divisor up to 128). The rule:
//
//   efficiency(w) = throughput(w) / (best throughput in w's group [a, a + 128]),
//                   throughput = w / latency
//   level(2^k)    = mean efficiency of the widths of exact granularity 2^k over every anchor,
//                   orientation and M (granularity 128: a and a + 128)
//   g             = the smallest 2^k in [min_g, 128] such that every level >= 2^k reaches
//                   `min_efficiency` (default 0.9) x level(128); 128 when none does
//
// so a width that is a multiple of g runs at >= 90% of the throughput the multiples of 128 reach
// (the anchors' own level is the reference, not 1: on a noisy machine each group's best is its
// luckiest sample, which lowers every level alike; measured on a shared CPU, every level 0.67-0.82
// with no trend, which an absolute bar read as "only multiples of 128" and so cut stories15M's
// hidden size to 256 or 128).
// min_g (default 8) bounds the step from below: finer steps cost under ~3% of the width and
// only multiply the search's choices. Devices without a profile (the spec-only GPUs) take
// the documented default of their devices/<name>.json ("width_granularity") instead.
#pragma once
#include <cstdint>
#include <vector>

#include "hardware/profile.h"

namespace ac {

struct GranularityRule {
  double min_efficiency = 0.9;  // throughput of an on-grid width vs its group's best
  int64_t min_granularity = 8;  // never finer than this
  int64_t max_granularity = 128;
};

/// Widths a scan measures per anchor a (a multiple of 128): a, a + 1, a + 2, ..., a + 64, a + 128.
std::vector<int64_t> granularity_scan_widths(int64_t anchor);

/// Exact granularity of width w within its anchor's group: the largest power of two <= 128
/// dividing w - anchor (128 for w == anchor).
int64_t scan_granularity(int64_t w, int64_t anchor);

/// The rule above on a table with dims (M, N, K, A, O): A the anchor, O = 0 when the width is
/// N, 1 when it is K. Throws ConfigError when the table is empty or has other dims.
int64_t derive_width_granularity(const OpTable& scan, const GranularityRule& rule = {});

/// The width step the search uses: the profile's derived width_granularity when it has one,
/// else the device's documented default (DeviceSpec::width_granularity).
int64_t width_granularity_for(const Profile* profile, const DeviceSpec& device);

/// Per-level mean efficiencies (for the profile's record): {granularity, efficiency} pairs.
std::vector<std::pair<int64_t, double>> granularity_levels(const OpTable& scan);

}  // namespace ac
