// Latency correction and width granularity (docs/design.md, "The fitted correction", "Width
// granularity"): the residual fit recovers known coefficients and respects its bounds, calibration
// and validation architectures are disjoint, the granularity rule finds the step of a synthetic
// GEMM table with slow non-multiples, profile.json round-trips the new fields and an older profile
// without them still loads, and the cost model applies the correction exactly as the linear model
// the fit assumes.
#include <fstream>
#include <random>
#include <set>

#include "common/error.h"
#include "common/runtime.h"
#include "hardware/calibration.h"
#include "hardware/cost_model.h"
#include "hardware/device.h"
#include "hardware/expected_cost.h"
#include "hardware/granularity.h"
#include "hardware/profile.h"
#include "hardware/validate.h"
#include "profile_fixture.h"
#include "test_util.h"

using namespace ac;

namespace {

using Coefs = std::array<double, kCorrectionTerms>;

// n samples with features in [0.1, 5] ms (constants' features: parts 1..12, steps 1) and
// offsets in [0, 0.3] ms, measured exactly as `truth` predicts.
PhaseSamples synthetic_samples(const Coefs& truth, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.1, 5.0), off(0.0, 0.3);
  PhaseSamples s;
  for (int i = 0; i < n; ++i) {
    Coefs x{u(rng), u(rng), u(rng), u(rng), double(1 + rng() % 12), 1.0};
    s.x.push_back(x);
    s.offset.push_back(off(rng));
    double y = s.offset.back();
    for (int j = 0; j < kCorrectionTerms; ++j) y += x[size_t(j)] * truth[size_t(j)];
    s.y.push_back(y);
  }
  return s;
}


}  // namespace

TEST(CostCalibration, FitRecoversKnownCoefficients) {
  // A truth inside the native engine's bounds (factors in [0.5, 2], constants >= 0).
  const Coefs truth{1.3, 0.8, 1.7, 1.9, 0.05, 0.4};
  PhaseSamples s = synthetic_samples(truth, 15, 7);
  PhaseCorrection c = fit_phase_correction(s, /*ridge=*/0);
  Coefs got = c.coefficients();
  for (int j = 0; j < kCorrectionTerms; ++j)
    EXPECT_NEAR(got[size_t(j)], truth[size_t(j)], 1e-6) << correction_term_names()[size_t(j)];
  EXPECT_NEAR(correction_mape(s, c), 0.0, 1e-6);
  EXPECT_NEAR(correction_loo_mape(s, 0), 0.0, 1e-5);
  // The identity (the bare tables) is off by the factors: a clearly positive error.
  EXPECT_GT(correction_mape(s, PhaseCorrection{}), 10.0);
  // An engine fitted through its work features (llama.cpp) has factors beyond 2 and negative
  // constants; its bounds let the fit recover them.
  const Coefs work{3.5, 0.8, 1.7, 2.1, -0.05, 0.4};
  PhaseSamples w = synthetic_samples(work, 15, 8);
  Coefs got_w = fit_phase_correction(w, 0, CorrectionBounds::nonnegative_factors()).coefficients();
  for (int j = 0; j < kCorrectionTerms; ++j)
    EXPECT_NEAR(got_w[size_t(j)], work[size_t(j)], 1e-6) << correction_term_names()[size_t(j)];
}

// Sum of squared relative residuals of coefficients th on s (the fit's objective without ridge).
static double sse(const PhaseSamples& s, const Coefs& th) {
  double o = 0;
  for (size_t i = 0; i < s.y.size(); ++i) {
    double e = (s.y[i] - correction_predict(s, i, PhaseCorrection::from_coefficients(th))) / s.y[i];
    o += e * e;
  }
  return o;
}

// No small feasible step of any one coefficient from `best` lowers the objective (the KKT
// conditions of the box-constrained optimum, checked numerically).
static void expect_box_optimum(const PhaseSamples& s, const Coefs& best, const CorrectionBounds& b) {
  for (int j = 0; j < kCorrectionTerms; ++j)
    for (double step : {-1e-4, 1e-4}) {
      Coefs th = best;
      th[size_t(j)] += step;
      if (th[size_t(j)] < b.lo[size_t(j)] || th[size_t(j)] > b.hi[size_t(j)]) continue;
      EXPECT_GE(sse(s, th), sse(s, best) - 1e-12) << correction_term_names()[size_t(j)] << " " << step;
    }
}

TEST(CostCalibration, FitKeepsFactorsNonNegative) {
  // The truth has a negative attention factor: with the work features' bounds the fit clamps it
  // to 0, and no feasible small step lowers the objective.
  const Coefs truth{1.2, -0.5, 1.0, 1.0, 0.1, 0.2};
  PhaseSamples s = synthetic_samples(truth, 20, 11);
  const CorrectionBounds b = CorrectionBounds::nonnegative_factors();
  PhaseCorrection c = fit_phase_correction(s, 0, b);
  EXPECT_EQ(c.attention, 0.0);
  for (double v : {c.gemm, c.elementwise, c.lm_head}) EXPECT_GE(v, 0.0);
  expect_box_optimum(s, c.coefficients(), b);
}

