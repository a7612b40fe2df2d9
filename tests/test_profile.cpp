// Profile and measurement tests: the profiler's op replicas equal the native forward (so the
// tables time what the model runs), a tiny profile has every table on the expected grid,
// the counting allocator counts, and measured memory holds the weights and the KV cache.
#include <cctype>
#include <cstdlib>

#include "common/error.h"
#include "common/runtime.h"
#include "hardware/calibration.h"
#include "hardware/measure.h"
#include "hardware/native_ops.h"
#include "hardware/profile.h"
#include "hardware/validate.h"
#include "profile_fixture.h"
#include "test_util.h"

using namespace ac;

namespace {

ModelConfig tiny_config(bool tied) {
  LayerConfig l;
  l.num_attention_heads = 4;
  l.num_key_value_heads = 2;
  l.head_dim = 8;
  l.intermediate_size = 24;
  ModelConfig c = ModelConfig::uniform(50, 16, 1, l);
  c.tie_word_embeddings = tied;
  return c;
}

// The forward of a 1-layer model written with native_ops, from the KV cache position pos0.
at::Tensor replica_logits(const LlamaModel& m, const at::Tensor& tokens, at::Tensor& ck,
                          at::Tensor& cv, int64_t pos0) {
  const ModelConfig& c = m.config;
  const LayerWeights& w = m.weights.layers[0];
  const LayerConfig& l = c.layers[0];
  const int64_t T = tokens.size(1), Hd = l.head_dim;
  at::Tensor x = at::embedding(m.weights.embed_tokens, tokens);  // [B, T, D]
  at::Tensor h = native_ops::rmsnorm(x, w.input_layernorm, c.rms_norm_eps);
  auto [cos, sin] = rope_tables(c, Hd, pos0, T);
  at::Tensor allowed = T > 1 ? causal_allowed(pos0, T) : at::Tensor();
  at::Tensor a = native_ops::attention(at::linear(h, w.q_proj), at::linear(h, w.k_proj),
                                       at::linear(h, w.v_proj), ck, cv, pos0,
                                       l.num_attention_heads, l.num_key_value_heads, Hd, cos, sin,
                                       allowed);
  x = x + at::linear(a, w.o_proj);
  h = native_ops::rmsnorm(x, w.post_attention_layernorm, c.rms_norm_eps);
  x = x + at::linear(native_ops::silu_mul(at::linear(h, w.gate_proj), at::linear(h, w.up_proj)),
                     w.down_proj);
  x = native_ops::rmsnorm(x.narrow(1, T - 1, 1), m.weights.norm, c.rms_norm_eps);
  return at::linear(x, m.weights.lm_head);  // [B, 1, V]
}

}  // namespace

TEST(Profile, NativeOpsReplicateTheForward) {
  ModelConfig c = tiny_config(false);
  LlamaModel m{c, random_weights(c, 3, 0.2)};
  at::Tensor tokens = at::randint(0, 50, {2, 5}, at::kLong);
  KVCache cache = KVCache::allocate(c, 2, 8);
  ForwardOptions opt;
  opt.cache = &cache;
  opt.last_logits_only = true;
  at::Tensor ck = at::zeros({2, 2, 8, 8}), cv = at::zeros({2, 2, 8, 8});
  at::Tensor want = m.forward(tokens, opt), got = replica_logits(m, tokens, ck, cv, 0);
  double diff = (want - got).abs().max().item<double>();
  EXPECT_LT(diff, 1e-5) << "prefill: largest difference " << diff;
  at::Tensor next = at::randint(0, 50, {2, 1}, at::kLong);
  want = m.forward(next, opt);
  got = replica_logits(m, next, ck, cv, 5);
  diff = (want - got).abs().max().item<double>();
  EXPECT_LT(diff, 1e-5) << "decode: largest difference " << diff;
}

