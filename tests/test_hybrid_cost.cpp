// The cost model's hybrid layer kinds (hardware/mamba2_cost.h, hardware/moe_cost.h) by hand on
// tiny configs: the Mamba-2 state and the KV cache of the attention layers alone, an MoE decode
// step that reads only the experts its rows touch, the expected number of those experts; the
// Mamba-2 layer's decode does not grow with the context and its prefill grows linearly; and the
// arithmetic of Nemotron 3 Super on one B200 (120.7B BF16 weights = 241 GB, 8 KiB of KV cache a
// token, 162 MiB of Mamba-2 state a sequence).
#include "common/error.h"
#include "hardware/cost_model.h"
#include "hardware/mamba2_cost.h"
#include "hardware/moe_cost.h"
#include "hardware/validate.h"
#include "hybrid_fixture.h"
#include "test_paths.h"
#include "test_support.h"

using namespace ac;
using json = nlohmann::json;

namespace {

Scenario gpu_scenario(const std::string& engine, int64_t B, int64_t prompt, int64_t output) {
  json j = {{"name", "hybrid-test"}, {"device", "b200"}, {"engine", engine},
            {"workload", {{"prompt_tokens", prompt}, {"output_tokens", output},
                          {"batch_size", B}, {"weight_dtype", "bf16"},
                          {"kv_cache_dtype", "bf16"}}}};
  return scenario_from_json(j, "hybrid-test.json", test::source_dir());
}

ModelConfig super_config() {
  return read_architecture(test::source_dir() / "architectures/nemotron-3-super-120b-a12b.json");
}

}  // namespace

// B = 3 sequences of 100 + 28 tokens on vLLM (16-token blocks: capacity 128).
// Mamba-2 state a sequence: conv (3 - 1) * 44 values * 2 bytes + SSM 4 * 6 * 5 values * 4 bytes
// (float32) = 176 + 480 = 656; x3 = 1968, in layer 0 only. KV cache: the attention layer alone,
// 2 (k, v) * 3 * (2 * 8) * 128 * 2 bytes = 24576. Weights: 8882 parameters * 2 bytes.
TEST(HybridCost, StateAndKvCacheByHand) {
  const ModelConfig c = config_from_hf_json(test::tiny_nemotron_h(), "tiny.json");
  EXPECT_EQ(mamba2_state_bytes_per_sequence(*c.layers[0].mamba, 2.0), 656);
  const CostEstimate e = predict(c, gpu_scenario("vllm", 3, 100, 28), nullptr);
  EXPECT_EQ(e.state_bytes, 1968);
  EXPECT_EQ(e.layer_state_bytes, (std::vector<int64_t>{1968, 0, 0, 0}));
  EXPECT_EQ(e.kv_cache_bytes, 24576);
  EXPECT_EQ(e.layer_kv_cache_bytes, (std::vector<int64_t>{0, 24576, 0, 0}));
  EXPECT_EQ(e.weight_bytes, 8882 * 2);
  EXPECT_EQ(e.peak_memory_bytes,
            e.weight_bytes + e.kv_cache_bytes + e.state_bytes + e.activation_bytes + e.reserve_bytes);
}

// E (1 - (1 - k/E)^n): E 4, k 2: one row touches 2, two rows 4 * (1 - 1/4) = 3.
TEST(HybridCost, ExpectedDistinctExperts) {
  EXPECT_DOUBLE_EQ(expected_distinct_experts(4, 2, 0), 0.0);
  EXPECT_DOUBLE_EQ(expected_distinct_experts(4, 2, 1), 2.0);
  EXPECT_DOUBLE_EQ(expected_distinct_experts(4, 2, 2), 3.0);
  EXPECT_NEAR(expected_distinct_experts(512, 22, 4), 512 * (1 - std::pow(490.0 / 512, 4)), 1e-9);
  EXPECT_NEAR(expected_distinct_experts(8, 2, 1e6), 8.0, 1e-12);
  test::expect_error<ConfigError>([] { expected_distinct_experts(4, 5, 1); },
                                  {"expected_distinct_experts", "k 5, E 4"});
}