TEST(CostCalibration, PhysicalBoundsHoldFactorsAndConstants) {
  // A gemm factor of 3 and a negative per-part constant: the native engine's fit stops at the
  // bounds (gemm 2, per_part_ms 0) and is the best fit inside them; the others stay inside.
  const Coefs truth{3.0, 1.0, 1.0, 1.0, -0.1, 0.2};
  PhaseSamples s = synthetic_samples(truth, 20, 13);
  const CorrectionBounds b = CorrectionBounds::physical();
  EXPECT_EQ(b.lo, (Coefs{0.5, 0.5, 0.5, 0.5, 0, 0}));
  EXPECT_EQ(b.hi[0], 2.0);
  EXPECT_TRUE(std::isinf(b.hi[5]));
  const Coefs got = fit_phase_correction(s, 0).coefficients();  // physical() is the default
  EXPECT_EQ(got[0], 2.0);
  EXPECT_EQ(got[4], 0.0);
  for (int j = 0; j < kCorrectionTerms; ++j) {
    EXPECT_GE(got[size_t(j)], b.lo[size_t(j)]) << correction_term_names()[size_t(j)];
    EXPECT_LE(got[size_t(j)], b.hi[size_t(j)]) << correction_term_names()[size_t(j)];
  }
  expect_box_optimum(s, got, b);
  // Bounds that exclude the prior are refused.
  CorrectionBounds bad;
  bad.lo[0] = 1.5;
  EXPECT_THROW(fit_phase_correction(s, 0, bad), ConfigError);
}

TEST(CostCalibration, InForwardBoundsNarrowTheDecodeFactors) {
  // physical(1.25): factors in [0.8, 1.25], constants >= 0. A truth of gemm 1.5 and lm_head 0.6
  // stops at 1.25 and 0.8, the best fit inside that box.
  const CorrectionBounds b = CorrectionBounds::physical(1.25);
  EXPECT_EQ(b.lo, (Coefs{0.8, 0.8, 0.8, 0.8, 0, 0}));
  EXPECT_EQ(b.hi[3], 1.25);
  PhaseSamples s = synthetic_samples({1.5, 1.1, 0.9, 0.6, 0.02, 0.1}, 20, 17);
  const Coefs got = fit_phase_correction(s, 0, b).coefficients();
  EXPECT_EQ(got[0], 1.25);
  EXPECT_EQ(got[3], 0.8);
  expect_box_optimum(s, got, b);
  EXPECT_THROW(CorrectionBounds::physical(0.9), ConfigError);
  EXPECT_THROW(CorrectionBounds::physical(NAN), ConfigError);
  // The native decode's bounds: the narrow box only with in-forward ratios in the profile.
  Profile p;
  EXPECT_EQ(native_decode_bounds(p).hi[0], 2.0);
  p.in_forward.push_back(InForwardRatio{});
  EXPECT_EQ(native_decode_bounds(p).hi[0], 1.25);
}

TEST(CostCalibration, FitRejectsBadMeasurements) {
  PhaseSamples s = synthetic_samples({1, 1, 1, 1, 0, 0}, 3, 1);
  s.y[1] = 0;
  EXPECT_THROW(fit_phase_correction(s, 0), ConfigError);
  s.y.pop_back();
  EXPECT_THROW(fit_phase_correction(s, 0), ConfigError);
  EXPECT_THROW(fit_phase_correction(PhaseSamples{}, 0), ConfigError);
}

TEST(CostCalibration, CalibrationAndValidationArchitecturesAreDisjoint) {
  const ModelConfig base = stories15m_shape();
  ProfileOptions o;  // the profile's default calibration seed and count
  std::vector<ModelConfig> cal = calibration_architectures({base}, o.calibration_models,
                                                           o.calibration_seed);
  ASSERT_EQ(cal.size(), size_t(1 + o.calibration_models));
  EXPECT_EQ(describe(cal[0]), describe(base));  // the shape of interest itself comes first
  LatencyCorrection c;
  c.fitted = true;
  for (const auto& a : cal) c.fit.architectures.push_back(describe(a));
  // validate's default: 20 random prunes with seed 1 (cmd_validate.cpp).
  std::vector<ModelConfig> val = random_architectures(base, 20, 1);
  EXPECT_EQ(correction_overlap(c, val), 0);
  EXPECT_EQ(correction_overlap(c, cal), int(cal.size()));
  EXPECT_NE(o.calibration_seed, 1u);
}

TEST(CostCalibration, ScanGranularityOfWidths) {
  EXPECT_EQ(scan_granularity(256, 256), 128);
  EXPECT_EQ(scan_granularity(257, 256), 1);
  EXPECT_EQ(scan_granularity(258, 256), 2);
  EXPECT_EQ(scan_granularity(264, 256), 8);
  EXPECT_EQ(scan_granularity(320, 256), 64);
  EXPECT_EQ(scan_granularity(384, 256), 128);
  EXPECT_EQ(granularity_scan_widths(128),
            (std::vector<int64_t>{128, 129, 130, 132, 136, 144, 160, 192, 256}));
}

