// The sparse MoE forward (model/moe_model.h) judged by transformers' own Qwen3MoeForCausalLM and
// MixtralForCausalLM. The fixtures of tests/golden/hf-moe/ are tiny random models that
// tests/golden/hf_golden_moe.py built and saved with save_pretrained, with the logits
// transformers computed from them in float32 on the CPU (pinned versions in
// tests/golden/requirements-hf.txt); regenerate them with
//   HF_HUB_OFFLINE=1 python3 tests/golden/hf_golden_moe.py
// Only the committed files are read here: no Python, no network.
//
//   RouterPicksTopKByHand, RouterRejectsBadK: the router on numbers worked out by hand;
//   FixturesCoverBothFamiliesAndOptions: Qwen3-MoE and Mixtral, top-2 and top-3, norm_topk_prob
//     on and off, dense layers by mlp_only_layers and by decoder_sparse_step, GQA, tied and
//     untied heads, fp32 and bf16 in shards;
//   PrefillMatchesTransformers, KvCacheDecodeMatchesTransformers: as tests/test_hf_golden.cpp;
//   NormTopkProbChangesTheLogits: the goldens tell a renormalized top-k from a raw one;
//   SlidingWindowIsRefusedPastItsLength: Qwen3-MoE's window (tests/golden/hf-moe-refused/);
//   FusedExpertsLoadTheSame: transformers 5's in-memory layout (experts.gate_up_proj,
//     experts.down_proj) loads to the same logits as the per-expert tensors on disk;
//   refusals: the dense loader, a field changing the computation, a missing expert.
//
// Tolerance: max |ours - transformers| / max |transformers| <= kTolerance, the dense goldens'
// bound (tests/test_hf_golden.cpp): float32 on both sides from the same weights. The fixtures'
// routers keep every top-k choice at least 1e-4 in probability from a tie (hf_golden_moe.py
// checks it), so rounding cannot pick other experts; a wrong routing moves logits by far more.
#include <fmt/format.h>

#include <cstdio>
#include <optional>
#include <set>
#include <vector>

#include "common/error.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/moe_model.h"
#include "golden_fixture.h"
#include "test_util.h"

using namespace ac;
using ac::test::TempDir;

namespace {

constexpr double kTolerance = 1e-5;

fs::path golden_root() { return ac::test::source_dir() / "tests/golden/hf-moe"; }
std::vector<fs::path> fixture_dirs() { return ac::test::golden_fixture_dirs(golden_root()); }
double relative_diff(const at::Tensor& ours, const at::Tensor& theirs, const std::string& what) {
  return ac::test::golden_relative_diff(ours, theirs, what, "moe-golden");
}

// The rows' first positions[0] + 1 tokens as a prefill, then one token a step, as
// tests/test_hf_golden.cpp decode_steps. Returns [B, N, V].
at::Tensor decode_steps(const MoeModel& m, const at::Tensor& tokens, const at::Tensor& positions) {
  const int64_t B = tokens.size(0), T = tokens.size(1), prefill = positions[0].item<int64_t>() + 1;
  KVCache cache = KVCache::allocate(m.config, B, T);
  std::vector<at::Tensor> steps{m.forward(tokens.narrow(1, 0, prefill), &cache, true)};
  for (int64_t t = prefill; t < T; ++t)
    steps.push_back(m.forward(tokens.narrow(1, t, 1), &cache, true));
  EXPECT_EQ(positions.size(0), int64_t(steps.size()));
  return at::cat(steps, 1);
}

// A copy of fixture `name` in a temporary folder, for variants.
void copy_fixture(const std::string& name, const fs::path& to) {
  for (const auto& e : fs::directory_iterator(golden_root() / name))
    fs::copy_file(e.path(), to / e.path().filename());
}

}  // namespace

