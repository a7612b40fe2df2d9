// Measuring the native engine for real on this machine: TTFT, TPOT and peak tensor memory of
// the forward pass in model/llama.h, the ground truth `validate` compares predictions to.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/cpu_allocator.h"  // install_counting_allocator, counted_bytes_*: the peak memory
#include "hardware/cost_model.h"
#include "model/llama.h"

namespace ac {

/// The quantile of the latency samples that Measurement reports as TTFT and TPOT.
constexpr double kLatencyQuantile = 0.1;

/// The q-quantile (0 <= q <= 1) of `v`: nearest rank on the sorted values, as the profile's
/// spread (hardware/profile.cpp). Throws InternalError when `v` is empty.
double sample_quantile(std::vector<double> v, double q);

/// The median of `v`: the middle value, or the mean of the two middle values when the count is
/// even. Throws InternalError when `v` is empty.
double sample_median(std::vector<double> v);

/// What the native engine measured over one or more runs (requests) of a workload.
///
/// Latencies are read from the clock of hardware/timer.h (wall time unless AC_TIMER=cpu). The
/// headline figures `ttft_ms` and `tpot_ms` are *uncontended* latencies: the 10th percentile
/// of the samples, what the machine does when nothing else runs, which is what a latency model
/// of the machine can predict. On a shared machine (a cloud VM), other tenants slow whole runs by
/// 10-30% for seconds at a time: the median of a run carries that interference, the fast
/// samples do not ("higher values ... are typically not caused by variability in Python's
/// speed, but by other processes interfering with your timing accuracy": Python's `timeit`
/// documentation, which takes the min). A low quantile rather than the min, so that the figure
/// does not fall as more samples are taken (calibration and validation take different counts).
/// The medians are kept beside them (`*_median_ms`): a report shows both, and their ratio is
/// what the interference cost.
struct Measurement {
  double ttft_ms = 0;   // p10 of every prefill sample (B x prompt tokens, logits of the last
                        // position only); each run adds 2 to 16 prefill-only samples: more
                        // than 2 while they cost at most half of its decode time
  double tpot_ms = 0;   // p10 of every decode step of every run
  double ttft_median_ms = 0;  // median of the same prefill samples
  double tpot_median_ms = 0;  // median over runs of each run's median decode step
  double throughput_tokens_per_s = 0;  // B * output / p10 over runs of (TTFT + decode steps):
                                       // the uncontended request, as TTFT and TPOT
  double throughput_median_tokens_per_s = 0;  // B * output / the median request
  int64_t tokens_per_request = 0;  // B * output tokens: what one request (run) generates
  int64_t weight_bytes = 0;    // unique storage bytes of the model's tensors
  int64_t peak_memory_bytes = 0;  // weights + peak of everything allocated during the run
                                  // (KV cache, activations, logits)
  int repeats = 0;  // runs (requests) measured

  /// The raw samples behind the figures (and tokens_per_request), so runs measured apart
  /// (interleaved rounds) combine exactly: merge_measurements. Not written to JSON.
  struct Samples {
    std::vector<double> ttft_ms;                 // every prefill sample
    std::vector<std::vector<double>> step_ms;    // [run][decode position] step latency
    std::vector<double> request_ms;              // [run] TTFT + all decode steps
  } samples;

  /// As a CostEstimate (measured values; per-layer vectors empty; source "measured"), e.g.
  /// for resolving relative limits against the teacher's measurement (pipeline/limits.h).
  CostEstimate as_estimate() const;
  json to_json() const;
};

/// Pools the samples of several measurements of the same model and workload (e.g. one per
/// interleaved round) and recomputes every figure from them as if measured in one call; peak
/// memory is the max. Throws ConfigError when `parts` is empty, a part has no samples, or the
/// parts generate different numbers of tokens per request (not the same workload).
Measurement merge_measurements(const std::vector<Measurement>& parts);

/// Prefill-only runs measure_native adds after a timed run whose decode took `decode_total_ms`
/// and whose prefill took `ttft_ms`: floor(0.5 * decode_total_ms / ttft_ms), clamped to [2, 16].
/// A run has one prefill against output_tokens decode steps, so TTFT, the p10 of its samples,
/// would otherwise have far fewer samples than TPOT; the extra prefills cost at most half the
/// decode time once the minimum of 2 is met. Never throws.
int extra_prefill_runs(double decode_total_ms, double ttft_ms);

/// Runs prefill + decode of `workload` `repeats` times (one untimed warm-up first) with random
/// tokens, the KV cache allocated for prompt + output tokens, torch threads as set by the
/// caller, on the device of the model's weights (to_device, model/weights.h). Peak memory
/// comes from a counting CPU allocator (install_counting_allocator), on a GPU from the caching
/// allocator's peak (common/accelerator.h); every latency is read after the device finished.
/// `show_progress`: a progress line (common/progress.h) over the timed tokens, for callers that
/// measure as a stage of their own (compress); off where an outer stage shows its own.
/// Throws ConfigError if workload.weight_dtype is not fp32 (the native engine is fp32) or
/// repeats < 1.
Measurement measure_native(const LlamaModel& model, const Workload& workload, int repeats = 3,
                           bool show_progress = false);

/// Measures `models` on the same workload in `rounds` interleaved rounds (each round runs each
/// model once: measure_native with one warm-up and one timed run) and pools each model's samples
/// (merge_measurements). A drift of the machine's speed then hits every model alike: a teacher
/// and its student whose TPOT ratio a limit checks are measured in the same minutes. Throws
/// ConfigError when `models` is empty or rounds < 1, and as measure_native.
std::vector<Measurement> measure_models_interleaved(const std::vector<const LlamaModel*>& models,
                                                    const Workload& workload, int rounds);

/// Why `scenario` cannot be measured on this machine by measure_native, or "" when it can: the
/// native engine runs fp32, so the scenario must name engine "native", fp32 weights and KV
/// cache, and device "cpu" or, in a build with CUDA (common/accelerator.h), the GPU this
/// machine has (gpu_name_matches). A GPU scenario in a CPU build gets e.g. "device rtx-5070 is
/// a GPU and this build has no CUDA (...)".
std::string not_measurable_reason(const Scenario& scenario);

/// The torch device the native engine measures `scenario` on: kCPU, or cuda:0 for a GPU
/// scenario. Throws ConfigError with not_measurable_reason when it cannot be measured here.
c10::Device measurement_device(const Scenario& scenario);


/// (The correction of a profile by real forwards lives in hardware/calibration.h.)

}  // namespace ac
