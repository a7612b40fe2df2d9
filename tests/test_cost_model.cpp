// Cost model tests against hand-computed values: weight and KV-cache bytes of heterogeneous
// configs, table interpolation on a synthetic bilinear table, a roofline FFN computed by hand,
// limit messages, scenario and data-file errors, and a profile applied to the wrong device.
#include <fstream>

#include "pipeline/limits.h"
#include "common/error.h"
#include "common/units.h"
#include "hardware/cost_model.h"
#include "hardware/data_dir.h"
#include "hardware/expected_cost.h"
#include "hardware/validate.h"
#include "test_util.h"

using namespace ac;
using ac::test::TempDir;

namespace {

fs::path data_root() { return ac::test::source_dir(); }

Scenario scenario(const std::string& device, const std::string& engine, const Workload& w) {
  json j = {{"name", "test"}, {"device", device}, {"engine", engine},
            {"workload", {{"prompt_tokens", w.prompt_tokens}, {"output_tokens", w.output_tokens},
                          {"batch_size", w.batch_size}, {"weight_dtype", w.weight_dtype},
                          {"kv_cache_dtype", w.kv_cache_dtype}}}};
  return scenario_from_json(j, "test.json", data_root());
}

LayerConfig layer(int64_t H, int64_t G, int64_t Hd, int64_t F) {
  LayerConfig l;
  l.num_attention_heads = H;
  l.num_key_value_heads = G;
  l.head_dim = Hd;
  l.intermediate_size = F;
  l.attention_no_op = H == 0;
  l.ffn_no_op = F == 0;
  return l;
}

// Layer 0: GQA 6/2 x 48, F 768; layer 1: attention removed, F 512; layer 2: 4/4 x 64, FFN removed.
ModelConfig hetero_config() {
  ModelConfig c;
  c.vocab_size = 1000;
  c.hidden_size = 288;
  c.tie_word_embeddings = false;
  c.layers = {layer(6, 2, 48, 768), layer(0, 0, 0, 512), layer(4, 4, 64, 0)};
  return c;
}

// A profile whose every table returns `ms` (one entry each), for checks that do not need timing.
Profile flat_profile(const std::string& device, double ms) {
  Profile p;
  p.identity.device = device;
  p.workload.prompt_tokens = 0;  // any workload: no mismatch warning
  auto put = [&](const std::string& name, std::vector<std::string> dims) {
    OpTable t;
    t.dim_names = dims;
    t.entries.push_back({std::vector<int64_t>(dims.size(), 1), ms, 0, 1});
    p.tables[name] = t;
  };
  put("gemm", {"M", "N", "K"});
  put("lm_head", {"M", "N", "K"});
  put("attention_prefill", {"B", "Hd", "G", "H", "T"});
  put("attention_decode", {"B", "Hd", "G", "H", "C"});
  for (const char* n : {"rmsnorm", "silu_mul", "add", "embedding"}) put(n, {"M", "D"});
  put("step", {"B", "T", "Hd", "V"});
  return p;
}

}  // namespace

TEST(CostModel, WeightBytesOfStories15MMatchTheCheckpointSize) {
  // model.bin is 60816028 bytes = 28 (header) + 4 * params + 2 * 256 * 24 * 4 (RoPE tables),
  // so params = (60816028 - 28 - 49152) / 4 = 15191712.
  Scenario s = scenario("cpu", "native", Workload{});
  Profile p = flat_profile("cpu", 0.01);
  CostEstimate e = predict(stories15m_shape(), s, &p);
  EXPECT_EQ(e.weight_bytes, 60766848);
  // KV cache: 6 layers x 2 x 6 x 48 x (128 + 128) x 4 bytes.
  EXPECT_EQ(e.kv_cache_bytes, 6 * 2 * 6 * 48 * 256 * 4);
  EXPECT_EQ(e.reserve_bytes, 0);
  EXPECT_EQ(e.peak_memory_bytes,
            e.weight_bytes + e.kv_cache_bytes + e.activation_bytes + e.reserve_bytes);
}