// Router logits of two tokens over E = 4 experts, chosen so that the softmax is easy by hand:
// row 0 = log(0.1, 0.2, 0.3, 0.4): probabilities 0.1, 0.2, 0.3, 0.4; top-2 experts 3, 2 with
// weights 0.4, 0.3, or 4/7, 3/7 renormalized. Row 1 = log(0.5, 0.05, 0.25, 0.2): top-2 experts
// 0, 2 with 0.5, 0.25, or 2/3, 1/3 renormalized; top-3 adds expert 3 (0.2; renormalized over
// 0.95).
TEST(MoeGolden, RouterPicksTopKByHand) {
  const at::Tensor logits =
      at::log(at::tensor({0.1, 0.2, 0.3, 0.4, 0.5, 0.05, 0.25, 0.2}, at::kFloat)).view({2, 4});
  auto expect_close = [](const at::Tensor& got, std::vector<float> want) {
    ASSERT_EQ(got.numel(), int64_t(want.size()));
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got.flatten()[int64_t(i)].item<float>(), want[i], 1e-6) << i;
  };
  Routing raw = route_top_k(logits, 2, /*normalize=*/false);
  EXPECT_TRUE(at::equal(raw.experts, at::tensor({3, 2, 0, 2}, at::kLong).view({2, 2})));
  expect_close(raw.weights, {0.4f, 0.3f, 0.5f, 0.25f});
  Routing norm = route_top_k(logits, 2, /*normalize=*/true);
  EXPECT_TRUE(at::equal(norm.experts, raw.experts));
  expect_close(norm.weights, {4.f / 7, 3.f / 7, 2.f / 3, 1.f / 3});
  Routing top3 = route_top_k(logits, 3, /*normalize=*/true);
  EXPECT_TRUE(at::equal(top3.experts, at::tensor({3, 2, 1, 0, 2, 3}, at::kLong).view({2, 3})));
  expect_close(top3.weights, {0.4f / 0.9f, 0.3f / 0.9f, 0.2f / 0.9f, 0.5f / 0.95f,
                              0.25f / 0.95f, 0.2f / 0.95f});
}

// The block on the same routing: with identity-like experts the output is the weighted sum of
// each chosen expert's own output, computed here expert by expert.
TEST(MoeGolden, BlockSumsTheChosenExpertsByHand) {
  const int64_t N = 3, D = 4, E = 3, Fe = 2;
  at::Generator gen = at::detail::createCPUGenerator(7);
  auto draw = [&](std::vector<int64_t> shape) {
    return at::normal(0.0, 0.5, shape, gen, at::TensorOptions().dtype(at::kFloat));
  };
  MoeLayerWeights w{draw({E, D}), draw({E, Fe, D}), draw({E, Fe, D}), draw({E, D, Fe})};
  const at::Tensor h = draw({N, D});
  const at::Tensor out = moe_block(h, w, /*k=*/2, /*normalize=*/true);
  const Routing r = route_top_k(at::matmul(h, w.router.t()), 2, true);
  for (int64_t n = 0; n < N; ++n) {
    at::Tensor want = at::zeros({D});
    for (int64_t j = 0; j < 2; ++j) {
      const int64_t e = r.experts[n][j].item<int64_t>();
      const at::Tensor g = at::matmul(w.gate_proj[e], h[n]), u = at::matmul(w.up_proj[e], h[n]);
      want += r.weights[n][j] * at::matmul(w.down_proj[e], at::silu(g) * u);
    }
    EXPECT_LE((out[n] - want).abs().max().item<double>(), 1e-6) << "row " << n;
  }
}

TEST(MoeGolden, RouterRejectsBadK) {
  const at::Tensor logits = at::zeros({2, 4});
  ac::test::expect_error<ConfigError>([&] { route_top_k(logits, 5, true); },
                                      {"[route_top_k]", "k 5 (expected 1..E)"});
  ac::test::expect_error<ConfigError>([&] { route_top_k(logits, 0, true); },
                                      {"[route_top_k]", "k 0"});
}

