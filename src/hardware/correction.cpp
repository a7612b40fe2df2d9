#include "hardware/correction.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "common/error.h"
#include "common/json_io.h"

namespace ac {

const std::array<const char*, kCorrectionTerms>& correction_term_names() {
  static const std::array<const char*, kCorrectionTerms> names{
      "gemm", "attention", "elementwise", "lm_head", "per_part_ms", "per_step_ms"};
  return names;
}

std::array<double, kCorrectionTerms> PhaseCorrection::coefficients() const {
  return {gemm, attention, elementwise, lm_head, per_part_ms, per_step_ms};
}

PhaseCorrection PhaseCorrection::from_coefficients(const std::array<double, kCorrectionTerms>& c) {
  PhaseCorrection p;
  p.gemm = c[0];
  p.attention = c[1];
  p.elementwise = c[2];
  p.lm_head = c[3];
  p.per_part_ms = c[4];
  p.per_step_ms = c[5];
  return p;
}

PhaseCorrection PhaseCorrection::unit(int j) {
  std::array<double, kCorrectionTerms> c{};
  c[size_t(j)] = 1;
  PhaseCorrection p = from_coefficients(c);
  p.step_table = 0;
  return p;
}

// ---------------------------------------------------------------------------------------------
// Fit.

namespace {

constexpr int kFactors = 4;  // the first four terms are factors (>= 0), the rest constants
constexpr std::array<double, kCorrectionTerms> kPrior{1, 1, 1, 1, 0, 0};
using Vec = std::array<double, kCorrectionTerms>;
using Mat = std::array<Vec, kCorrectionTerms>;

// Solves M theta = r for the free coefficients, the others held at `fixed_value` (their bound)
// and moved to the right-hand side (Gaussian elimination with partial pivoting). Returns false
// on a singular system.
bool solve_free(const Mat& M, const Vec& r, const std::array<bool, kCorrectionTerms>& fixed,
                const Vec& fixed_value, Vec& theta) {
  std::vector<int> f;
  for (int j = 0; j < kCorrectionTerms; ++j)
    if (!fixed[size_t(j)]) f.push_back(j);
  const size_t n = f.size();
  std::vector<std::vector<double>> a(n, std::vector<double>(n + 1));
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < n; ++k) a[i][k] = M[size_t(f[i])][size_t(f[k])];
    a[i][n] = r[size_t(f[i])];
    for (int j = 0; j < kCorrectionTerms; ++j)
      if (fixed[size_t(j)]) a[i][n] -= M[size_t(f[i])][size_t(j)] * fixed_value[size_t(j)];
  }
  for (size_t c = 0; c < n; ++c) {
    size_t piv = c;
    for (size_t i = c + 1; i < n; ++i)
      if (std::fabs(a[i][c]) > std::fabs(a[piv][c])) piv = i;
    if (std::fabs(a[piv][c]) < 1e-300) return false;
    std::swap(a[c], a[piv]);
    for (size_t i = 0; i < n; ++i) {
      if (i == c) continue;
      double m = a[i][c] / a[c][c];
      for (size_t k = c; k <= n; ++k) a[i][k] -= m * a[c][k];
    }
  }
  theta = fixed_value;
  for (size_t i = 0; i < n; ++i) theta[size_t(f[i])] = a[i][n] / a[i][i];
  return true;
}

double objective(const PhaseSamples& s, const Vec& theta, double ridge) {
  double o = 0;
  for (size_t i = 0; i < s.y.size(); ++i) {
    double e = (s.y[i] - correction_predict(s, i, PhaseCorrection::from_coefficients(theta))) / s.y[i];
    o += e * e;
  }
  for (int j = 0; j < kCorrectionTerms; ++j) o += ridge * std::pow(theta[size_t(j)] - kPrior[size_t(j)], 2);
  return o;
}

