// Latency correction of a native CPU profile: a small linear residual model, fitted by least
// squares on real forwards of CALIBRATION architectures, that maps the sum of separately
// profiled ops to what the whole forward takes (docs/design.md, "The fitted correction").
//
// Why: each table entry times one op alone (its own cache state, its own dispatch); the real
// forward chains them. On a CPU whose last-level cache holds the whole model, the difference
// is not a constant per step: it scales with the work of each op class. Per phase (prefill =
// TTFT, one decode step = TPOT) the corrected latency is
//
//   t = k_gemm * S_gemm + k_attention * S_attention + k_elementwise * S_elementwise
//       + k_lm_head * S_lm_head + c_part * n_parts + c_step + S_step
//
// where S_x (ms) is the sum of the profile's table entries of class x over the forward
// (gemm: every projection; attention: attention_prefill / attention_decode; elementwise:
// rmsnorm, silu_mul, add, embedding; lm_head: the output head), n_parts counts the attention
// and FFN parts present (a removed part has none), and S_step is the "step" table entry (not
// fitted, factor 1). Six coefficients per phase: k_* (dimensionless) in [0.5, 2] and c_* (ms)
// >= 0 for the native engine (CorrectionBounds::physical).
//
// Fit: minimise sum_i ((y_i - t_i) / y_i)^2 + ridge * sum_j (theta_j - prior_j)^2 with
// prior k = 1, c = 0 (relative residuals: the goal is a percentage error), subject to the
// bounds, solved exactly by enumerating which bounds are active (at most 3^6 small linear
// systems). This header is torch-free so the profile reader builds without torch.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ac {

using json = nlohmann::json;

/// Number of fitted coefficients per phase, in the order of PhaseCorrection::coefficients().
constexpr int kCorrectionTerms = 6;
/// Their names: "gemm", "attention", "elementwise", "lm_head", "per_part_ms", "per_step_ms".
const std::array<const char*, kCorrectionTerms>& correction_term_names();

/// Coefficients of one phase (see the header comment). The defaults are the identity: the
/// uncorrected sum of table entries.
struct PhaseCorrection {
  double gemm = 1, attention = 1, elementwise = 1, lm_head = 1;  // factors, >= 0
  double per_part_ms = 0;  // per attention or FFN part present
  double per_step_ms = 0;  // once per forward call
  double step_table = 1;   // factor of the "step" table entry: fixed at 1 (0 only while the
                           // fit extracts the features)

  std::array<double, kCorrectionTerms> coefficients() const;
  static PhaseCorrection from_coefficients(const std::array<double, kCorrectionTerms>& c);
  /// The unit vector e_j (step_table 0): predict() with it yields feature j.
  static PhaseCorrection unit(int j);
};

/// What the fit was done on and how well it fits (percent errors on the calibration set;
/// leave-one-out: each architecture predicted by a fit on the others, an honest estimate).
struct CorrectionFit {
  int models = 0;                          // calibration architectures measured
  std::string base;                        // describe() of the model the prunes start from
  uint64_t seed = 0;                       // seed of the random calibration prunes
  std::vector<std::string> architectures;  // describe() of each calibration architecture
  int repeats = 0;                         // measured runs per architecture (median)
  double ridge = 0;
  double mape_ttft = 0, mape_tpot = 0;          // in-sample, percent
  double loo_mape_ttft = 0, loo_mape_tpot = 0;  // leave-one-out, percent
  double uncorrected_mape_ttft = 0, uncorrected_mape_tpot = 0;  // the bare tables, percent
  double elapsed_s = 0;
};

/// The correction stored in profile.json ("correction"); absent / fitted = false: identity.
struct LatencyCorrection {
  bool fitted = false;
  PhaseCorrection prefill, decode;
  CorrectionFit fit;

  json to_json() const;
  /// Throws FormatError naming `where` and the field on a malformed object.
  static LatencyCorrection from_json(const json& j, const std::string& where);
};

/// A few lines for a person: how many architectures the fit saw, and the mean absolute
/// percentage error of the predicted TTFT and TPOT without the correction, with it (in-sample)
/// and leave-one-out. The full fit (coefficients, architectures) is LatencyCorrection::to_json,
/// which belongs in the profile file rather than on a terminal.
std::string describe_fit(const CorrectionFit& fit);