TEST(MoeGolden, FixturesCoverBothFamiliesAndOptions) {
  std::set<std::string> families, seen;
  for (const fs::path& dir : fixture_dirs()) {
    const MoeModel m = load_moe_checkpoint(dir);
    const ModelConfig& c = m.config;
    families.insert(c.model_type);
    int64_t dense = 0;
    for (const LayerConfig& l : c.layers) {
      if (!l.has_moe()) {
        ++dense;
        continue;
      }
      seen.insert(fmt::format("top{}", l.moe->num_experts_per_tok));
      if (l.num_key_value_heads < l.num_attention_heads) seen.insert("gqa");
    }
    const nlohmann::json raw = read_json_file(dir / "config.json");
    if (dense && raw.contains("mlp_only_layers") && !raw["mlp_only_layers"].empty())
      seen.insert("mlp_only_layers");
    if (dense && raw.value("decoder_sparse_step", 1) > 1) seen.insert("decoder_sparse_step");
    if (c.model_type == "qwen3_moe") seen.insert(m.norm_topk_prob ? "norm_topk" : "raw_topk");
    seen.insert(c.tie_word_embeddings ? "tied" : "untied");
    seen.insert(c.torch_dtype);
    if (fs::exists(dir / "model.safetensors.index.json")) seen.insert("sharded");
  }
  EXPECT_EQ(families, (std::set<std::string>{"qwen3_moe", "mixtral"}));
  for (const char* option : {"top2", "top3", "gqa", "mlp_only_layers", "decoder_sparse_step",
                             "norm_topk", "raw_topk", "tied", "untied", "float32", "bfloat16",
                             "sharded"})
    EXPECT_TRUE(seen.count(option)) << "no fixture has " << option;
}

TEST(MoeGolden, PrefillMatchesTransformers) {
  init_torch_threads();
  at::NoGradGuard no_grad;
  const std::vector<fs::path> dirs = fixture_dirs();
  ASSERT_GE(dirs.size(), 4u) << golden_root();
  for (const fs::path& dir : dirs) {
    const std::string name = dir.filename().string();
    const MoeModel m = load_moe_checkpoint(dir);
    EXPECT_LE(relative_diff(m.forward(ac::test::read_golden_tokens(dir)), ac::test::read_golden_logits(dir, "prefill"),
                            name + " forward"),
              kTolerance)
        << name;
  }
}

TEST(MoeGolden, KvCacheDecodeMatchesTransformers) {
  init_torch_threads();
  at::NoGradGuard no_grad;
  for (const fs::path& dir : fixture_dirs()) {
    const std::string name = dir.filename().string();
    const MoeModel m = load_moe_checkpoint(dir);
    const at::Tensor ours = decode_steps(m, ac::test::read_golden_tokens(dir), ac::test::read_golden_logits(dir, "decode_positions"));
    EXPECT_LE(relative_diff(ours, ac::test::read_golden_logits(dir, "decode"), name + " decode"), kTolerance)
        << name;
  }
}

// The goldens see the routing: the top-3 Qwen3-MoE fixture renormalized, as it is not, is far
// outside the tolerance.
TEST(MoeGolden, NormTopkProbChangesTheLogits) {
  at::NoGradGuard no_grad;
  const fs::path dir = golden_root() / "qwen3moe-top3-step2-bf16-sharded";
  MoeModel m = load_moe_checkpoint(dir);
  ASSERT_FALSE(m.norm_topk_prob);
  m.norm_topk_prob = true;
  EXPECT_GT(relative_diff(m.forward(ac::test::read_golden_tokens(dir)), ac::test::read_golden_logits(dir, "prefill"),
                          "qwen3moe-top3 renormalized (wrong)"),
            1e3 * kTolerance);
}

// Qwen3-MoE with use_sliding_window slides every layer (no layer_types or max_window_layers,
// unlike Qwen3): window 6 over rows of 10, the first 6 positions match transformers and more are
// refused rather than computed with full attention.
TEST(MoeGolden, SlidingWindowIsRefusedPastItsLength) {
  at::NoGradGuard no_grad;
  const fs::path dir = ac::test::source_dir() / "tests/golden/hf-moe-refused/qwen3moe-sliding-window";
  const MoeModel m = load_moe_checkpoint(dir);
  ASSERT_EQ(m.config.sliding_window, std::optional<int64_t>(6));
  const at::Tensor tokens = ac::test::read_golden_tokens(dir), theirs = ac::test::read_golden_logits(dir, "prefill");
  EXPECT_LE(relative_diff(m.forward(tokens.narrow(1, 0, 6)), theirs.narrow(1, 0, 6),
                          "qwen3moe-sliding-window first 6"),
            kTolerance);
  ac::test::expect_error<ConfigError>(
      [&] { m.forward(tokens); },
      {"config.json sliding_window 6", "model_type qwen3_moe",
       "expected at most 6 positions, found 10"});
  MoeModel unwindowed = m;
  unwindowed.config.sliding_window.reset();
  EXPECT_GT(relative_diff(unwindowed.forward(tokens).narrow(1, 6, 4), theirs.narrow(1, 6, 4),
                          "qwen3moe-sliding-window past 6, no window"),
            1e3 * kTolerance);
}