// One MoE layer (D 64, E 8, k 2, relu² experts of 32, no shared expert, no latent) in a decode
// step on a B200 under vLLM (CUDA graphs: 1 us a kernel; add + rmsnorm fused): bandwidth
// 8e12 * 0.8 B/s, every op here bound by bytes. B = 1: rmsnorm 64 * 2 * 2 = 256 B; router
// 8 * 64 * 2 + (64 + 8) * 2 = 1168 B; top-k 8 * 2 * 2 = 32 B; the experts: 2 touched of 8 (1 row,
// k 2) * 2 * 64 * 32 * 2 B = 16384 B + the row's k copies 2 * (2 * 64 + 2 * 32) * 2 = 768 B;
// 1 + 1 + 1 + 4 kernels. B = 2: 3.5 experts touched (8 (1 - (6/8)^2)).
TEST(HybridCost, MoeDecodeReadsTheTouchedExpertsByHand) {
  json j = test::tiny_nemotron_h();
  j["hybrid_override_pattern"] = "E";
  j["hidden_size"] = 64;
  j["n_routed_experts"] = 8;
  j["moe_intermediate_size"] = 32;
  j["n_shared_experts"] = 0;
  j["moe_latent_size"] = nullptr;
  const ModelConfig c = config_from_hf_json(j, "moe.json");
  const double bw = 8e12 * 0.8, launch_ms = 1e-3;
  const PartCost one = moe_part_cost(c, c.layers[0], gpu_scenario("vllm", 1, 64, 2), nullptr);
  EXPECT_NEAR(one.tpot_ms, 7 * launch_ms + (256 + 1168 + 32 + 16384 + 768) / bw * 1e3, 1e-12);
  const PartCost two = moe_part_cost(c, c.layers[0], gpu_scenario("vllm", 2, 64, 2), nullptr);
  const double bytes2 = 512 + (1024 + 2 * 72 * 2) + 64 + 3.5 * 8192 + 2 * 2 * 192 * 2;
  EXPECT_NEAR(two.tpot_ms, 7 * launch_ms + bytes2 / bw * 1e3, 1e-12);
  // Memory holds all 8 experts: (8 * 2 * 64 * 32 + router 8 * 64 + bias 8 + norm 64) * 2 bytes.
  EXPECT_EQ(one.weight_bytes, (8 * 2 * 64 * 32 + 8 * 64 + 8 + 64) * 2);
}

// The tiny Mamba-2 layer (D 16, nh 4 x P 6, N 5, groups 2, conv 3: d_inner 24, conv_dim 44,
// in_proj 72) in a decode step of B = 1 on a B200 under vLLM (1 us a kernel in the CUDA graph,
// add + rmsnorm fused), every op bound by bytes: rmsnorm 16 * 2 * 2 = 64; in_proj 72 * 16 * 2 +
// (16 + 72) * 2 = 2480; conv 44 * 2 * 2 (in, out) + the conv state (3 - 1) * 44 * 2 read and
// written = 528; the recurrence: x, B, C, dt, y (2 * 24 + 2 * 2 * 5 + 4) * 2 = 144 + the fp32
// state 4 * 6 * 5 * 4 read and written = 960; gated norm 24 * 2 * 3 = 144; out_proj 16 * 24 * 2
// + (24 + 16) * 2 = 848; 6 kernels.
TEST(HybridCost, MambaDecodeByHand) {
  const ModelConfig c = config_from_hf_json(test::tiny_nemotron_h(), "tiny.json");
  const PartCost p = mamba2_part_cost(c, c.layers[0], gpu_scenario("vllm", 1, 64, 2), nullptr);
  const double bytes = 64 + 2480 + 528 + 144 + 960 + 144 + 848;
  EXPECT_NEAR(p.tpot_ms, 6 * 1e-3 + bytes / (8e12 * 0.8) * 1e3, 1e-12);
  EXPECT_EQ(p.weight_bytes, 1764 * 2);
  EXPECT_EQ(p.kv_cache_bytes, 0);
  EXPECT_EQ(p.state_bytes, 656);
  // The prefill of T = 16 tokens (4 us a kernel outside the graph), still bound by bytes:
  // rmsnorm 16 * 16 * 2 * 2 = 1024; in_proj 72 * 16 * 2 + (16 * 16 + 16 * 72) * 2 = 5120; conv
  // 2 * 16 * 44 * 2 = 2816; the scan in chunks of Q = 8: x, B, C, dt, y 16 * 72 * 2 = 2304, the
  // 2 chunk states 120 * 4 written and read = 1920, the final state 480 (5 kernels); gated norm
  // 16 * 24 * 2 * 3 = 2304; out_proj 16 * 24 * 2 + (16 * 24 + 16 * 16) * 2 = 2048; 10 kernels.
  const PartCost q = mamba2_part_cost(c, c.layers[0], gpu_scenario("vllm", 1, 16, 2), nullptr);
  const double prefill = 1024 + 5120 + 2816 + (2304 + 1920 + 480) + 2304 + 2048;
  EXPECT_NEAR(q.ttft_ms, 10 * 4e-3 + prefill / (8e12 * 0.8) * 1e3, 1e-12);
}