TEST(CostModel, HeterogeneousWeightsAndKvCacheByHand) {
  Workload w;
  w.batch_size = 2;
  w.prompt_tokens = 100;
  w.output_tokens = 28;  // capacity 128
  Scenario s = scenario("cpu", "native", w);
  Profile p = flat_profile("cpu", 0.01);
  CostEstimate e = predict(hetero_config(), s, &p);
  // Parameters: embed + head 2 * 1000 * 288 + final norm 288 = 576288;
  // layer 0: attn 288 + 288*288 (q) + 2*288*96 (k, v) + 288*288 (o) = 221472,
  //          ffn 288 + 3*288*768 = 663840; layer 1: ffn 288 + 3*288*512 = 442656;
  // layer 2: attn 288 + 288*256 + 2*288*256 + 256*288 = 295200.
  EXPECT_EQ(e.layer_weight_bytes, (std::vector<int64_t>{4 * (221472 + 663840), 4 * 442656, 4 * 295200}));
  EXPECT_EQ(e.weight_bytes, 4 * (576288 + 221472 + 663840 + 442656 + 295200));
  EXPECT_EQ(e.weight_bytes, 4 * hetero_config().num_parameters());
  // KV: 2 (k, v) * B 2 * G*Hd * 128 * 4 bytes; none for the attention-free layer 1.
  EXPECT_EQ(e.layer_kv_cache_bytes, (std::vector<int64_t>{2 * 2 * 96 * 128 * 4, 0, 2 * 2 * 256 * 128 * 4}));
  EXPECT_EQ(e.kv_cache_bytes, 196608 + 524288);
}

TEST(CostModel, KvCacheRoundsUpToTheEngineBlockAndUsesItsDtype) {
  Workload w;
  w.batch_size = 2;
  w.prompt_tokens = 100;
  w.output_tokens = 30;  // 130 tokens -> 9 blocks of 16 = 144
  w.weight_dtype = "bf16";
  w.kv_cache_dtype = "bf16";
  Scenario s = scenario("h100-sxm", "vllm", w);
  EXPECT_EQ(kv_capacity_tokens(w, s.engine_spec), 144);
  CostEstimate e = predict(hetero_config(), s, nullptr);
  EXPECT_EQ(e.source, "roofline");
  EXPECT_EQ(e.kv_cache_bytes, 2 * 2 * 96 * 144 * 2 + 2 * 2 * 256 * 144 * 2);
  EXPECT_EQ(e.weight_bytes, 2 * hetero_config().num_parameters());
  // vLLM keeps 10% of the H100's 80 GiB.
  EXPECT_EQ(e.reserve_bytes, int64_t(0.1 * 80.0 * (1ll << 30)));
}

TEST(CostModel, RooflineFfnDecodeByHand) {
  // H100 SXM + vLLM, bf16, B = 1 decode: every op is memory-bound.
  // bandwidth 3.35e12 * 0.8 = 2.68e12 B/s; a kernel in a CUDA graph costs 1 us.
  // rmsnorm 4096*2*2 B, gate_up [28672, 4096] 234881024 B + 65536 B of activations,
  // silu_mul 14336*2*3 B, down [4096, 14336] 117440512 B + 36864 B: 4 kernels.
  Workload w;
  w.weight_dtype = w.kv_cache_dtype = "bf16";
  Scenario s = scenario("h100-sxm", "vllm", w);
  ModelConfig c = ModelConfig::uniform(32000, 4096, 1, layer(32, 8, 128, 14336));
  PartCost f = ffn_part_cost(c, c.layers[0], s, nullptr);
  EXPECT_NEAR(f.tpot_ms, 0.004 + 6.113432835820896e-06 + 0.08766662686567164 +
                             3.20955223880597e-05 + 0.04383484179104478, 1e-9);
  EXPECT_EQ(f.weight_bytes, (4096 + 3 * 4096 * 14336) * 2);
  EXPECT_EQ(f.kv_cache_bytes, 0);
}

