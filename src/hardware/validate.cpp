#include "hardware/validate.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "common/accelerator.h"
#include "common/error.h"
#include "common/gemm.h"
#include "common/progress.h"
#include "common/runtime.h"
#include "hardware/calibration.h"
#include "hardware/timer.h"
#include "io/llama2c.h"

namespace ac {

ModelConfig stories15m_shape() {
  LayerConfig l;
  l.num_attention_heads = 6;
  l.num_key_value_heads = 6;
  l.head_dim = 48;
  l.intermediate_size = 768;
  ModelConfig c = ModelConfig::uniform(32000, 288, 6, l);
  c.tie_word_embeddings = true;
  c.max_position_embeddings = 256;
  return c;
}

ModelConfig read_architecture(const fs::path& path) {
  if (fs::is_directory(path)) {
    fs::path cfg = path / "config.json";
    if (fs::exists(cfg)) return config_from_hf_json(read_json_file(cfg), cfg.string());
    if (fs::exists(path / "model.bin")) return read_llama2c_config(path / "model.bin");
    throw ConfigError(msg("read_architecture", "{}: no config.json or model.bin in the folder",
                          path.string()));
  }
  if (path.extension() == ".bin") return read_llama2c_config(path);
  return config_from_hf_json(read_json_file(path), path.string());
}

static LayerConfig random_layer(const LayerConfig& base, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  LayerConfig l = base;
  if (base.has_attention()) {
    l.num_attention_heads = 1 + int64_t(rng() % uint64_t(base.num_attention_heads));
    std::vector<int64_t> divisors;
    for (int64_t g = 1; g <= std::min(l.num_attention_heads, base.num_key_value_heads); ++g)
      if (l.num_attention_heads % g == 0) divisors.push_back(g);
    l.num_key_value_heads = divisors[rng() % divisors.size()];
  }
  if (base.has_ffn()) {
    int64_t lo = std::max<int64_t>(1, base.intermediate_size / 8);
    l.intermediate_size = lo + int64_t(rng() % uint64_t(base.intermediate_size - lo + 1));
  }
  double r = u(rng);
  if (r < 0.15 && base.has_attention()) {
    l.attention_no_op = true;
    l.num_attention_heads = l.num_key_value_heads = 0;
  } else if (r < 0.25 && base.has_ffn()) {
    l.ffn_no_op = true;
    l.intermediate_size = 0;
  }
  return l;
}

std::vector<ModelConfig> random_architectures(const ModelConfig& base, int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<ModelConfig> out;
  while (int(out.size()) < count) {
    ModelConfig c = base;
    if (rng() % 2 == 0) {  // narrower: a multiple of 8 in [0.4 D, D], the search's range
      const int64_t hi = base.hidden_size / 8;
      const int64_t lo = std::min(hi, std::max<int64_t>(2, (base.hidden_size * 2 / 5 + 7) / 8));
      c.hidden_size = 8 * (lo + int64_t(rng() % uint64_t(hi - lo + 1)));
    }
    bool any = false;
    for (size_t i = 0; i < c.layers.size(); ++i) {
      c.layers[i] = random_layer(base.layers[i], rng);
      any = any || c.layers[i].has_attention() || c.layers[i].has_ffn();
    }
    if (!any) continue;
    c.validate("random_architectures");
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<ModelConfig> width_spread_architectures(const ModelConfig& base, int count,
                                                    uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t hi = base.hidden_size / 8;
  const int64_t lo = std::min(hi, std::max<int64_t>(2, (base.hidden_size * 2 / 5 + 7) / 8));
  std::vector<ModelConfig> out;
  for (int i = 0; i < count;) {
    ModelConfig c = base;
    // Prune i takes the width at quantile (i + 0.5) / count of the search's range.
    const double q = count > 1 ? double(i) / double(count - 1) : 1.0;
    c.hidden_size = 8 * (lo + int64_t(std::lround(q * double(hi - lo))));
    // Every other prune keeps the base's layers whole: the search's picks are mostly whole
    // layers at a reduced width, which random layers alone do not teach the correction (the
    // first calibration of this kind under-predicted them by 5-13%; docs/benchmarks.md).
    // A draw keeps attention in some layer when the base has any: a model without attention
    // is nothing the search returns, and llama.cpp cannot load one (it reads the head size from
    // the layers).
    bool any = i % 2 == 1, attention = any;
    if (!any)
      for (size_t k = 0; k < c.layers.size(); ++k) {
        c.layers[k] = random_layer(base.layers[k], rng);
        any = any || c.layers[k].has_attention() || c.layers[k].has_ffn();
        attention = attention || c.layers[k].has_attention() || !base.layers[k].has_attention();
      }
    if (!any || !attention) continue;
    c.validate("width_spread_architectures");
    out.push_back(std::move(c));
    ++i;
  }
  return out;
}

std::vector<ModelConfig> base_width_architectures(const ModelConfig& base, int count,
                                                  uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<ModelConfig> out;
  for (int tries = 0; int(out.size()) < count; ++tries) {
    AC_CHECK(tries < 1000 * (count + 1), "base_width_architectures: no prune of {} kept attention",
             describe(base));
    ModelConfig c = base;
    bool attention = false;
    for (size_t k = 0; k < c.layers.size(); ++k) {
      c.layers[k] = random_layer(base.layers[k], rng);
      attention = attention || c.layers[k].has_attention();
    }
    if (!attention || c.layers == base.layers) continue;
    c.validate("base_width_architectures");
    out.push_back(std::move(c));
  }
  return out;
}

c10::Device profile_device(const Profile& p) {
  return p.identity.gpu_model.empty() ? c10::Device(c10::kCPU)
                                      : compute_device("cuda", p.identity.device);
}

// A GPU profile: the same GPU (driver name), a build with CUDA, the same clock and statistic.
static void check_gpu_profile_is_this_gpu(const Profile& p) {
  profile_device(p);  // throws without CUDA or GPU
  const std::string here = cuda_device_name(0);
  if (p.identity.gpu_model != here)
    throw ConfigError(msg("validate", "the profile was measured on GPU '{}' (device {}), this "
                                      "machine's GPU is '{}': re-run `autocompress profile "
                                      "--device cuda` here",
                          p.identity.gpu_model, p.identity.device, here));
  if (p.identity.timer != timer_kind() || p.identity.latency_statistic != "min")
    throw ConfigError(msg("validate", "the profile's latencies are {} time ({}), this run "
                                      "measures {} time (min): re-run `autocompress profile`",
                          p.identity.timer, p.identity.latency_statistic, timer_kind()));
}

void check_profile_is_this_machine(const Profile& p) {
  if (!p.identity.gpu_model.empty()) return check_gpu_profile_is_this_gpu(p);
  DeviceSpec here = detect_cpu();
  if (p.identity.device != "cpu" || p.identity.cpu_model != here.display_name ||
      p.identity.cores != here.cores)
    throw ConfigError(msg("validate", "the profile was measured on {} '{}' with {} cores, this "
                                      "machine is '{}' with {} cores: re-run `autocompress "
                                      "profile` here",
                          p.identity.device, p.identity.cpu_model, p.identity.cores,
                          here.display_name, here.cores));
  if (p.identity.timer != timer_kind())
    throw ConfigError(msg("validate", "the profile's latencies are {} time, this run measures {} "
                                      "time: set AC_TIMER={} or re-run `autocompress profile`",
                          p.identity.timer, timer_kind(), p.identity.timer == "cpu" ? "cpu" : "wall"));
  if (!p.identity.blas.empty() && p.identity.blas != gemm_description())
    throw ConfigError(msg("validate", "the profile's latencies were measured with GEMM library "
                                      "'{}', this run uses '{}' (AC_GEMM, OPENBLAS_CORETYPE): "
                                      "re-run `autocompress profile` here",
                          p.identity.blas, gemm_description()));
  if (p.identity.latency_statistic != "min")
    throw ConfigError(msg("validate", "the profile's tables hold {} latencies, this version "
                                      "times the uncontended latency (fastest call): re-run "
                                      "`autocompress profile` with this version",
                          p.identity.latency_statistic));
  if (p.identity.threads != at::get_num_threads())
    throw ConfigError(msg("validate", "the profile used {} torch threads, this run uses {}: set "
                                      "AC_NUM_THREADS={} or re-run `autocompress profile`",
                          p.identity.threads, at::get_num_threads(), p.identity.threads));
}

static double ape(double pred, double meas) { return std::fabs(pred - meas) / meas * 100.0; }

MeasurementRepeatability measurement_repeatability(const std::vector<Measurement>& measured) {
  std::vector<double> d;  // per row: 100 (even half / odd half - 1)
  for (const Measurement& m : measured) {
    std::vector<double> half[2];  // rounds 1, 3, ... and 2, 4, ... (0-based: even, odd index)
    for (size_t r = 0; r < m.samples.step_ms.size(); ++r)
      half[r % 2].insert(half[r % 2].end(), m.samples.step_ms[r].begin(),
                         m.samples.step_ms[r].end());
    if (half[0].empty() || half[1].empty()) continue;
    d.push_back(100.0 * (sample_quantile(half[1], kLatencyQuantile) /
                             sample_quantile(half[0], kLatencyQuantile) - 1));
  }
  MeasurementRepeatability out;
  if (d.empty()) return out;
  out.rows = int(d.size());
  for (double x : d) out.drift_tpot += x / double(d.size());
  for (double x : d) {
    const double left = 100.0 * ((1 + x / 100) / (1 + out.drift_tpot / 100) - 1);
    out.apart_tpot += std::fabs(left) / double(d.size());
    out.max_apart_tpot = std::max(out.max_apart_tpot, std::fabs(left));
  }
  return out;
}

ValidationReport validation_report(const std::vector<ModelConfig>& archs,
                                     const std::vector<Measurement>& measured, const Scenario& s,
                                     const Profile& profile) {
  ValidationReport rep;
  for (size_t i = 0; i < archs.size(); ++i) {
    ValidationRow row;
    row.config = archs[i];
    row.predicted = predict(archs[i], s, &profile);
    row.measured = measured[i];
    rep.rows.push_back(std::move(row));
  }
  const double n = double(rep.rows.size());
  for (const auto& r : rep.rows) {
    double t = ape(r.predicted.ttft_ms, r.measured.ttft_ms),
           p = ape(r.predicted.tpot_ms, r.measured.tpot_ms),
           m = ape(double(r.predicted.peak_memory_bytes), double(r.measured.peak_memory_bytes));
    rep.mape_ttft += t / n;
    rep.mape_tpot += p / n;
    rep.mape_memory += m / n;
    rep.max_ape_ttft = std::max(rep.max_ape_ttft, t);
    rep.max_ape_tpot = std::max(rep.max_ape_tpot, p);
    rep.max_ape_memory = std::max(rep.max_ape_memory, m);
    rep.bias_ttft += 100.0 * (r.predicted.ttft_ms / r.measured.ttft_ms - 1) / n;
    rep.bias_tpot += 100.0 * (r.predicted.tpot_ms / r.measured.tpot_ms - 1) / n;
    rep.interference_ttft += 100.0 * (r.measured.ttft_median_ms / r.measured.ttft_ms - 1) / n;
    rep.interference_tpot += 100.0 * (r.measured.tpot_median_ms / r.measured.tpot_ms - 1) / n;
  }
  rep.repeatability = measurement_repeatability(measured);
  std::map<int64_t, WidthErrors> widths;
  for (const auto& r : rep.rows) {
    const double t = 100.0 * (r.predicted.ttft_ms / r.measured.ttft_ms - 1),
                 p = 100.0 * (r.predicted.tpot_ms / r.measured.tpot_ms - 1);
    const double dt = 100.0 * (r.predicted.ttft_ms / (1 + rep.bias_ttft / 100) / r.measured.ttft_ms - 1),
                 dp = 100.0 * (r.predicted.tpot_ms / (1 + rep.bias_tpot / 100) / r.measured.tpot_ms - 1);
    rep.debiased_mape_ttft += std::fabs(dt) / n;
    rep.debiased_mape_tpot += std::fabs(dp) / n;
    rep.spread_ttft += (t - rep.bias_ttft) * (t - rep.bias_ttft) / n;
    rep.spread_tpot += (p - rep.bias_tpot) * (p - rep.bias_tpot) / n;
    WidthErrors& w = widths[r.config.hidden_size];
    w.hidden_size = r.config.hidden_size;
    w.rows += 1;
    w.mape_ttft += std::fabs(t), w.mape_tpot += std::fabs(p);
    w.bias_ttft += t, w.bias_tpot += p;
    w.max_ape_ttft = std::max(w.max_ape_ttft, std::fabs(t));
    w.max_ape_tpot = std::max(w.max_ape_tpot, std::fabs(p));
  }
  rep.spread_ttft = std::sqrt(rep.spread_ttft);
  rep.spread_tpot = std::sqrt(rep.spread_tpot);
  for (auto& [D, w] : widths) {
    const double k = double(w.rows);
    w.mape_ttft /= k, w.mape_tpot /= k, w.bias_ttft /= k, w.bias_tpot /= k;
    rep.by_width.push_back(w);
  }
  return rep;
}

void add_relative_errors(ValidationReport& rep, const ModelConfig& base,
                         const Measurement& base_measured, const Scenario& s,
                         const Profile& profile) {
  if (rep.rows.empty())
    throw ConfigError(msg("validate", "errors relative to {}: no architecture measured",
                          describe(base)));
  if (!(base_measured.ttft_ms > 0) || !(base_measured.tpot_ms > 0))
    throw ConfigError(msg("validate", "errors relative to {}: its measured TTFT {} ms and TPOT "
                                      "{} ms must be positive", describe(base),
                          base_measured.ttft_ms, base_measured.tpot_ms));
  RelativeErrors e;
  e.base = base;
  e.base_predicted = predict(base, s, &profile);
  e.base_measured = base_measured;
  const double n = double(rep.rows.size());
  std::map<int64_t, std::pair<double, int>> widths;  // hidden size -> (sum of errors, rows)
  for (const auto& r : rep.rows) {
    const double t = 100.0 * ((r.predicted.ttft_ms / e.base_predicted.ttft_ms) /
                              (r.measured.ttft_ms / base_measured.ttft_ms) - 1);
    const double p = 100.0 * ((r.predicted.tpot_ms / e.base_predicted.tpot_ms) /
                              (r.measured.tpot_ms / base_measured.tpot_ms) - 1);
    e.mape_ttft += std::fabs(t) / n, e.mape_tpot += std::fabs(p) / n;
    e.bias_ttft += t / n, e.bias_tpot += p / n;
    e.max_ape_ttft = std::max(e.max_ape_ttft, std::fabs(t));
    e.max_ape_tpot = std::max(e.max_ape_tpot, std::fabs(p));
    auto& [sum, rows] = widths[r.config.hidden_size];
    sum += p, rows += 1;
  }
  for (WidthErrors& w : rep.by_width)
    if (auto it = widths.find(w.hidden_size); it != widths.end())
      w.relative_bias_tpot = it->second.first / it->second.second;
  rep.relative = std::move(e);
}

static void check_native_scenario(const Scenario& s, const Profile& profile) {
  if (const std::string why = not_measurable_reason(s); !why.empty())
    throw ConfigError(msg("validate", "scenario '{}' cannot be measured here: {}", s.name, why));
  if (profile.identity.device != s.device)
    throw ConfigError(msg("validate", "the profile was measured on device '{}', scenario '{}' "
                                      "targets device '{}'", profile.identity.device, s.name,
                          s.device));
}

ValidationReport validate_native(const std::vector<ModelConfig>& archs, const Scenario& s,
                                 const Profile& profile, int repeats, bool progress,
                                 const std::optional<ModelConfig>& base) {
  check_native_scenario(s, profile);
  check_profile_is_this_machine(profile);
  // Interleaved rounds (hardware/calibration.h): a drift of the machine's speed during the
  // run is shared by all architectures rather than blamed on the few measured while it lasted.
  // The base goes first in each round, in the same rounds as the rows it is compared with.
  std::vector<ModelConfig> all;
  if (base) all.push_back(*base);
  all.insert(all.end(), archs.begin(), archs.end());
  const CpuTimes load_from = read_cpu_times();
  std::vector<Measurement> measured =
      measure_interleaved(all, s.workload, repeats, /*weight_seed=*/1000, progress,
                          profile_device(profile));
  const MachineLoad load = load_between(load_from, read_cpu_times());
  const std::vector<Measurement> rows(measured.begin() + (base ? 1 : 0), measured.end());
  ValidationReport rep = validation_report(archs, rows, s, profile);
  if (base) add_relative_errors(rep, *base, measured.front(), s, profile);
  rep.machine_load = load;
  rep.cores = profile.identity.cores;
  return rep;
}

ValidationReport validate_native_recalibrated(const std::vector<ModelConfig>& archs,
                                              const std::vector<ModelConfig>& calibration,
                                              const Scenario& s, const Profile& profile,
                                              int repeats, bool progress,
                                              LatencyCorrection* refit,
                                              const std::optional<ModelConfig>& base) {
  check_native_scenario(s, profile);
  check_profile_is_this_machine(profile);
  if (calibration.empty())
    throw ConfigError(msg("validate", "recalibration needs >= 1 calibration architecture"));
  std::set<std::string> judged;
  for (const auto& a : archs) judged.insert(describe(a));
  for (const auto& c : calibration)
    if (judged.count(describe(c)))
      throw ConfigError(msg("validate", "architecture {} is both calibrated on and judged: use "
                                        "another --seed", describe(c)));
  std::vector<ModelConfig> all = archs;
  all.insert(all.end(), calibration.begin(), calibration.end());
  // The base is measured once: the calibration set usually holds it already.
  size_t base_at = all.size();
  if (base) {
    const std::string wanted = describe(*base);
    for (size_t i = archs.size(); i < all.size(); ++i)
      if (describe(all[i]) == wanted) { base_at = i; break; }
    if (base_at == all.size()) all.push_back(*base);
  }
  const CpuTimes load_from = read_cpu_times();
  std::vector<Measurement> measured =
      measure_interleaved(all, s.workload, repeats, /*weight_seed=*/1000, progress,
                          profile_device(profile));
  const MachineLoad load = load_between(load_from, read_cpu_times());
  const std::optional<Measurement> base_measured =
      base ? std::optional<Measurement>(measured[base_at]) : std::nullopt;
  const std::vector<Measurement> calibration_measured(
      measured.begin() + long(archs.size()), measured.begin() + long(archs.size() + calibration.size()));
  Profile now = profile;
  now.correction = fit_native_correction(
      now, calibration_samples(now, calibration, calibration_measured, s.workload), kCorrectionRidge);
  now.correction.fit.base = describe(calibration.front());
  now.correction.fit.seed = profile.correction.fit.seed;
  now.correction.fit.repeats = repeats;
  if (refit) *refit = now.correction;
  measured.resize(archs.size());
  ValidationReport rep = validation_report(archs, measured, s, now);
  if (base) add_relative_errors(rep, *base, *base_measured, s, now);
  rep.machine_load = load;
  rep.cores = profile.identity.cores;
  return rep;
}

json ValidationReport::to_json() const {
  json widths = json::array();
  for (const auto& w : by_width)
    widths.push_back({{"hidden_size", w.hidden_size}, {"rows", w.rows},
                      {"mape_percent", {{"ttft_ms", w.mape_ttft}, {"tpot_ms", w.mape_tpot}}},
                      {"max_ape_percent", {{"ttft_ms", w.max_ape_ttft}, {"tpot_ms", w.max_ape_tpot}}},
                      {"bias_percent", {{"ttft_ms", w.bias_ttft}, {"tpot_ms", w.bias_tpot}}},
                      {"relative_bias_percent", relative ? json{{"tpot_ms", w.relative_bias_tpot}}
                                                         : json(nullptr)}});
  json rs = json::array();
  for (const auto& r : rows)
    rs.push_back({{"architecture", describe(r.config)},
                  {"parameters", r.config.num_parameters()},
                  {"config", config_to_hf_json(r.config)},
                  {"predicted", r.predicted.to_json()},
                  {"measured", r.measured.to_json()}});
  json rel = nullptr;
  if (relative)
    rel = {{"base", describe(relative->base)},
           {"base_predicted", relative->base_predicted.to_json()},
           {"base_measured", relative->base_measured.to_json()},
           {"mape_percent", {{"ttft_ms", relative->mape_ttft}, {"tpot_ms", relative->mape_tpot}}},
           {"max_ape_percent", {{"ttft_ms", relative->max_ape_ttft}, {"tpot_ms", relative->max_ape_tpot}}},
           {"bias_percent", {{"ttft_ms", relative->bias_ttft}, {"tpot_ms", relative->bias_tpot}}}};
  return {{"rows", rs},
          {"relative_to_base", rel},
          {"mape_percent", {{"ttft_ms", mape_ttft}, {"tpot_ms", mape_tpot},
                            {"peak_memory_bytes", mape_memory}}},
          {"max_ape_percent", {{"ttft_ms", max_ape_ttft}, {"tpot_ms", max_ape_tpot},
                               {"peak_memory_bytes", max_ape_memory}}},
          {"latency_statistic", fmt::format("p{:.0f} of the samples", 100 * kLatencyQuantile)},
          {"interference_percent", {{"ttft_ms", interference_ttft}, {"tpot_ms", interference_tpot}}},
          {"bias_percent", {{"ttft_ms", bias_ttft}, {"tpot_ms", bias_tpot}}},
          {"debiased_mape_percent", {{"ttft_ms", debiased_mape_ttft}, {"tpot_ms", debiased_mape_tpot}}},
          {"spread_percent", {{"ttft_ms", spread_ttft}, {"tpot_ms", spread_tpot}}},
          {"machine_load", machine_load.to_json()},
          {"measurement_repeatability",
           {{"rows", repeatability.rows},
            {"drift_percent", {{"tpot_ms", repeatability.drift_tpot}}},
            {"apart_percent", {{"tpot_ms", repeatability.apart_tpot}}},
            {"max_apart_percent", {{"tpot_ms", repeatability.max_apart_tpot}}}}},
          {"by_hidden_size", widths}};
}

std::string ValidationReport::table() const {
  std::string out = fmt::format("{:>3} {:>9} | {:>9} {:>9} | {:>8} {:>8} | {:>9} {:>9} | {}\n",
                                "#", "params", "TTFT pred", "meas ms", "TPOT prd", "meas ms",
                                "mem pred", "meas MiB", "architecture");
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    out += fmt::format("{:>3} {:>9} | {:>9.3f} {:>9.3f} | {:>8.3f} {:>8.3f} | {:>9.2f} {:>9.2f} | {}\n",
                       i, r.config.num_parameters(), r.predicted.ttft_ms, r.measured.ttft_ms,
                       r.predicted.tpot_ms, r.measured.tpot_ms,
                       double(r.predicted.peak_memory_bytes) / double(1 << 20),
                       double(r.measured.peak_memory_bytes) / double(1 << 20), describe(r.config));
  }
  out += fmt::format("MAPE over {} architectures: TTFT {:.2f}% (max {:.2f}%), TPOT {:.2f}% (max "
                     "{:.2f}%), peak memory {:.2f}% (max {:.2f}%)\n",
                     rows.size(), mape_ttft, max_ape_ttft, mape_tpot, max_ape_tpot, mape_memory,
                     max_ape_memory);
  out += fmt::format("Mean signed error (prediction - measurement): TTFT {:+.2f}%, TPOT {:+.2f}% "
                     "(shared by every row: the machine faster or slower than when profiled)\n",
                     bias_ttft, bias_tpot);
  out += fmt::format("Without that shared bias (the model's own error): TTFT MAPE {:.2f}%, TPOT "
                     "MAPE {:.2f}%; signed errors spread (std) {:.2f}% / {:.2f}% around it\n",
                     debiased_mape_ttft, debiased_mape_tpot, spread_ttft, spread_tpot);
  if (repeatability.rows > 0)
    out += fmt::format("The measurement against itself (each row's odd rounds against its even "
                       "ones, the same minutes): TPOT {:.2f}% apart on average (max {:.2f}%) "
                       "beyond a shared {:+.2f}%; a model error after the bias no larger than "
                       "that is this machine's noise, not the model's\n",
                       repeatability.apart_tpot, repeatability.max_apart_tpot,
                       repeatability.drift_tpot);
  if (relative)
    out += fmt::format("As fractions of the base {} measured in the same rounds (how a relative "
                       "limit reads the model; the machine's drift cancels): TTFT MAPE {:.2f}% "
                       "(max {:.2f}%), TPOT MAPE {:.2f}% (max {:.2f}%)\n",
                       describe(relative->base), relative->mape_ttft, relative->max_ape_ttft,
                       relative->mape_tpot, relative->max_ape_tpot);
  out += "By hidden size (TPOT):";
  for (const auto& w : by_width)
    out += fmt::format(" D={} {:+.1f}%{}{}", w.hidden_size, w.bias_tpot,
                       w.rows > 1 ? fmt::format(" (n={}, max {:.1f}%)", w.rows, w.max_ape_tpot) : "",
                       relative ? fmt::format(" (as a fraction of the base {:+.1f}%)", w.relative_bias_tpot) : "");
  out += "\n";
  out += fmt::format("Measured TTFT / TPOT: the p{:.0f} of the samples (the uncontended latency the "
                     "model predicts). The medians were {:.1f}% / {:.1f}% higher on average: "
                     "other processes on this machine.\n",
                     100 * kLatencyQuantile, interference_ttft, interference_tpot);
  if (machine_load.measured) {
    const std::string w = busy_machine_warning(machine_load, "The validation", cores);
    out += w.empty() ? fmt::format("Machine load during the measurement: other processes {:.2f} "
                                   "cores on average, steal {:.2f} (quiet).\n",
                                   machine_load.other_cores, machine_load.steal_cores)
                     : w + ".\n";
  }
  return out;
}

}  // namespace ac
