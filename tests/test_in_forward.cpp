// In-forward ratios (hardware/in_forward.h; docs/design.md, "In-forward ratios"): the op-by-op
// decode step is the forward's own decode step (its logits through a KVCache of the same
// content), the ratios interpolate in the hidden size as stated (the bytes beside them by hand), the cost model scales exactly
// the decode tables by them (the prefill untouched), measured ratios reproduce the class times
// they were measured from, and profile.json round-trips them and refuses malformed ones.
#include <gtest/gtest.h>

#include <c10/core/InferenceMode.h>

#include "common/error.h"
#include "common/runtime.h"
#include "hardware/calibration.h"
#include "hardware/cost_model.h"
#include "hardware/in_forward.h"
#include "hardware/profile.h"
#include "model/weights.h"
#include "profile_fixture.h"

using namespace ac;

namespace {

// Three layers: GQA attention + FFN, attention only (FFN removed), FFN only (attention removed).
ModelConfig three_kinds_of_layer(int64_t hidden_size) {
  LayerConfig l;
  l.num_attention_heads = 4;
  l.num_key_value_heads = 2;
  l.head_dim = 8;
  l.intermediate_size = 40;
  ModelConfig c = ModelConfig::uniform(64, hidden_size, 3, l);
  c.layers[1].ffn_no_op = true;
  c.layers[1].intermediate_size = 0;
  c.layers[2].attention_no_op = true;
  c.layers[2].num_attention_heads = c.layers[2].num_key_value_heads = 0;
  return c;
}

// An entry at hidden size D.
InForwardRatio ratio_at(int64_t D, std::array<double, 4> r) {
  InForwardRatio e;
  e.hidden_size = D;
  e.ratio = r;
  return e;
}

}  // namespace

TEST(InForward, TheOpByOpStepIsTheForwardsDecodeStep) {
  init_torch_threads();
  c10::InferenceMode no_grad;
  const ModelConfig c = three_kinds_of_layer(24);
  LlamaModel m{c, random_weights(c, 5, 0.2)};
  KVCache cache = KVCache::allocate(c, 1, 16);
  at::Tensor prompt = at::tensor(std::vector<int64_t>{3, 17, 42, 5, 60}, at::kLong).view({1, 5});
  ForwardOptions o;
  o.cache = &cache;
  (void)m.forward(prompt, o);
  ASSERT_EQ(cache.length, 5);
  std::vector<at::Tensor> ck, cv;
  for (size_t i = 0; i < cache.k.size(); ++i) {
    ck.push_back(cache.k[i].defined() ? cache.k[i].clone() : at::Tensor());
    cv.push_back(cache.v[i].defined() ? cache.v[i].clone() : at::Tensor());
  }
  at::Tensor next = at::tensor(std::vector<int64_t>{11}, at::kLong).view({1, 1});
  DecodeStepSplit s = timed_decode_step(m, ck, cv, 5, next);
  at::Tensor want = m.forward(next, o);  // [1, 1, V] through the cache
  ASSERT_EQ(s.logits.sizes(), want.sizes());
  EXPECT_LT((s.logits - want).abs().max().item<double>(), 1e-5 * want.abs().max().item<double>());
  // The step wrote the new key and value where the forward did.
  EXPECT_TRUE(at::allclose(ck[0].narrow(2, 5, 1), cache.k[0].narrow(2, 5, 1), 1e-6, 1e-6));
  for (double t : {s.gemm, s.attention, s.elementwise, s.lm_head}) EXPECT_GE(t, 0.0);
  EXPECT_LE(s.gemm + s.attention + s.elementwise + s.lm_head, s.total + 1e-9);
  // A position beyond the cache, or a cache per layer missing, is refused.
  EXPECT_THROW(timed_decode_step(m, ck, cv, 16, next), ConfigError);
  ck.pop_back();
  EXPECT_THROW(timed_decode_step(m, ck, cv, 5, next), ConfigError);
}

TEST(InForward, RatiosInterpolateInTheHiddenSize) {
  std::vector<InForwardRatio> r{ratio_at(100, {1.0, 2.0, 4.0, 0.5}),
                                ratio_at(200, {0.8, 3.0, 5.0, 1.0})};
  EXPECT_EQ(in_forward_ratio({}, 1, 150), 1.0);  // no ratios: the tables as they are
  EXPECT_EQ(in_forward_ratio(r, 1, 100), 2.0);
  EXPECT_DOUBLE_EQ(in_forward_ratio(r, 0, 150), 0.9);
  EXPECT_DOUBLE_EQ(in_forward_ratio(r, 2, 175), 4.75);
  EXPECT_EQ(in_forward_ratio(r, 3, 50), 0.5);    // below the range: the nearest end
  EXPECT_EQ(in_forward_ratio(r, 3, 300), 1.0);   // above it
  EXPECT_ANY_THROW(in_forward_ratio(r, 4, 150));  // per_part_ms is no factor
  // The default ladder: multiples of 8 from 0.4 D, thinned to 12 with D itself last.
  const std::vector<int64_t> widths = in_forward_widths(288, 8);
  ASSERT_EQ(widths.size(), 12u);
  EXPECT_EQ(widths.front(), 120);
  EXPECT_EQ(widths[10], 280);
  EXPECT_EQ(widths.back(), 288);
  for (int64_t d : widths) EXPECT_EQ(d % 8, 0);
  EXPECT_EQ(in_forward_widths(40, 8), (std::vector<int64_t>{16, 24, 32, 40}));
  EXPECT_THROW(in_forward_widths(40, 0), ConfigError);
}