TEST(Profile, TinyProfileHasEveryTableOnItsGrid) {
  init_torch_threads();
  ModelConfig c = tiny_config(true);
  const Workload w = ac::test::tiny_workload();
  ProfileOptions o = ac::test::quick_profile_options(16);
  o.calibrate = true;
  o.calibration_models = 2;
  o.calibration_repeats = 1;
  Profile p = run_profile({c}, w, o);
  // Widths: D 16, H*Hd 32, G*Hd 16, F 24, and the ladder 16, 24, 32 -> {16, 24, 32}.
  EXPECT_EQ(width_ladder({c}, 16), (std::vector<int64_t>{16, 24, 32}));
  EXPECT_EQ(reduction_ladder({16, 24, 32}), (std::vector<int64_t>{16, 24, 32}));  // all < 512
  // Multiples of 256 from 512 up get their +-8 neighbours; 384 (< 512) and 1000 do not.
  EXPECT_EQ(reduction_ladder({384, 512, 768, 1000, 2048}),
            (std::vector<int64_t>{384, 504, 512, 520, 760, 768, 776, 1000, 2040, 2048, 2056}));
  EXPECT_EQ(p.table("gemm").entries.size(), 2u * 3 * 3);  // M in {1, 8}
  EXPECT_EQ(p.table("lm_head").entries.size(), 1u);      // K <= D = 16
  // Passes that disagree are named at profile time, with the widths and their spread.
  Profile noisy;
  noisy.passes = 3;
  noisy.width_repeatability = {{288, 0.02, 0.03}, {160, 0.05, 0.247}};
  EXPECT_EQ(repeatability_warning(noisy, 0.25), "");
  const std::string warning = repeatability_warning(noisy, 0.10);
  EXPECT_NE(warning.find("more than 10% apart: 160 (24.7%). A search"), std::string::npos) << warning;
  EXPECT_EQ(warning.find("288"), std::string::npos) << warning;
  // The profiled model lies inside its own tables; one 8x wider, or with another vocabulary,
  // is extrapolated, and the profile names which dimension.
  EXPECT_TRUE(p.extrapolated_dimensions(c).empty())
      << fmt::format("{}", fmt::join(p.extrapolated_dimensions(c), "; "));
  ModelConfig wide = c;
  wide.hidden_size *= 8;
  wide.vocab_size *= 4;
  const std::vector<std::string> ext = p.extrapolated_dimensions(wide);
  ASSERT_EQ(ext.size(), 2u) << fmt::format("{}", fmt::join(ext, "; "));
  EXPECT_EQ(ext[0].rfind(fmt::format("hidden size {}: the profile timed GEMM widths", wide.hidden_size), 0), 0u) << ext[0];
  EXPECT_EQ(ext[1].rfind(fmt::format("vocabulary {}: the profile timed heads of {}..{}", wide.vocab_size,
                                     c.vocab_size, c.vocab_size), 0), 0u) << ext[1];
  // (H, G) with G | H, H <= 4: (1,1) (2,1) (2,2) (3,1) (3,3) (4,1) (4,2) (4,4): 8 shapes,
  // decode at contexts 9, 10, 12.
  EXPECT_EQ(p.table("attention_prefill").entries.size(), 8u);
  EXPECT_EQ(p.table("attention_decode").entries.size(), 8u * 3);
  EXPECT_EQ(p.table("rmsnorm").entries.size(), 2u * 3);
  EXPECT_EQ(p.table("embedding").entries.size(), 2u * 1);  // widths <= D only
  for (const auto& [name, t] : p.tables)
    for (const auto& e : t.entries) {
      EXPECT_GT(e.ms, 0) << name;
      EXPECT_LE(e.ms, e.median_ms) << name;  // the min of the calls the median is of
      EXPECT_EQ(e.dims.size(), t.dim_names.size()) << name;
      EXPECT_EQ(e.passes, o.passes) << name;  // every shape timed once per pass
      EXPECT_EQ(e.repeats, o.passes * o.max_repeats) << name;
      EXPECT_GE(e.pass_spread, 0) << name;
    }
  // How far one pass alone would have predicted the shape at each width of the search's range
  // (D = 16: 8 and 16).
  EXPECT_EQ(p.passes, o.passes);
  ASSERT_EQ(p.width_repeatability.size(), 2u);
  EXPECT_EQ(p.width_repeatability[0].hidden_size, 8);
  EXPECT_EQ(p.width_repeatability[1].hidden_size, 16);
  for (const auto& r : p.width_repeatability) EXPECT_GE(r.tpot_spread, 0);
  const OpTiming& g = p.table("gemm").entries.back();
  EXPECT_DOUBLE_EQ(p.table("gemm").lookup({double(g.dims[0]), double(g.dims[1]), double(g.dims[2])}),
                   g.ms);
  EXPECT_EQ(p.table("step").entries.size(), 2u);  // T = 8 (prefill) and 1 (decode)
  EXPECT_TRUE(p.correction.fitted);
  EXPECT_EQ(p.correction.fit.models, 3);  // the shape and two random prunes
  EXPECT_EQ(p.tables.count("gemm_width_scan"), 0u);  // widths below 256: no scan anchors
  EXPECT_EQ(p.width_granularity, 0);
  EXPECT_EQ(p.identity.cores, cpu_cores());
  EXPECT_GT(p.memory_bandwidth_bytes_per_s, 0);
  EXPECT_NO_THROW(check_profile_is_this_machine(p));
  Profile other = p;
  other.identity.cpu_model = "Another CPU";
  EXPECT_THROW(check_profile_is_this_machine(other), ConfigError);
  // validate --recalibrate: the correction re-fitted on calibration prunes measured in the same
  // rounds as the judged ones; the predictions are the profile's with that correction.
  const Scenario s = calibration_scenario(w);
  const std::vector<ModelConfig> judged = random_architectures(c, 2, 77);
  const std::vector<ModelConfig> calib = calibration_architectures({c}, 2, o.calibration_seed);
  LatencyCorrection refit;
  ValidationReport rep = validate_native_recalibrated(judged, calib, s, p, 1, false, &refit, c);
  ASSERT_EQ(rep.rows.size(), 2u);
  // The base (in the calibration set) measured in the same rounds: the errors relative to it,
  // by hand from the rows.
  ASSERT_TRUE(rep.relative.has_value());
  EXPECT_GT(rep.relative->base_measured.tpot_ms, 0);
  double relative = 0;
  for (const auto& r : rep.rows)
    relative += 50.0 * std::abs((r.predicted.tpot_ms / rep.relative->base_predicted.tpot_ms) /
                                (r.measured.tpot_ms / rep.relative->base_measured.tpot_ms) - 1);
  EXPECT_NEAR(rep.relative->mape_tpot, relative, 1e-9);
  EXPECT_TRUE(refit.fitted);
  EXPECT_EQ(refit.fit.models, 3);  // the shape and its two prunes
  Profile with = p;
  with.correction = refit;
  double bias = 0, mape = 0;  // percent, by hand from the rows
  for (const auto& r : rep.rows) {
    bias += 50.0 * (r.predicted.tpot_ms - r.measured.tpot_ms) / r.measured.tpot_ms;
    mape += 50.0 * std::abs(r.predicted.tpot_ms - r.measured.tpot_ms) / r.measured.tpot_ms;
  }
  EXPECT_NEAR(rep.bias_tpot, bias, 1e-9);
  EXPECT_NEAR(rep.mape_tpot, mape, 1e-9);
  for (const auto& r : rep.rows) {
    EXPECT_DOUBLE_EQ(r.predicted.ttft_ms, predict(r.config, s, &with).ttft_ms);
    EXPECT_DOUBLE_EQ(r.predicted.tpot_ms, predict(r.config, s, &with).tpot_ms);
    EXPECT_GT(r.measured.ttft_ms, 0);
  }
  test::expect_error<ConfigError>(
      [&] { validate_native_recalibrated(judged, {judged[0]}, s, p, 1, false); },
      {"both calibrated on and judged"});
  other = p;
  other.identity.latency_statistic = "median";  // an older profile's tables
  test::expect_error<ConfigError>([&] { check_profile_is_this_machine(other); },
                                  {"tables hold median latencies", "re-run `autocompress profile`"});
}