// A scan where latency is proportional to the width rounded up to 16, and widths that are not
// multiples of `slow_below` take 1.5x as long; `noise` > 0 multiplies each entry by a factor in
// [1, 1 + noise) drawn independently of the width (timing noise of a shared machine).
static OpTable synthetic_scan(int64_t slow_below, double noise = 0) {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  OpTable t;
  t.dim_names = {"M", "N", "K", "A", "O"};
  for (int64_t M : {1, 128})
    for (int64_t A : {128, 256, 512})
      for (int64_t w : granularity_scan_widths(A))
        for (int64_t O : {0, 1}) {
          OpTiming e;
          e.dims = {M, O == 0 ? w : 288, O == 0 ? 288 : w, A, O};
          double padded = double((w + 15) / 16 * 16);
          e.ms = 1e-3 * padded * double(M) * (w % slow_below ? 1.5 : 1.0);
          state = state * 6364136223846793005ull + 1442695040888963407ull;  // LCG
          e.ms *= 1 + noise * double(state >> 11) / double(1ull << 53);
          e.median_ms = e.ms;
          t.entries.push_back(e);
        }
  return t;
}

TEST(CostCalibration, WidthGranularityRuleFindsTheFastStep) {
  // Slow non-multiples of 16: widths a+1 .. a+8 reach (a+k)/(1.5 (a+16)) < 0.67 of the best.
  EXPECT_EQ(derive_width_granularity(synthetic_scan(16)), 16);
  EXPECT_EQ(derive_width_granularity(synthetic_scan(64)), 64);
  // Only the padding to 16: level k averages (a+k)/(a+16) over a = 128, 256, 512; level 1
  // reaches 0.937 >= 0.9, so every level passes and the floor of 8 applies. With the floor
  // lowered and a 0.97 bar, level 8 (0.967) fails and level 16 (1.0) passes: g = 16.
  EXPECT_EQ(derive_width_granularity(synthetic_scan(1)), 8);
  GranularityRule r;
  r.min_granularity = 1;
  r.min_efficiency = 0.97;
  EXPECT_EQ(derive_width_granularity(synthetic_scan(1), r), 16);
  auto levels = granularity_levels(synthetic_scan(16));
  ASSERT_EQ(levels.size(), 8u);  // 1, 2, 4, ..., 128
  EXPECT_EQ(levels.front().first, 1);
  EXPECT_LT(levels.front().second, 0.7);
  EXPECT_NEAR(levels.back().second, 1.0, 1e-12);
  EXPECT_THROW(derive_width_granularity(OpTable{}), ConfigError);
}

TEST(CostCalibration, WidthGranularityRuleIsNotFooledByTimingNoise) {
  // Up to +40% noise on every entry: each group's best is a lucky sample, so every level's mean
  // efficiency drops to 0.8-0.9 alike. Measured against the anchors' own level, no width is slow:
  // the floor of 8 (an absolute 0.9 bar would say 128).
  auto levels = granularity_levels(synthetic_scan(1, 0.4));
  for (const auto& [g, eff] : levels) std::printf("level %3lld: efficiency %.3f\n", (long long)g, eff);
  ASSERT_EQ(levels.back().first, 128);
  EXPECT_LT(levels.back().second, 0.9);  // an absolute bar already fails at 128
  EXPECT_EQ(derive_width_granularity(synthetic_scan(1, 0.4)), 8);
  // Real slow widths still show through the same noise.
  EXPECT_EQ(derive_width_granularity(synthetic_scan(16, 0.4)), 16);
  EXPECT_EQ(derive_width_granularity(synthetic_scan(64, 0.4)), 64);
}

TEST(CostCalibration, GranularityForFallsBackToTheDevice) {
  DeviceSpec h100 = load_device("h100-sxm");
  EXPECT_EQ(width_granularity_for(nullptr, h100), 64);
  EXPECT_FALSE(h100.width_granularity.source.empty());
  Profile p;
  p.width_granularity = 16;
  EXPECT_EQ(width_granularity_for(&p, h100), 16);
  p.width_granularity = 0;  // not derived (an older profile)
  EXPECT_EQ(width_granularity_for(&p, h100), 64);
}