void check_samples(const PhaseSamples& s) {
  if (s.y.empty() || s.x.size() != s.y.size() || s.offset.size() != s.y.size())
    throw ConfigError(msg("fit_phase_correction", "expected as many features, offsets and "
                                                  "measurements (>= 1), found {}, {} and {}",
                          s.x.size(), s.offset.size(), s.y.size()));
  for (size_t i = 0; i < s.y.size(); ++i)
    if (!(s.y[i] > 0) || !std::isfinite(s.y[i]))
      throw ConfigError(msg("fit_phase_correction", "measurement {}: expected a positive finite "
                                                    "latency (ms), found {}", i, s.y[i]));
}

}  // namespace

double correction_predict(const PhaseSamples& s, size_t i, const PhaseCorrection& c) {
  Vec th = c.coefficients();
  double t = s.offset[i] * c.step_table;
  for (int j = 0; j < kCorrectionTerms; ++j) t += s.x[i][size_t(j)] * th[size_t(j)];
  return t;
}

CorrectionBounds CorrectionBounds::physical() {
  CorrectionBounds b;
  for (int j = 0; j < kFactors; ++j) b.lo[size_t(j)] = 0.5, b.hi[size_t(j)] = 2.0;
  b.lo[4] = b.lo[5] = 0;
  return b;
}

CorrectionBounds CorrectionBounds::physical(double range) {
  if (!(range >= 1) || !std::isfinite(range))
    throw ConfigError(msg("CorrectionBounds::physical", "range: expected a finite number >= 1, "
                                                        "found {}", range));
  CorrectionBounds b;
  for (int j = 0; j < kFactors; ++j) b.lo[size_t(j)] = 1 / range, b.hi[size_t(j)] = range;
  b.lo[4] = b.lo[5] = 0;
  return b;
}

CorrectionBounds CorrectionBounds::nonnegative_factors() {
  CorrectionBounds b;
  for (int j = 0; j < kFactors; ++j) b.lo[size_t(j)] = 0;
  return b;
}

PhaseCorrection fit_phase_correction(const PhaseSamples& s, double ridge,
                                     const CorrectionBounds& bounds) {
  check_samples(s);
  if (!(ridge >= 0))
    throw ConfigError(msg("fit_phase_correction", "ridge: expected >= 0, found {}", ridge));
  for (int j = 0; j < kCorrectionTerms; ++j) {
    const double lo = bounds.lo[size_t(j)], hi = bounds.hi[size_t(j)];
    if (std::isnan(lo) || std::isnan(hi) || lo > hi || lo > kPrior[size_t(j)] || hi < kPrior[size_t(j)])
      throw ConfigError(msg("fit_phase_correction", "bounds of {}: expected lo <= {} <= hi, "
                                                    "found [{}, {}]",
                            correction_term_names()[size_t(j)], kPrior[size_t(j)], lo, hi));
  }
  // Normal equations of the relative residuals (rows scaled by 1 / y_i) plus the ridge.
  Mat M{};
  Vec r{};
  for (size_t i = 0; i < s.y.size(); ++i) {
    const double w = 1.0 / (s.y[i] * s.y[i]), b = s.y[i] - s.offset[i];
    for (int j = 0; j < kCorrectionTerms; ++j) {
      r[size_t(j)] += w * s.x[i][size_t(j)] * b;
      for (int k = 0; k < kCorrectionTerms; ++k)
        M[size_t(j)][size_t(k)] += w * s.x[i][size_t(j)] * s.x[i][size_t(k)];
    }
  }
  // A term that never occurs (e.g. no lm_head) keeps its prior through a tiny ridge.
  const double eff = std::max(ridge, 1e-12);
  for (int j = 0; j < kCorrectionTerms; ++j) {
    M[size_t(j)][size_t(j)] += eff;
    r[size_t(j)] += eff * kPrior[size_t(j)];
  }
  // Exact box-constrained optimum of this convex problem: over every assignment of each bounded
  // coefficient to free, its lower or its upper bound (3^6 small systems at most), the feasible
  // solution with the lowest objective.
  std::array<int, kCorrectionTerms> states{};  // 1 + finite bounds of each coefficient
  int combos = 1;
  for (int j = 0; j < kCorrectionTerms; ++j) {
    states[size_t(j)] = 1 + (std::isfinite(bounds.lo[size_t(j)]) ? 1 : 0) +
                        (std::isfinite(bounds.hi[size_t(j)]) ? 1 : 0);
    combos *= states[size_t(j)];
  }
  Vec best{};
  double best_obj = std::numeric_limits<double>::infinity();
  for (int code = 0; code < combos; ++code) {
    std::array<bool, kCorrectionTerms> fixed{};
    Vec value{};
    int rest = code;
    for (int j = 0; j < kCorrectionTerms; ++j) {
      const size_t u = size_t(j);
      int st = rest % states[u];
      rest /= states[u];
      if (st == 0) continue;
      fixed[u] = true;
      // state 1: the first finite bound (lo if finite, else hi); state 2: hi
      value[u] = (st == 1 && std::isfinite(bounds.lo[u])) ? bounds.lo[u] : bounds.hi[u];
    }
    Vec theta;
    if (!solve_free(M, r, fixed, value, theta)) continue;
    bool feasible = true;
    for (int j = 0; j < kCorrectionTerms; ++j)
      feasible = feasible && theta[size_t(j)] >= bounds.lo[size_t(j)] - 1e-12 &&
                 theta[size_t(j)] <= bounds.hi[size_t(j)] + 1e-12;
    if (!feasible) continue;
    double o = objective(s, theta, eff);
    if (o < best_obj) best_obj = o, best = theta;
  }
  AC_CHECK(std::isfinite(best_obj), "no feasible correction (bounds {}..{} hold the prior)",
           bounds.lo[0], bounds.hi[0]);
  return PhaseCorrection::from_coefficients(best);
}