TEST(Profile, AnEntryWithOnePassLeftOut) {
  // Three passes of a shape; by hand: fastest 1 (pass 1), the slowest pass's fastest 4.
  const std::vector<std::vector<double>> passes{{3, 2}, {1, 5}, {4, 6}};
  const OpTiming all = pass_timing({1, 8, 8}, passes);
  EXPECT_EQ(all.ms, 1);
  EXPECT_EQ(all.passes, 3);
  EXPECT_EQ(all.repeats, 6);
  EXPECT_DOUBLE_EQ(all.pass_spread, 3.0);
  EXPECT_EQ(all.dims, (std::vector<int64_t>{1, 8, 8}));
  // Without pass 1: fastest 2, from 4 calls of 2 passes; the slowest pass's fastest is 4.
  const OpTiming loo = pass_timing({1, 8, 8}, passes, 1);
  EXPECT_EQ(loo.ms, 2);
  EXPECT_EQ(loo.passes, 2);
  EXPECT_EQ(loo.repeats, 4);
  EXPECT_DOUBLE_EQ(loo.pass_spread, 1.0);
  EXPECT_EQ(pass_timing({1}, passes, 0).ms, 1);   // the fastest pass kept
  EXPECT_EQ(pass_timing({1}, passes, 7).ms, 1);   // no such pass: none left out
  EXPECT_EQ(pass_timing({1}, {{5, 3}}, 0).ms, 3);  // one pass: kept
  EXPECT_THROW(pass_timing({1}, {{5}, {}}), InternalError);
}

