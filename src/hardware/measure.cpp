#include "hardware/measure.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <optional>
#include <set>

#include "common/accelerator.h"
#include "common/cpu_allocator.h"
#include "common/error.h"
#include "common/progress.h"
#include "common/runtime.h"
#include "hardware/timer.h"

namespace ac {

// ---------------------------------------------------------------------------------------------
// Native measurement.

static int64_t unique_storage_bytes(const ModelWeights& w) {
  std::set<const void*> seen;
  int64_t total = 0;
  for (const auto& t : w.parameters()) {
    if (!t.defined()) continue;
    const void* key = t.storage().data();
    if (seen.insert(key).second) total += int64_t(t.storage().nbytes());
  }
  return total;
}

double sample_median(std::vector<double> v) {
  AC_CHECK(!v.empty(), "median of nothing");
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {
struct Run {
  double ttft_ms, decode_total_ms;
  std::vector<double> steps;  // [decode position] ms
  int64_t peak_extra_bytes;
};

// One request: prefill of the prompt, then greedy decode steps, on the prompt's device (the
// model's); `progress` (may be null) counts the request's tokens from `done_before`. On a GPU
// each latency is read after the device finished its kernels, and the peak is the caching
// allocator's (common/accelerator.h); on the CPU, the counting allocator's.
Run run_once(const LlamaModel& m, const at::Tensor& prompt, int64_t output_tokens,
             Progress* progress = nullptr, int64_t done_before = 0) {
  const int64_t B = prompt.size(0), P = prompt.size(1);
  const c10::Device dev = prompt.device();
  device_synchronize(dev);
  reset_counted_peak();
  reset_device_peak(dev);
  const int64_t base = dev.is_cpu() ? counted_bytes_now() : device_allocated_bytes_now(dev);
  Run r{};
  std::vector<double>& steps = r.steps;
  {
    KVCache cache = KVCache::allocate(m.config, B, P + output_tokens, dev);
    ForwardOptions opt;
    opt.cache = &cache;
    opt.last_logits_only = true;
    double t0 = timer_ms();
    at::Tensor logits = m.forward(prompt, opt);  // [B, 1, V]
    at::Tensor next = logits.argmax(-1);         // [B, 1]
    device_synchronize(dev);
    r.ttft_ms = timer_ms() - t0;
    for (int64_t i = 0; i < output_tokens; ++i) {
      double s = timer_ms();
      logits = m.forward(next, opt);
      next = logits.argmax(-1);
      device_synchronize(dev);
      steps.push_back(timer_ms() - s);
      if (progress) progress->update(done_before + B * (P + i + 1));
    }
  }
  r.peak_extra_bytes =
      (dev.is_cpu() ? counted_bytes_peak() : device_allocated_bytes_peak(dev)) - base;
  for (double s : steps) r.decode_total_ms += s;
  return r;
}

// "" when the native engine can run `w` (fp32 weights and KV cache), else why not.
std::string fp32_mismatch(const Workload& w) {
  if (w.weight_dtype == "fp32" && w.kv_cache_dtype == "fp32") return "";
  return fmt::format("the native engine runs fp32, the workload asks for weights {} and KV cache {}",
                     w.weight_dtype, w.kv_cache_dtype);
}

}  // namespace

std::string not_measurable_reason(const Scenario& s) {
  const std::string engine =
      s.engine == "native" ? "" : fmt::format("engine {} is not the native engine that runs here", s.engine);
  if (s.device_spec.kind == "cuda") {
    if (!cuda_compiled())
      return fmt::format("device {} is a GPU and this build has no CUDA (the native engine "
                         "measures this CPU; scripts/build_cuda.sh builds for a GPU)", s.device);
    if (cuda_device_count() < 1)
      return fmt::format("device {} is a GPU and no CUDA device is visible here", s.device);
    if (!gpu_name_matches(s.device_spec, cuda_device_name(0)))
      return fmt::format("device {} ({}) is not this machine's GPU ({})", s.device,
                         s.device_spec.display_name, cuda_device_name(0));
  } else if (s.device != "cpu") {
    return fmt::format("device {} is not this machine (the native engine measures this CPU only)", s.device);
  }
  return engine.empty() ? fp32_mismatch(s.workload) : engine;
}

c10::Device measurement_device(const Scenario& s) {
  if (const std::string why = not_measurable_reason(s); !why.empty())
    throw ConfigError(msg("measure", "scenario '{}': {}", s.name, why));
  return compute_device(s.device_spec.kind, s.device);
}

// Extra prefill-only runs per timed run (TTFT samples): at least kMinExtraPrefills, then more
// while they cost at most kPrefillShare of its decode time, at most kMaxExtraPrefills. TTFT is
// the p10 of its samples, and one run has one prefill against output_tokens decode steps:
// without these, a 5-round measurement has 5 TTFT samples and 640 TPOT samples (cpu-local). The
// minimum is for short decodes of large models (cpu-1b: 8 steps of ~80 ms against a ~250 ms
// prefill), where the share alone allowed one extra: 6 TTFT samples in 3 rounds, too few for a
// p10 on a shared machine (where TTFT is the noisier figure).
constexpr int kMinExtraPrefills = 2;
constexpr int kMaxExtraPrefills = 16;
constexpr double kPrefillShare = 0.5;

int extra_prefill_runs(double decode_total_ms, double ttft_ms) {
  return int(std::clamp(std::floor(kPrefillShare * decode_total_ms / std::max(ttft_ms, 1e-3)),
                        double(kMinExtraPrefills), double(kMaxExtraPrefills)));
}

double sample_quantile(std::vector<double> v, double q) {
  AC_CHECK(!v.empty(), "quantile of nothing");
  std::sort(v.begin(), v.end());
  return v[size_t(std::lround(q * double(v.size() - 1)))];
}

// Every figure of a Measurement from its samples (see the field comments in measure.h).
static void summarize(Measurement& m) {
  const auto& s = m.samples;
  AC_CHECK(!s.ttft_ms.empty() && !s.request_ms.empty(), "measurement without samples");
  std::vector<double> steps, run_medians;
  for (const auto& run : s.step_ms) {
    steps.insert(steps.end(), run.begin(), run.end());
    if (!run.empty()) run_medians.push_back(sample_median(run));
  }
  m.ttft_ms = sample_quantile(s.ttft_ms, kLatencyQuantile);
  m.ttft_median_ms = sample_median(s.ttft_ms);
  m.tpot_ms = steps.empty() ? 0.0 : sample_quantile(steps, kLatencyQuantile);
  m.tpot_median_ms = run_medians.empty() ? 0.0 : sample_median(run_medians);
  m.repeats = int(s.request_ms.size());
  const double tokens = double(m.tokens_per_request);
  m.throughput_tokens_per_s = tokens / (sample_quantile(s.request_ms, kLatencyQuantile) * 1e-3);
  m.throughput_median_tokens_per_s = tokens / (sample_median(s.request_ms) * 1e-3);
}

Measurement measure_native(const LlamaModel& m, const Workload& w, int repeats,
                           bool show_progress) {
  if (const std::string why = fp32_mismatch(w); !why.empty())
    throw ConfigError(msg("measure_native", "{}", why));
  if (repeats < 1)
    throw ConfigError(msg("measure_native", "repeats: expected >= 1, found {}", repeats));
  install_counting_allocator();
  c10::InferenceMode guard;
  const c10::Device dev = m.weights.embed_tokens.device();  // the model's (to_device)
  at::Tensor prompt = at::randint(3, m.config.vocab_size, {w.batch_size, w.prompt_tokens},
                                  at::TensorOptions().dtype(at::kLong)).to(dev);
  run_once(m, prompt, std::min<int64_t>(w.output_tokens, 8));  // warm-up
  Measurement out;
  int64_t peak = 0;
  const int64_t per_run = w.batch_size * w.context_tokens();
  std::optional<Progress> progress;
  if (show_progress) progress.emplace("measure", repeats * per_run, "tok");
  for (int r = 0; r < repeats; ++r) {
    Run run = run_once(m, prompt, w.output_tokens, progress ? &*progress : nullptr, r * per_run);
    out.samples.ttft_ms.push_back(run.ttft_ms);
    // A run has one prefill but output_tokens decode steps, so its TTFT is the noisier figure:
    // more prefill-only samples: kMinExtraPrefills, and more while they cost at most
    // kPrefillShare of its decode time.
    const int extra = extra_prefill_runs(run.decode_total_ms, run.ttft_ms);
    for (int e = 0; e < extra; ++e) {
      Run p = run_once(m, prompt, 0);
      out.samples.ttft_ms.push_back(p.ttft_ms);
      peak = std::max(peak, p.peak_extra_bytes);
    }
    out.samples.request_ms.push_back(run.ttft_ms + run.decode_total_ms);
    out.samples.step_ms.push_back(std::move(run.steps));
    peak = std::max(peak, run.peak_extra_bytes);
  }
  if (progress) progress->finish();
  out.tokens_per_request = w.batch_size * w.output_tokens;
  summarize(out);
  out.weight_bytes = unique_storage_bytes(m.weights);
  out.peak_memory_bytes = out.weight_bytes + peak;
  return out;
}

Measurement merge_measurements(const std::vector<Measurement>& parts) {
  if (parts.empty()) throw ConfigError(msg("merge_measurements", "no measurements to merge"));
  Measurement out = parts.front();
  out.samples = {};
  for (const auto& p : parts) {
    if (p.samples.ttft_ms.empty() || p.samples.request_ms.empty())
      throw ConfigError(msg("merge_measurements", "a measurement without samples (read back "
                                                  "from JSON?) cannot be merged"));
    if (p.tokens_per_request != out.tokens_per_request)
      throw ConfigError(msg("merge_measurements", "the parts are not one workload: {} and {} "
                                                  "tokens per request", out.tokens_per_request,
                            p.tokens_per_request));
    const auto& s = p.samples;
    out.samples.ttft_ms.insert(out.samples.ttft_ms.end(), s.ttft_ms.begin(), s.ttft_ms.end());
    out.samples.step_ms.insert(out.samples.step_ms.end(), s.step_ms.begin(), s.step_ms.end());
    out.samples.request_ms.insert(out.samples.request_ms.end(), s.request_ms.begin(),
                                  s.request_ms.end());
    out.peak_memory_bytes = std::max(out.peak_memory_bytes, p.peak_memory_bytes);
  }
  summarize(out);
  return out;
}

std::vector<Measurement> measure_models_interleaved(const std::vector<const LlamaModel*>& models,
                                                    const Workload& w, int rounds) {
  if (models.empty() || rounds < 1)
    throw ConfigError(msg("measure", "expected >= 1 model and rounds >= 1, found {} models and "
                                     "rounds {}", models.size(), rounds));
  std::vector<std::vector<Measurement>> parts(models.size());
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < models.size(); ++i) parts[i].push_back(measure_native(*models[i], w, 1));
  std::vector<Measurement> out;
  for (const auto& p : parts) out.push_back(merge_measurements(p));
  return out;
}

CostEstimate Measurement::as_estimate() const {
  CostEstimate e;
  e.ttft_ms = ttft_ms;
  e.tpot_ms = tpot_ms;
  e.throughput_tokens_per_s = throughput_tokens_per_s;
  e.weight_bytes = weight_bytes;
  e.peak_memory_bytes = peak_memory_bytes;
  e.source = "measured";
  return e;
}

json Measurement::to_json() const {
  return {{"ttft_ms", ttft_ms},
          {"tpot_ms", tpot_ms},
          {"ttft_median_ms", ttft_median_ms},
          {"tpot_median_ms", tpot_median_ms},
          {"throughput_tokens_per_s", throughput_tokens_per_s},
          {"throughput_median_tokens_per_s", throughput_median_tokens_per_s},
          {"weight_bytes", weight_bytes},
          {"peak_memory_bytes", peak_memory_bytes},
          {"repeats", repeats}};
}

}  // namespace ac
