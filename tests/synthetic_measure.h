// Measurements made of given samples, for tests of what is computed from measurements (the
// paired verdict, the fit to the measurement) without timing anything.
#pragma once
#include <vector>

#include "hardware/measure.h"
#include "hardware/scenario.h"

namespace ac::test {

/// One request (as measure_native with repeats = 1): prefill samples `ttft_ms`, decode steps
/// `steps_ms` (one token per step, batch 1), `peak_bytes` of peak memory; every figure
/// recomputed from the samples by merge_measurements.
inline Measurement synthetic_request(const std::vector<double>& ttft_ms,
                                     const std::vector<double>& steps_ms, int64_t peak_bytes = 0) {
  Measurement m;
  m.tokens_per_request = int64_t(steps_ms.size());
  m.samples.ttft_ms = ttft_ms;
  m.samples.step_ms = {steps_ms};
  double total = ttft_ms.front();
  for (double s : steps_ms) total += s;
  m.samples.request_ms = {total};
  m.peak_memory_bytes = peak_bytes;
  return merge_measurements({m});
}

/// A request whose prefill takes `ttft_ms` and each of `steps` decode steps `tpot_ms`.
inline Measurement synthetic_request(double ttft_ms, double tpot_ms, int steps = 4,
                                     int64_t peak_bytes = 0) {
  return synthetic_request({ttft_ms}, std::vector<double>(size_t(steps), tpot_ms), peak_bytes);
}

/// The limit "TPOT <= fraction x the teacher's TPOT" (a relative limit), alone.
inline Limits relative_tpot(double fraction) {
  Limits l;
  l.tpot_fraction = fraction;
  return l;
}

}  // namespace ac::test