TEST(CostCalibration, ProfileJsonRoundTripsTheNewFields) {
  Profile p;
  p.tables["step"].dim_names = {"B", "T", "Hd", "V"};
  p.correction.fitted = true;
  p.correction.prefill = PhaseCorrection::from_coefficients({1.1, 0.9, 1.3, 0.0, -0.01, 0.25});
  p.correction.decode = PhaseCorrection::from_coefficients({1.4, 1.2, 0.7, 1.05, 0.02, -0.1});
  p.correction.fit.models = 13;
  p.correction.fit.seed = 0xCA1B;
  p.correction.fit.base = "D=288 L=6 [H6/G6 F768]";
  p.correction.fit.architectures = {"a", "b"};
  p.correction.fit.repeats = 3;
  p.correction.fit.ridge = 1e-3;
  p.correction.fit.loo_mape_tpot = 2.5;
  p.width_granularity = 16;
  p.granularity_levels = {{8, 0.85}, {16, 0.97}};
  p.last_level_cache_bytes = 32 << 20;
  p.warm_pool_bytes = 8 << 20;
  p.cold_pool_bytes = 120 << 20;
  p.passes = 3;
  p.width_repeatability = {{120, 0.01, 0.02}, {288, 0.03, 0.04}};
  OpTiming timed;
  timed.dims = {1, 8, 2, 3};
  timed.ms = 0.4, timed.median_ms = 0.5, timed.repeats = 12, timed.passes = 3, timed.pass_spread = 0.07;
  p.tables["step"].entries = {timed};
  Profile q = Profile::from_json(p.to_json(), "round-trip");
  EXPECT_EQ(q.last_level_cache_bytes, 32 << 20);
  EXPECT_EQ(q.warm_pool_bytes, 8 << 20);
  EXPECT_EQ(q.cold_pool_bytes, 120 << 20);
  EXPECT_EQ(q.passes, 3);
  ASSERT_EQ(q.width_repeatability.size(), 2u);
  EXPECT_EQ(q.width_repeatability[1].hidden_size, 288);
  EXPECT_EQ(q.width_repeatability[1].tpot_spread, 0.04);
  EXPECT_EQ(q.repeatability_at(130).hidden_size, 120);  // the nearest measured width
  EXPECT_EQ(q.repeatability_at(250).tpot_spread, 0.04);
  EXPECT_EQ(q.table("step").entries[0].passes, 3);
  EXPECT_EQ(q.table("step").entries[0].pass_spread, 0.07);
  EXPECT_TRUE(q.correction.fitted);
  EXPECT_EQ(q.correction.prefill.coefficients(), p.correction.prefill.coefficients());
  EXPECT_EQ(q.correction.decode.coefficients(), p.correction.decode.coefficients());
  EXPECT_EQ(q.correction.fit.models, 13);
  EXPECT_EQ(q.correction.fit.seed, 0xCA1Bu);
  EXPECT_EQ(q.correction.fit.base, p.correction.fit.base);
  EXPECT_EQ(q.correction.fit.architectures, p.correction.fit.architectures);
  EXPECT_EQ(q.correction.fit.repeats, 3);
  EXPECT_EQ(q.correction.fit.loo_mape_tpot, 2.5);
  EXPECT_EQ(q.width_granularity, 16);
  EXPECT_EQ(q.granularity_levels, p.granularity_levels);

  // An older profile (written before profiles had the correction and the granularity) loads with
  // neither.
  json old = p.to_json();
  old.erase("correction");
  old.erase("width_granularity");
  old.erase("granularity_levels");
  old["identity"].erase("latency_statistic");
  for (const char* k : {"last_level_cache_bytes", "warm_pool_bytes", "cold_pool_bytes", "passes",
                        "width_repeatability"})
    old.erase(k);
  old["tables"]["step"]["entries"] = json::array({{{"dims", {1, 8, 2, 3}}, {"median_ms", 0.5}}});
  Profile o = Profile::from_json(old, "old");
  EXPECT_EQ(o.identity.latency_statistic, "median");  // tables of medians: validate refuses it
  EXPECT_EQ(o.table("step").entries[0].ms, 0.5);      // looked up as before
  EXPECT_EQ(q.identity.latency_statistic, "min");
  EXPECT_FALSE(o.correction.fitted);
  EXPECT_EQ(o.width_granularity, 0);
  EXPECT_EQ(o.correction.prefill.coefficients(), PhaseCorrection{}.coefficients());
  EXPECT_EQ(o.passes, 1);
  EXPECT_EQ(o.table("step").entries[0].passes, 1);
  EXPECT_TRUE(o.width_repeatability.empty());
  EXPECT_EQ(o.residency(1e6, 1), 0.0);  // no residency tables: every GEMM cold

  json bad = p.to_json();
  bad["correction"]["decode"]["gemm"] = -1.0;
  EXPECT_THROW(Profile::from_json(bad, "bad"), FormatError);
  bad = p.to_json();
  bad["correction"]["prefill"].erase("lm_head");
  EXPECT_THROW(Profile::from_json(bad, "bad"), FormatError);
  bad = p.to_json();
  bad["passes"] = 0;
  EXPECT_THROW(Profile::from_json(bad, "bad"), FormatError);
  bad = p.to_json();
  bad["warm_pool_bytes"] = -1;
  EXPECT_THROW(Profile::from_json(bad, "bad"), FormatError);
  bad = p.to_json();
  bad["tables"]["step"]["entries"][0]["pass_spread"] = -0.5;
  EXPECT_THROW(Profile::from_json(bad, "bad"), FormatError);
}

