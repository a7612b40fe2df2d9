// The Nemotron-H forward (model/nemotron_h_model.h, model/mamba2_mixer.h) judged by
// transformers' own NemotronHForCausalLM on its PyTorch path. The fixtures of
// tests/golden/hf-nemotron-h/ are tiny random hybrids that tests/golden/hf_golden_nemotron_h.py
// built and saved with save_pretrained, with the logits transformers computed from them in
// float32 on the CPU (pinned versions in tests/golden/requirements-hf.txt); regenerate them with
//   HF_HUB_OFFLINE=1 python3 tests/golden/hf_golden_nemotron_h.py
// Only the committed files are read here: no Python, no network.
//
//   SsdRecurrenceByHand, SsdScanMatchesAPlainLoop: the Mamba-2 recurrence on numbers worked out
//     by hand, and on random ones against scalar loops in double;
//   SigmoidRouterByHand, SigmoidRouterRejectsBadOptions: the router with its correction bias,
//     groups, normalisation and scaling on numbers worked out by hand;
//   FixturesCoverEveryLayerKindAndOption: M, *, - and E layers, n_groups > 1, conv and
//     projection biases, latent MoE, expert groups, fp32 and bf16 in shards;
//   PrefillMatchesTransformers, DecodeMatchesTransformers: one forward over the rows, and a
//     prefill then one token a step through NemotronHCache (transformers' decode through its
//     own cache);
//   TwoPrefillsThroughTheCacheMatch: a block of several tokens continuing a cache (the conv
//     state and the SSM state carried into a multi-token forward);
//   CorrectionBiasChangesTheLogits: the goldens see e_score_correction_bias;
//   refusals: the dense loader, fields changing the computation, a missing or extra tensor.
//
// Tolerance: max |ours - transformers| / max |transformers| <= kTolerance, the dense goldens'
// bound (tests/test_hf_golden.cpp). transformers' prefill runs the chunked SSD scan
// (mamba2_chunk_scan), ours the sequential recurrence: the same sums in another order, in fp32.
// The routers keep every top-k choice at least 1e-4 from a tie (hf_golden_nemotron_h.py checks
// it), so rounding cannot pick other experts.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <set>
#include <vector>

#include "common/error.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "io/checkpoint.h"
#include "io/nemotron_h_checkpoint.h"
#include "io/safetensors.h"
#include "model/nemotron_h_config.h"
#include "model/nemotron_h_model.h"
#include "golden_fixture.h"
#include "test_util.h"

using namespace ac;
using ac::test::TempDir;

namespace {

constexpr double kTolerance = 1e-5;

fs::path golden_root() { return ac::test::source_dir() / "tests/golden/hf-nemotron-h"; }
std::vector<fs::path> fixture_dirs() { return ac::test::golden_fixture_dirs(golden_root()); }
double relative_diff(const at::Tensor& ours, const at::Tensor& theirs, const std::string& what) {
  return ac::test::golden_relative_diff(ours, theirs, what, "nemotron-h-golden");
}

// The rows' first positions[0] + 1 tokens as a prefill, then one token a step, as
// tests/test_hf_golden.cpp decode_steps. Returns [B, N, V].
at::Tensor decode_steps(const NemotronHModel& m, const at::Tensor& tokens,
                        const at::Tensor& positions) {
  const int64_t B = tokens.size(0), T = tokens.size(1), prefill = positions[0].item<int64_t>() + 1;
  NemotronHCache cache = NemotronHCache::allocate(m.config, B, T);
  std::vector<at::Tensor> steps{m.forward(tokens.narrow(1, 0, prefill), &cache, true)};
  for (int64_t t = prefill; t < T; ++t)
    steps.push_back(m.forward(tokens.narrow(1, t, 1), &cache, true));
  EXPECT_EQ(positions.size(0), int64_t(steps.size()));
  return at::cat(steps, 1);
}

void copy_fixture(const std::string& name, const fs::path& to) {
  for (const auto& e : fs::directory_iterator(golden_root() / name))
    fs::copy_file(e.path(), to / e.path().filename());
}

// A fixture's copy with config.json field `field` set to `value`.
void expect_config_refused(const std::string& field, const nlohmann::json& value,
                           const std::vector<std::string>& needles) {
  TempDir tmp;
  copy_fixture("nemotronh-mix-fp32", tmp.path);
  nlohmann::json config = read_json_file(tmp.path / "config.json");
  config[field] = value;
  write_json_file(tmp.path / "config.json", config);
  ac::test::expect_error<ConfigError>([&] { load_nemotron_h_checkpoint(tmp.path); }, needles);
}

}  // namespace