TEST(CostModel, RemovedPartsCostNothing) {
  Scenario s = scenario("cpu", "native", Workload{});
  Profile p = flat_profile("cpu", 0.5);
  ModelConfig c = hetero_config();
  PartCost a = attention_part_cost(c, c.layers[1], s, &p), f = ffn_part_cost(c, c.layers[2], s, &p);
  EXPECT_EQ(a.ttft_ms, 0);
  EXPECT_EQ(a.weight_bytes, 0);
  EXPECT_EQ(f.tpot_ms, 0);
  // Flat tables: attention part = rmsnorm + 3 GEMMs + attention + o_proj + add = 7 lookups.
  PartCost a0 = attention_part_cost(c, c.layers[0], s, &p);
  EXPECT_DOUBLE_EQ(a0.tpot_ms, 7 * 0.5);
  // FFN part = rmsnorm + 2 GEMMs + silu_mul + down + add = 6 lookups.
  EXPECT_DOUBLE_EQ(ffn_part_cost(c, c.layers[0], s, &p).ttft_ms, 6 * 0.5);
}

TEST(CostModel, TableInterpolationIsExactOnABilinearFunction) {
  // f(M, N, K) = 0.1 + 0.002 N + 0.003 K + 1e-6 N K at M = 1; M = 8 is 4x that.
  auto f = [](double M, double N, double K) {
    return (M == 1 ? 1.0 : 4.0) * (0.1 + 0.002 * N + 0.003 * K + 1e-6 * N * K);
  };
  OpTable t;
  t.dim_names = {"M", "N", "K"};
  for (int64_t M : {1, 8})
    for (int64_t N : {32, 96, 288})
      for (int64_t K : {64, 192, 768}) t.entries.push_back({{M, N, K}, f(M, N, K), 0, 1});
  EXPECT_DOUBLE_EQ(t.lookup({1, 96, 192}), f(1, 96, 192));    // measured point
  EXPECT_NEAR(t.lookup({1, 150, 500}), f(1, 150, 500), 1e-12);  // inside: bilinear is exact
  EXPECT_NEAR(t.lookup({8, 33, 767}), f(8, 33, 767), 1e-12);
  EXPECT_NEAR(t.lookup({1, 400, 768}), f(1, 400, 768), 1e-12);  // extrapolated linearly in N
  EXPECT_NEAR(t.lookup({4.5, 96, 192}), 0.5 * (f(1, 96, 192) + f(8, 96, 192)), 1e-12);
  OpTable empty;
  empty.dim_names = {"M"};
  EXPECT_THROW(empty.lookup({1}), ConfigError);
  EXPECT_THROW(t.lookup({1, 2}), ConfigError);
}

TEST(CostModel, LimitMessagesSayExpectedAndFound) {
  CostEstimate e;
  e.ttft_ms = 30;
  e.tpot_ms = 13.2;
  e.throughput_tokens_per_s = 80;
  e.peak_memory_bytes = 1000;
  Limits l;
  l.ttft_ms = 40;
  EXPECT_EQ(check_limits(e, l), "");
  l.tpot_ms = 12.5;
  EXPECT_EQ(check_limits(e, l), "tpot_ms: expected <= 12.5, found 13.2 (5.6% over)");
  l.min_throughput_tokens_per_s = 100;
  l.peak_memory_bytes = 2000;
  EXPECT_EQ(check_limits(e, l), "tpot_ms: expected <= 12.5, found 13.2 (5.6% over); "
                                "min_throughput_tokens_per_s: expected >= 100, found 80 (20.0% under)");
  auto slack = limit_slack(e, l);
  ASSERT_EQ(slack.size(), 4u);
  EXPECT_DOUBLE_EQ(slack[0].slack, 0.25);  // ttft 30 of 40
  EXPECT_DOUBLE_EQ(slack[2].slack, 0.5);   // memory 1000 of 2000
  EXPECT_FALSE(slack[3].holds());
  e.peak_memory_bytes = int64_t(12) << 30;  // memory in GiB: 12 against 11.5
  l = Limits{};
  l.peak_memory_bytes = int64_t(23) << 29;
  EXPECT_EQ(check_limits(e, l), "peak_memory_bytes: expected <= 11.500 GiB, found 12.000 GiB "
                                "(4.3% over)");
  // Binary prefixes by hand (IEC 80000-13): the largest that keeps the value at or above 1.
  EXPECT_EQ(bytes_text(500), "500 B");
  EXPECT_EQ(bytes_text(1536), "1.500 KiB");
  EXPECT_EQ(bytes_text(3 << 20), "3.000 MiB");
  EXPECT_EQ(bytes_text(double(int64_t(12) << 30)), "12.000 GiB");
}

