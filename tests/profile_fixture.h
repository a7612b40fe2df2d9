// A profile of a tiny model in seconds, for the tests that need real tables: the fewest timed
// calls, a small rotation pool and no progress bar (hardware/profile.h ProfileOptions).
#pragma once
#include <cstdint>

#include "hardware/profile.h"

namespace ac::test {

/// A workload of 8 prompt and 4 output tokens, batch 1.
inline Workload tiny_workload() {
  Workload w;
  w.prompt_tokens = 8;
  w.output_tokens = 4;
  return w;
}

/// ProfileOptions timing each shape twice after one warm-up, over a 1 MiB rotation pool, with
/// widths down to `min_width`; everything else at its default (three passes, the residency
/// and width-scan tables, no calibration).
inline ProfileOptions quick_profile_options(int64_t min_width) {
  ProfileOptions o;
  o.warmup = 1;
  o.min_repeats = o.max_repeats = 2;
  o.min_time_ms = 0;
  o.rotation_bytes = 1 << 20;
  o.min_width = min_width;
  o.progress = false;
  return o;
}

}  // namespace ac::test