// transformers 5 holds the experts fused (conversion_mapping.py): [E, 2 Fe, D] gate rows then
// up rows, and [E, D, Fe]; a checkpoint written in that layout gives the same model.
TEST(MoeGolden, FusedExpertsLoadTheSame) {
  at::NoGradGuard no_grad;
  for (const char* name : {"qwen3moe-top2-fp32", "mixtral-top2-fp32"}) {
    const fs::path dir = golden_root() / name;
    const MoeModel per_expert = load_moe_checkpoint(dir);
    const ModelConfig& c = per_expert.config;
    const bool mixtral = c.model_type == "mixtral";
    TensorMap fused;
    for (const auto& [key, t] : load_safetensors_dir(dir))
      if (key.find(".experts.") == std::string::npos && key.find(".gate.weight") == std::string::npos)
        fused[key] = t;
    for (int64_t i = 0; i < c.num_layers(); ++i) {
      if (!c.layers[size_t(i)].has_moe()) continue;
      const MoeLayerWeights& w = per_expert.moe[size_t(i)];
      const std::string p = fmt::format("model.layers.{}.mlp.", i);
      fused[p + "gate.weight"] = w.router;
      fused[p + "experts.gate_up_proj"] = at::cat({w.gate_proj, w.up_proj}, 1);
      fused[p + "experts.down_proj"] = w.down_proj;
    }
    const MoeModel back = moe_model_from_tensor_map(c, fused, "fused");
    const at::Tensor tokens = ac::test::read_golden_tokens(dir);
    EXPECT_TRUE(at::equal(back.forward(tokens), per_expert.forward(tokens)))
        << name << (mixtral ? " (Mixtral, renamed from block_sparse_moe)" : "");
  }
}

// The dense loader and the stages built on it keep refusing MoE models with one clear error.
TEST(MoeGolden, DenseLoaderRefusesMoe) {
  const fs::path dir = golden_root() / "mixtral-top2-fp32";
  ac::test::expect_error<ConfigError>(
      [&] { load_checkpoint(dir); },
      {"has Mamba-2, MoE or relu² layers", "model_type mixtral"});
}

TEST(MoeGolden, UnimplementedFieldsAndMissingExpertsAreRefused) {
  {
    TempDir tmp;
    copy_fixture("qwen3moe-top2-fp32", tmp.path);
    nlohmann::json config = read_json_file(tmp.path / "config.json");
    config["attention_bias"] = true;
    write_json_file(tmp.path / "config.json", config);
    ac::test::expect_error<ConfigError>([&] { load_moe_checkpoint(tmp.path); },
                                        {"[load_moe_model]", "attention_bias true",
                                         "model_type qwen3_moe"});
  }
  {
    TempDir tmp;
    copy_fixture("qwen3moe-top2-fp32", tmp.path);
    nlohmann::json config = read_json_file(tmp.path / "config.json");
    config["norm_topk_prob"] = "yes";
    write_json_file(tmp.path / "config.json", config);
    ac::test::expect_error<FormatError>(
        [&] { load_moe_checkpoint(tmp.path); },
        {"field 'norm_topk_prob' has the wrong type or range: found \"yes\""});
  }
  const fs::path dir = golden_root() / "mixtral-top2-fp32";
  const MoeModel m = load_moe_checkpoint(dir);
  TensorMap tensors = load_safetensors_dir(dir);
  tensors.erase("model.layers.1.block_sparse_moe.experts.4.w3.weight");
  ac::test::expect_error<FormatError>(
      [&] { moe_model_from_tensor_map(m.config, tensors, "model.safetensors"); },
      {"missing tensor 'model.layers.1.block_sparse_moe.experts.4.w3.weight'",
       "from config.json intermediate_size"});
  tensors = load_safetensors_dir(dir);
  tensors["model.layers.0.block_sparse_moe.experts.5.w1.weight"] = at::zeros({18, 28});
  ac::test::expect_error<FormatError>(
      [&] { moe_model_from_tensor_map(m.config, tensors, "model.safetensors"); },
      {"tensor model.layers.0.block_sparse_moe.experts.5.w1.weight has no place",
       "model_type mixtral"});
}