TEST(CostCalibration, CostModelAppliesTheLinearCorrection) {
  init_torch_threads();
  LayerConfig l;
  l.num_attention_heads = 4;
  l.num_key_value_heads = 2;
  l.head_dim = 8;
  l.intermediate_size = 24;
  ModelConfig c = ModelConfig::uniform(50, 16, 2, l);
  c.layers[1].attention_no_op = true;  // 3 parts: attention + FFN, FFN
  c.layers[1].num_attention_heads = c.layers[1].num_key_value_heads = 0;
  const Workload w = ac::test::tiny_workload();
  ProfileOptions o = ac::test::quick_profile_options(16);
  Profile p = run_profile({c}, w, o);
  Scenario s = calibration_scenario(w);
  CostEstimate bare = predict(c, s, &p);
  auto [pre, dec] = correction_features(p, c, w);
  EXPECT_EQ(pre.x[4], 3.0);  // per_part_ms feature: parts present
  EXPECT_EQ(pre.x[5], 1.0);  // per_step_ms feature
  EXPECT_EQ(dec.x[4], 3.0);
  // The features and the offset add up to the uncorrected prediction.
  double sum_pre = pre.offset, sum_dec = dec.offset;
  for (int j = 0; j < 4; ++j) sum_pre += pre.x[size_t(j)], sum_dec += dec.x[size_t(j)];
  EXPECT_NEAR(sum_pre, bare.ttft_ms, 1e-9 * bare.ttft_ms);
  EXPECT_NEAR(sum_dec, bare.tpot_ms, 1e-9 * bare.tpot_ms);
  // A fitted correction predicts x . theta + offset.
  p.correction.fitted = true;
  p.correction.prefill = PhaseCorrection::from_coefficients({1.5, 0.5, 2.0, 1.0, 0.01, 0.3});
  p.correction.decode = PhaseCorrection::from_coefficients({0.7, 1.2, 1.0, 3.0, 0.02, -0.01});
  CostEstimate e = predict(c, s, &p);
  PhaseSamples sp{{pre.x}, {pre.offset}, {1.0}}, sd{{dec.x}, {dec.offset}, {1.0}};
  EXPECT_NEAR(e.ttft_ms, correction_predict(sp, 0, p.correction.prefill), 1e-9 * e.ttft_ms);
  EXPECT_NEAR(e.tpot_ms, correction_predict(sd, 0, p.correction.decode), 1e-9 * e.tpot_ms);
  EXPECT_NE(e.ttft_ms, bare.ttft_ms);
}

// ---------------------------------------------------------------------------------------------
// Cache residency (docs/design.md, "Profiling the device"): a decode GEMM costs between its cold
// and warm table entries by the share of the model's bytes the last-level cache holds.

namespace {

// A tiny profile measured here (cold tables only), then given synthetic residency tables: warm
// GEMM and head entries at `warm_factor` x the cold ones, and a working-set curve of 1, 2 and
// 3 ms per MiB at 1000, 5000 and 100000 bytes (warm pool 1000 B, cold pool 100000 B).
Profile residency_profile(const ModelConfig& c, const Workload& w, double warm_factor) {
  init_torch_threads();
  ProfileOptions o = ac::test::quick_profile_options(8);
  o.passes = 1;
  o.residency = false;
  o.width_scan = false;
  Profile p = run_profile({c}, w, o);
  for (const char* name : {"gemm", "lm_head"}) {
    OpTable warm = p.table(name);
    for (auto& e : warm.entries) e.ms *= warm_factor;
    p.tables[std::string(name) + "_warm"] = warm;
  }
  OpTable ws;
  ws.dim_names = {"M", "W"};
  for (auto [bytes, ms] : {std::pair{1000, 1.0}, {5000, 2.0}, {100000, 3.0}}) {
    OpTiming e;
    e.dims = {w.batch_size, bytes};
    e.ms = e.median_ms = ms;
    ws.entries.push_back(e);
  }
  p.tables["working_set"] = ws;
  p.warm_pool_bytes = 1000;
  p.cold_pool_bytes = 100000;
  return p;
}

ModelConfig residency_model() {
  LayerConfig l;
  l.num_attention_heads = 4;
  l.num_key_value_heads = 2;
  l.head_dim = 4;
  l.intermediate_size = 24;
  ModelConfig c = ModelConfig::uniform(50, 16, 2, l);
  c.tie_word_embeddings = true;
  return c;
}

}  // namespace

TEST(CostCalibration, ResidencyInterpolatesTheWorkingSetCurve) {
  Workload w;
  w.prompt_tokens = 8;
  w.output_tokens = 4;
  const Profile p = residency_profile(residency_model(), w, 0.5);
  // share(W) = (t(cold) - t(W)) / (t(cold) - t(warm)) = (3 - t) / 2 at the measured points.
  const auto curve = p.residency_curve(1);
  ASSERT_EQ(curve.size(), 3u);
  EXPECT_EQ(curve[0], (std::pair<double, double>{1000, 1.0}));
  EXPECT_EQ(curve[1], (std::pair<double, double>{5000, 0.5}));
  EXPECT_EQ(curve[2], (std::pair<double, double>{100000, 0.0}));
  EXPECT_DOUBLE_EQ(p.residency(3000, 1), 0.75);                        // halfway 1 -> 0.5
  EXPECT_DOUBLE_EQ(p.residency(52500, 1), 0.25);                       // halfway 0.5 -> 0
  EXPECT_DOUBLE_EQ(p.residency(10, 1), 1.0);                           // below the warm pool
  EXPECT_DOUBLE_EQ(p.residency(1e9, 1), 0.0);                          // beyond the cold pool
  Profile none = p;
  none.tables.erase("working_set");
  EXPECT_EQ(none.residency(3000, 1), 0.0);  // a profile without the curve: the cold tables
  Profile flat = p;
  for (auto& e : flat.tables["working_set"].entries) e.ms = 1.0;
  EXPECT_TRUE(flat.residency_curve(1).empty());  // no cache effect measured
}