TEST(InForward, TheCostModelScalesTheDecodeTablesOnly) {
  init_torch_threads();
  const ModelConfig c = three_kinds_of_layer(24);
  const Workload w = test::tiny_workload();
  Profile p = run_profile({c}, w, test::quick_profile_options(16));
  const Scenario s = calibration_scenario(w);
  const CostEstimate bare = predict(c, s, &p);
  const auto [pre, dec] = correction_features(p, c, w);
  // Ratios at 16 and 32: at 24 each is the midpoint.
  p.in_forward = {ratio_at(16, {1.2, 2.0, 3.0, 0.6}), ratio_at(32, {0.8, 3.0, 5.0, 1.0})};
  const std::array<double, 4> mid{1.0, 2.5, 4.0, 0.8};
  const CostEstimate e = predict(c, s, &p);
  double want = dec.offset;
  for (size_t j = 0; j < 4; ++j) want += mid[j] * dec.x[j];
  EXPECT_NEAR(e.tpot_ms, want, 1e-9 * want);
  EXPECT_NEAR(e.ttft_ms, bare.ttft_ms, 1e-12 * bare.ttft_ms);  // the prefill as before
  EXPECT_EQ(e.peak_memory_bytes, bare.peak_memory_bytes);
  // The correction's features are read through the ratios, so a fit on them sees the scaled
  // tables: features with ratios = ratio x features without.
  const PhaseFeatures scaled = correction_features(p, c, w).second;
  for (size_t j = 0; j < 4; ++j) EXPECT_NEAR(scaled.x[j], mid[j] * dec.x[j], 1e-12 + 1e-9 * dec.x[j]);
  EXPECT_EQ(scaled.x[4], dec.x[4]);  // parts present, unscaled
}

TEST(InForward, MeasuredRatiosReproduceTheClassTimesTheyCameFrom) {
  init_torch_threads();
  const ModelConfig c = three_kinds_of_layer(32);
  const Workload w = test::tiny_workload();
  Profile p = run_profile({c}, w, test::quick_profile_options(16));
  InForwardOptions o;
  o.hidden_sizes = {32, 16};  // sorted by the measurement
  o.rounds = 1;
  o.steps = 3;
  p.in_forward = measure_in_forward(p, c, w, o);
  ASSERT_EQ(p.in_forward.size(), 2u);
  EXPECT_EQ(p.in_forward[0].hidden_size, 16);
  // The time between the timed ops spread over the classes in proportion (never below 1).
  auto spread = [](const InForwardRatio& r) {
    double sum = 0;
    for (double t : r.in_forward_ms) sum += t;
    return std::max(1.0, (sum + r.rest_ms) / sum);
  };
  for (const InForwardRatio& r : p.in_forward) {
    double sum = 0;
    for (size_t k = 0; k < 4; ++k) {
      EXPECT_GT(r.ratio[k], 0.0);
      EXPECT_GT(r.table_ms[k], 0.0);
      EXPECT_NEAR(r.ratio[k] * r.table_ms[k], spread(r) * r.in_forward_ms[k],
                  1e-12 + 1e-9 * r.in_forward_ms[k]);
      sum += r.in_forward_ms[k];
    }
    EXPECT_GT(r.total_ms, 0.0);
    // Each class's p10 is at most its share of some step; their sum may exceed the p10 of the
    // total only by the spread between steps, never by a factor.
    EXPECT_LT(sum, 3 * r.total_ms);
  }
  // Predicting the model at a measured width costs each class as measured inside the step, and
  // the whole step as the op-by-op step took it (when the ops did not add up to more).
  ModelConfig at16 = c;
  at16.hidden_size = 16;
  const InForwardRatio& r16 = p.in_forward[0];
  const PhaseFeatures f = correction_features(p, at16, w).second;
  double step = f.offset;
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_NEAR(f.x[k], spread(r16) * r16.in_forward_ms[k], 1e-9 + 1e-9 * f.x[k]);
    step += f.x[k];
  }
  if (r16.rest_ms >= 0) {
    EXPECT_NEAR(step, r16.total_ms, 1e-9 * r16.total_ms);
  }
  // A base the op-by-op step does not mirror is refused.
  ModelConfig qwen3 = c;
  qwen3.qk_norm = true;
  EXPECT_THROW(measure_in_forward(p, qwen3, w, o), ConfigError);
  EXPECT_TRUE(in_forward_for(p, qwen3, w, false).empty());
  o.rounds = 0;
  EXPECT_THROW(measure_in_forward(p, c, w, o), ConfigError);
  o.rounds = 1, o.steps = -1;
  EXPECT_THROW(measure_in_forward(p, c, w, o), ConfigError);
}

