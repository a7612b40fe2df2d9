#include "hardware/calibration.h"

#include <algorithm>
#include <set>

#include "common/error.h"
#include "common/progress.h"
#include "common/runtime.h"
#include "hardware/in_forward.h"
#include "hardware/validate.h"

namespace ac {

Scenario calibration_scenario(const Workload& w, const std::string& device) {
  Scenario s;
  s.name = "calibration";
  s.device = device;
  s.engine = "native";
  s.workload = w;
  s.device_spec = device == "cpu" ? detect_cpu() : load_device(device);
  s.engine_spec.name = "native";
  return s;
}

std::pair<PhaseFeatures, PhaseFeatures> correction_features(const Profile& profile,
                                                            const ModelConfig& config,
                                                            const Workload& workload) {
  return correction_features(profile, config,
                             calibration_scenario(workload, profile.identity.device));
}

std::pair<PhaseFeatures, PhaseFeatures> correction_features(const Profile& profile,
                                                            const ModelConfig& config,
                                                            const Scenario& s) {
  Profile bare = profile;
  bare.calibration = Calibration{};
  bare.correction = LatencyCorrection{};
  bare.engines.clear();
  LatencyCorrection* target = &bare.correction;
  if (s.engine != "native") {  // an engine measured here: its correction over the same tables
    EngineCalibration e;
    e.engine = s.engine;
    e.threads = s.workload.threads > 0 ? int(s.workload.threads) : profile.identity.cores;
    e.weight_dtype = s.workload.weight_dtype;
    e.kv_cache_dtype = s.workload.kv_cache_dtype;
    bare.engines.push_back(e);
    target = &bare.engines.back().correction;
  }
  target->fitted = true;
  PhaseFeatures pre, dec;
  // Prediction is linear in the coefficients: e_j gives feature j, step_table alone the offset.
  for (int j = 0; j <= kCorrectionTerms; ++j) {
    PhaseCorrection c = j < kCorrectionTerms ? PhaseCorrection::unit(j) : PhaseCorrection::unit(0);
    if (j == kCorrectionTerms) c.gemm = 0, c.step_table = 1;
    target->prefill = target->decode = c;
    CostEstimate e = predict(config, s, &bare);
    (j < kCorrectionTerms ? pre.x[size_t(j)] : pre.offset) = e.ttft_ms;
    (j < kCorrectionTerms ? dec.x[size_t(j)] : dec.offset) = e.tpot_ms;
  }
  return {pre, dec};
}

std::vector<ModelConfig> calibration_architectures(const std::vector<ModelConfig>& shapes,
                                                   int count, uint64_t seed) {
  if (shapes.empty() || count < 0)
    throw ConfigError(msg("calibration", "expected >= 1 shape and count >= 0, found {} shapes "
                                         "and count {}", shapes.size(), count));
  std::vector<ModelConfig> out = shapes;
  const int at_base = count / 4;
  for (auto& c : width_spread_architectures(shapes.front(), count - at_base, seed))
    out.push_back(std::move(c));
  for (auto& c : base_width_architectures(shapes.front(), at_base, seed + 1))
    out.push_back(std::move(c));
  return out;
}

std::vector<Measurement> measure_interleaved(const std::vector<ModelConfig>& archs,
                                             const Workload& workload, int rounds,
                                             uint64_t weight_seed, bool progress,
                                             const c10::Device& device) {
  if (rounds < 1)
    throw ConfigError(msg("measure", "rounds: expected >= 1, found {}", rounds));
  std::vector<std::vector<Measurement>> runs(archs.size());
  Progress bar("measure", int64_t(archs.size()) * rounds, "runs");
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < archs.size(); ++i) {
      // Weights rebuilt each round (same seed): memory stays one model, whatever the count.
      LlamaModel m{archs[i], to_device(archs[i], random_weights(archs[i], weight_seed + i), device)};
      runs[i].push_back(measure_native(m, workload, /*repeats=*/1));
      if (progress) bar.update(int64_t(r * archs.size() + i + 1));
    }
  if (progress) bar.finish();
  std::vector<Measurement> out;
  for (const auto& rs : runs) out.push_back(merge_measurements(rs));
  return out;
}

std::vector<CalibrationSample> measure_calibration(const Profile& profile,
                                                   const std::vector<ModelConfig>& archs,
                                                   const Workload& workload, int repeats,
                                                   bool progress) {
  return calibration_samples(
      profile, archs,
      measure_interleaved(archs, workload, repeats, /*weight_seed=*/17, progress,
                          profile_device(profile)),
      workload);
}

std::vector<CalibrationSample> calibration_samples(const Profile& profile,
                                                   const std::vector<ModelConfig>& archs,
                                                   const std::vector<Measurement>& measured,
                                                   const Workload& workload) {
  return calibration_samples(profile, archs, measured,
                             calibration_scenario(workload, profile.identity.device));
}