TEST(Measure, CountingAllocatorCountsLiveAndPeakBytes) {
  install_counting_allocator();
  int64_t before = counted_bytes_now();
  reset_counted_peak();
  {
    at::Tensor t = at::empty({1 << 20});  // 4 MiB
    EXPECT_GE(counted_bytes_now() - before, 4 << 20);
  }
  EXPECT_EQ(counted_bytes_now(), before);
  EXPECT_GE(counted_bytes_peak() - before, 4 << 20);
}

TEST(Measure, NativeMeasurementHoldsWeightsAndKvCache) {
  ModelConfig c = tiny_config(true);
  LlamaModel m{c, random_weights(c, 5)};
  Workload w;
  w.prompt_tokens = 6;
  w.output_tokens = 3;
  Measurement r = measure_native(m, w, 1);
  EXPECT_EQ(r.weight_bytes, 4 * c.num_parameters());  // tied head counted once
  int64_t kv = 2 * 1 * 2 * 8 * 9 * 4;  // k and v [1, 2, 9, 8] fp32
  EXPECT_GE(r.peak_memory_bytes, r.weight_bytes + kv);
  EXPECT_LT(r.peak_memory_bytes, r.weight_bytes + kv + (1 << 20));
  EXPECT_GT(r.ttft_ms, 0);
  EXPECT_GT(r.tpot_ms, 0);
  EXPECT_LE(r.ttft_ms, r.ttft_median_ms);  // p10 <= median of the same samples
  EXPECT_EQ(r.samples.step_ms.size(), 1u);
  EXPECT_EQ(r.samples.step_ms[0].size(), 3u);  // one latency per output token
  // TTFT samples per run: its prefill plus 2 to 16 prefill-only runs (more than 2 while they
  // cost at most half of its decode time).
  EXPECT_GE(r.samples.ttft_ms.size(), 3u);
  EXPECT_LE(r.samples.ttft_ms.size(), 17u);
  Workload one = w;  // two runs: each its prefill and 2 to 16 prefill-only runs
  one.prompt_tokens = 64;
  one.output_tokens = 1;
  const Measurement r1 = measure_native(m, one, 2);
  EXPECT_GE(r1.samples.ttft_ms.size(), 2u * 3);
  EXPECT_LE(r1.samples.ttft_ms.size(), 2u * 17);
  EXPECT_EQ(r1.samples.request_ms.size(), 2u);
  w.weight_dtype = "bf16";
  EXPECT_THROW(measure_native(m, w, 1), ConfigError);
}