TEST(CostModel, RelativeLimitsResolveAgainstTheTeacher) {
  Limits l = limits_from_json(json::parse(R"({"tpot_ms": {"fraction_of_teacher": 0.6},
      "peak_memory_bytes": {"fraction_of_teacher": 0.5}, "ttft_ms": 12.5})"), "x.json");
  EXPECT_TRUE(l.has_relative());
  CostEstimate e;
  EXPECT_THROW(check_limits(e, l), ConfigError);
  CostEstimate teacher;
  teacher.tpot_ms = 10;
  teacher.peak_memory_bytes = 3000;
  Limits r = resolve_limits(l, teacher);
  EXPECT_FALSE(r.has_relative());
  EXPECT_DOUBLE_EQ(*r.tpot_ms, 6.0);
  EXPECT_EQ(*r.peak_memory_bytes, 1500);
  EXPECT_DOUBLE_EQ(*r.ttft_ms, 12.5);
  EXPECT_EQ(l.to_json(), json::parse(R"({"tpot_ms": {"fraction_of_teacher": 0.6},
      "peak_memory_bytes": {"fraction_of_teacher": 0.5}, "ttft_ms": 12.5})"));
}

namespace {
// Expects scenario_from_json(j) to throw E whose message contains `needle`.
template <typename E>
void expect_scenario_error(const std::string& text, const std::string& needle) {
  try {
    scenario_from_json(json::parse(text), "bad.json", data_root());
    ADD_FAILURE() << "no error for " << text;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(Scenario, ParseErrorsNameTheField) {
  const std::string ok_head = R"({"name": "s", "device": "cpu", "engine": "native", )";
  expect_scenario_error<ConfigError>(R"({"name": "s", "device": "tpu-v9", "engine": "native"})",
                                     "unknown device 'tpu-v9', known: a100-sxm");
  expect_scenario_error<ConfigError>(R"({"name": "s", "device": "cpu", "engine": "sglang"})",
                                     "unknown engine 'sglang'");
  expect_scenario_error<FormatError>(ok_head + R"("workload": {"batch_size": 0}})",
                                     "bad.json: workload.batch_size: expected a positive integer, found 0");
  expect_scenario_error<FormatError>(ok_head + R"("workload": {"batch": 2}})",
                                     "unknown field 'batch'");
  expect_scenario_error<ConfigError>(ok_head + R"("workload": {"weight_dtype": "fp64"}})",
                                     "unknown dtype 'fp64'");
  expect_scenario_error<FormatError>(ok_head + R"("limits": {"tpot_ms": -3}})",
                                     "limits.tpot_ms: expected a positive number");
  expect_scenario_error<FormatError>(ok_head + R"("limits": {"latency": 3}})",
                                     "unknown field 'latency'");
  expect_scenario_error<FormatError>(R"({"device": "cpu", "engine": "native"})",
                                     "missing field 'name'");
}

TEST(Scenario, ShippedDataFilesLoad) {
  for (const auto& name : list_data_files("scenarios", data_root())) {
    Scenario s = find_scenario(name, data_root());
    EXPECT_EQ(s.name, name);
  }
  Scenario s = find_scenario("cpu-local", data_root());
  EXPECT_EQ(s.workload.prompt_tokens, 128);
  EXPECT_EQ(s.workload.output_tokens, 128);
  EXPECT_DOUBLE_EQ(*s.limits.tpot_fraction, 0.6);
  EXPECT_GT(s.device_spec.cores, 0);
  for (const auto& name : list_data_files("devices", data_root())) {
    DeviceSpec d = load_device(name, data_root());
    if (d.kind != "cuda") continue;
    EXPECT_GT(d.memory_bytes->value, 1e9) << name;
    EXPECT_GT(d.bandwidth_bytes_per_s->value, 1e11) << name;
    EXPECT_GT(d.peak_flops_for("bf16"), d.peak_flops_for("fp32")) << name;
  }
  EXPECT_EQ(list_data_files("engines", data_root()),
            (std::vector<std::string>{"llama.cpp", "native", "tensorrt-llm", "vllm"}));
  for (const auto& name : list_data_files("engines", data_root())) load_engine(name, data_root());
  EXPECT_THROW(load_device("a100-sxm", data_root()).peak_flops_for("fp8"), ConfigError);
}

TEST(Scenario, AbsoluteTpotLimitWorks) {
  TempDir tmp;
  std::ofstream(tmp.path / "s.json") << R"({"name": "abs", "device": "cpu", "engine": "native",
      "limits": {"tpot_ms": 12.5, "min_throughput_tokens_per_s": 50}})";
  Scenario s = load_scenario(tmp.path / "s.json", data_root());
  EXPECT_FALSE(s.limits.has_relative());
  EXPECT_DOUBLE_EQ(*s.limits.tpot_ms, 12.5);
  EXPECT_DOUBLE_EQ(*s.limits.min_throughput_tokens_per_s, 50);
}

TEST(CostModel, ProfileOfAnotherDeviceIsRefused) {
  Scenario s = scenario("cpu", "native", Workload{});
  Profile gpu = flat_profile("h100-sxm", 0.01);
  try {
    predict(stories15m_shape(), s, &gpu);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("measured on device 'h100-sxm'"), std::string::npos) << m;
    EXPECT_NE(m.find("targets device 'cpu'"), std::string::npos) << m;
  }
  EXPECT_THROW(predict(stories15m_shape(), s, nullptr), ConfigError);  // a CPU needs a profile
}

