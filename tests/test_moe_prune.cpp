// Importance and pruning of the sparse MoE layers (importance/moe_importance.h,
// prune/moe_prune.h) and the HF writer of a pruned MoE model (export/moe_hf_export.h), on the
// tiny transformers-made fixtures of tests/golden/hf-moe/ (tests/test_moe_golden.cpp).
//
//   NeverRoutedExpertScoresZero: a hand-made router that never picks expert 3 of layer 0 gives
//     it share 0, output norm 0 and all-zero channel scores, ranks it last, and removing it
//     leaves the logits unchanged; the routed experts' scores equal a recomputation in float64
//     with plain ATen ops; scores do not depend on how tokens are split into batches.
//   MaskedEqualsPruned: on every fixture, per-layer (heterogeneous) expert counts and widths,
//     k clamped to the experts kept: the 0/1-masked full model gives the pruned model's logits.
//   ExportReloadsToIdenticalLogits: a uniform pruning written in the HF layout and read back
//     by load_moe_checkpoint gives bit-identical logits, Qwen3-MoE and Mixtral.
//   ImportanceFileRoundTripsAndRefusesOthers: save_moe_importance / load_moe_importance bit for
//     bit; hand-made bad files (a dense importance file among them) refused naming the tensor.
//   HeterogeneousExportIsRefused, bad targets and masks: one clear error each.
//
// Tolerance of masked vs pruned: relative 1e-5 (float32, same weights, other summation order).
#include <fmt/format.h>

#include <cstdio>

#include "common/error.h"
#include "common/json_io.h"
#include "export/moe_hf_export.h"
#include "importance/importance.h"
#include "importance/moe_importance.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "prune/moe_prune.h"
#include "golden_fixture.h"
#include "test_util.h"

using namespace ac;
using ac::test::TempDir;

namespace {

constexpr double kTolerance = 1e-5;

fs::path fixture(const std::string& name) {
  return ac::test::source_dir() / "tests/golden/hf-moe" / name;
}

const std::vector<std::string> kFixtures = {"mixtral-top2-fp32", "mixtral-top3-bf16-sharded",
                                            "qwen3moe-top2-fp32",
                                            "qwen3moe-top3-step2-bf16-sharded"};

// Calibration batches: the fixture's tokens and two random ones of odd length.
std::vector<at::Tensor> calibration(const MoeModel& m, const fs::path& dir) {
  return {ac::test::read_golden_tokens(dir), ac::test::random_tokens(3, 31, m.config.vocab_size, 7),
          ac::test::random_tokens(2, 33, m.config.vocab_size, 8)};
}

double relative_diff(const at::Tensor& ours, const at::Tensor& ref, const std::string& what) {
  return ac::test::golden_relative_diff(ours, ref, what, "moe-prune");
}

// The parent's config with sparse layer j (counting sparse layers only) set to sizes[j].
struct Sizes {
  int64_t experts, width, per_tok;
};
ModelConfig target_with(const ModelConfig& parent, const std::vector<Sizes>& sizes) {
  ModelConfig t = parent;
  size_t j = 0;
  for (auto& l : t.layers) {
    if (!l.has_moe()) continue;
    const Sizes& s = sizes[std::min(j++, sizes.size() - 1)];
    l.moe->num_experts = s.experts;
    l.moe->moe_intermediate_size = s.width;
    l.moe->num_experts_per_tok = s.per_tok;
  }
  return t;
}

// The fixture qwen3moe-top2-fp32 (layer 0 sparse: 5 experts, top-2, width 16) changed so that
// layer 0's router never picks expert 3: layer 0's attention writes nothing (o_proj 0), so the
// MoE input is the embedding, whose channel 0 is 10 for every token; after the RMSNorm (weight
// 1) channel 0 is positive, and expert 3's router row is -100 on channel 0 alone.
MoeModel never_routes_expert_3() {
  MoeModel m = load_moe_checkpoint(fixture("qwen3moe-top2-fp32"));
  m.weights.layers[0].o_proj = at::zeros_like(m.weights.layers[0].o_proj);
  m.weights.embed_tokens = m.weights.embed_tokens.clone();
  m.weights.embed_tokens.select(1, 0).fill_(10.0);
  m.weights.layers[0].post_attention_layernorm =
      at::ones_like(m.weights.layers[0].post_attention_layernorm);
  m.moe[0].router = m.moe[0].router.clone();
  m.moe[0].router[3].zero_();
  m.moe[0].router[3][0] = -100.0;
  return m;
}

}  // namespace