// A Mamba-2 layer's decode step reads a state that does not grow with the context; an attention
// layer's reads the KV cache, which does. Its prefill grows linearly in T (the chunked scan),
// the attention's faster (the causal T^2 term).
TEST(HybridCost, MambaDecodeConstantPrefillLinear) {
  const ModelConfig c = super_config();
  const LayerConfig& mamba = c.layers[0];
  const LayerConfig& attention = c.layers[7];
  ASSERT_TRUE(mamba.has_mamba());
  ASSERT_TRUE(attention.has_attention());
  const Scenario short_ctx = gpu_scenario("tensorrt-llm", 4, 8192, 64);
  const Scenario long_ctx = gpu_scenario("tensorrt-llm", 4, 131072, 64);
  EXPECT_DOUBLE_EQ(attention_part_cost(c, mamba, short_ctx, nullptr).tpot_ms,
                   attention_part_cost(c, mamba, long_ctx, nullptr).tpot_ms);
  EXPECT_GT(attention_part_cost(c, attention, long_ctx, nullptr).tpot_ms,
            3 * attention_part_cost(c, attention, short_ctx, nullptr).tpot_ms);
  const Scenario half = gpu_scenario("tensorrt-llm", 4, 65536, 64);
  const double ratio = attention_part_cost(c, mamba, long_ctx, nullptr).ttft_ms /
                       attention_part_cost(c, mamba, half, nullptr).ttft_ms;
  EXPECT_NEAR(ratio, 2.0, 0.05);
  EXPECT_GT(attention_part_cost(c, attention, long_ctx, nullptr).ttft_ms,
            2.5 * attention_part_cost(c, attention, half, nullptr).ttft_ms);
}

// Nemotron 3 Super on scenarios/b200-128k.json (4 x 131072 tokens, BF16, TensorRT-LLM's 64-token
// blocks): 120,668,707,840 parameters x 2 bytes = 241.3 GB of weights, over the B200's 180 GB;
// KV cache 8 attention layers x 2 (k, v) x 2 KV heads x 128 x 2 bytes = 8 KiB a token (1 GiB a
// 131072-token sequence); Mamba-2 state 40 x (128 * 64 * 128 * 4 + 3 * 10240 * 2) bytes =
// 162.34375 MiB a sequence, whatever the context.
TEST(HybridCost, NemotronSuperOnOneB200) {
  const ModelConfig c = super_config();
  const Scenario s = find_scenario("b200-128k", test::source_dir());
  const CostEstimate e = predict(c, s, nullptr);
  EXPECT_EQ(e.weight_bytes, int64_t(120668707840) * 2);
  const int64_t B = s.workload.batch_size, capacity = 131072;
  EXPECT_EQ(e.kv_cache_bytes, 8192 * B * capacity);
  for (int64_t i = 0; i < c.num_layers(); ++i)
    EXPECT_EQ(e.layer_kv_cache_bytes[size_t(i)] > 0, c.layers[size_t(i)].has_attention()) << i;
  EXPECT_EQ(e.state_bytes, B * 170229760);
  EXPECT_DOUBLE_EQ(double(e.state_bytes) / double(B) / double(1 << 20), 162.34375);
  EXPECT_GT(e.peak_memory_bytes, *s.limits.peak_memory_bytes);
  EXPECT_NE(check_limits(e, s.limits).find("peak_memory_bytes"), std::string::npos);
}

// The native engine is costed from a profile's tables, which hold no Mamba-2 or MoE op.
TEST(HybridCost, ProfileTablesRefuseHybridLayers) {
  const ModelConfig c = config_from_hf_json(test::tiny_nemotron_h(), "tiny.json");
  Profile p;
  p.identity.device = "b200";
  const Scenario s = gpu_scenario("native", 1, 16, 4);
  test::expect_error<ConfigError>([&] { mamba2_part_cost(c, c.layers[0], s, &p); },
                                  {"op tables", "Mamba-2", "roofline"});
  test::expect_error<ConfigError>([&] { moe_part_cost(c, c.layers[3], s, &p); },
                                  {"op tables", "MoE"});
}
