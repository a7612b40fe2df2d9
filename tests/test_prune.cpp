// Structured pruning (prune/prune.h, prune/arch.h): the masked full model equals the physically
// pruned one on odd sizes, GQA, qkv bias, tied and untied heads and heterogeneous targets; the
// pruned config agrees with every tensor; save -> load is bit-exact; the selection follows the
// importance by hand-made scores; masks of growing widths are nested; clear target errors.
#include "common/error.h"
#include "data/token_file.h"
#include "prune/depth.h"
#include "common/runtime.h"
#include "importance/importance.h"
#include "io/checkpoint.h"
#include "prune/arch.h"
#include "prune/prune.h"
#include "test_util.h"

using namespace ac;
using ac::test::TempDir;
using ac::test::attention_removed;
using ac::test::ffn_removed;
using ac::test::random_tokens;

namespace {

LlamaModel random_model(const ModelConfig& c, uint64_t seed) {
  return LlamaModel{c, random_weights(c, seed, /*std=*/0.2)};
}

Importance importance_of(const LlamaModel& m) {
  ImportanceOptions opt;
  opt.show_progress = false;
  return compute_importance(m, {random_tokens(3, 11, m.config.vocab_size, 7)}, opt);
}


struct Case {
  std::string name;
  ModelConfig parent, target;
};

// Odd sizes (D 33, F 257), GQA 8/2 and 16/2, bias, q/k norms, tied and untied, and heterogeneous
// targets with a removed attention, a removed FFN, a removed block and a hidden-size cut.
std::vector<Case> cases() {
  std::vector<Case> out;
  {
    ModelConfig p = ModelConfig::uniform(/*V=*/53, /*D=*/33, /*L=*/4, LayerConfig{8, 2, 6, 257});
    p.attention_bias = true;
    p.tie_word_embeddings = false;
    ModelConfig t = p;
    t.hidden_size = 21;
    t.layers[0] = LayerConfig{3, 1, 6, 100};     // one KV group, 3 of its 4 heads
    t.layers[1] = attention_removed(LayerConfig{0, 0, 6, 257});
    t.layers[2] = ffn_removed(LayerConfig{6, 2, 6, 0});
    t.layers[3] = ffn_removed(attention_removed(p.layers[3]));  // whole block
    out.push_back({"odd_gqa8x2_bias_untied", p, t});
  }
  {
    ModelConfig p = ModelConfig::uniform(47, 40, 3, LayerConfig{16, 2, 4, 31});
    p.tie_word_embeddings = true;
    p.qk_norm = true;  // Qwen3's q/k norms: over head_dim, kept whole
    ModelConfig t = p;
    t.hidden_size = 17;
    t.layers[0] = LayerConfig{6, 2, 4, 31};
    t.layers[1] = LayerConfig{8, 1, 4, 5};
    t.layers[2] = attention_removed(LayerConfig{0, 0, 4, 1});
    out.push_back({"gqa16x2_tied_qknorm", p, t});
  }
  {
    // A parent that is already heterogeneous (layer 1 without attention), no hidden cut.
    ModelConfig p = ModelConfig::uniform(41, 24, 2, LayerConfig{4, 4, 6, 50});
    p.attention_bias = true;
    p.layers[1] = attention_removed(p.layers[1]);
    ModelConfig t = p;
    t.layers[0] = LayerConfig{2, 2, 6, 49};
    t.layers[1].intermediate_size = 7;
    out.push_back({"mha_bias_heterogeneous_parent", p, t});
  }
  return out;
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

}  // namespace

TEST(Prune, MaskedModelEqualsPrunedModel) {
  init_torch_threads();
  for (const Case& c : cases()) {
    LlamaModel m = random_model(c.parent, 1);
    Importance imp = importance_of(m);
    LlamaModel pruned = prune_model(m, imp, c.target);
    Masks masks = masks_for(m, imp, c.target);
    at::Tensor tokens = random_tokens(2, 13, c.parent.vocab_size, 3);
    at::NoGradGuard no_grad;
    ForwardOptions fo;
    fo.masks = &masks;
    at::Tensor masked = m.forward(tokens, fo), small = pruned.forward(tokens);
    double diff = max_abs_diff(masked, small), vs_full = max_abs_diff(masked, m.forward(tokens));
    std::printf("[prune] %s: %s -> %s, masked vs pruned largest |diff| %.3g (vs full %.3g)\n",
                c.name.c_str(), describe(c.parent).c_str(), describe(pruned.config).c_str(), diff,
                vs_full);
    EXPECT_LT(diff, 1e-5) << c.name;
    EXPECT_GT(vs_full, 1e-3) << c.name << ": the masks changed nothing; the test would be void";
  }
}

TEST(Prune, PrunedConfigAgreesWithEveryTensor) {
  for (const Case& c : cases()) {
    LlamaModel m = random_model(c.parent, 2);
    LlamaModel pruned = prune_model(m, importance_of(m), c.target);
    EXPECT_EQ(pruned.config.hidden_size, c.target.hidden_size);
    for (size_t i = 0; i < c.target.layers.size(); ++i) {
      const LayerConfig& got = pruned.config.layers[i];
      const LayerConfig& want = c.target.layers[i];
      EXPECT_EQ(got.has_attention(), want.has_attention()) << c.name << " layer " << i;
      EXPECT_EQ(got.has_ffn(), want.has_ffn()) << c.name << " layer " << i;
      if (want.has_attention()) {
        EXPECT_EQ(got.num_attention_heads, want.num_attention_heads);
        EXPECT_EQ(got.num_key_value_heads, want.num_key_value_heads);
      } else {
        EXPECT_FALSE(pruned.weights.layers[i].q_proj.defined()) << c.name << " layer " << i;
      }
      if (want.has_ffn())
        EXPECT_EQ(got.intermediate_size, want.intermediate_size);
      else
        EXPECT_FALSE(pruned.weights.layers[i].down_proj.defined()) << c.name << " layer " << i;
    }
    // from_tensor_map checks every tensor's shape against the config (throws on a mismatch).
    TensorMap t = to_tensor_map(pruned.config, pruned.weights);
    EXPECT_NO_THROW(from_tensor_map(pruned.config, t, c.name));
    EXPECT_EQ(pruned.config.num_parameters(),
              [&] {
                int64_t n = 0;
                for (const auto& p : pruned.weights.parameters()) n += p.numel();
                return n;
              }())
        << c.name;
    if (c.parent.tie_word_embeddings) {
      EXPECT_TRUE(pruned.weights.lm_head.is_same(pruned.weights.embed_tokens)) << c.name;
    }
  }
}

TEST(Prune, SaveLoadRoundTripIsBitExact) {
  for (const Case& c : cases()) {
    LlamaModel m = random_model(c.parent, 4);
    LlamaModel pruned = prune_model(m, importance_of(m), c.target);
    TempDir tmp;
    save_checkpoint_atomic(tmp.path / "pruned", pruned);
    LlamaModel back = load_checkpoint(tmp.path / "pruned");
    ASSERT_EQ(back.config.num_layers(), pruned.config.num_layers());
    for (size_t i = 0; i < back.config.layers.size(); ++i)
      EXPECT_EQ(back.config.layers[i], pruned.config.layers[i]) << c.name << " layer " << i;
    TensorMap a = to_tensor_map(pruned.config, pruned.weights),
              b = to_tensor_map(back.config, back.weights);
    ASSERT_EQ(a.size(), b.size()) << c.name;
    for (const auto& [name, t] : a) {
      ASSERT_TRUE(b.count(name)) << c.name << ": " << name;
      EXPECT_TRUE(at::equal(t, b.at(name))) << c.name << ": " << name;
    }
    EXPECT_EQ(back.weights.lm_head.is_same(back.weights.embed_tokens),
              c.parent.tie_word_embeddings);
  }
}

// Hand-made scores: the kept channels are exactly the ones the rule in prune.h names.
TEST(Prune, SelectionFollowsImportance) {
  ModelConfig p = ModelConfig::uniform(11, 6, 1, LayerConfig{8, 2, 2, 5});
  Importance imp;
  imp.hidden = at::tensor({0.5, 3.0, 1.0, 3.0, 0.0, 2.0}, at::kFloat);
  imp.block_influence = at::zeros({1});
  LayerImportance li;
  li.heads = at::tensor({1.0, 5.0, 3.0, 7.0, 2.0, 2.0, 9.0, 0.0}, at::kFloat);
  li.kv_groups = at::tensor({16.0, 13.0}, at::kFloat);
  li.ffn = at::tensor({0.1, 0.4, 0.3, 0.2, 0.4}, at::kFloat);
  imp.layers = {li};
  auto vec = [](const at::Tensor& t) {
    return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
  };
  ModelConfig t = p;
  t.hidden_size = 3;                    // 1 and 3 tie at 3.0, then 5 (2.0)
  t.layers[0] = LayerConfig{4, 2, 2, 2};  // both groups, 2 heads each
  PrunePlan plan = plan_pruning(p, imp, t);
  EXPECT_EQ(vec(plan.hidden), (std::vector<int64_t>{1, 3, 5}));
  EXPECT_EQ(vec(plan.layers[0].kv_groups), (std::vector<int64_t>{0, 1}));
  // group 0: heads 3 (7) and 1 (5); group 1: head 6 (9), then 4 and 5 tie at 2 -> 4
  EXPECT_EQ(vec(plan.layers[0].heads), (std::vector<int64_t>{1, 3, 4, 6}));
  EXPECT_EQ(vec(plan.layers[0].ffn), (std::vector<int64_t>{1, 4}));  // tie at 0.4
  t.layers[0] = LayerConfig{3, 1, 2, 2};  // group 0 only (16 > 13): heads 3, 1, 2
  plan = plan_pruning(p, imp, t);
  EXPECT_EQ(vec(plan.layers[0].kv_groups), (std::vector<int64_t>{0}));
  EXPECT_EQ(vec(plan.layers[0].heads), (std::vector<int64_t>{1, 2, 3}));
  Masks masks = masks_for_plan(p, plan);
  EXPECT_TRUE(at::equal(masks.layers[0].heads,
                        at::tensor({0.f, 1.f, 1.f, 1.f, 0.f, 0.f, 0.f, 0.f})))
      << "a removed KV group zeroes all its query heads";
  EXPECT_TRUE(at::equal(masks.hidden, at::tensor({0.f, 1.f, 0.f, 1.f, 0.f, 1.f})));
  EXPECT_EQ(masks.layers[0].attn_gate.item<float>(), 1.f);
}

TEST(Prune, MasksOfGrowingWidthsAreNested) {
  ModelConfig p = ModelConfig::uniform(29, 33, 1, LayerConfig{8, 2, 4, 257});
  LlamaModel m = random_model(p, 5);
  Importance imp = importance_of(m);
  at::Tensor prev_hidden, prev_ffn, prev_heads;
  for (int64_t k = 1; k <= 4; ++k) {
    ModelConfig t = p;
    t.hidden_size = 8 * k;
    t.layers[0].intermediate_size = 64 * k;
    t.layers[0].num_attention_heads = 2 * k;  // both groups, k heads each
    Masks mk = masks_for(m, imp, t);
    EXPECT_EQ(mk.hidden.sum().item<float>(), 8 * k);
    if (k > 1) {
      EXPECT_TRUE((prev_hidden <= mk.hidden).all().item<bool>()) << "hidden width " << 8 * k;
      EXPECT_TRUE((prev_ffn <= mk.layers[0].ffn).all().item<bool>()) << "ffn width " << 64 * k;
      EXPECT_TRUE((prev_heads <= mk.layers[0].heads).all().item<bool>()) << "heads " << 2 * k;
    }
    prev_hidden = mk.hidden;
    prev_ffn = mk.layers[0].ffn;
    prev_heads = mk.layers[0].heads;
  }
}

TEST(Prune, InvalidQueryHeadCountListsValidCounts) {
  ModelConfig p = ModelConfig::uniform(11, 16, 1, LayerConfig{8, 2, 4, 20});
  ModelConfig t = p;
  t.layers[0].num_attention_heads = 5;
  try {
    validate_target(p, t);
    FAIL() << "5 heads over 2 KV groups was accepted";
  } catch (const ConfigError& e) {
    std::string w = e.what();
    EXPECT_NE(w.find("layer 0"), std::string::npos) << w;
    EXPECT_NE(w.find("valid counts: 2, 4, 6, 8"), std::string::npos) << w;
  }
  t.layers[0].num_key_value_heads = 1;
  t.layers[0].num_attention_heads = 6;  // 6 heads in one group of at most 4
  try {
    validate_target(p, t);
    FAIL() << "6 heads in one group of 4 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("valid counts: 1, 2, 3, 4"), std::string::npos)
        << e.what();
  }
}

TEST(Prune, InvalidTargetsAreRejectedClearly) {
  ModelConfig p = ModelConfig::uniform(11, 16, 2, LayerConfig{4, 2, 4, 20});
  auto expect_error = [&](ModelConfig t, const std::string& needle) {
    try {
      validate_target(p, t);
      ADD_FAILURE() << "accepted; expected an error with '" << needle << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  ModelConfig t = p;
  t.layers.pop_back();
  expect_error(t, "1 layers, expected the parent's 2");
  t = p;
  t.hidden_size = 17;
  expect_error(t, "hidden_size 17, expected 1..16");
  t = p;
  t.layers[1].num_key_value_heads = 4;
  t.layers[1].num_attention_heads = 4;
  expect_error(t, "layer 1: num_key_value_heads 4, expected 1..2");
  t = p;
  t.layers[0].intermediate_size = 21;
  expect_error(t, "layer 0: intermediate_size 21 exceeds the parent's 20");
  t = p;
  t.layers[0].head_dim = 2;
  expect_error(t, "layer 0: head_dim 2, expected the parent's 4");
  t = p;
  t.vocab_size = 12;
  expect_error(t, "vocab_size 12");
  ModelConfig p2 = p;
  p2.layers[0] = ffn_removed(p2.layers[0]);
  try {
    validate_target(p2, p);
    ADD_FAILURE() << "an FFN where the parent has none was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("layer 0: has an FFN but the parent's has none"),
              std::string::npos)
        << e.what();
  }
  // Importance of another model.
  LlamaModel m = random_model(p, 6);
  Importance imp = importance_of(m);
  imp.layers[1].ffn = at::ones({19});
  EXPECT_THROW(prune_model(m, imp, p), ConfigError);
}

TEST(Prune, ArchJsonRoundTrip) {
  const Case c = cases()[0];
  TempDir tmp;
  const fs::path path = tmp.path / "arch.json";
  write_arch(path, c.target, {{"predicted", {{"tpot_ms", 1.5}}}});
  ModelConfig back = read_arch(path);
  EXPECT_EQ(back.hidden_size, c.target.hidden_size);
  ASSERT_EQ(back.num_layers(), c.target.num_layers());
  for (size_t i = 0; i < back.layers.size(); ++i)
    EXPECT_EQ(back.layers[i], c.target.layers[i]) << "layer " << i;
  EXPECT_EQ(read_arch_json(path)["predicted"]["tpot_ms"].get<double>(), 1.5);
  write_file_atomic(tmp.path / "bad.json", "{\"hidden_size\": 3}");
  try {
    read_arch(tmp.path / "bad.json");
    FAIL() << "arch.json without config accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(write_arch(path, c.target, {{"config", 1}}), ConfigError);
}

// The CLI end to end: importance on a token file, then prune to arch.json; the written
// checkpoint equals the library's prune_model (+ dropping the removed block) bit for bit.
TEST(Prune, CliImportanceThenPrune) {
  const char* env = std::getenv("AC_BIN");
  const fs::path bin = env ? fs::path(env) : ac::test::binary_dir() / "autocompress";
  ASSERT_TRUE(fs::exists(bin)) << bin << " missing: build the autocompress target";
  const Case c = cases()[0];
  LlamaModel m = random_model(c.parent, 8);
  TempDir tmp;
  fs::create_directories(tmp.path / "parent");
  save_checkpoint(tmp.path / "parent", m);
  at::Tensor ids = random_tokens(1, 120, c.parent.vocab_size, 9).to(at::kInt).contiguous();
  write_token_file(tmp.path / "calib.tokens",
                   std::vector<int32_t>(ids.data_ptr<int32_t>(), ids.data_ptr<int32_t>() + 120),
                   c.parent.vocab_size);
  write_arch(tmp.path / "arch.json", c.target);
  const std::string p = tmp.path.string();
  ac::test::run_or_fail("AC_QUIET=1 " + bin.string() + " importance --model " + p + "/parent" +
                        " --data " + p + "/calib.tokens --seq-len 16 --batch-size 3 --out " +
                        p + "/imp.safetensors");
  ac::test::run_or_fail("AC_QUIET=1 " + bin.string() + " prune --model " + p + "/parent" +
                        " --importance " + p + "/imp.safetensors --arch " + p +
                        "/arch.json --out " + p + "/pruned");
  Importance imp = load_importance(tmp.path / "imp.safetensors");
  EXPECT_EQ(imp.num_tokens, 7 * 16) << "120 tokens make 7 windows of 16";
  LlamaModel want = drop_removed_blocks(prune_model(m, imp, c.target));
  LlamaModel got = load_checkpoint(tmp.path / "pruned");
  ASSERT_EQ(got.config.num_layers(), 3) << "the removed block is dropped";
  TensorMap a = to_tensor_map(want.config, want.weights), b = to_tensor_map(got.config, got.weights);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) EXPECT_TRUE(b.count(name) && at::equal(t, b.at(name))) << name;
  // A bad target fails with one clear line and leaves no output folder behind.
  ModelConfig bad = c.target;
  bad.layers[0].num_attention_heads = 5;
  bad.layers[0].num_key_value_heads = 1;
  nlohmann::json j = {{"config", config_to_hf_json(bad)}};
  write_file_atomic(tmp.path / "bad.json", j.dump());
  std::string cmd = bin.string() + " prune --model " + p + "/parent --importance " + p +
                    "/imp.safetensors --arch " + p + "/bad.json --out " + p + "/bad 2> " + p +
                    "/err.txt";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  std::string err = read_file(tmp.path / "err.txt");
  EXPECT_NE(err.find("valid counts: 1, 2, 3, 4"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(tmp.path / "bad"));
}