TEST(MoePrune, NeverRoutedExpertScoresZero) {
  const MoeModel m = never_routes_expert_3();
  const std::vector<at::Tensor> batches = calibration(m, fixture("qwen3moe-top2-fp32"));
  const MoeImportance imp = compute_moe_importance(m, batches);
  ASSERT_EQ(imp.num_layers(), 3);
  EXPECT_FALSE(imp.layers[1].experts.defined());  // mlp_only_layers [1]: dense
  const MoeLayerImportance& l0 = imp.layers[0];
  EXPECT_EQ(l0.routing_share[3].item<float>(), 0.0f);
  EXPECT_EQ(l0.output_norm[3].item<float>(), 0.0f);
  EXPECT_EQ(l0.experts[3].item<float>(), 0.0f);
  EXPECT_EQ(l0.expert_ffn[3].abs().sum().item<float>(), 0.0f);
  EXPECT_NEAR(l0.routing_share.sum().item<double>(), 1.0, 1e-6);
  EXPECT_TRUE(at::allclose(l0.experts, l0.routing_share * l0.output_norm, 1e-5, 1e-7));
  EXPECT_EQ(ranking(l0.experts).back(), 3);
  // Channel 0 dominates every token's input, so other experts may go unused too: whichever
  // expert is routed has positive scores, whichever is not has zeros.
  for (int64_t e = 0; e < 5; ++e) {
    const bool routed = l0.routing_share[e].item<float>() > 0;
    EXPECT_EQ(l0.output_norm[e].item<float>() > 0, routed) << "expert " << e;
    EXPECT_EQ(l0.expert_ffn[e].sum().item<float>() > 0, routed) << "expert " << e;
  }
  // Each routed row counts k = 2 slots: shares are multiples of 1 / (2 * tokens).
  int64_t tokens = 0;
  for (const auto& b : batches) tokens += b.numel();
  EXPECT_EQ(imp.num_tokens, tokens);
  at::Tensor slots = l0.routing_share * double(2 * tokens);
  EXPECT_TRUE(at::allclose(slots, slots.round(), 0, 1e-3)) << slots;

  // Layer 0 by hand: its input is the embedding (o_proj 0), normed with weight 1; routing,
  // shares, weighted output norms and channel magnitudes recomputed with plain ATen ops.
  {
    at::Tensor x = at::cat({at::embedding(m.weights.embed_tokens, batches[0]).reshape({-1, 24}),
                            at::embedding(m.weights.embed_tokens, batches[1]).reshape({-1, 24}),
                            at::embedding(m.weights.embed_tokens, batches[2]).reshape({-1, 24})})
                       .to(at::kDouble);  // [N, D]
    const at::Tensor h = x * at::rsqrt(x.pow(2).mean(-1, true) + m.config.rms_norm_eps);
    const MoeLayerWeights w = m.moe[0];
    auto [p, idx] = at::softmax(h.matmul(w.router.to(at::kDouble).t()), -1).topk(2, -1);
    p = p / p.sum(-1, true);  // norm_topk_prob
    const int64_t N = h.size(0);
    int64_t checked = 0;
    for (int64_t e = 0; e < 5; ++e) {
      const at::Tensor hit = (idx == e);                    // [N, 2]
      const at::Tensor rows = hit.any(1).nonzero().view(-1);  // a row picks e at most once
      EXPECT_NEAR(l0.routing_share[e].item<double>(), hit.sum().item<double>() / (2.0 * N), 1e-7);
      if (rows.numel() == 0) continue;
      ++checked;
      const at::Tensor he = h.index_select(0, rows);
      const at::Tensor act = at::silu(he.matmul(w.gate_proj[e].to(at::kDouble).t())) *
                             he.matmul(w.up_proj[e].to(at::kDouble).t());  // [n, Fe]
      const at::Tensor g = (p * hit).sum(1).index_select(0, rows).unsqueeze(1);
      const at::Tensor out = g * act.matmul(w.down_proj[e].to(at::kDouble).t());  // [n, D]
      EXPECT_NEAR(l0.output_norm[e].item<double>(), out.norm(2, {1}).mean().item<double>(),
                  1e-5 * l0.output_norm[e].item<double>());
      EXPECT_TRUE(at::allclose(l0.expert_ffn[e].to(at::kDouble), act.abs().mean(0), 1e-4, 1e-7));
    }
    EXPECT_GE(checked, 2);  // k = 2 experts per row at least
  }

  // The same tokens cut into other batches: the same scores (plain sums).
  std::vector<at::Tensor> rows;
  for (const auto& b : batches)
    for (int64_t r = 0; r < b.size(0); ++r) rows.push_back(b.narrow(0, r, 1));
  const MoeImportance by_row = compute_moe_importance(m, rows);
  EXPECT_TRUE(at::allclose(by_row.layers[0].experts, l0.experts, 1e-5, 1e-7));
  EXPECT_TRUE(at::allclose(by_row.layers[2].expert_ffn, imp.layers[2].expert_ffn, 1e-5, 1e-7));

  // Removing the expert no token uses changes nothing.
  const MoeModel pruned = prune_moe_model(m, imp, target_with(m.config, {{4, 16, 2}, {5, 16, 2}}));
  EXPECT_EQ(pruned.moe[0].router.size(0), 4);
  const at::Tensor t = ac::test::read_golden_tokens(fixture("qwen3moe-top2-fp32"));
  EXPECT_LE(relative_diff(pruned.forward(t), m.forward(t), "never-routed expert removed"),
            kTolerance);
}