// One head of width P = 1, state N = 1, one group: dt = 1 and A = -log 2 halve the state each
// step, x = B = C = 1 add 1: states 1, 1.5, 1.75; with D = 0.5, y = state + 0.5.
TEST(NemotronHGolden, SsdRecurrenceByHand) {
  const at::Tensor ones = at::ones({1, 3, 1, 1});
  const at::Tensor dt = at::ones({1, 3, 1});
  const at::Tensor A = at::full({1}, -std::log(2.0), at::kFloat);
  at::Tensor state = at::zeros({1, 1, 1, 1});
  const at::Tensor y = ssd_scan(ones, dt, A, ones, ones, at::full({1}, 0.5f), state);
  const std::vector<float> want = {1.5f, 2.0f, 2.25f};
  for (int64_t t = 0; t < 3; ++t) EXPECT_NEAR(y[0][t][0][0].item<float>(), want[size_t(t)], 1e-6);
  EXPECT_NEAR(state.item<float>(), 1.75f, 1e-6);
  // Continuing from that state: one more step is 0.875 + 1.
  const at::Tensor y4 = ssd_scan(ones.narrow(1, 0, 1), dt.narrow(1, 0, 1), A,
                                 ones.narrow(1, 0, 1), ones.narrow(1, 0, 1), at::zeros({1}), state);
  EXPECT_NEAR(y4.item<float>(), 1.875f, 1e-6);
}

// Random inputs, 4 heads in 2 groups: ssd_scan against the recurrence written as scalar loops in
// double, state_t[h][p][n] = exp(dt A_h) state_{t-1}[h][p][n] + dt x[h][p] B[g(h)][n].
TEST(NemotronHGolden, SsdScanMatchesAPlainLoop) {
  const int64_t Bt = 2, T = 5, nh = 4, P = 3, N = 2, Gm = 2;
  at::manual_seed(3);
  const at::Tensor x = at::randn({Bt, T, nh, P}), Bm = at::randn({Bt, T, Gm, N}),
                   Cm = at::randn({Bt, T, Gm, N}), D = at::randn({nh}),
                   dt = at::softplus(at::randn({Bt, T, nh})), A = -at::rand({nh}) - 0.1;
  const at::Tensor s0 = at::randn({Bt, nh, P, N});
  at::Tensor state = s0.clone();
  const at::Tensor y = ssd_scan(x, dt, A, Bm, Cm, D, state);
  const auto X = x.to(at::kDouble), Bd = Bm.to(at::kDouble), Cd = Cm.to(at::kDouble),
             Dd = D.to(at::kDouble), dtd = dt.to(at::kDouble), Ad = A.to(at::kDouble);
  double worst = 0;
  for (int64_t b = 0; b < Bt; ++b)
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t g = h / (nh / Gm);
      std::vector<double> s(size_t(P * N));
      for (int64_t i = 0; i < P * N; ++i) s[size_t(i)] = s0[b][h][i / N][i % N].item<double>();
      for (int64_t t = 0; t < T; ++t) {
        const double d = dtd[b][t][h].item<double>(), decay = std::exp(d * Ad[h].item<double>());
        for (int64_t p = 0; p < P; ++p) {
          double out = Dd[h].item<double>() * X[b][t][h][p].item<double>();
          for (int64_t n = 0; n < N; ++n) {
            double& v = s[size_t(p * N + n)];
            v = decay * v + d * X[b][t][h][p].item<double>() * Bd[b][t][g][n].item<double>();
            out += v * Cd[b][t][g][n].item<double>();
          }
          worst = std::max(worst, std::abs(out - y[b][t][h][p].item<double>()));
        }
      }
      for (int64_t i = 0; i < P * N; ++i)
        worst = std::max(worst, std::abs(s[size_t(i)] - state[b][h][i / N][i % N].item<double>()));
    }
  std::printf("[nemotron-h-golden] ssd_scan vs loop in double: largest |diff| %.3g\n", worst);
  EXPECT_LE(worst, 1e-5);
}