/// Bounds of the fitted coefficients (in the order of PhaseCorrection::coefficients(); +-inf:
/// unbounded). Each must hold the prior (factors 1, constants 0).
struct CorrectionBounds {
  std::array<double, kCorrectionTerms> lo, hi;
  CorrectionBounds() { lo.fill(-INFINITY), hi.fill(INFINITY); }
  /// The native engine's (the default): factors in [0.5, 2] and constants >= 0. The tables
  /// time each op of the forward, so the forward costs each class within a factor of two of its
  /// table sum, and nothing it does costs negative time; a fit that needs more is explaining
  /// noise on collinear features (the 2026-12-04 profiles of machine B fitted a per-step
  /// constant of -0.8 ms on TPOTs of 1-3 ms).
  static CorrectionBounds physical();
  /// Factors in [1 / range, range] and constants >= 0 (range >= 1): the decode phase of a
  /// profile with in-forward ratios (hardware/in_forward.h), whose scaled tables already hold
  /// each class's cost inside a step, so the factors only correct what remains.
  static CorrectionBounds physical(double range);
  /// Factors >= 0, constants free: an engine measured through its work features (llama.cpp,
  /// hardware/engine_calibration.h), whose factors are ms per unit of work, not ratios.
  static CorrectionBounds nonnegative_factors();
};

/// One phase's calibration data: per architecture i the features x_i (ms, the table sums of
/// PhaseCorrection::unit(j)), the fixed offset (the step table entry, ms) and the measured
/// latency y_i (ms, > 0).
struct PhaseSamples {
  std::vector<std::array<double, kCorrectionTerms>> x;
  std::vector<double> offset, y;
};

/// The constrained ridge least-squares fit described in the header comment, within `bounds`.
/// Needs at least one sample; throws ConfigError on mismatched sizes, a non-positive /
/// non-finite measurement, or bounds that exclude the prior.
PhaseCorrection fit_phase_correction(const PhaseSamples& s, double ridge,
                                     const CorrectionBounds& bounds = CorrectionBounds::physical());

/// Prediction of sample i with coefficients c: x_i . c + offset_i.
double correction_predict(const PhaseSamples& s, size_t i, const PhaseCorrection& c);

/// Mean |pred - y| / y in percent over the samples, with coefficients c.
double correction_mape(const PhaseSamples& s, const PhaseCorrection& c);

/// Leave-one-out MAPE (percent): each sample predicted by the fit on all the others.
/// Needs >= 2 samples.
double correction_loo_mape(const PhaseSamples& s, double ridge,
                           const CorrectionBounds& bounds = CorrectionBounds::physical());

/// The decode phase's in-forward ratios at one hidden size (hardware/in_forward.h): per factor
/// term (gemm, attention, elementwise, lm_head, the order of PhaseCorrection::coefficients())
/// what the class cost inside a real decode step (in_forward_ms, the 10th percentile over the
/// timed steps) over the sum of its table entries (table_ms), times the share of the step
/// between the timed ops: ratio_k = in_forward_ms_k / table_ms_k * (total_ms - step table) /
/// sum_k in_forward_ms_k (>= 1). total_ms: the whole op-by-op step (p10); rest_ms: total_ms -
/// the step table - sum_k in_forward_ms_k, what no op's timer saw.
struct InForwardRatio {
  int64_t hidden_size = 0;
  std::array<double, 4> ratio{1, 1, 1, 1};
  std::array<double, 4> in_forward_ms{}, table_ms{};
  double total_ms = 0, rest_ms = 0;

  json to_json() const;
  /// Throws FormatError naming `where` and the field on a malformed object or a ratio that is
  /// not positive and finite.
  static InForwardRatio from_json(const json& j, const std::string& where);
};

/// One line for a person: the measured hidden sizes and each ratio's range over them (empty
/// `r`: ""); the per-width values are in the profile's JSON ("in_forward").
std::string describe_in_forward(const std::vector<InForwardRatio>& r);

/// The ratio of factor term `term` (0..3) at `hidden_size`: linear in the hidden size between
/// the two nearest measured ones, the nearest one's outside their range; 1 when `r` is empty
/// (a profile without in-forward ratios). Keyed by the hidden size, not by the bytes the step
/// touches: on machine C the tables' errors follow the shapes (a GEMM of width 288 timed alone
/// 1.4x its neighbours), and keyed by the working set the same validation's TPOT error was 4.2%
/// against 3.4% (docs/benchmarks.md, 2026-12-06). `r` must be sorted by hidden size.
double in_forward_ratio(const std::vector<InForwardRatio>& r, int term, int64_t hidden_size);

}  // namespace ac
