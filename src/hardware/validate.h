// Validation of the cost model: predictions beside measurements of the native engine on this
// machine, over real or random heterogeneous architectures (docs/design.md, "Measuring, and the
// measured verdict").
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hardware/cost_model.h"
#include "hardware/machine_load.h"
#include "hardware/measure.h"

namespace ac {

/// stories15M's shape (llama2.c TinyStories: D 288, 6 layers of 6 heads x 48, F 768,
/// V 32000, tied head), the default shapes of interest of a CPU profile.
ModelConfig stories15m_shape();

/// Reads an architecture: a checkpoint folder (its config.json), a config.json, or a
/// llama2.c model.bin (header only). Throws FormatError / ConfigError naming the path.
ModelConfig read_architecture(const fs::path& path);

/// `count` random heterogeneous prunes of `base` (seeded): hidden size kept, or (half of them)
/// cut to a multiple of 8 in [0.4 D, D], the range the search explores (min_width_fraction,
/// search/minitron.h), so that the latency correction fitted on them and the validation see
/// the narrow models a search returns; per layer, query heads in [1, H], KV heads a divisor of them, head_dim kept,
/// FFN width anywhere in [F/8, F] (odd widths included), attention or FFN sometimes removed,
/// never both in every layer.
std::vector<ModelConfig> random_architectures(const ModelConfig& base, int count, uint64_t seed);

/// `count` prunes of `base` (seeded) whose hidden sizes are spread evenly over the search's
/// range, from the smallest multiple of 8 >= 0.4 D to D (prune i at quantile i / (count - 1)):
/// the even ones with every layer drawn as in random_architectures, the odd ones with the base's
/// layers whole; every one keeps attention in some layer. The latency correction is fitted on
/// them, so that it sees every width the search can pick, heterogeneous and whole layers, not
/// mostly the base's width.
std::vector<ModelConfig> width_spread_architectures(const ModelConfig& base, int count,
                                                    uint64_t seed);

/// `count` prunes of `base` (seeded) at the base's own hidden size, every layer drawn as in
/// random_architectures, each keeping attention in some layer and none the base itself: the
/// search's most frequent pick on a CPU (the teacher's width with layers cut), which the
/// width-spread set has only once.
std::vector<ModelConfig> base_width_architectures(const ModelConfig& base, int count,
                                                  uint64_t seed);

struct ValidationRow {
  ModelConfig config;
  CostEstimate predicted;
  Measurement measured;
};

/// The errors of the rows of one hidden size (percent).
struct WidthErrors {
  int64_t hidden_size = 0;
  int rows = 0;
  double mape_ttft = 0, mape_tpot = 0;      // mean |pred - meas| / meas
  double max_ape_ttft = 0, max_ape_tpot = 0;
  double bias_ttft = 0, bias_tpot = 0;      // mean signed error
  double relative_bias_tpot = 0;            // mean signed error of the ratio to the base
                                            // (ValidationReport::relative; 0 without one)
};

/// The model read as the search reads it: each row's prediction as a fraction of the base's
/// (the teacher's) prediction, against its measurement as a fraction of the base's measurement
/// taken in the same interleaved rounds. A relative limit ("TPOT <= 0.6 x the teacher's") is
/// searched as that fraction of the teacher's prediction and checked as that fraction of its
/// measurement (pipeline/limits.h), so this is the error a relative limit meets; a drift of the
/// machine's speed between `profile` and now slows the base as much as the rows and cancels.
/// Errors in percent: 100 x ((pred / pred_base) / (meas / meas_base) - 1).
struct RelativeErrors {
  ModelConfig base;
  CostEstimate base_predicted;
  Measurement base_measured;
  double mape_ttft = 0, mape_tpot = 0;        // mean |error|
  double max_ape_ttft = 0, max_ape_tpot = 0;  // worst row
  double bias_ttft = 0, bias_tpot = 0;        // mean signed error
};

/// How far the measurement repeats itself while it is taken: the noise floor under the model's
/// error on this machine. Each row's samples are split by round into two interleaved halves
/// (rounds 1, 3, 5, ... and 2, 4, 6, ...; Measurement::Samples::step_ms holds one run per round,
/// measure_interleaved), both spanning the same minutes, and each half's TPOT is the p10 of its
/// decode steps (kLatencyQuantile), as the measurement's own. d_i = 100 (even / odd - 1) per row;
/// the drift is their mean (what every row shares); what is left is
/// 100 ((1 + d_i/100) / (1 + drift/100) - 1), its mean |.| and max |.| over the rows (percent).
/// A model error after the shared bias (ValidationReport::debiased_mape_tpot) no larger than
/// `apart_tpot` cannot be told from the machine measuring the same model twice. Neighbours that
/// share the last-level cache or the memory bus slow a step without showing as steal or as other
/// processes (MachineLoad), and this sees them. Rows with fewer than two rounds (or a round
/// without decode steps) are skipped; `rows` counts the others (0: nothing to compare, every
/// field 0).
struct MeasurementRepeatability {
  int rows = 0;
  double drift_tpot = 0;       // mean d_i, percent
  double apart_tpot = 0;       // mean |d_i beyond the drift|, percent
  double max_apart_tpot = 0;   // largest |d_i beyond the drift|, percent
};

/// MeasurementRepeatability of `measured` (each with its per-round samples). Never throws.
MeasurementRepeatability measurement_repeatability(const std::vector<Measurement>& measured);

struct ValidationReport {
  std::vector<ValidationRow> rows;
  double mape_ttft = 0, mape_tpot = 0, mape_memory = 0;  // mean |pred - meas| / meas, percent
  double max_ape_ttft = 0, max_ape_tpot = 0, max_ape_memory = 0;  // worst row, percent
  // How much other processes slowed the runs: mean over rows of measured median / p10 - 1,
  // percent (Measurement: the model predicts the p10, the uncontended latency).
  double interference_ttft = 0, interference_tpot = 0;
  // Mean signed error (pred - meas) / meas, percent: an error shared by every row (the
  // machine faster or slower than when profiled) shows here; scatter around it does not.
  double bias_ttft = 0, bias_tpot = 0;
  // The model's own error once the shared bias is taken out: MAPE of predictions divided by
  // (1 + bias), and the standard deviation of the signed errors around the bias (percent). A
  // machine that runs uniformly faster or slower than when profiled moves the bias, not these.
  double debiased_mape_ttft = 0, debiased_mape_tpot = 0;
  double spread_ttft = 0, spread_tpot = 0;
  std::vector<WidthErrors> by_width;  // one per hidden size measured, ascending
  std::optional<RelativeErrors> relative;  // when the base was measured with the rows
  MeasurementRepeatability repeatability;  // the rows' measurement against itself
  MachineLoad machine_load;  // what else ran while the rows were measured (validate_native)
  int cores = 0;             // the machine's cores (for that line)
  json to_json() const;
  /// A text table, one row per architecture, then the MAPE line.
  std::string table() const;
};

/// Each architecture's prediction from `profile` in `scenario` beside measured[i], and the errors
/// (MAPE, worst row, bias, interference). Throws as predict().
ValidationReport validation_report(const std::vector<ModelConfig>& archs,
                                   const std::vector<Measurement>& measured,
                                   const Scenario& scenario, const Profile& profile);

/// Fills rep.relative and each width's relative_bias_tpot (RelativeErrors) from the base's
/// prediction by `profile` and its measurement `base_measured` (taken in the same rounds as the
/// rows'). Throws ConfigError when rep has no rows or a base latency is not positive.
void add_relative_errors(ValidationReport& rep, const ModelConfig& base,
                         const Measurement& base_measured, const Scenario& scenario,
                         const Profile& profile);

/// Measures each architecture with random weights (measure_interleaved: `repeats` rounds over
/// all architectures, their samples pooled per architecture) and predicts
/// it from `profile`; the scenario must be measurable here (not_measurable_reason,
/// hardware/measure.h: engine "native" on this CPU, or on this GPU in a build with CUDA).
/// With `base` (the teacher the prunes come from), it is measured in the same rounds and the
/// report holds the errors relative to it (RelativeErrors).
/// Throws ConfigError otherwise, or when the profile was measured on another device than this
/// one (check_profile_is_this_machine).
ValidationReport validate_native(const std::vector<ModelConfig>& archs, const Scenario& scenario,
                                 const Profile& profile, int repeats = 3, bool progress = true,
                                 const std::optional<ModelConfig>& base = std::nullopt);

/// As validate_native, but first re-fits the profile's latency correction on `calibration`
/// architectures measured in the same interleaved rounds as `archs`. The tables stay the
/// profile's; only the correction's coefficients (correction.h) are fitted again, on
/// architectures disjoint from the ones judged. What this removes is a drift of the machine's
/// speed between `profile --calibrate` and now (on a shared VM: up to 7% within minutes),
/// which no model of the architecture can predict. `refit` (may be null) gets the correction
/// used. Throws ConfigError as validate_native, when `calibration` is empty, or when an
/// architecture is in both lists.
ValidationReport validate_native_recalibrated(const std::vector<ModelConfig>& archs,
                                              const std::vector<ModelConfig>& calibration,
                                              const Scenario& scenario, const Profile& profile,
                                              int repeats = 3, bool progress = true,
                                              LatencyCorrection* refit = nullptr,
                                              const std::optional<ModelConfig>& base = std::nullopt);

/// Throws ConfigError when `profile` was not measured on this machine: for a CPU profile, on
/// another CPU (model name, cores), with other BLAS kernels or another thread count than torch
/// uses now; for a GPU profile, on another GPU than the visible one (driver name), or in a build
/// without CUDA; for either, with another clock (AC_TIMER), or when its tables hold medians
/// (profiles written before 2026-12-01) rather than the uncontended latency measurements report.
void check_profile_is_this_machine(const Profile& profile);

/// The torch device a profile was measured on and a measurement against it must run on: kCPU
/// for a CPU profile, cuda:0 for a GPU profile (identity.gpu_model set). Throws ConfigError
/// (compute_device, common/accelerator.h) for a GPU profile in a build without CUDA or without
/// a visible GPU.
c10::Device profile_device(const Profile& profile);

}  // namespace ac