TEST(MoePrune, MaskedEqualsPruned) {
  for (const std::string& name : kFixtures) {
    const MoeModel m = load_moe_checkpoint(fixture(name));
    const MoeImportance imp = compute_moe_importance(m, calibration(m, fixture(name)));
    const MoeConfig& p = *std::find_if(m.config.layers.begin(), m.config.layers.end(),
                                       [](const LayerConfig& l) { return l.has_moe(); })->moe;
    const int64_t E = p.num_experts, Fe = p.moe_intermediate_size, k = p.num_experts_per_tok;
    // Heterogeneous: the first sparse layer keeps E-1 experts at 3/4 width, the next only k-1
    // experts at half width with k kept asked for (clamped to k-1).
    const ModelConfig target =
        target_with(m.config, {{E - 1, Fe * 3 / 4, k}, {k - 1, Fe / 2, k}});
    const MoePrunePlan plan = plan_moe_pruning(m.config, imp, target);
    const MoeModel pruned = apply_moe_plan(m, plan);
    const MoeMasks masks = moe_masks_for_plan(m.config, plan);
    bool first = true;
    for (size_t i = 0; i < pruned.config.layers.size(); ++i) {
      const LayerConfig& l = pruned.config.layers[i];
      if (!l.has_moe()) continue;
      const int64_t e = first ? E - 1 : k - 1, fe = first ? Fe * 3 / 4 : Fe / 2;
      first = false;
      EXPECT_EQ(l.moe->num_experts, e) << name << " layer " << i;
      EXPECT_EQ(l.moe->moe_intermediate_size, fe) << name << " layer " << i;
      EXPECT_EQ(l.moe->num_experts_per_tok, std::min(k, e)) << name << " layer " << i;
      const int64_t D = m.config.hidden_size;
      EXPECT_EQ(pruned.moe[i].router.sizes().vec(), (std::vector<int64_t>{e, D}));
      EXPECT_EQ(pruned.moe[i].gate_proj.sizes().vec(),
                (std::vector<int64_t>{e, fe, D}));
      EXPECT_EQ(pruned.moe[i].down_proj.sizes().vec(),
                (std::vector<int64_t>{e, D, fe}));
    }
    const at::Tensor tokens = ac::test::read_golden_tokens(fixture(name));
    MoeForwardOptions opt;
    opt.masks = &masks;
    const at::Tensor masked = m.forward(tokens, opt), physical = pruned.forward(tokens);
    EXPECT_LE(relative_diff(masked, physical, name + " masked vs pruned"), kTolerance);
    EXPECT_GT(relative_diff(masked, m.forward(tokens), name + " pruned vs parent"), 1e-3)
        << "the pruning should change the function";
  }
}