double correction_mape(const PhaseSamples& s, const PhaseCorrection& c) {
  check_samples(s);
  double m = 0;
  for (size_t i = 0; i < s.y.size(); ++i)
    m += std::fabs(correction_predict(s, i, c) - s.y[i]) / s.y[i];
  return 100.0 * m / double(s.y.size());
}

double correction_loo_mape(const PhaseSamples& s, double ridge, const CorrectionBounds& bounds) {
  check_samples(s);
  if (s.y.size() < 2)
    throw ConfigError(msg("correction_loo_mape", "leave-one-out needs >= 2 samples, found {}",
                          s.y.size()));
  double m = 0;
  for (size_t out = 0; out < s.y.size(); ++out) {
    PhaseSamples rest;
    for (size_t i = 0; i < s.y.size(); ++i)
      if (i != out) rest.x.push_back(s.x[i]), rest.offset.push_back(s.offset[i]), rest.y.push_back(s.y[i]);
    PhaseCorrection c = fit_phase_correction(rest, ridge, bounds);
    m += std::fabs(correction_predict(s, out, c) - s.y[out]) / s.y[out];
  }
  return 100.0 * m / double(s.y.size());
}

// ---------------------------------------------------------------------------------------------
// JSON.

static json phase_json(const PhaseCorrection& p) {
  json j = json::object();
  Vec c = p.coefficients();
  for (int k = 0; k < kCorrectionTerms; ++k) j[correction_term_names()[size_t(k)]] = c[size_t(k)];
  return j;
}

static PhaseCorrection phase_from_json(const json& j, const std::string& where) {
  if (!j.is_object())
    throw FormatError(msg("load_profile", "{}: expected an object of coefficients, found {}",
                          where, j.type_name()));
  Vec c;
  for (int k = 0; k < kCorrectionTerms; ++k) {
    c[size_t(k)] = json_get<double>(j, correction_term_names()[size_t(k)], where);
    if (!std::isfinite(c[size_t(k)]) || (k < kFactors && c[size_t(k)] < 0))
      throw FormatError(msg("load_profile", "{}.{}: expected a finite{} number, found {}", where,
                            correction_term_names()[size_t(k)], k < kFactors ? " non-negative" : "",
                            c[size_t(k)]));
  }
  return PhaseCorrection::from_coefficients(c);
}

