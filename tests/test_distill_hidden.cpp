// Hidden-state distillation loss between mapped layers (distill/hidden_loss.h) and the pruning
// map that feeds it (prune/pruning_map.h): a float64 hand computation, exactly 0 for the
// unpruned teacher under the identity map, masking, the map `prune` writes, clear errors for a
// map that does not fit, and `distill --hidden-loss-weight` end to end.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "common/error.h"
#include "common/fs.h"
#include "common/json_io.h"
#include "data/dataset.h"
#include "data/token_file.h"
#include "distill/distill.h"
#include "distill/hidden_loss.h"
#include "importance/importance.h"
#include "io/checkpoint.h"
#include "prune/arch.h"
#include "prune/prune.h"
#include "prune/pruning_map.h"
#include "test_util.h"

namespace ac {
namespace {

// L_hid in float64 with plain loops (the formula of hidden_loss.h, independent of the code).
double hidden_loss_by_hand(const std::vector<at::Tensor>& s, const std::vector<at::Tensor>& t,
                           const at::Tensor& keep, bool normalize) {
  double total = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    at::Tensor a = s[k].to(at::kDouble).contiguous(), b = t[k].to(at::kDouble).contiguous();
    const int64_t B = a.size(0), T = a.size(1), D = a.size(2);
    auto A = a.accessor<double, 3>(), Bt = b.accessor<double, 3>();
    auto kept = [&](int64_t i, int64_t j) { return keep[i][j].item<bool>(); };
    double n = 0, se = 0;
    std::vector<double> mu(size_t(D), 0.0);
    for (int64_t i = 0; i < B; ++i)
      for (int64_t j = 0; j < T; ++j) {
        if (!kept(i, j)) continue;
        n += 1;
        for (int64_t c = 0; c < D; ++c) {
          se += (A[i][j][c] - Bt[i][j][c]) * (A[i][j][c] - Bt[i][j][c]);
          mu[size_t(c)] += Bt[i][j][c];
        }
      }
    double mse = se / (n * double(D));
    if (normalize) {
      double var = 0;
      for (int64_t i = 0; i < B; ++i)
        for (int64_t j = 0; j < T; ++j)
          if (kept(i, j))
            for (int64_t c = 0; c < D; ++c) {
              double d = Bt[i][j][c] - mu[size_t(c)] / n;
              var += d * d;
            }
      mse /= var / (n * double(D));
    }
    total += mse;
  }
  return total / double(s.size());
}

TEST(HiddenLoss, MatchesFloat64HandComputation) {
  at::manual_seed(21);
  std::vector<at::Tensor> s, t;
  for (int k = 0; k < 2; ++k) {
    s.push_back(at::randn({2, 3, 5}).requires_grad_(true));
    t.push_back(at::randn({2, 3, 5}) * (k + 1) + 0.5);
  }
  at::Tensor keep = at::tensor({1, 1, 0, 1, 0, 1}, at::kInt).to(at::kBool).view({2, 3});
  for (bool normalize : {false, true}) {
    double got = hidden_state_loss(s, t, keep, normalize).item<double>();
    double want = hidden_loss_by_hand(s, t, keep, normalize);
    EXPECT_NEAR(got, want, 1e-6 * want) << "normalize " << normalize;
  }
  // The gradient of the plain MSE is 2 (s - t) m / (n D) / K, by hand.
  hidden_state_loss(s, t, keep, false).backward();
  at::Tensor want = 2 * (s[0].detach() - t[0]) * keep.unsqueeze(-1) / (4.0 * 5.0) / 2.0;
  EXPECT_LT((s[0].grad() - want).abs().max().item<double>(), 1e-7);
  EXPECT_THROW(hidden_state_loss(s, {t[0]}, keep, false), ConfigError);
  EXPECT_THROW(hidden_state_loss({s[0]}, {t[0].narrow(2, 0, 4)}, keep, false), ConfigError);
}

ModelConfig tiny_config(int64_t layers) {
  ModelConfig c = ModelConfig::uniform(48, 32, layers, LayerConfig{4, 2, 8, 48});
  c.tie_word_embeddings = true;
  return c;
}

TEST(HiddenLoss, ExactlyZeroForTheUnprunedTeacherUnderTheIdentityMap) {
  LlamaModel teacher{tiny_config(3), random_weights(tiny_config(3), 3, 0.3)};
  LlamaModel student{teacher.config, clone(teacher.config, teacher.weights)};
  for (auto& p : student.weights.parameters()) p.requires_grad_(true);
  at::Tensor tokens = test::random_tokens(2, 9, 48, 4);
  PruningMap map = identity_pruning_map(teacher.config);
  check_pruning_map(map, teacher.config, student.config, "identity");
  for (bool normalize : {false, true}) {
    HiddenForward f = forward_with_hidden_loss(teacher, student, tokens, map, {}, normalize);
    EXPECT_EQ(f.loss.item<double>(), 0.0) << "normalize " << normalize;
    EXPECT_TRUE(at::equal(f.teacher_logits, f.student_logits.detach()));
  }
  // A perturbed student has a positive loss (the test can fail).
  {
    at::NoGradGuard g;
    student.weights.layers[1].down_proj.add_(0.1);
  }
  HiddenForward f = forward_with_hidden_loss(teacher, student, tokens, map, {}, true);
  EXPECT_GT(f.loss.item<double>(), 1e-6);
}

TEST(HiddenLoss, MaskedPositionsContributeNothingAndGetFiniteGradients) {
  at::manual_seed(2);
  at::Tensor s0 = at::randn({1, 4, 6}), t = at::randn({1, 4, 6});
  s0[0][1].fill_(std::numeric_limits<float>::quiet_NaN());
  t[0][3].fill_(std::numeric_limits<float>::infinity());
  at::Tensor keep = at::tensor({1, 0, 1, 0}, at::kInt).to(at::kBool).view({1, 4});
  for (bool normalize : {false, true}) {
    at::Tensor s = s0.clone().requires_grad_(true);
    at::Tensor loss = hidden_state_loss({s}, {t}, keep, normalize);
    loss.backward();
    ASSERT_TRUE(std::isfinite(loss.item<double>())) << "normalize " << normalize;
    ASSERT_TRUE(s.grad().isfinite().all().item<bool>());
    EXPECT_EQ(s.grad()[0][1].abs().max().item<float>(), 0.f);
    EXPECT_EQ(s.grad()[0][3].abs().max().item<float>(), 0.f);
    at::Tensor idx = at::tensor({0, 2}, at::kLong);
    double sub = hidden_state_loss({s0.index_select(1, idx)}, {t.index_select(1, idx)}, {},
                                   normalize).item<double>();
    EXPECT_NEAR(loss.item<double>(), sub, 1e-6 * sub);
  }
}

// A parent checkpoint, its importance and an arch.json that narrows the hidden size and removes
// the middle block, in `dir`.
struct PruneFixture {
  fs::path dir;
  std::string cli = (ac::test::binary_dir() / "autocompress").string();
  LlamaModel parent{tiny_config(3), random_weights(tiny_config(3), 7, 0.3)};
  Importance imp;
  ModelConfig target;
  explicit PruneFixture(const fs::path& d) : dir(d) {
    fs::create_directories(dir / "parent");
    save_checkpoint(dir / "parent", parent);
    ImportanceOptions io;
    io.show_progress = false;
    imp = compute_importance(parent, {test::random_tokens(2, 12, 48, 5)}, io);
    save_importance(dir / "importance.safetensors", imp);
    target = parent.config;
    target.hidden_size = 24;
    LayerConfig& mid = target.layers[1];
    mid.attention_no_op = mid.ffn_no_op = true;
    mid.num_attention_heads = mid.num_key_value_heads = 0;
    mid.intermediate_size = 0;
    write_arch(dir / "arch.json", target);
  }
  // DIR/train.tokens: 3000 random ids of the parent's vocabulary (the distillation's data).
  void write_train_tokens() const {
    at::Tensor ids = test::random_tokens(1, 3000, 48, 6).to(at::kInt).view({-1});
    write_token_file(dir / "train.tokens",
                     std::vector<int32_t>(ids.data_ptr<int32_t>(), ids.data_ptr<int32_t>() + 3000),
                     48);
  }
  std::string prune(const std::string& out) const {
    return fmt::format("AC_QUIET=1 {} prune --model {} --importance {} --arch {} --out {}", cli,
                       (dir / "parent").string(), (dir / "importance.safetensors").string(),
                       (dir / "arch.json").string(), (dir / out).string());
  }
};

TEST(PruningMap, PruneWritesAMapThatAgreesWithThePrunedModel) {
  test::TempDir d;
  PruneFixture fx(d.path);
  test::run_or_fail(fx.prune("student") + " >/dev/null 2>&1");
  LlamaModel student = load_checkpoint(d.path / "student");
  PruningMap map = read_pruning_map(d.path / "student" / kPruningMapFile);
  ASSERT_EQ(student.config.hidden_size, 24);
  ASSERT_EQ(student.config.num_layers(), 2);
  EXPECT_EQ(map.layers, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(map.teacher_hidden_size, 32);
  EXPECT_EQ(map.teacher_num_layers, 3);
  EXPECT_NO_THROW(check_pruning_map(map, fx.parent.config, student.config, "written map"));
  EXPECT_TRUE(at::equal(map.hidden_channels, plan_pruning(fx.parent.config, fx.imp, fx.target).hidden));
  // The channels are the ones the weights were sliced by: embedding columns, and the kept
  // blocks' norms / projections come from the mapped teacher layers.
  EXPECT_TRUE(at::equal(student.weights.embed_tokens,
                        fx.parent.weights.embed_tokens.index_select(1, map.hidden_channels)));
  for (size_t i = 0; i < map.layers.size(); ++i)
    EXPECT_TRUE(at::equal(student.weights.layers[i].input_layernorm,
                          fx.parent.weights.layers[size_t(map.layers[i])].input_layernorm
                              .index_select(0, map.hidden_channels)))
        << "student layer " << i;
  // With the blocks kept as no-ops, the map is the identity on layers.
  test::run_or_fail(fx.prune("keep") + " --keep-removed-blocks >/dev/null 2>&1");
  EXPECT_EQ(read_pruning_map(d.path / "keep" / kPruningMapFile).layers,
            (std::vector<int64_t>{0, 1, 2}));
}

TEST(PruningMap, AMapThatDoesNotFitFailsWithAClearError) {
  ModelConfig teacher = tiny_config(3), student = tiny_config(2);
  student.hidden_size = 24;
  PruningMap good;
  good.teacher_hidden_size = 32;
  good.teacher_num_layers = 3;
  good.hidden_channels = at::arange(0, 32, 4, at::kLong).repeat({3}).slice(0, 0, 24);  // repeats
  good.layers = {0, 2};
  auto message = [&](const PruningMap& m) {
    try {
      check_pruning_map(m, teacher, student, "some/pruning_map.json");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(good).find("appears twice"), std::string::npos) << message(good);
  good.hidden_channels = at::arange(24, at::kLong);
  EXPECT_EQ(message(good), "no error");
  PruningMap m = good;
  m.hidden_channels = at::arange(20, at::kLong);
  std::string e = message(m);
  EXPECT_NE(e.find("some/pruning_map.json"), std::string::npos) << e;
  EXPECT_NE(e.find("hidden_channels has 20 entries, the student's hidden_size is 24"),
            std::string::npos) << e;
  m = good;
  m.layers = {0, 1, 2};
  EXPECT_NE(message(m).find("layers has 3 entries, the student has 2 layers"), std::string::npos);
  m = good;
  m.layers = {2, 1};
  EXPECT_NE(message(m).find("strictly increase"), std::string::npos);
  m = good;
  m.teacher_hidden_size = 64;
  EXPECT_NE(message(m).find("teacher with hidden_size 64"), std::string::npos);
  m = good;
  m.hidden_channels = at::arange(10, 34, at::kLong);
  EXPECT_NE(message(m).find("outside [0, 32)"), std::string::npos) << message(m);
  // Files: missing, and a wrong field type, name the file.
  test::TempDir d;
  try {
    read_pruning_map(d.path / "pruning_map.json");
    ADD_FAILURE() << "a missing map must throw";
  } catch (const FormatError& err) {
    EXPECT_NE(std::string(err.what()).find((d.path / "pruning_map.json").string()),
              std::string::npos) << err.what();
  }
  write_file_atomic(d.path / "bad.json", R"({"format": "autocompress.pruning_map", "version": 1,
    "teacher_hidden_size": 32, "teacher_num_layers": 3, "hidden_channels": [0, 1.5], "layers": [0]})");
  EXPECT_THROW(read_pruning_map(d.path / "bad.json"), FormatError);
  write_pruning_map(d.path / "good.json", good);
  PruningMap back = read_pruning_map(d.path / "good.json");
  EXPECT_TRUE(at::equal(back.hidden_channels, good.hidden_channels));
  EXPECT_EQ(back.layers, good.layers);
}

TEST(DistillHidden, TrainerAddsTheHiddenLossAndRefusesAMissingMap) {
  ModelConfig c = tiny_config(2);
  LlamaModel teacher{c, random_weights(c, 11, 0.3)};
  LlamaModel student{c, clone(c, teacher.weights)};
  {
    at::NoGradGuard g;
    at::manual_seed(5);
    for (auto& p : student.weights.parameters()) p.add_(at::randn_like(p) * 0.05);
  }
  at::manual_seed(1);
  at::Tensor ids = at::randint(0, 48, {4000}, at::kInt);
  TokenDataset data(std::vector<int32_t>(ids.data_ptr<int32_t>(), ids.data_ptr<int32_t>() + 4000),
                    48);
  DistillOptions o;
  o.batch_size = 4;
  o.seq_len = 16;
  o.token_budget = 30 * 64;
  o.lr = 3e-3;
  o.min_lr = 3e-4;
  o.warmup_steps = 2;
  o.checkpoint_every = 0;
  o.show_progress = false;
  o.hidden_loss_weight = 1.0;
  EXPECT_THROW(distill(teacher, student, data, o), ConfigError);  // no map
  PruningMap bad = identity_pruning_map(c);
  bad.layers = {0};
  o.hidden_map = bad;
  EXPECT_THROW(distill(teacher, student, data, o), ConfigError);
  o.hidden_map = identity_pruning_map(c);
  DistillResult r = distill(teacher, student, data, o);
  ASSERT_EQ(r.steps.size(), 30u);
  for (const auto& s : r.steps) {
    ASSERT_TRUE(std::isfinite(s.hidden)) << "step " << s.step;
    EXPECT_GT(s.hidden, 0) << "step " << s.step;
    // The logged loss is KL + w_h L_hid (ce_weight 0, w_h = 1).
    EXPECT_NEAR(s.loss, s.kl + s.hidden, 1e-5 * s.loss) << "step " << s.step;
  }
}

TEST(DistillHidden, CliReadsTheMapOfPruneAndNamesItWhenItDoesNotFit) {
  test::TempDir d;
  PruneFixture fx(d.path);
  test::run_or_fail(fx.prune("student") + " >/dev/null 2>&1");
  fx.write_train_tokens();
  auto distill_cmd = [&](const std::string& student, const std::string& out) {
    return fmt::format("AC_NUM_THREADS=1 AC_QUIET=1 {} distill --teacher {} --student {} --data "
                       "{} --tokens 256 --batch-size 4 --seq-len 16 --hidden-loss-weight 0.5 "
                       "--out {} 2>{}", fx.cli, (d.path / "parent").string(),
                       (d.path / student).string(), (d.path / "train.tokens").string(),
                       (d.path / out).string(), (d.path / (out + ".err")).string());
  };
  test::run_or_fail(distill_cmd("student", "distilled") + " >/dev/null");
  EXPECT_TRUE(fs::exists(d.path / "distilled" / kPruningMapFile));
  json info = read_json_file(d.path / "distilled" / "distill.json");
  EXPECT_EQ(info["hidden_loss_weight"].get<double>(), 0.5);
  // A map that does not fit: the error names the file.
  fs::copy(d.path / "student", d.path / "student_badmap", fs::copy_options::recursive);
  PruningMap bad = read_pruning_map(d.path / "student" / kPruningMapFile);
  bad.layers = {0, 1, 2};
  write_pruning_map(d.path / "student_badmap" / kPruningMapFile, bad);
  EXPECT_NE(std::system((distill_cmd("student_badmap", "o2") + " >/dev/null").c_str()), 0);
  std::string err = read_file(d.path / "o2.err");
  EXPECT_NE(err.find((d.path / "student_badmap" / kPruningMapFile).string()), std::string::npos)
      << err;
  EXPECT_NE(err.find("layers has 3 entries"), std::string::npos) << err;
  // No map at all.
  fs::remove(d.path / "student_badmap" / kPruningMapFile);
  EXPECT_NE(std::system((distill_cmd("student_badmap", "o3") + " >/dev/null").c_str()), 0);
  EXPECT_NE(read_file(d.path / "o3.err").find("no such file"), std::string::npos);
}

// distill --bld-tokens: the blockwise distillation alone (--tokens 0) writes the student and
// bld.json with every block of the narrower student; first, then the distillation; and the
// same refusal as the hidden-state loss when the map is missing.
TEST(DistillBld, CliRunsTheBlockwiseDistillationAloneOrFirst) {
  test::TempDir d;
  PruneFixture fx(d.path);
  test::run_or_fail(fx.prune("student") + " >/dev/null 2>&1");
  fx.write_train_tokens();
  auto cmd = [&](const std::string& student, const std::string& tokens, const std::string& out) {
    return fmt::format("AC_NUM_THREADS=1 AC_QUIET=1 {} distill --teacher {} --student {} --data "
                       "{} --tokens {} --bld-tokens 128 --batch-size 4 --seq-len 16 --out {} "
                       "2>{}", fx.cli, (d.path / "parent").string(), (d.path / student).string(),
                       (d.path / "train.tokens").string(), tokens, (d.path / out).string(),
                       (d.path / (out + ".err")).string());
  };
  test::run_or_fail(cmd("student", "0", "bld") + " >/dev/null");
  json b = read_json_file(d.path / "bld" / "bld.json");
  EXPECT_EQ(b["tokens"].get<int64_t>(), 128);
  ASSERT_EQ(b["blocks"].size(), 2u);  // hidden 32 -> 24: both kept blocks
  EXPECT_EQ(b["blocks"][0]["teacher_layers"], json({0, 2}));  // the dropped middle block
  EXPECT_EQ(b["blocks"][1]["teacher_layers"], json({2, 3}));
  LlamaModel pruned = load_checkpoint(d.path / "student");
  LlamaModel after = load_checkpoint(d.path / "bld");
  EXPECT_FALSE(at::equal(pruned.weights.layers[0].down_proj, after.weights.layers[0].down_proj));
  EXPECT_TRUE(at::equal(pruned.weights.embed_tokens, after.weights.embed_tokens));
  EXPECT_TRUE(fs::exists(d.path / "bld" / kPruningMapFile));
  EXPECT_FALSE(fs::exists(d.path / "bld.state"));
  test::run_or_fail(cmd("student", "256", "both") + " >/dev/null");
  EXPECT_TRUE(fs::exists(d.path / "both" / "bld.json"));
  EXPECT_TRUE(fs::exists(d.path / "both" / "distill_log.csv"));
  // --tokens 0 without --bld-tokens trains nothing: refused, naming both flags.
  std::string none = fmt::format("AC_QUIET=1 {} distill --teacher {} --student {} --data {} "
                                 "--tokens 0 --out {} 2>{} >/dev/null", fx.cli,
                                 (d.path / "parent").string(), (d.path / "student").string(),
                                 (d.path / "train.tokens").string(), (d.path / "o4").string(),
                                 (d.path / "o4.err").string());
  EXPECT_NE(std::system(none.c_str()), 0);
  EXPECT_NE(read_file(d.path / "o4.err").find("--bld-tokens"), std::string::npos)
      << read_file(d.path / "o4.err");
  fs::copy(d.path / "student", d.path / "nomap", fs::copy_options::recursive);
  fs::remove(d.path / "nomap" / kPruningMapFile);
  EXPECT_NE(std::system((cmd("nomap", "0", "o5") + " >/dev/null").c_str()), 0);
  EXPECT_NE(read_file(d.path / "o5.err").find(kPruningMapFile), std::string::npos)
      << read_file(d.path / "o5.err");
  EXPECT_FALSE(fs::exists(d.path / "o5"));
}

}  // namespace
}  // namespace ac