TEST(MoePrune, ExportReloadsToIdenticalLogits) {
  for (const std::string name : {"qwen3moe-top3-step2-bf16-sharded", "mixtral-top2-fp32"}) {
    const MoeModel m = load_moe_checkpoint(fixture(name));
    const MoeImportance imp = compute_moe_importance(m, calibration(m, fixture(name)));
    const MoeModel pruned = prune_moe_model(m, imp, target_with(m.config, {{3, 8, 2}}));
    TempDir tmp;
    const fs::path out = tmp.path / "pruned";
    save_moe_checkpoint(out, pruned, fixture(name));
    EXPECT_TRUE(fs::exists(out / "generation_config.json"));
    const MoeModel back = load_moe_checkpoint(out);
    EXPECT_EQ(back.config.layers, pruned.config.layers) << name;
    EXPECT_EQ(back.norm_topk_prob, m.norm_topk_prob) << name;
    const at::Tensor tokens = ac::test::read_golden_tokens(fixture(name));
    const at::Tensor a = pruned.forward(tokens), b = back.forward(tokens);
    EXPECT_TRUE(at::equal(a, b)) << name << ": " << relative_diff(b, a, name + " reloaded");
  }
}

TEST(MoePrune, HeterogeneousExportIsRefused) {
  const MoeModel m = load_moe_checkpoint(fixture("mixtral-top2-fp32"));
  const MoeImportance imp = compute_moe_importance(m, calibration(m, fixture("mixtral-top2-fp32")));
  const MoeModel pruned =
      prune_moe_model(m, imp, target_with(m.config, {{4, 18, 2}, {3, 12, 2}}));
  TempDir tmp;
  ac::test::expect_error<ConfigError>(
      [&] { save_moe_checkpoint(tmp.path / "out", pruned); },
      {"[save_moe_checkpoint]", "layer 0: 4 experts, 2 per token, width 18",
       "layer 1: 3 experts, 2 per token, width 12", "one num_experts"});
  EXPECT_FALSE(fs::exists(tmp.path / "out"));
}