json LatencyCorrection::to_json() const {
  if (!fitted) return json::object({{"fitted", false}});
  return {{"fitted", true},
          {"model", "t = sum_x k_x * S_x + per_part_ms * parts + per_step_ms + step table "
                    "(hardware/correction.h)"},
          {"prefill", phase_json(prefill)},
          {"decode", phase_json(decode)},
          {"fitted_on", {{"models", fit.models}, {"base", fit.base}, {"seed", int64_t(fit.seed)},
                         {"architectures", fit.architectures}, {"repeats", fit.repeats},
                         {"ridge", fit.ridge}, {"elapsed_s", fit.elapsed_s}}},
          {"fit_mape_percent", {{"ttft_ms", fit.mape_ttft}, {"tpot_ms", fit.mape_tpot}}},
          {"leave_one_out_mape_percent", {{"ttft_ms", fit.loo_mape_ttft},
                                          {"tpot_ms", fit.loo_mape_tpot}}},
          {"uncorrected_mape_percent", {{"ttft_ms", fit.uncorrected_mape_ttft},
                                        {"tpot_ms", fit.uncorrected_mape_tpot}}}};
}

LatencyCorrection LatencyCorrection::from_json(const json& j, const std::string& where) {
  LatencyCorrection c;
  if (!j.is_object())
    throw FormatError(msg("load_profile", "{}: expected an object, found {}", where, j.type_name()));
  c.fitted = json_get_or<bool>(j, "fitted", false, where);
  if (!c.fitted) return c;
  c.prefill = phase_from_json(j.value("prefill", json()), where + ".prefill");
  c.decode = phase_from_json(j.value("decode", json()), where + ".decode");
  const json& on = j.value("fitted_on", json::object());
  const std::string w = where + ".fitted_on";
  c.fit.models = json_get_or<int>(on, "models", 0, w);
  c.fit.base = json_get_or<std::string>(on, "base", "", w);
  c.fit.seed = uint64_t(json_get_or<int64_t>(on, "seed", 0, w));
  if (on.is_object() && on.contains("architectures")) {
    if (!on.at("architectures").is_array())
      throw FormatError(msg("load_profile", "{}.architectures: expected an array of strings", w));
    for (const json& a : on.at("architectures")) {
      if (!a.is_string())
        throw FormatError(msg("load_profile", "{}.architectures: expected strings, found {}", w,
                              a.type_name()));
      c.fit.architectures.push_back(a.get<std::string>());
    }
  }
  c.fit.repeats = json_get_or<int>(on, "repeats", 0, w);
  c.fit.ridge = json_get_or<double>(on, "ridge", 0.0, w);
  c.fit.elapsed_s = json_get_or<double>(on, "elapsed_s", 0.0, w);
  auto pair = [&](const char* key, double& ttft, double& tpot) {
    const json& m = j.value(key, json::object());
    ttft = json_get_or<double>(m, "ttft_ms", 0.0, where + "." + key);
    tpot = json_get_or<double>(m, "tpot_ms", 0.0, where + "." + key);
  };
  pair("fit_mape_percent", c.fit.mape_ttft, c.fit.mape_tpot);
  pair("leave_one_out_mape_percent", c.fit.loo_mape_ttft, c.fit.loo_mape_tpot);
  pair("uncorrected_mape_percent", c.fit.uncorrected_mape_ttft, c.fit.uncorrected_mape_tpot);
  return c;
}

json InForwardRatio::to_json() const {
  json j = {{"hidden_size", hidden_size}, {"total_ms", total_ms}, {"rest_ms", rest_ms}};
  for (int k = 0; k < 4; ++k) {
    const char* n = correction_term_names()[size_t(k)];
    j["ratio"][n] = ratio[size_t(k)];
    j["in_forward_ms"][n] = in_forward_ms[size_t(k)];
    j["table_ms"][n] = table_ms[size_t(k)];
  }
  return j;
}