TEST(CostModel, ProfileJsonRoundTrips) {
  TempDir tmp;
  Profile p = flat_profile("cpu", 0.25);
  p.identity.cpu_model = "Test CPU";
  p.identity.isa = {"avx2", "fma"};
  p.calibration.decode_step_ms = 0.125;
  p.workload.prompt_tokens = 17;
  save_profile(tmp.path / "p.json", p);
  Profile q = load_profile(tmp.path / "p.json");
  EXPECT_EQ(q.to_json(), p.to_json());
  std::ofstream(tmp.path / "bad.json") << R"({"format": "autocompress-profile", "device": "cpu",
      "tables": {"gemm": {"dims": ["M", "N", "K"], "entries": [{"dims": [1, 2], "median_ms": 1}]}}})";
  try {
    load_profile(tmp.path / "bad.json");
    ADD_FAILURE() << "no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("tables.gemm.entries[0].dims: expected 3 values"),
              std::string::npos) << e.what();
  }
}

TEST(CostModel, RandomArchitecturesAreValidAndSeeded) {
  auto a = random_architectures(stories15m_shape(), 20, 7), b = random_architectures(stories15m_shape(), 20, 7);
  ASSERT_EQ(a.size(), 20u);
  int hetero = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(describe(a[i]), describe(b[i]));
    EXPECT_NO_THROW(a[i].validate("test"));
    hetero += !a[i].is_homogeneous();
  }
  EXPECT_GE(hetero, 18);
  // Hidden sizes: kept (288) or multiples of 8 in [0.4 x 288 = 115.2, 288], some below 0.5 x 288.
  int narrow = 0, below_half = 0;
  for (const ModelConfig& c : random_architectures(stories15m_shape(), 40, 3)) {
    EXPECT_EQ(c.hidden_size % 8, 0) << c.hidden_size;
    EXPECT_GE(c.hidden_size, 120);
    EXPECT_LE(c.hidden_size, 288);
    narrow += c.hidden_size < 288;
    below_half += c.hidden_size < 144;
  }
  EXPECT_GE(narrow, 12);
  EXPECT_GE(below_half, 2);
}

// ---------------------------------------------------------------------------------------------
// Differentiable expected cost.