TEST(MoePrune, BadTargetsAndMasksAreRefused) {
  const MoeModel m = load_moe_checkpoint(fixture("qwen3moe-top2-fp32"));
  const at::Tensor t = ac::test::read_golden_tokens(fixture("qwen3moe-top2-fp32"));
  const MoeImportance imp = compute_moe_importance(m, {t});
  ac::test::expect_error<ConfigError>(
      [&] { plan_moe_pruning(m.config, imp, target_with(m.config, {{6, 16, 2}, {5, 0, 3}})); },
      {"[prune_moe]", "layer 0: num_experts 6, expected 1..5", "layer 2: moe_intermediate_size 0",
       "layer 2: num_experts_per_tok 3, expected 1..2"});
  ModelConfig dense_changed = m.config;
  dense_changed.layers[1].intermediate_size -= 1;
  ac::test::expect_error<ConfigError>(
      [&] { plan_moe_pruning(m.config, imp, dense_changed); },
      {"layer 1: the attention or the dense FFN differs"});
  MoeImportance wrong = imp;
  wrong.layers[0].expert_ffn = wrong.layers[0].expert_ffn.narrow(1, 0, 8);
  ac::test::expect_error<ConfigError>([&] { plan_moe_pruning(m.config, wrong, m.config); },
                                      {"layers.0.expert_ffn has shape [5, 8], expected [5, 16]"});
  MoeMasks none;
  none.layers.resize(3);
  none.layers[0].experts = at::zeros({5});
  MoeForwardOptions opt;
  opt.masks = &none;
  ac::test::expect_error<ConfigError>([&] { m.forward(t, opt); }, {"removes every expert"});
  none.layers.resize(2);
  ac::test::expect_error<ConfigError>([&] { m.forward(t, opt); }, {"masks for 2 layers"});
}

TEST(MoePrune, ImportanceFileRoundTripsAndRefusesOthers) {
  const MoeModel m = load_moe_checkpoint(fixture("qwen3moe-top3-step2-bf16-sharded"));
  const MoeImportance imp =
      compute_moe_importance(m, calibration(m, fixture("qwen3moe-top3-step2-bf16-sharded")));
  TempDir tmp;
  const fs::path path = tmp.path / "moe_importance.safetensors";
  save_moe_importance(path, imp);
  const MoeImportance back = load_moe_importance(path);
  EXPECT_EQ(back.num_tokens, imp.num_tokens);
  ASSERT_EQ(back.num_layers(), imp.num_layers());
  for (size_t i = 0; i < imp.layers.size(); ++i) {
    EXPECT_EQ(back.layers[i].experts.defined(), imp.layers[i].experts.defined()) << i;
    if (!imp.layers[i].experts.defined()) continue;
    EXPECT_TRUE(at::equal(back.layers[i].routing_share, imp.layers[i].routing_share)) << i;
    EXPECT_TRUE(at::equal(back.layers[i].output_norm, imp.layers[i].output_norm)) << i;
    EXPECT_TRUE(at::equal(back.layers[i].experts, imp.layers[i].experts)) << i;
    EXPECT_TRUE(at::equal(back.layers[i].expert_ffn, imp.layers[i].expert_ffn)) << i;
  }
  check_moe_importance_matches(m.config, back, "test");  // no throw

  // Hand-made bad files: a dense importance file, a layer out of range, a missing part, a
  // tensor of the wrong rank.
  const std::map<std::string, std::string> meta = {
      {"format", "autocompress.moe_importance.v1"}, {"num_layers", "4"}, {"num_tokens", "9"}};
  const fs::path bad = tmp.path / "bad.safetensors";
  save_safetensors(bad, {{"hidden", at::ones({24})}}, {{"format", "autocompress.importance.v1"}});
  ac::test::expect_error<FormatError>([&] { load_moe_importance(bad); },
                                      {"bad.safetensors", "not an MoE importance file"});
  save_safetensors(bad, {{"layers.4.experts", at::ones({5})}}, meta);
  ac::test::expect_error<FormatError>([&] { load_moe_importance(bad); },
                                      {"unexpected tensor 'layers.4.experts'", "4 layers"});
  save_safetensors(bad, {{"layers.1.experts", at::ones({5})}}, meta);
  ac::test::expect_error<FormatError>([&] { load_moe_importance(bad); },
                                      {"layer 1 lacks tensor 'layers.1.routing_share'"});
  save_safetensors(bad, {{"layers.1.expert_ffn", at::ones({5})}}, meta);
  ac::test::expect_error<FormatError>([&] { load_moe_importance(bad); },
                                      {"'layers.1.expert_ffn' must be a 2-D float tensor"});
}