// By hand: half the decode time over the prefill's, floored, within [2, 16]. (The count a run
// gets depends on its timings; the rule is checked here, not through a timed run, whose count
// a slow stretch of the machine can move.)
TEST(Measure, ExtraPrefillRunsFollowTheirShareOfTheDecodeTime) {
  EXPECT_EQ(extra_prefill_runs(1.0, 1.0), 2);     // 0.5: the minimum
  EXPECT_EQ(extra_prefill_runs(0.0, 1.0), 2);     // no decode step
  EXPECT_EQ(extra_prefill_runs(14.0, 1.0), 7);    // 0.5 * 14
  EXPECT_EQ(extra_prefill_runs(15.9, 1.0), 7);    // 7.95, floored
  EXPECT_EQ(extra_prefill_runs(640.0, 5.0), 16);  // 64: the maximum
  EXPECT_EQ(extra_prefill_runs(10.0, 0.0), 16);   // a prefill below the clock: the maximum
}

TEST(Measure, ModelsMeasuredInInterleavedRoundsPoolTheirRuns) {
  ModelConfig c = tiny_config(true), d = tiny_config(false);
  LlamaModel a{c, random_weights(c, 5)}, b{d, random_weights(d, 6)};
  Workload w;
  w.prompt_tokens = 6;
  w.output_tokens = 3;
  std::vector<Measurement> m = measure_models_interleaved({&a, &b}, w, 2);
  ASSERT_EQ(m.size(), 2u);
  for (const auto& x : m) {
    EXPECT_EQ(x.repeats, 2);
    EXPECT_EQ(x.samples.step_ms.size(), 2u);  // one run per round
    EXPECT_GT(x.tpot_ms, 0);
  }
  EXPECT_EQ(m[0].weight_bytes, 4 * c.num_parameters());
  EXPECT_EQ(m[1].weight_bytes, 4 * d.num_parameters());  // untied: its own head
  EXPECT_THROW(measure_models_interleaved({}, w, 2), ConfigError);
  EXPECT_THROW(measure_models_interleaved({&a}, w, 0), ConfigError);
}

// Hand-computed: the figures of pooled samples (measure.h: p10, nearest rank on the sorted
// values; medians per run then over runs).
TEST(Measure, MergedFiguresAreTheTenthPercentileOfThePooledSamples) {
  Measurement a, b;
  a.samples.ttft_ms = {10, 12, 30, 11, 13};
  a.samples.step_ms = {{3, 4, 5, 3.5}};
  a.samples.request_ms = {100};
  a.tokens_per_request = 8;  // B * output tokens
  a.peak_memory_bytes = 1000;
  b.samples.ttft_ms = {9.5, 40};
  b.samples.step_ms = {{2.9, 6, 7, 3.1}};
  b.samples.request_ms = {120};
  b.tokens_per_request = 8;
  b.peak_memory_bytes = 1200;
  Measurement m = merge_measurements({a, b});
  // TTFT samples sorted: 9.5 10 11 12 13 30 40: p10 = rank round(0.1 * 6) = 1, median = 12.
  EXPECT_DOUBLE_EQ(m.ttft_ms, 10);
  EXPECT_DOUBLE_EQ(m.ttft_median_ms, 12);
  // Steps sorted: 2.9 3 3.1 3.5 4 5 6 7: p10 = rank round(0.7) = 1.
  EXPECT_DOUBLE_EQ(m.tpot_ms, 3);
  // Run medians 3.75 and 4.55, their median 4.15.
  EXPECT_DOUBLE_EQ(m.tpot_median_ms, 4.15);
  // Requests 100 and 120 ms: p10 = rank round(0.1) = 0, 100 ms; median 110 ms. 8 tokens each.
  EXPECT_DOUBLE_EQ(m.throughput_tokens_per_s, 8 / 0.100);
  EXPECT_DOUBLE_EQ(m.throughput_median_tokens_per_s, 8 / 0.110);
  EXPECT_EQ(m.peak_memory_bytes, 1200);
  EXPECT_EQ(m.repeats, 2);
  // One part alone is its own figures: p10 of 5 TTFT samples is rank round(0.4) = 0.
  Measurement one = merge_measurements({a});
  EXPECT_DOUBLE_EQ(one.ttft_ms, 10);
  EXPECT_DOUBLE_EQ(one.tpot_ms, 3);
  EXPECT_THROW(merge_measurements({}), ConfigError);
  Measurement other = b;
  other.tokens_per_request = 16;  // another workload's request
  EXPECT_THROW(merge_measurements({a, other}), ConfigError);
  Measurement bare;  // e.g. read back from a report: figures without samples
  bare.ttft_ms = 5;
  test::expect_error<ConfigError>([&] { merge_measurements({a, bare}); }, {"without samples"});
}