TEST(CostCalibration, DecodeCostsMixColdAndWarmTablesByTheModelsResidency) {
  Workload w;
  w.prompt_tokens = 8;
  w.output_tokens = 4;
  const ModelConfig c = residency_model();
  const Profile p = residency_profile(c, w, 0.5);
  const Scenario s = calibration_scenario(w);
  // The same profile costing every GEMM cold (no curve), and warm (the warm entries as tables).
  Profile cold = p, warm = p;
  cold.tables.erase("working_set");
  warm.tables.erase("working_set");
  warm.tables["gemm"] = p.table("gemm_warm");
  warm.tables["lm_head"] = p.table("lm_head_warm");
  const CostEstimate e = predict(c, s, &p), ec = predict(c, s, &cold), ew = predict(c, s, &warm);
  // The share by hand from the curve at the model's weight + KV-cache bytes.
  const double bytes = double(e.weight_bytes + e.kv_cache_bytes);
  ASSERT_GT(bytes, 5000);
  ASSERT_LT(bytes, 100000);
  const double h = 0.5 * (100000 - bytes) / 95000;
  EXPECT_NEAR(e.residency, h, 1e-12);
  EXPECT_NEAR(e.tpot_ms, (1 - h) * ec.tpot_ms + h * ew.tpot_ms, 1e-9 * e.tpot_ms);
  EXPECT_LT(ew.tpot_ms, ec.tpot_ms);
  EXPECT_EQ(e.ttft_ms, ec.ttft_ms);  // the prefill stays cold
  // The search's expected cost of a one-hot choice is predict() of that architecture, residency
  // included (expected_cost.h): the mix at the expected bytes of each hidden size.
  std::vector<std::vector<LayerConfig>> attn(2), ffn(2);
  for (int i = 0; i < 2; ++i) {
    LayerConfig full = c.layers[size_t(i)], half = full, none = full;
    half.num_attention_heads = 2, half.num_key_value_heads = 1, half.intermediate_size = 12;
    none.attention_no_op = none.ffn_no_op = true;
    none.num_attention_heads = none.num_key_value_heads = 0, none.intermediate_size = 0;
    attn[size_t(i)] = {full, half, none};
    ffn[size_t(i)] = {full, half, none};
  }
  const ChoiceTables t = build_choice_tables(c, attn, ffn, {16, 8}, s, &p);
  ASSERT_FALSE(t.residency_curve.empty());
  auto onehot = [](int64_t n, int64_t k) { return at::one_hot(at::tensor(k), n).view({n}).to(at::kDouble); };
  const ExpectedCost x = expected_cost(t, onehot(2, 1), {onehot(3, 1), onehot(3, 2)},
                                       {onehot(3, 0), onehot(3, 1)});
  ModelConfig pick = c;
  pick.hidden_size = 8;
  pick.layers = {attn[0][1], attn[1][2]};
  pick.layers[0].intermediate_size = ffn[0][0].intermediate_size;
  pick.layers[1].ffn_no_op = false;
  pick.layers[1].intermediate_size = ffn[1][1].intermediate_size;
  const CostEstimate want = predict(pick, s, &p);
  EXPECT_GT(want.residency, 0.0);
  EXPECT_NEAR(x.tpot_ms.item<double>(), want.tpot_ms, 1e-9 * want.tpot_ms);
  EXPECT_NEAR(x.ttft_ms.item<double>(), want.ttft_ms, 1e-9 * want.ttft_ms);
}

TEST(CostCalibration, WidthSpreadArchitecturesCoverTheSearchRange) {
  const ModelConfig base = stories15m_shape();
  const std::vector<ModelConfig> a = width_spread_architectures(base, 12, 5);
  ASSERT_EQ(a.size(), 12u);
  EXPECT_EQ(a.front().hidden_size, 120);  // the smallest multiple of 8 >= 0.4 x 288
  EXPECT_EQ(a.back().hidden_size, 288);
  std::set<int64_t> widths;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].hidden_size % 8, 0);
    if (i > 0) {
      EXPECT_GE(a[i].hidden_size, a[i - 1].hidden_size);
    }
    widths.insert(a[i].hidden_size);
  }
  EXPECT_EQ(widths.size(), 12u);  // 22 widths in range: no two prunes share one
  // The odd ones keep the base's layers whole; the even ones draw theirs, seeded: the same draw
  // twice, another with another seed.
  for (size_t i = 1; i < a.size(); i += 2) EXPECT_EQ(a[i].layers, base.layers) << i;
  // Never a model without attention (llama.cpp cannot load one): over many draws of a 2-layer
  // base, where both layers lose it with probability 0.15^2 per draw.
  ModelConfig two = base;
  two.layers.resize(2);
  for (const ModelConfig& c : width_spread_architectures(two, 400, 3))
    EXPECT_TRUE(c.layers[0].has_attention() || c.layers[1].has_attention()) << describe(c);
  EXPECT_NE(a[2].layers, base.layers);
  EXPECT_EQ(describe(width_spread_architectures(base, 12, 5)[2]), describe(a[2]));
  EXPECT_NE(describe(width_spread_architectures(base, 12, 6)[2]), describe(a[2]));
}