// Scores are sigmoids: logits log(p / (1 - p)) give the scores p.
// Row 0: scores (0.2, 0.6, 0.5, 0.9), correction bias (0.5, 0, 0, -0.5): biased (0.7, 0.6, 0.5,
// 0.4) choose experts 0, 1 (unbiased, 3 and 1 would win), weighted by the unbiased 0.2, 0.6:
// 0.25, 0.75 normalised, times routed_scaling_factor 2: 0.5, 1.5.
// Row 1: scores (0.9, 0.1, 0.6, 0.7), biased (1.4, 0.1, 0.6, 0.2): experts 0, 2 with 0.9, 0.6.
TEST(NemotronHGolden, SigmoidRouterByHand) {
  auto logits_of = [](std::vector<double> p) {
    at::Tensor t = at::tensor(p, at::kDouble);
    return at::log(t / (1 - t)).to(at::kFloat);
  };
  const at::Tensor logits =
      logits_of({0.2, 0.6, 0.5, 0.9, 0.9, 0.1, 0.6, 0.7}).view({2, 4});
  const at::Tensor bias = at::tensor({0.5, 0.0, 0.0, -0.5}, at::kFloat);
  auto expect_close = [](const at::Tensor& got, std::vector<float> want) {
    ASSERT_EQ(got.numel(), int64_t(want.size()));
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got.flatten()[int64_t(i)].item<float>(), want[i], 1e-6) << i;
  };
  SigmoidRouterOptions o;
  o.top_k = 2;
  o.norm_topk_prob = true;
  o.routed_scaling_factor = 2.0;
  Routing r = route_sigmoid(logits, bias, o);
  EXPECT_TRUE(at::equal(r.experts, at::tensor({0, 1, 0, 2}, at::kLong).view({2, 2})));
  expect_close(r.weights, {0.5f, 1.5f, 2 * 0.9f / 1.5f, 2 * 0.6f / 1.5f});
  o.norm_topk_prob = false;
  o.routed_scaling_factor = 1.0;
  r = route_sigmoid(logits, bias, o);
  expect_close(r.weights, {0.2f, 0.6f, 0.9f, 0.6f});
  // Without the bias, row 0 picks 3 and 1.
  r = route_sigmoid(logits, at::zeros({4}), o);
  EXPECT_TRUE(at::equal(r.experts[0], at::tensor({3, 1}, at::kLong)));
  // Groups {0, 1} and {2, 3}, one kept. Row 0: biased group sums 1.3 and 0.9 keep {0, 1};
  // row 1: 1.5 and 0.8 keep {0, 1}, so expert 2 (biased 0.6) loses to expert 1 (0.1).
  o.n_group = 2;
  o.topk_group = 1;
  r = route_sigmoid(logits, bias, o);
  EXPECT_TRUE(at::equal(r.experts, at::tensor({0, 1, 0, 1}, at::kLong).view({2, 2})));
  expect_close(r.weights, {0.2f, 0.6f, 0.9f, 0.1f});
}

TEST(NemotronHGolden, SigmoidRouterRejectsBadOptions) {
  const at::Tensor logits = at::zeros({2, 4});
  SigmoidRouterOptions o;
  o.top_k = 5;
  ac::test::expect_error<ConfigError>([&] { route_sigmoid(logits, at::zeros({4}), o); },
                                      {"[route_sigmoid]", "num_experts_per_tok 5"});
  o.top_k = 2;
  o.n_group = 3;
  ac::test::expect_error<ConfigError>([&] { route_sigmoid(logits, at::zeros({4}), o); },
                                      {"[route_sigmoid]", "n_group 3"});
  o.n_group = 1;
  ac::test::expect_error<ConfigError>([&] { route_sigmoid(logits, at::zeros({3}), o); },
                                      {"correction bias [3]"});
}

TEST(NemotronHGolden, FixturesCoverEveryLayerKindAndOption) {
  std::set<std::string> seen;
  for (const fs::path& dir : fixture_dirs()) {
    const NemotronHModel m = load_nemotron_h_checkpoint(dir);
    const ModelConfig& c = m.config;
    for (const LayerConfig& l : c.layers) {
      seen.insert(std::string(1, nemotron_h_layer_char(l, 0)));
      if (l.has_mamba() && l.mamba->n_groups > 1) seen.insert("mamba_groups");
      if (l.has_mamba() && l.mamba->use_bias) seen.insert("mamba_bias");
      if (l.has_mamba() && l.mamba->chunk_size < 10) seen.insert("several_chunks");
      if (l.has_attention() && l.num_key_value_heads < l.num_attention_heads) seen.insert("gqa");
      if (l.has_moe() && l.moe->moe_latent_size > 0) seen.insert("latent");
      if (l.has_moe() && l.moe->shared_expert_intermediate_size > 0) seen.insert("shared");
    }
    if (m.router.n_group > 1) seen.insert("expert_groups");
    seen.insert(m.router.norm_topk_prob ? "norm_topk" : "raw_topk");
    if (m.router.routed_scaling_factor != 1.0) seen.insert("scaled");
    seen.insert(c.torch_dtype);
    if (fs::exists(dir / "model.safetensors.index.json")) seen.insert("sharded");
  }
  for (const char* option : {"M", "*", "-", "E", "mamba_groups", "mamba_bias", "several_chunks",
                             "gqa", "latent", "shared", "expert_groups", "norm_topk", "raw_topk",
                             "scaled", "float32", "bfloat16", "sharded"})
    EXPECT_TRUE(seen.count(option)) << "no fixture has " << option;
}