TEST(Measure, MedianAndQuantileByHand) {
  EXPECT_DOUBLE_EQ(sample_median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(sample_median({4, 1, 3, 2}), 2.5);  // mean of the two middle values
  EXPECT_DOUBLE_EQ(sample_median({7}), 7);
  EXPECT_THROW(sample_median({}), InternalError);
  // Nearest rank round(q (n - 1)) on the sorted values: 1 2 3 4 5.
  EXPECT_DOUBLE_EQ(sample_quantile({5, 1, 4, 2, 3}, 0.1), 1);
  EXPECT_DOUBLE_EQ(sample_quantile({5, 1, 4, 2, 3}, 0.5), 3);
  EXPECT_DOUBLE_EQ(sample_quantile({5, 1, 4, 2, 3}, 1.0), 5);
  EXPECT_THROW(sample_quantile({}, 0.5), InternalError);
}

TEST(Measure, NotMeasurableReasonNamesTheDeviceEngineOrDtype) {
  Scenario s;
  s.device = "cpu";
  s.engine = "native";
  EXPECT_EQ(not_measurable_reason(s), "");  // fp32 weights and KV cache by default
  s.workload.kv_cache_dtype = "fp16";
  EXPECT_NE(not_measurable_reason(s).find("KV cache fp16"), std::string::npos);
  s.workload.kv_cache_dtype = "fp32";
  s.engine = "vllm";
  EXPECT_NE(not_measurable_reason(s).find("engine vllm"), std::string::npos);
  s.device = "h100-sxm";
  EXPECT_NE(not_measurable_reason(s).find("device h100-sxm"), std::string::npos);
}

TEST(Validate, ShippedOneBillionShapeAndItsRandomPrunes) {
  // architectures/tinyllama-1.1b.json: the base of the ~1B validation (scenario cpu-1b).
  ModelConfig c = read_architecture(test::source_dir() / "architectures" / "tinyllama-1.1b.json");
  // By hand: embed + untied head 2 x 32000 x 2048; per layer q, o 2048^2, k, v 2048 x 4 x 64,
  // gate/up/down 3 x 2048 x 5632, two norms 2 x 2048; 22 layers; the final norm 2048.
  const int64_t per_layer = 2 * 2048 * 2048 + 2 * 2048 * 256 + 3 * 2048 * 5632 + 2 * 2048;
  EXPECT_EQ(c.num_parameters(), 2 * 32000 * 2048 + 22 * per_layer + 2048);
  EXPECT_EQ(c.num_parameters(), 1'100'048'384);  // TinyLlama-1.1B's published count
  for (const ModelConfig& p : random_architectures(c, 20, 1)) {
    EXPECT_LE(p.num_parameters(), c.num_parameters());
    EXPECT_EQ(p.num_layers(), 22);
  }
}

TEST(Runtime, OpenBlasRunsTheVectorKernelsThisCpuHas) {
  // tests/blas_kernels_init.cpp calls ensure_fast_blas_kernels() before main, as the CLI does.
  const std::string blas = blas_description();
  if (blas.empty()) GTEST_SKIP() << "the BLAS is not OpenBLAS";
  if (const char* keep = std::getenv("AC_KEEP_BLAS_CORE"); keep && keep[0] == '1')
    GTEST_SKIP() << "AC_KEEP_BLAS_CORE=1";
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
    GTEST_SKIP() << "no AVX2 + FMA on this CPU";
  EXPECT_EQ(blas.find("core Prescott"), std::string::npos) << blas;
  if (const char* core = std::getenv("OPENBLAS_CORETYPE")) {  // the core asked for is the one used
    auto lower = [](std::string x) {
      for (char& ch : x) ch = char(std::tolower(static_cast<unsigned char>(ch)));
      return x;
    };
    EXPECT_NE(lower(blas).find("core " + lower(core)), std::string::npos) << blas;
  }
}