TEST(InForward, ProfileJsonRoundTripsTheRatiosAndRefusesBadOnes) {
  Profile p;
  InForwardRatio a = ratio_at(120, {0.9, 1.3, 2.1, 0.75});
  a.in_forward_ms = {0.3, 0.28, 0.05, 0.29};
  a.table_ms = {0.33, 0.22, 0.025, 0.39};
  a.total_ms = 1.04;
  p.in_forward = {a, ratio_at(288, {0.86, 1.44, 2.4, 0.88})};
  const Profile q = Profile::from_json(p.to_json(), "round-trip");
  ASSERT_EQ(q.in_forward.size(), 2u);
  EXPECT_EQ(q.in_forward[0].hidden_size, 120);
  EXPECT_EQ(q.in_forward[0].ratio, a.ratio);
  EXPECT_EQ(q.in_forward[0].in_forward_ms, a.in_forward_ms);
  EXPECT_EQ(q.in_forward[0].table_ms, a.table_ms);
  EXPECT_EQ(q.in_forward[0].total_ms, 1.04);
  EXPECT_EQ(q.in_forward[1].ratio[3], 0.88);
  EXPECT_EQ(describe_in_forward(q.in_forward),
            "decode op classes inside a real step over their tables, hidden sizes 120..288 (2 "
            "widths): gemm 0.86-0.90, attention 1.30-1.44, elementwise 2.10-2.40, lm_head "
            "0.75-0.88\n");
  EXPECT_EQ(describe_in_forward({}), "");
  // A profile from before the ratios loads without them.
  json old = p.to_json();
  old.erase("in_forward");
  EXPECT_TRUE(Profile::from_json(old, "old").in_forward.empty());
  json bad = p.to_json();
  bad["in_forward"][0]["ratio"]["attention"] = 0.0;
  EXPECT_THROW(Profile::from_json(bad, "bad"), FormatError);
  bad = p.to_json();
  bad["in_forward"][1]["hidden_size"] = 100;  // not ascending
  EXPECT_THROW(Profile::from_json(bad, "bad"), FormatError);
  bad = p.to_json();
  bad["in_forward"][0]["ratio"].erase("lm_head");
  EXPECT_THROW(Profile::from_json(bad, "bad"), FormatError);
  bad = p.to_json();
  bad["in_forward"] = json::object();
  EXPECT_THROW(Profile::from_json(bad, "bad"), FormatError);
}

TEST(InForward, DecodeGemmEntriesAreCappedAtTheirMonotoneEnvelope) {
  // Decode rows (M = 1): (N, K) -> ms. (64, 64) is slower than the wider (128, 64) and
  // (64, 128): it drops to the fastest of the entries at least as wide in both, 0.30.
  OpTable t;
  t.dim_names = {"M", "N", "K"};
  auto add = [&](int64_t M, int64_t N, int64_t K, double ms) {
    OpTiming e;
    e.dims = {M, N, K};
    e.ms = e.median_ms = ms;
    t.entries.push_back(e);
  };
  add(1, 32, 32, 0.10);
  add(1, 64, 64, 0.45);   // the outlier
  add(1, 128, 64, 0.30);
  add(1, 64, 128, 0.35);
  add(1, 128, 128, 0.50);
  add(1, 32, 128, 0.20);
  add(32, 64, 64, 0.90);  // a prefill row above the prefill (128, 64): left as timed
  add(32, 128, 64, 0.60);
  EXPECT_EQ(cap_decode_gemm_table(t, 1), 1);
  EXPECT_EQ(t.entries[1].ms, 0.30);
  EXPECT_EQ(t.entries[1].median_ms, 0.45);  // the timing itself kept for inspection
  for (size_t i : {0, 2, 3, 4, 5}) EXPECT_EQ(t.entries[i].ms, t.entries[i].median_ms) << i;
  EXPECT_EQ(t.entries[6].ms, 0.90);
  // Monotone now: capping again changes nothing.
  EXPECT_EQ(cap_decode_gemm_table(t, 1), 0);
  // A profile records how many it lowered; one from before loads with 0.
  Profile p;
  p.decode_gemm_capped = 3;
  EXPECT_EQ(Profile::from_json(p.to_json(), "round-trip").decode_gemm_capped, 3);
  json old = p.to_json();
  old.erase("decode_gemm_capped");
  EXPECT_EQ(Profile::from_json(old, "old").decode_gemm_capped, 0);
}