TEST(NemotronHGolden, PrefillMatchesTransformers) {
  init_torch_threads();
  at::NoGradGuard no_grad;
  const std::vector<fs::path> dirs = fixture_dirs();
  ASSERT_GE(dirs.size(), 2u) << golden_root();
  for (const fs::path& dir : dirs) {
    const std::string name = dir.filename().string();
    const NemotronHModel m = load_nemotron_h_checkpoint(dir);
    EXPECT_LE(relative_diff(m.forward(ac::test::read_golden_tokens(dir)), ac::test::read_golden_logits(dir, "prefill"),
                            name + " forward"),
              kTolerance)
        << name;
  }
}

TEST(NemotronHGolden, DecodeMatchesTransformers) {
  init_torch_threads();
  at::NoGradGuard no_grad;
  for (const fs::path& dir : fixture_dirs()) {
    const std::string name = dir.filename().string();
    const NemotronHModel m = load_nemotron_h_checkpoint(dir);
    const at::Tensor ours = decode_steps(m, ac::test::read_golden_tokens(dir), ac::test::read_golden_logits(dir, "decode_positions"));
    EXPECT_LE(relative_diff(ours, ac::test::read_golden_logits(dir, "decode"), name + " decode"), kTolerance)
        << name;
  }
}

// Three tokens, then the other seven in one forward continuing the cache: the second block
// starts from the conv inputs and SSM states the first left, and matches the whole-row prefill.
TEST(NemotronHGolden, TwoPrefillsThroughTheCacheMatch) {
  at::NoGradGuard no_grad;
  for (const fs::path& dir : fixture_dirs()) {
    const std::string name = dir.filename().string();
    const NemotronHModel m = load_nemotron_h_checkpoint(dir);
    const at::Tensor tokens = ac::test::read_golden_tokens(dir), theirs = ac::test::read_golden_logits(dir, "prefill");
    const int64_t T = tokens.size(1);
    NemotronHCache cache = NemotronHCache::allocate(m.config, tokens.size(0), T);
    const at::Tensor first = m.forward(tokens.narrow(1, 0, 3), &cache);
    const at::Tensor rest = m.forward(tokens.narrow(1, 3, T - 3), &cache);
    EXPECT_EQ(cache.kv.length, T);
    EXPECT_LE(relative_diff(at::cat({first, rest}, 1), theirs, name + " 3 + 7 through the cache"),
              kTolerance);
  }
}

// The goldens see the routers' correction bias: zeroed, the logits move far outside the bound.
TEST(NemotronHGolden, CorrectionBiasChangesTheLogits) {
  at::NoGradGuard no_grad;
  const fs::path dir = golden_root() / "nemotronh-mix-fp32";
  NemotronHModel m = load_nemotron_h_checkpoint(dir);
  for (NemotronHLayerWeights& l : m.layers)
    if (l.moe.correction_bias.defined()) l.moe.correction_bias = at::zeros_like(l.moe.correction_bias);
  EXPECT_GT(relative_diff(m.forward(ac::test::read_golden_tokens(dir)), ac::test::read_golden_logits(dir, "prefill"),
                          "nemotronh-mix without correction bias (wrong)"),
            1e3 * kTolerance);
}

// The dense loader and the stages built on it keep refusing hybrids with one clear error.
TEST(NemotronHGolden, DenseLoaderRefusesNemotronH) {
  ac::test::expect_error<ConfigError>(
      [&] { load_checkpoint(golden_root() / "nemotronh-mix-fp32"); },
      {"has Mamba-2, MoE or relu² layers", "model_type nemotron_h"});
}

TEST(NemotronHGolden, UnimplementedFieldsAreRefused) {
  expect_config_refused("mamba_hidden_act", "gelu",
                        {"[load_nemotron_h_model]", "mamba_hidden_act 'gelu'", "expected silu"});
  expect_config_refused("mlp_bias", true, {"mlp_bias true"});
  expect_config_refused("time_step_limit", nlohmann::json::array({0.0, 0.1}),
                        {"time_step_limit [0.0,0.1]", "expected [0.0, Infinity]"});
  expect_config_refused("n_group", 2, {"n_group 2", "layer 4", "n_routed_experts 5"});
}

