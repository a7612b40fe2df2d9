// Activation importance (importance/importance.h): scores against hand computations in float64
// (FFN neurons, hidden channels and block influence on a model whose only block is an FFN; heads
// on one-token sequences where attention returns V), layer-drop loss against a model rebuilt
// without the block, a constant-zero channel scoring exactly zero, streaming and resume
// invariants, file round trip, and the rankings.
#include "common/error.h"
#include "common/runtime.h"
#include "importance/importance.h"
#include "io/safetensors.h"
#include "test_util.h"

using namespace ac;
using ac::test::TempDir;
using ac::test::random_tokens;

namespace {

ImportanceOptions quiet() {
  ImportanceOptions o;
  o.show_progress = false;
  return o;
}

at::Tensor d(const at::Tensor& t) { return t.to(at::kDouble); }

at::Tensor rms(const at::Tensor& x, const at::Tensor& w, double eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, true) + eps) * d(w);
}

double rel_diff(const at::Tensor& ours, const at::Tensor& ref, const char* what) {
  double diff = (d(ours) - ref).abs().max().item<double>();
  double scale = ref.abs().max().item<double>();
  std::printf("[importance] %s: largest |diff| %.3g (max |ref| %.3g)\n", what, diff, scale);
  return diff / std::max(scale, 1e-30);
}

void expect_same(const Importance& a, const Importance& b, double tol) {
  auto close = [&](const at::Tensor& x, const at::Tensor& y, const std::string& n) {
    ASSERT_EQ(x.defined(), y.defined()) << n;
    if (x.defined()) {
      EXPECT_TRUE(at::allclose(x, y, tol, 1e-7)) << n << "\n" << x << "\n" << y;
    }
  };
  close(a.hidden, b.hidden, "hidden");
  close(a.block_influence, b.block_influence, "block_influence");
  close(a.layer_drop_loss, b.layer_drop_loss, "layer_drop_loss");
  for (size_t i = 0; i < a.layers.size(); ++i) {
    close(a.layers[i].heads, b.layers[i].heads, "heads");
    close(a.layers[i].kv_groups, b.layers[i].kv_groups, "kv_groups");
    close(a.layers[i].ffn, b.layers[i].ffn, "ffn");
  }
}

ModelConfig gqa_config() {
  ModelConfig c = ModelConfig::uniform(/*V=*/37, /*D=*/33, /*L=*/3, LayerConfig{8, 2, 6, 257});
  c.attention_bias = true;
  return c;
}

}  // namespace

// Layer 0 has no attention, so its FFN reads the embedding: every score is a few lines of
// float64 algebra.
TEST(Importance, FfnHiddenAndBlockInfluenceMatchHandComputation) {
  ModelConfig c = ModelConfig::uniform(23, 9, 1, LayerConfig{0, 0, 4, 13});
  c.layers[0].attention_no_op = true;
  LlamaModel m{c, random_weights(c, 11, 0.3)};
  at::Tensor tokens = random_tokens(3, 7, c.vocab_size, 12);
  Importance imp = compute_importance(m, {tokens}, quiet());

  const LayerWeights& w = m.weights.layers[0];
  at::Tensor x = d(m.weights.embed_tokens).index_select(0, tokens.reshape({-1}));  // [N, D]
  at::Tensor h = rms(x, w.post_attention_layernorm, c.rms_norm_eps);
  at::Tensor act = at::silu(at::matmul(h, d(w.gate_proj).t())) * at::matmul(h, d(w.up_proj).t());
  at::Tensor out = x + at::matmul(act, d(w.down_proj).t());
  at::Tensor hf = rms(out, m.weights.norm, c.rms_norm_eps);
  const double N = double(tokens.numel());
  at::Tensor hidden = (x.abs() + h.abs() + hf.abs()).sum(0) / N;
  at::Tensor ffn = act.abs().sum(0) / N;
  at::Tensor cos = (x * out).sum(-1) / (x.norm(2, -1) * out.norm(2, -1));
  at::Tensor influence = (1.0 - cos).mean().view({1});

  EXPECT_LT(rel_diff(imp.hidden, hidden, "hidden"), 1e-5);
  EXPECT_LT(rel_diff(imp.layers[0].ffn, ffn, "ffn"), 1e-5);
  EXPECT_LT(rel_diff(imp.block_influence, influence, "block_influence"), 1e-4);
  EXPECT_FALSE(imp.layers[0].heads.defined());
  EXPECT_EQ(imp.num_tokens, tokens.numel());
  EXPECT_EQ(imp.num_sequences, 3);
}