InForwardRatio InForwardRatio::from_json(const json& j, const std::string& where) {
  if (!j.is_object())
    throw FormatError(msg("load_profile", "{}: expected an object, found {}", where, j.type_name()));
  InForwardRatio r;
  r.hidden_size = json_get<int64_t>(j, "hidden_size", where);
  if (r.hidden_size < 1)
    throw FormatError(msg("load_profile", "{}.hidden_size: expected >= 1, found {}", where,
                          r.hidden_size));
  r.total_ms = json_get_or<double>(j, "total_ms", 0.0, where);
  r.rest_ms = json_get_or<double>(j, "rest_ms", 0.0, where);
  auto group = [&](const char* key) -> const json& {
    if (!j.contains(key) || !j.at(key).is_object())
      throw FormatError(msg("load_profile", "{}.{}: expected an object gemm / attention / "
                                            "elementwise / lm_head", where, key));
    return j.at(key);
  };
  const json &ratio = group("ratio"), &in = group("in_forward_ms"), &table = group("table_ms");
  for (int k = 0; k < 4; ++k) {
    const char* n = correction_term_names()[size_t(k)];
    r.ratio[size_t(k)] = json_get<double>(ratio, n, where + ".ratio");
    if (!(r.ratio[size_t(k)] > 0) || !std::isfinite(r.ratio[size_t(k)]))
      throw FormatError(msg("load_profile", "{}.ratio.{}: expected a positive finite number, "
                                            "found {}", where, n, r.ratio[size_t(k)]));
    r.in_forward_ms[size_t(k)] = json_get_or<double>(in, n, 0.0, where + ".in_forward_ms");
    r.table_ms[size_t(k)] = json_get_or<double>(table, n, 0.0, where + ".table_ms");
  }
  return r;
}

double in_forward_ratio(const std::vector<InForwardRatio>& r, int term, int64_t hidden_size) {
  AC_CHECK(term >= 0 && term < 4, "in_forward_ratio: term {} is not a factor", term);
  if (r.empty()) return 1.0;
  const size_t t = size_t(term);
  if (hidden_size <= r.front().hidden_size) return r.front().ratio[t];
  if (hidden_size >= r.back().hidden_size) return r.back().ratio[t];
  size_t i = 1;
  while (r[i].hidden_size < hidden_size) ++i;
  const double a = double(hidden_size - r[i - 1].hidden_size) /
                   double(r[i].hidden_size - r[i - 1].hidden_size);
  return (1 - a) * r[i - 1].ratio[t] + a * r[i].ratio[t];
}

std::string describe_in_forward(const std::vector<InForwardRatio>& r) {
  if (r.empty()) return "";
  std::string out = fmt::format("decode op classes inside a real step over their tables, hidden "
                                "sizes {}..{} ({} widths):", r.front().hidden_size,
                                r.back().hidden_size, r.size());
  for (int k = 0; k < 4; ++k) {
    double lo = r.front().ratio[size_t(k)], hi = lo;
    for (const auto& e : r) lo = std::min(lo, e.ratio[size_t(k)]), hi = std::max(hi, e.ratio[size_t(k)]);
    out += fmt::format("{} {} {:.2f}-{:.2f}", k ? "," : "", correction_term_names()[size_t(k)], lo, hi);
  }
  return out + "\n";
}

std::string describe_fit(const CorrectionFit& f) {
  std::string out = fmt::format("correction fitted on {} calibration architectures (seed {}, "
                                "{:.1f} s); mean absolute percentage error of the predictions:\n",
                                f.models, f.seed, f.elapsed_s);
  out += fmt::format("        {:>11}  {:>9}  {:>13}\n", "uncorrected", "corrected",
                     "leave-one-out");
  out += fmt::format("  TTFT  {:>10.2f}%  {:>8.2f}%  {:>12.2f}%\n", f.uncorrected_mape_ttft,
                     f.mape_ttft, f.loo_mape_ttft);
  out += fmt::format("  TPOT  {:>10.2f}%  {:>8.2f}%  {:>12.2f}%\n", f.uncorrected_mape_tpot,
                     f.mape_tpot, f.loo_mape_tpot);
  return out;
}

}  // namespace ac