namespace {

// The two-width setting of the validation tests: a residency model (D = 16), its profile and
// scenario, and the same model at D = 8.
struct ValidationSetting {
  Workload w;
  ModelConfig c, narrow;
  Profile p;
  Scenario s;
};

ValidationSetting validation_setting() {
  ValidationSetting v;
  v.w.prompt_tokens = 8;
  v.w.output_tokens = 4;
  v.c = residency_model();
  v.p = residency_profile(v.c, v.w, 0.5);
  v.s = calibration_scenario(v.w);
  v.narrow = v.c;
  v.narrow.hidden_size = 8;
  return v;
}

// A measurement of `a` that the prediction misses by `err` (TPOT and TTFT alike), on a machine
// `slower` times slower than profiled; memory as predicted.
Measurement missed_by(const ValidationSetting& v, const ModelConfig& a, double err, double slower = 1) {
  const CostEstimate e = predict(a, v.s, &v.p);
  Measurement m;
  m.tpot_ms = m.tpot_median_ms = slower * e.tpot_ms / (1 + err);
  m.ttft_ms = m.ttft_median_ms = slower * e.ttft_ms / (1 + err);
  m.peak_memory_bytes = e.peak_memory_bytes;
  return m;
}

}  // namespace

TEST(CostCalibration, ValidationSeparatesTheSharedBiasFromTheModelsError) {
  const ValidationSetting v = validation_setting();
  const ModelConfig &c = v.c, &narrow = v.narrow;
  const Profile& p = v.p;
  const Scenario& s = v.s;
  const std::vector<ModelConfig> archs{c, c, narrow};
  // Measurements that the predictions miss by +10%, +10% and -5% (TPOT and TTFT alike).
  const std::vector<double> err{0.10, 0.10, -0.05};
  std::vector<Measurement> measured;
  for (size_t i = 0; i < archs.size(); ++i) measured.push_back(missed_by(v, archs[i], err[i]));
  const ValidationReport r = validation_report(archs, measured, s, p);
  EXPECT_NEAR(r.bias_tpot, 5.0, 1e-9);
  EXPECT_NEAR(r.mape_tpot, 25.0 / 3, 1e-9);
  // Divided by 1.05: +4.762%, +4.762%, -9.524%.
  EXPECT_NEAR(r.debiased_mape_tpot, 100.0 * (2 * (1.10 / 1.05 - 1) + (1 - 0.95 / 1.05)) / 3, 1e-9);
  EXPECT_NEAR(r.spread_tpot, std::sqrt((25.0 + 25.0 + 100.0) / 3), 1e-9);
  EXPECT_NEAR(r.debiased_mape_ttft, r.debiased_mape_tpot, 1e-9);
  ASSERT_EQ(r.by_width.size(), 2u);
  EXPECT_EQ(r.by_width[0].hidden_size, 8);
  EXPECT_EQ(r.by_width[0].rows, 1);
  EXPECT_NEAR(r.by_width[0].bias_tpot, -5.0, 1e-9);
  EXPECT_EQ(r.by_width[1].hidden_size, 16);
  EXPECT_EQ(r.by_width[1].rows, 2);
  EXPECT_NEAR(r.by_width[1].max_ape_tpot, 10.0, 1e-9);
  const json j = r.to_json();
  EXPECT_EQ(j.at("by_hidden_size").size(), 2u);
  EXPECT_NEAR(j.at("debiased_mape_percent").at("tpot_ms").get<double>(), r.debiased_mape_tpot, 1e-12);
}

TEST(CostCalibration, ErrorsRelativeToTheBaseCancelTheMachinesDrift) {
  const ValidationSetting v = validation_setting();
  const ModelConfig &c = v.c, &narrow = v.narrow;
  const Profile& p = v.p;
  const Scenario& s = v.s;
  const std::vector<ModelConfig> archs{c, narrow};
  // The model misses the rows by +10% and -5% and the base by +4%; the machine is `slower`
  // times slower than profiled for every one of them alike.
  const std::vector<double> err{0.10, -0.05};
  auto measure = [&](const ModelConfig& a, double e, double slower) {
    return missed_by(v, a, e, slower);
  };
  ValidationReport first, drifted;
  for (double slower : {1.0, 1.07}) {
    std::vector<Measurement> rows;
    for (size_t i = 0; i < archs.size(); ++i) rows.push_back(measure(archs[i], err[i], slower));
    ValidationReport r = validation_report(archs, rows, s, p);
    add_relative_errors(r, c, measure(c, 0.04, slower), s, p);
    (slower == 1.0 ? first : drifted) = std::move(r);
  }
  ASSERT_TRUE(first.relative && drifted.relative);
  // By hand: (1 + e) / 1.04 - 1 per row: +5.769%, -8.654%.
  const double a = 100 * (1.10 / 1.04 - 1), b = 100 * (0.95 / 1.04 - 1);
  EXPECT_NEAR(first.relative->mape_tpot, (std::fabs(a) + std::fabs(b)) / 2, 1e-9);
  EXPECT_NEAR(first.relative->max_ape_tpot, std::fabs(b), 1e-9);
  EXPECT_NEAR(first.relative->bias_ttft, (a + b) / 2, 1e-9);
  ASSERT_EQ(first.by_width.size(), 2u);
  EXPECT_NEAR(first.by_width[0].relative_bias_tpot, b, 1e-9);  // D = 8
  EXPECT_NEAR(first.by_width[1].relative_bias_tpot, a, 1e-9);  // D = 16
  // The drift moves the plain errors (bias +2.5% -> about -4.2%), not the relative ones.
  EXPECT_NEAR(first.bias_tpot, 2.5, 1e-9);
  EXPECT_NEAR(drifted.bias_tpot, 100 * ((1.10 + 0.95) / 2 / 1.07 - 1), 1e-9);
  EXPECT_NEAR(drifted.relative->mape_tpot, first.relative->mape_tpot, 1e-9);
  EXPECT_NEAR(drifted.relative->mape_ttft, first.relative->mape_ttft, 1e-9);
  const json j = drifted.to_json();
  EXPECT_EQ(j.at("relative_to_base").at("base").get<std::string>(), describe(c));
  EXPECT_NEAR(j.at("relative_to_base").at("mape_percent").at("tpot_ms").get<double>(),
              first.relative->mape_tpot, 1e-9);
  EXPECT_TRUE(validation_report(archs, {measure(c, 0, 1), measure(narrow, 0, 1)}, s, p)
                  .to_json().at("relative_to_base").is_null());
  Measurement zero;
  EXPECT_THROW(add_relative_errors(first, c, zero, s, p), ConfigError);
}