// With one token per sequence attention returns V of the head's KV group: head score = ||v||.
TEST(Importance, HeadScoresMatchHandComputationOnOneTokenSequences) {
  ModelConfig c = ModelConfig::uniform(19, 10, 1, LayerConfig{4, 2, 4, 6});
  c.attention_bias = true;
  LlamaModel m{c, random_weights(c, 13, 0.3)};
  at::Tensor tokens = random_tokens(5, 1, c.vocab_size, 14);
  Importance imp = compute_importance(m, {tokens}, quiet());
  const LayerWeights& w = m.weights.layers[0];
  at::Tensor x = d(m.weights.embed_tokens).index_select(0, tokens.reshape({-1}));
  at::Tensor h = rms(x, w.input_layernorm, c.rms_norm_eps);
  at::Tensor v = (at::matmul(h, d(w.v_proj).t()) + d(w.v_bias)).view({-1, 2, 4});  // [N, G, Hd]
  at::Tensor group = v.norm(2, -1).mean(0);                                        // [G]
  at::Tensor heads = group.repeat_interleave(2);  // query heads 0,1 -> group 0; 2,3 -> group 1
  EXPECT_LT(rel_diff(imp.layers[0].heads, heads, "heads"), 1e-5);
  EXPECT_LT(rel_diff(imp.layers[0].kv_groups, 2.0 * group, "kv_groups"), 1e-5);
}

TEST(Importance, LayerDropLossMatchesModelWithoutTheBlock) {
  ModelConfig c = ModelConfig::uniform(29, 16, 3, LayerConfig{4, 2, 4, 24});
  c.layers[1].attention_no_op = c.layers[1].ffn_no_op = true;  // already an empty block
  c.layers[1].num_attention_heads = c.layers[1].num_key_value_heads = 0;
  c.layers[1].intermediate_size = 0;
  LlamaModel m{c, random_weights(c, 15, 0.3)};
  at::Tensor tokens = random_tokens(2, 9, c.vocab_size, 16);
  ImportanceOptions opt = quiet();
  opt.layer_drop_loss = true;
  Importance imp = compute_importance(m, {tokens}, opt);
  auto loss = [&](const LlamaModel& model) {
    at::NoGradGuard ng;
    at::Tensor logits = d(model.forward(tokens.narrow(1, 0, 8)));
    return at::cross_entropy_loss(logits.reshape({-1, c.vocab_size}),
                                  tokens.narrow(1, 1, 8).reshape({-1}))
        .item<double>();
  };
  LlamaModel without0 = m;
  without0.config.layers[0].attention_no_op = without0.config.layers[0].ffn_no_op = true;
  const double expected0 = loss(without0) - loss(m);
  std::printf("[importance] layer-drop loss of block 0: %.6f, expected %.6f\n",
              imp.layer_drop_loss[0].item<double>(), expected0);
  EXPECT_NEAR(imp.layer_drop_loss[0].item<double>(), expected0, 1e-5);
  EXPECT_EQ(imp.layer_drop_loss[1].item<float>(), 0.f) << "dropping an empty block";
  EXPECT_NEAR(imp.block_influence[1].item<double>(), 0.0, 1e-6);
  EXPECT_GT(imp.block_influence[0].item<double>(), 1e-4);
}

TEST(Importance, ConstantZeroChannelScoresExactlyZero) {
  ModelConfig c = gqa_config();
  LlamaModel m{c, random_weights(c, 17)};
  const int64_t ch = 5;
  m.weights.embed_tokens.select(1, ch).zero_();
  for (auto& l : m.weights.layers) {
    l.input_layernorm[ch].zero_();
    l.post_attention_layernorm[ch].zero_();
  }
  m.weights.norm[ch].zero_();
  for (Aggregation agg : {Aggregation::kMean, Aggregation::kBatchL2}) {
    ImportanceOptions opt = quiet();
    opt.aggregation = agg;
    Importance imp = compute_importance(m, {random_tokens(2, 10, c.vocab_size, 18)}, opt);
    EXPECT_EQ(imp.hidden[ch].item<float>(), 0.f);
    EXPECT_GT(imp.hidden.min().item<float>() + (imp.hidden == 0).sum().item<float>(), 0.f)
        << "only channel " << ch << " may be zero";
    EXPECT_EQ((imp.hidden == 0).sum().item<int64_t>(), 1);
    EXPECT_EQ(ranking(imp.hidden).back(), ch);
  }
}