std::vector<CalibrationSample> calibration_samples(const Profile& profile,
                                                   const std::vector<ModelConfig>& archs,
                                                   const std::vector<Measurement>& measured,
                                                   const Scenario& scenario) {
  AC_CHECK(measured.size() >= archs.size(), "fewer measurements than architectures");
  std::vector<CalibrationSample> out;
  for (size_t i = 0; i < archs.size(); ++i) {
    CalibrationSample s;
    s.config = archs[i];
    std::tie(s.prefill, s.decode) = correction_features(profile, archs[i], scenario);
    s.measured = measured[i];
    out.push_back(std::move(s));
  }
  return out;
}

static PhaseSamples phase_samples(const std::vector<CalibrationSample>& samples, bool prefill) {
  PhaseSamples p;
  for (const auto& s : samples) {
    const PhaseFeatures& f = prefill ? s.prefill : s.decode;
    p.x.push_back(f.x);
    p.offset.push_back(f.offset);
    p.y.push_back(prefill ? s.measured.ttft_ms : s.measured.tpot_ms);
  }
  return p;
}

LatencyCorrection fit_correction(const std::vector<CalibrationSample>& samples, double ridge,
                                 const CorrectionBounds& bounds) {
  return fit_correction(samples, ridge, bounds, bounds);
}

CorrectionBounds native_decode_bounds(const Profile& profile) {
  return profile.in_forward.empty() ? CorrectionBounds::physical() : CorrectionBounds::physical(1.25);
}

LatencyCorrection fit_native_correction(const Profile& profile,
                                        const std::vector<CalibrationSample>& samples,
                                        double ridge) {
  return fit_correction(samples, ridge, CorrectionBounds::physical(), native_decode_bounds(profile));
}

std::vector<InForwardRatio> in_forward_for(const Profile& profile, const ModelConfig& base,
                                           const Workload& workload, bool progress) {
  if (profile.identity.device != "cpu" || !in_forward_measures(base)) return {};
  InForwardOptions o;
  o.progress = progress;
  return measure_in_forward(profile, base, workload, o);
}

LatencyCorrection fit_correction(const std::vector<CalibrationSample>& samples, double ridge,
                                 const CorrectionBounds& prefill_bounds,
                                 const CorrectionBounds& decode_bounds) {
  if (samples.empty()) throw ConfigError(msg("fit_correction", "no calibration samples"));
  PhaseSamples pre = phase_samples(samples, true), dec = phase_samples(samples, false);
  LatencyCorrection c;
  c.fitted = true;
  c.prefill = fit_phase_correction(pre, ridge, prefill_bounds);
  c.decode = fit_phase_correction(dec, ridge, decode_bounds);
  CorrectionFit& f = c.fit;
  f.models = int(samples.size());
  f.ridge = ridge;
  for (const auto& s : samples) f.architectures.push_back(describe(s.config));
  f.mape_ttft = correction_mape(pre, c.prefill);
  f.mape_tpot = correction_mape(dec, c.decode);
  f.uncorrected_mape_ttft = correction_mape(pre, PhaseCorrection{});
  f.uncorrected_mape_tpot = correction_mape(dec, PhaseCorrection{});
  if (samples.size() >= 2) {
    f.loo_mape_ttft = correction_loo_mape(pre, ridge, prefill_bounds);
    f.loo_mape_tpot = correction_loo_mape(dec, ridge, decode_bounds);
  }
  return c;
}

LatencyCorrection calibrate_correction(const Profile& profile,
                                       const std::vector<ModelConfig>& shapes,
                                       const Workload& workload, const ProfileOptions& opt) {
  const double t0 = now_s();
  std::vector<ModelConfig> archs =
      calibration_architectures(shapes, opt.calibration_models, opt.calibration_seed);
  std::vector<CalibrationSample> samples =
      measure_calibration(profile, archs, workload, opt.calibration_repeats, opt.progress);
  LatencyCorrection c = fit_native_correction(profile, samples, kCorrectionRidge);
  c.fit.base = describe(shapes.front());
  c.fit.seed = opt.calibration_seed;
  c.fit.repeats = opt.calibration_repeats;
  c.fit.elapsed_s = now_s() - t0;
  return c;
}

int correction_overlap(const LatencyCorrection& c, const std::vector<ModelConfig>& archs) {
  std::set<std::string> fitted(c.fit.architectures.begin(), c.fit.architectures.end());
  int n = 0;
  for (const auto& a : archs) n += fitted.count(describe(a)) ? 1 : 0;
  return n;
}

json calibration_samples_json(const std::vector<CalibrationSample>& samples) {
  json out = json::array();
  for (const auto& s : samples)
    out.push_back({{"architecture", describe(s.config)},
                   {"parameters", s.config.num_parameters()},
                   {"measured", s.measured.to_json()},
                   {"prefill", {{"x", s.prefill.x}, {"offset", s.prefill.offset}}},
                   {"decode", {{"x", s.decode.x}, {"offset", s.decode.offset}}}});
  json names = json::array();
  for (const char* n : correction_term_names()) names.push_back(n);
  return {{"terms", names}, {"samples", out}};
}

}  // namespace ac