TEST(CostCalibration, ValidationMeasuresTheMeasurementAgainstItself) {
  // Per-round decode steps: round r of a row is Samples::step_ms[r] (measure_interleaved).
  auto steps = [](double from, double by) {
    std::vector<double> v;
    for (int k = 0; k < 10; ++k) v.push_back(from + by * k);
    return v;
  };
  Measurement a, b, one_round, none;
  // Rounds 1 and 3 pooled: 20 steps, p10 = the 3rd smallest (index lround(0.1 x 19) = 2) = 1.1;
  // round 2: 10 steps from 1.2, p10 = index lround(0.9) = 1 -> 1.3. d = 1.3 / 1.1 - 1.
  a.samples.step_ms = {steps(1.0, 0.1), steps(1.2, 0.1), steps(1.0, 0.1)};
  b.samples.step_ms = {steps(2.0, 0.0), steps(2.0, 0.0), steps(2.0, 0.0)};  // d = 0
  one_round.samples.step_ms = {steps(3.0, 0.1)};                          // skipped
  const MeasurementRepeatability r = measurement_repeatability({a, b, one_round, none});
  EXPECT_EQ(r.rows, 2);
  const double d = 100 * (1.3 / 1.1 - 1);
  EXPECT_NEAR(r.drift_tpot, d / 2, 1e-9);
  // Beyond the drift: 2 x 1.3 / (1.3 + 1.1) - 1 = +8.333% and 2 x 1.1 / 2.4 - 1 = -8.333%.
  EXPECT_NEAR(r.apart_tpot, 100.0 / 12, 1e-9);
  EXPECT_NEAR(r.max_apart_tpot, 100.0 / 12, 1e-9);
  EXPECT_EQ(measurement_repeatability({one_round, none}).rows, 0);

  // validate's report carries it, in JSON and in its summary; without samples it says nothing.
  const ValidationSetting v = validation_setting();
  std::vector<Measurement> measured{missed_by(v, v.c, 0.0), missed_by(v, v.narrow, 0.0)};
  measured[0].samples.step_ms = a.samples.step_ms;
  measured[1].samples.step_ms = b.samples.step_ms;
  const ValidationReport rep = validation_report({v.c, v.narrow}, measured, v.s, v.p);
  EXPECT_EQ(rep.repeatability.rows, 2);
  EXPECT_NEAR(rep.repeatability.apart_tpot, 100.0 / 12, 1e-9);
  const json j = rep.to_json().at("measurement_repeatability");
  EXPECT_EQ(j.at("rows").get<int>(), 2);
  EXPECT_NEAR(j.at("drift_percent").at("tpot_ms").get<double>(), d / 2, 1e-9);
  EXPECT_NE(rep.table().find("The measurement against itself"), std::string::npos);
  const ValidationReport bare = validation_report(
      {v.c, v.narrow}, {missed_by(v, v.c, 0.0), missed_by(v, v.narrow, 0.0)}, v.s, v.p);
  EXPECT_EQ(bare.repeatability.rows, 0);
  EXPECT_EQ(bare.table().find("The measurement against itself"), std::string::npos);
}

TEST(CostCalibration, LastLevelCacheFromSysfs) {
  EXPECT_EQ(parse_cache_size("32768K"), int64_t(32) << 20);
  EXPECT_EQ(parse_cache_size("2M"), int64_t(2) << 20);
  EXPECT_EQ(parse_cache_size("512"), 512);
  EXPECT_EQ(parse_cache_size("48K\n"), 48 << 10);
  EXPECT_EQ(parse_cache_size(""), 0);
  EXPECT_EQ(parse_cache_size("K"), 0);
  EXPECT_EQ(parse_cache_size("12 parrots"), 0);
  test::TempDir dir;
  auto level = [&](const char* index, const char* type, const char* size) {
    fs::create_directories(dir.path / index);
    std::ofstream(dir.path / index / "type") << type << "\n";
    std::ofstream(dir.path / index / "size") << size << "\n";
  };
  level("index0", "Data", "48K");
  level("index1", "Instruction", "65536K");  // larger, but not data: ignored
  level("index2", "Unified", "1024K");
  level("index3", "Unified", "32768K");
  EXPECT_EQ(last_level_cache_bytes(dir.path), int64_t(32) << 20);
  EXPECT_EQ(last_level_cache_bytes(dir.path / "missing"), 0);
}