TEST(NemotronHGolden, MissingAndExtraTensorsAreRefused) {
  const fs::path dir = golden_root() / "nemotronh-mix-fp32";
  const NemotronHModel m = load_nemotron_h_checkpoint(dir);
  TensorMap tensors = load_safetensors_dir(dir);
  tensors.erase("backbone.layers.2.mixer.A_log");
  ac::test::expect_error<FormatError>(
      [&] { nemotron_h_model_from_tensor_map(m.config, tensors, "model.safetensors"); },
      {"missing tensor 'backbone.layers.2.mixer.A_log'", "mamba_num_heads"});
  tensors = load_safetensors_dir(dir);
  tensors["backbone.layers.4.mixer.experts.5.up_proj.weight"] = at::zeros({12, 22});
  ac::test::expect_error<FormatError>(
      [&] { nemotron_h_model_from_tensor_map(m.config, tensors, "model.safetensors"); },
      {"tensor backbone.layers.4.mixer.experts.5.up_proj.weight has no place",
       "model_type nemotron_h"});
  tensors = load_safetensors_dir(dir);
  tensors["backbone.layers.0.mixer.conv1d.weight"] = at::zeros({58, 1, 3});
  ac::test::expect_error<FormatError>(
      [&] { nemotron_h_model_from_tensor_map(m.config, tensors, "model.safetensors"); },
      {"backbone.layers.0.mixer.conv1d.weight", "conv_kernel"});
}

// The chunked scan (the prefill) against the recurrence from the same initial state: T = 11 in
// chunks of 1, 3, 4 (the last padded), 11 and 16 (one padded chunk), 4 heads in 2 groups.
TEST(NemotronHGolden, ChunkScanMatchesTheRecurrence) {
  const int64_t Bt = 2, T = 11, nh = 4, P = 3, N = 5, Gm = 2;
  at::manual_seed(5);
  const at::Tensor x = at::randn({Bt, T, nh, P}), Bm = at::randn({Bt, T, Gm, N}),
                   Cm = at::randn({Bt, T, Gm, N}), D = at::randn({nh}),
                   dt = at::softplus(at::randn({Bt, T, nh})), A = -at::rand({nh}) * 2 - 0.1;
  const at::Tensor s0 = at::randn({Bt, nh, P, N});
  at::Tensor s_ref = s0.clone();
  const at::Tensor y_ref = ssd_scan(x, dt, A, Bm, Cm, D, s_ref);
  for (int64_t Q : {1, 3, 4, 11, 16}) {
    at::Tensor s = s0.clone();
    const at::Tensor y = ssd_chunk_scan(x, dt, A, Bm, Cm, D, s, Q);
    const double dy = (y - y_ref).abs().max().item<double>(),
                 ds = (s - s_ref).abs().max().item<double>();
    std::printf("[nemotron-h-golden] ssd_chunk_scan chunk %2lld vs ssd_scan: largest |diff| y "
                "%.3g, state %.3g\n", static_cast<long long>(Q), dy, ds);
    EXPECT_LE(dy, 1e-5 * y_ref.abs().max().item<double>()) << "chunk " << Q;
    EXPECT_LE(ds, 1e-5 * s_ref.abs().max().item<double>()) << "chunk " << Q;
  }
  at::Tensor s = s0.clone();
  ac::test::expect_error<ConfigError>([&] { ssd_chunk_scan(x, dt, A, Bm, Cm, D, s, 0); },
                                      {"[ssd_chunk_scan]", "chunk_size 0"});
  ac::test::expect_error<ConfigError>(
      [&] { ssd_chunk_scan(x, dt, A, Bm.narrow(2, 0, 1).repeat({1, 1, 3, 1}),
                           Cm.narrow(2, 0, 1).repeat({1, 1, 3, 1}), D, s, 4); },
      {"nh a multiple of Gm", "B [2, 11, 3, 5]"});
}

TEST(NemotronHGolden, CacheOfAnotherBatchIsRefused) {
  at::NoGradGuard no_grad;
  const NemotronHModel m = load_nemotron_h_checkpoint(golden_root() / "nemotronh-mix-fp32");
  const at::Tensor tokens = ac::test::read_golden_tokens(golden_root() / "nemotronh-mix-fp32");
  NemotronHCache cache = NemotronHCache::allocate(m.config, 1, 16);
  ac::test::expect_error<ConfigError>([&] { m.forward(tokens, &cache); },
                                      {"[forward]", "cache holds 1 sequences", "2 rows"});
  cache = NemotronHCache::allocate(m.config, 2, 4);
  ac::test::expect_error<ConfigError>([&] { m.forward(tokens, &cache); },
                                      {"[forward]", "holds 4 positions, 10 needed"});
}