// Scores are normalised sums: repeating a batch, or splitting one batch in two, changes nothing.
TEST(Importance, StreamingIsIndependentOfBatching) {
  ModelConfig c = gqa_config();
  LlamaModel m{c, random_weights(c, 19)};
  at::Tensor b = random_tokens(2, 12, c.vocab_size, 20);
  for (Aggregation agg : {Aggregation::kMean, Aggregation::kBatchL2}) {
    ImportanceOptions opt = quiet();
    opt.aggregation = agg;
    Importance once = compute_importance(m, {b}, opt);
    Importance twice = compute_importance(m, {b, b}, opt);
    Importance joined = compute_importance(m, {at::cat({b, b})}, opt);
    Importance split = compute_importance(m, {b.narrow(0, 0, 1), b.narrow(0, 1, 1)}, opt);
    EXPECT_EQ(twice.num_tokens, 2 * b.numel());
    expect_same(once, twice, 1e-5);
    expect_same(twice, joined, 1e-5);
    expect_same(once, split, 1e-5);
  }
}

TEST(Importance, ResumeContinuesFromSavedState) {
  ModelConfig c = gqa_config();
  LlamaModel m{c, random_weights(c, 21)};
  std::vector<at::Tensor> batches;
  for (int i = 0; i < 3; ++i) batches.push_back(random_tokens(2, 8, c.vocab_size, 30 + i));
  ImportanceOptions opt = quiet();
  opt.layer_drop_loss = true;
  Importance full = compute_importance(m, batches, opt);

  TempDir tmp;
  opt.state_path = tmp.path / "imp.state";
  opt.save_every = 1;
  compute_importance(m, {batches[0], batches[1]}, opt);  // "interrupted" after 2 batches
  ASSERT_TRUE(fs::exists(opt.state_path));
  opt.resume = true;
  Importance resumed = compute_importance(m, batches, opt);
  EXPECT_EQ(resumed.num_tokens, full.num_tokens);
  expect_same(full, resumed, 1e-5);

  ImportanceOptions other = opt;
  other.aggregation = Aggregation::kBatchL2;
  EXPECT_THROW(compute_importance(m, batches, other), ConfigError);
  EXPECT_THROW(compute_importance(m, {batches[0]}, opt), ConfigError) << "state covers 3 > 1";
}

TEST(Importance, SaveLoadRoundTripAndBadFiles) {
  ModelConfig c = gqa_config();
  c.layers[2].attention_no_op = true;
  c.layers[2].num_attention_heads = c.layers[2].num_key_value_heads = 0;
  LlamaModel m{c, random_weights(c, 23)};
  ImportanceOptions opt = quiet();
  opt.layer_drop_loss = true;
  Importance imp = compute_importance(m, {random_tokens(2, 6, c.vocab_size, 24)}, opt);
  TempDir tmp;
  save_importance(tmp.path / "imp.safetensors", imp);
  Importance back = load_importance(tmp.path / "imp.safetensors");
  TensorMap a = importance_to_tensor_map(imp), b = importance_to_tensor_map(back);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) EXPECT_TRUE(at::equal(t, b.at(name))) << name;
  EXPECT_FALSE(back.layers[2].heads.defined());
  EXPECT_EQ(back.num_tokens, imp.num_tokens);
  EXPECT_NO_THROW(check_importance_matches(c, back, "test"));
  EXPECT_THROW(check_importance_matches(gqa_config(), back, "test"), ConfigError);

  TensorMap broken = a;
  broken.erase("hidden");
  save_safetensors(tmp.path / "broken.safetensors", broken);
  try {
    load_importance(tmp.path / "broken.safetensors");
    FAIL() << "missing 'hidden' accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("'hidden'"), std::string::npos) << e.what();
  }
  broken = a;
  broken["layers.7.ffn"] = at::ones({3});
  save_safetensors(tmp.path / "broken2.safetensors", broken);
  EXPECT_THROW(load_importance(tmp.path / "broken2.safetensors"), FormatError);
}

TEST(Importance, RankingIsDescendingWithStableTies) {
  at::Tensor s = at::tensor({3.0, 1.0, 3.0, 2.0, NAN, 1.0});
  EXPECT_EQ(ranking(s), (std::vector<int64_t>{0, 2, 3, 1, 5, 4}));
  at::Tensor top = top_k_indices(s, 3);
  EXPECT_EQ(std::vector<int64_t>(top.data_ptr<int64_t>(), top.data_ptr<int64_t>() + 3),
            (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(top_k_indices(s, 0).numel(), 0);
  EXPECT_THROW(top_k_indices(s, 7), ConfigError);
}

TEST(Importance, RejectsBadBatches) {
  ModelConfig c = ModelConfig::uniform(13, 8, 1, LayerConfig{2, 1, 4, 8});
  LlamaModel m{c, random_weights(c, 25)};
  EXPECT_THROW(compute_importance(m, {}, quiet()), ConfigError);
  EXPECT_THROW(compute_importance(m, {at::zeros({4})}, quiet()), ConfigError);
  EXPECT_THROW(compute_importance(m, {at::zeros({2, 3}, at::kFloat)}, quiet()), ConfigError);
}
