// Measuring the native engine for real on this machine: TTFT, TPOT and peak tensor memory of
// the forward pass in model/llama.h, the ground truth `validate` compares predictions to.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hardware/cost_model.h"
#include "model/llama.h"

namespace ac {

/// What one native run measured. Latencies are read from the clock of hardware/timer.h (wall
/// time unless AC_TIMER=cpu).
struct Measurement {
  double ttft_ms = 0;   // median over repeats of the prefill (B x prompt tokens, logits of the
                        // last position only); each repeat adds up to 4 prefill-only samples
                        // while they cost at most a quarter of its decode time
  double tpot_ms = 0;   // median over repeats of the median decode step (output_tokens steps)
  double throughput_tokens_per_s = 0;  // B * output / (TTFT + sum of decode steps)
  int64_t weight_bytes = 0;    // unique storage bytes of the model's tensors
  int64_t peak_memory_bytes = 0;  // weights + peak of everything allocated during the run
                                  // (KV cache, activations, logits)
  int repeats = 0;

  /// As a CostEstimate (measured values; per-layer vectors empty; source "measured"), e.g.
  /// for Limits::resolve with the teacher's measurement.
  CostEstimate as_estimate() const;
  json to_json() const;
};

/// Runs prefill + decode of `workload` `repeats` times (one untimed warm-up first) with random
/// tokens, the KV cache allocated for prompt + output tokens, torch threads as set by the
/// caller. Peak memory comes from a counting CPU allocator (install_counting_allocator).
/// `show_progress`: a progress line (common/progress.h) over the timed tokens, for callers that
/// measure as a stage of their own (compress); off where an outer stage shows its own.
/// Throws ConfigError if workload.weight_dtype is not fp32 (the native engine is fp32) or
/// repeats < 1.
Measurement measure_native(const LlamaModel& model, const Workload& workload, int repeats = 3,
                           bool show_progress = false);

/// Why `scenario` cannot be measured on this machine by measure_native, or "" when it can: the
/// native engine runs fp32 on this CPU, so the scenario must name device "cpu", engine "native"
/// and fp32 weights and KV cache. A GPU scenario costed by its spec sheet gets e.g.
/// "device rtx-5070 is not this machine (the native engine measures this CPU only)".
std::string not_measurable_reason(const Scenario& scenario);

/// Installs (once per process) a CPU allocator that wraps the default one and counts live and
/// peak bytes. Tensors allocated before it are not counted.
void install_counting_allocator();
/// Live bytes of tensors allocated through the counting allocator.
int64_t counted_bytes_now();
/// Peak live bytes since the last reset_counted_peak().
int64_t counted_bytes_peak();
void reset_counted_peak();

/// (The correction of a profile by real forwards lives in hardware/calibration.h.)

}  // namespace ac