namespace {
struct SearchSpace {
  ModelConfig base = ModelConfig::uniform(1000, 256, 2, layer(8, 2, 32, 512));
  std::vector<std::vector<LayerConfig>> attn, ffn;
  std::vector<int64_t> hidden{256, 192};
  SearchSpace() {
    for (int i = 0; i < 2; ++i) {
      attn.push_back({layer(8, 2, 32, 512), layer(4, 2, 32, 512), layer(2, 1, 32, 512), layer(0, 0, 0, 512)});
      ffn.push_back({layer(8, 2, 32, 512), layer(8, 2, 32, 256), layer(8, 2, 32, 100), layer(8, 2, 32, 0)});
    }
  }
};
Scenario gpu_scenario() {
  Workload w;
  w.weight_dtype = w.kv_cache_dtype = "bf16";
  w.batch_size = 4;
  return scenario("l40s", "tensorrt-llm", w);
}
}  // namespace

TEST(ExpectedCost, OneHotEqualsPredictOfThatArchitecture) {
  SearchSpace sp;
  Scenario s = gpu_scenario();
  ChoiceTables t = build_choice_tables(sp.base, sp.attn, sp.ffn, sp.hidden, s, nullptr);
  auto onehot = [](int64_t n, int64_t k) { return at::one_hot(at::tensor(k), n).view({n}).to(at::kDouble); };
  // Layer 0: attention H4/G2, FFN 100; layer 1: attention removed, FFN 256; hidden 192.
  ExpectedCost e = expected_cost(t, onehot(2, 1), {onehot(4, 1), onehot(4, 3)},
                                 {onehot(4, 2), onehot(4, 1)});
  ModelConfig c = sp.base;
  c.hidden_size = 192;
  c.layers = {layer(4, 2, 32, 100), layer(0, 0, 0, 256)};
  CostEstimate want = predict(c, s, nullptr);
  EXPECT_NEAR(e.ttft_ms.item<double>(), want.ttft_ms, 1e-9 * want.ttft_ms);
  EXPECT_NEAR(e.tpot_ms.item<double>(), want.tpot_ms, 1e-9 * want.tpot_ms);
  EXPECT_NEAR(e.peak_memory_bytes.item<double>(), double(want.peak_memory_bytes), 1.0);
  EXPECT_NEAR(e.throughput_tokens_per_s.item<double>(), want.throughput_tokens_per_s,
              1e-9 * want.throughput_tokens_per_s);
}

TEST(ExpectedCost, GradientsMatchFiniteDifferences) {
  SearchSpace sp;
  ChoiceTables t = build_choice_tables(sp.base, sp.attn, sp.ffn, sp.hidden, gpu_scenario(), nullptr);
  at::manual_seed(11);
  std::vector<at::Tensor> logits = {at::randn({2}, at::kDouble)};
  for (int i = 0; i < 4; ++i) logits.push_back(at::randn({4}, at::kDouble));
  auto cost = [&](const std::vector<at::Tensor>& lg) {
    ExpectedCost e = expected_cost(t, at::softmax(lg[0], 0), {at::softmax(lg[1], 0), at::softmax(lg[2], 0)},
                                   {at::softmax(lg[3], 0), at::softmax(lg[4], 0)});
    // One scalar mixing every output, each scaled to O(1).
    return e.tpot_ms / 0.01 + e.ttft_ms / 0.1 + e.peak_memory_bytes / 1e9;
  };
  for (auto& l : logits) l.requires_grad_(true);
  cost(logits).backward();
  double worst = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    for (int64_t k = 0; k < logits[i].size(0); ++k) {
      std::vector<at::Tensor> plus, minus;
      for (const auto& l : logits) {
        plus.push_back(l.detach().clone());
        minus.push_back(l.detach().clone());
      }
      const double h = 1e-6;
      plus[i][k] += h;
      minus[i][k] -= h;
      double fd = (cost(plus).item<double>() - cost(minus).item<double>()) / (2 * h);
      double ad = logits[i].grad()[k].item<double>();
      worst = std::max(worst, std::fabs(fd - ad) / std::max(1.0, std::fabs(fd)));
    }
  EXPECT_LT(worst, 1e-6) << "largest relative difference autograd vs finite differences";
}
