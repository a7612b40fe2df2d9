// Calibration of a native CPU profile: measure real forwards of calibration architectures,
// extract the per-class table sums the correction is linear in, and fit it
// (hardware/correction.h; docs/design.md, "The fitted correction").
//
// Calibration architectures: the profile's shapes of interest (the teacher) plus `count`
// random heterogeneous prunes of the first shape, their hidden sizes spread over the search's
// range (validate.h width_spread_architectures), drawn with
// `seed`, which differs from validate's default seed so that validation measures other
// architectures; `validate` reports the overlap (correction_overlap), which must be 0.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "hardware/correction.h"
#include "hardware/measure.h"
#include "hardware/profile.h"

namespace ac {

/// The features of one architecture in one phase: x[j] = the prediction of `profile`'s tables
/// under PhaseCorrection::unit(j) (ms), offset = the step table entry (ms).
struct PhaseFeatures {
  std::array<double, kCorrectionTerms> x{};
  double offset = 0;
};

/// The scenario calibration measures under: the native engine, workload `w`, on this CPU
/// (detect_cpu) when `device` is "cpu", else on the GPU devices/<device>.json describes (the
/// device of a GPU profile, Profile::identity.device). Throws ConfigError on an unknown device.
Scenario calibration_scenario(const Workload& w, const std::string& device = "cpu");

/// Features of `config` for the prefill (TTFT) and one decode step (TPOT) of `workload`, from
/// the tables of `profile` (its correction and older calibration ignored). Throws as predict().
std::pair<PhaseFeatures, PhaseFeatures> correction_features(const Profile& profile,
                                                            const ModelConfig& config,
                                                            const Workload& workload);

/// The same features in `scenario`: its engine (another than the native one: as that engine's
/// calibration in the profile would cost it, hardware/engine_calibration.h) and workload.
std::pair<PhaseFeatures, PhaseFeatures> correction_features(const Profile& profile,
                                                            const ModelConfig& config,
                                                            const Scenario& scenario);

/// Measures every architecture (random weights, seed weight_seed + i) in `rounds` interleaved
/// rounds: each round runs each architecture once (measure_native with one warm-up and one
/// timed run), so a slow drift of the machine's speed hits every architecture alike instead of
/// the few measured while it lasted. Per architecture: the samples of all rounds pooled
/// (merge_measurements: TTFT, TPOT and the request time their p10, the largest
/// peak memory). The models run on `device` (the profile's: profile_device, validate.h).
/// Throws ConfigError when rounds < 1.
std::vector<Measurement> measure_interleaved(const std::vector<ModelConfig>& archs,
                                             const Workload& workload, int rounds,
                                             uint64_t weight_seed, bool progress,
                                             const c10::Device& device = c10::kCPU);

/// One measured calibration architecture.
struct CalibrationSample {
  ModelConfig config;
  Measurement measured;
  PhaseFeatures prefill, decode;
};

/// `shapes` followed by `count` random prunes of shapes.front() drawn with `seed`: count -
/// count / 4 with their hidden sizes spread over the search's range (width_spread_architectures,
/// validate.h), then count / 4 at the base's own width with every layer drawn
/// (base_width_architectures, seed + 1), where the search picks most often on a CPU.
/// Throws ConfigError when `shapes` is empty or count < 0.
std::vector<ModelConfig> calibration_architectures(const std::vector<ModelConfig>& shapes,
                                                   int count, uint64_t seed);

/// Measures each architecture (measure_interleaved, `repeats` rounds, on the profile's device)
/// and computes its features. Torch threads as the caller set them (the profile's).
std::vector<CalibrationSample> measure_calibration(const Profile& profile,
                                                   const std::vector<ModelConfig>& archs,
                                                   const Workload& workload, int repeats,
                                                   bool progress);

/// The samples of architectures already measured: archs[i] with measured[i] (extra
/// measurements ignored) and its features from `profile`.
std::vector<CalibrationSample> calibration_samples(const Profile& profile,
                                                   const std::vector<ModelConfig>& archs,
                                                   const std::vector<Measurement>& measured,
                                                   const Workload& workload);

/// The same, with the features in `scenario` (correction_features with a scenario).
std::vector<CalibrationSample> calibration_samples(const Profile& profile,
                                                   const std::vector<ModelConfig>& archs,
                                                   const std::vector<Measurement>& measured,
                                                   const Scenario& scenario);

/// Fits both phases on the samples (fit_phase_correction within `bounds`), fills
/// CorrectionFit's errors (in-sample, leave-one-out with >= 2 samples, uncorrected). Throws
/// ConfigError when empty.
LatencyCorrection fit_correction(const std::vector<CalibrationSample>& samples, double ridge,
                                 const CorrectionBounds& bounds = CorrectionBounds::physical());

/// The same with the prefill's and the decode's own bounds.
LatencyCorrection fit_correction(const std::vector<CalibrationSample>& samples, double ridge,
                                 const CorrectionBounds& prefill_bounds,
                                 const CorrectionBounds& decode_bounds);

/// How far the native engine's decode factors may move: within [0.8, 1.25] when `profile` has
/// in-forward ratios (its decode tables then already cost each class as inside a step,
/// hardware/in_forward.h), else CorrectionBounds::physical()'s [0.5, 2].
CorrectionBounds native_decode_bounds(const Profile& profile);

/// The fit of the native engine on `samples` of `profile`: fit_correction with the prefill in
/// CorrectionBounds::physical() and the decode in native_decode_bounds(profile).
LatencyCorrection fit_native_correction(const Profile& profile,
                                        const std::vector<CalibrationSample>& samples,
                                        double ridge);

/// Measures the in-forward ratios of `base` on this CPU (measure_in_forward, its default ladder
/// of hidden sizes) when `profile` is a CPU profile and `base` a plain Llama-family decoder;
/// empty otherwise (the ratios then stay 1).
std::vector<InForwardRatio> in_forward_for(const Profile& profile, const ModelConfig& base,
                                           const Workload& workload, bool progress);

/// Default ridge of the fit (relative residuals vs squared deviation from the prior).
constexpr double kCorrectionRidge = 1e-3;

/// Profile + fit in one: calibration_architectures(shapes, opt...), measure, fit
/// (fit_native_correction: `profile`'s in-forward ratios are measured first, by the caller);
/// records seed, base, architectures, repeats, elapsed time.
LatencyCorrection calibrate_correction(const Profile& profile,
                                       const std::vector<ModelConfig>& shapes,
                                       const Workload& workload, const ProfileOptions& opt);

/// How many of `archs` the correction was fitted on (describe() equality).
int correction_overlap(const LatencyCorrection& correction, const std::vector<ModelConfig>& archs);

/// The raw samples as JSON (config, measurement, features), for offline analysis.
json calibration_samples_json(const std::vector<CalibrationSample>& samples);

}  // namespace ac
