// Minitron's homogeneous grid for a Nemotron-H teacher (search/nemotron_h_minitron.h) on the
// transformers fixture nemotronh-mix-fp32 (Mamba-2 nh 6 in 2 groups, P 5; MLP F 26; MoE E 5,
// k 2, Fe 12; 2 attention layers) under a predicted GPU scenario. Checked against what the grid
// does not compute itself: the scenario's limits by the cost model's predict(), the pruning's own
// validation, the homogeneity of every shape, and the KL by hand from the pruned model's logits.
#include <gtest/gtest.h>

#include <set>

#include "common/error.h"
#include "hardware/cost_model.h"
#include "hardware/scenario.h"
#include "importance/nemotron_h_importance.h"
#include "io/nemotron_h_checkpoint.h"
#include "nemotron_h_fixture.h"
#include "plan/plan.h"
#include "prune/nemotron_h_prune.h"
#include "search/nemotron_h_minitron.h"
#include "test_support.h"

namespace ac {
namespace {

struct GridFixture {
  NemotronHModel teacher = load_nemotron_h_checkpoint(test::nemotron_h_fixture_dir("nemotronh-mix-fp32"));
  std::vector<at::Tensor> calibration;
  NemotronHImportance imp;
  Scenario scenario = find_scenario("stories15m-game");  // TPOT <= 0.95 x the teacher's
  Plan plan;
  GridFixture() {
    at::manual_seed(7);
    for (int i = 0; i < 2; ++i)
      calibration.push_back(at::randint(teacher.config.vocab_size, {2, 16}, at::kLong));
    imp = compute_nemotron_h_importance(teacher, calibration);
    plan = plan_deployment(teacher.config, "config.json", scenario, nullptr);
  }
};

TEST(NemotronHMinitron, GridShapesAreHomogeneousFeasibleAndRankedByKl) {
  GridFixture f;
  NemotronHGridOptions opt;
  opt.width_granularity = f.plan.options.width_granularity;
  // A tiny model's TPOT on a GPU's roofline is its kernels' fixed costs, which only depth
  // lowers: the limit here is the memory of the teacher with 3 of its 5 experts, which the
  // other levers can meet too.
  ModelConfig reference = f.teacher.config;
  for (LayerConfig& l : reference.layers)
    if (l.has_moe()) l.moe->num_experts = 3;
  Limits limits;
  limits.peak_memory_bytes = predict(reference, f.scenario, nullptr).peak_memory_bytes;
  const NemotronHGrid g =
      nemotron_h_minitron_grid(f.teacher, f.imp, f.scenario, limits, f.calibration, opt);
  ASSERT_GE(g.ranked.size(), 3u);
  bool fewer_heads = false, fewer_experts = false, fewer_layers = false;
  EXPECT_GE(g.shapes, g.buildable);
  EXPECT_GE(g.buildable, g.feasible);
  EXPECT_GE(g.feasible, int64_t(g.ranked.size()));
  std::set<std::string> seen;
  const std::vector<at::Tensor> ref = nemotron_h_logprobs(f.teacher, f.calibration);
  for (size_t i = 0; i < g.ranked.size(); ++i) {
    const NemotronHGridCandidate& c = g.ranked[i];
    SCOPED_TRACE(c.shape);
    EXPECT_TRUE(seen.insert(describe(c.config)).second) << "ranked twice";
    EXPECT_NO_THROW(validate_nemotron_h_target(f.teacher.config, c.config, f.teacher.router.n_group));
    EXPECT_EQ(check_limits(predict(c.config, f.scenario, nullptr), limits), "");
    EXPECT_LT(c.config.num_parameters(), f.teacher.config.num_parameters());
    // One size per lever in every layer of its kind; attention and experts per token kept.
    std::set<std::pair<int64_t, int64_t>> mamba, moe;
    std::set<int64_t> mlp;
    for (size_t l = 0; l < c.config.layers.size(); ++l) {
      const LayerConfig& x = c.config.layers[l];
      const LayerConfig& p = f.teacher.config.layers[l];
      if (!x.is_present()) {
        fewer_layers = true;
        EXPECT_NE(l, 0u);
        EXPECT_NE(l + 1, c.config.layers.size());
        continue;
      }
      if (x.has_mamba()) {
        mamba.insert({x.mamba->mamba_num_heads, x.mamba->mamba_head_dim});
        fewer_heads |= x.mamba->mamba_num_heads < p.mamba->mamba_num_heads;
      }
      if (x.has_ffn()) mlp.insert(x.intermediate_size);
      if (x.has_moe()) {
        moe.insert({x.moe->num_experts, x.moe->moe_intermediate_size});
        fewer_experts |= x.moe->num_experts < p.moe->num_experts;
        EXPECT_EQ(x.moe->num_experts_per_tok, p.moe->num_experts_per_tok);
      }
      if (x.has_attention()) {
        EXPECT_EQ(x.num_attention_heads, p.num_attention_heads);
        EXPECT_EQ(x.num_key_value_heads, p.num_key_value_heads);
      }
    }
    EXPECT_LE(mamba.size(), 1u);
    EXPECT_LE(mlp.size(), 1u);
    EXPECT_LE(moe.size(), 1u);
    if (i > 0) {
      EXPECT_LE(g.ranked[i - 1].kl_after_pruning, c.kl_after_pruning);
    }
    // The KL by hand: sum over positions of p_t (log p_t - log p_s), over the tokens.
    const NemotronHModel s = prune_nemotron_h_model(f.teacher, f.imp, c.config);
    double sum = 0, n = 0;
    at::NoGradGuard no_grad;
    for (size_t b = 0; b < f.calibration.size(); ++b) {
      const at::Tensor lt = at::log_softmax(f.teacher.forward(f.calibration[b]).to(at::kDouble), -1);
      const at::Tensor ls = at::log_softmax(s.forward(f.calibration[b]).to(at::kDouble), -1);
      sum += (lt.exp() * (lt - ls)).sum().item<double>();
      n += double(f.calibration[b].numel());
    }
    EXPECT_NEAR(c.kl_after_pruning, sum / n, 1e-5 * std::max(1.0, sum / n));
    EXPECT_GT(c.kl_after_pruning, 0);
  }
  // The maximal shapes trade one lever for another.
  EXPECT_TRUE(fewer_heads && fewer_experts && fewer_layers)
      << fewer_heads << fewer_experts << fewer_layers;
  // The teacher against itself: KL 0.
  EXPECT_EQ(nemotron_h_calibration_kl(ref, f.teacher, f.calibration), 0.0);
}

TEST(NemotronHMinitron, SaysWhatTheSmallestShapeBreaks) {
  GridFixture f;
  NemotronHGridOptions opt;
  opt.width_granularity = f.plan.options.width_granularity;
  Limits impossible = f.plan.limits;
  impossible.tpot_ms = 1e-6;
  test::expect_error<InfeasibleError>(
      [&] {
        nemotron_h_minitron_grid(f.teacher, f.imp, f.scenario, impossible, f.calibration, opt);
      },
      {"minitron", "shapes of the hybrid grid", "stories15m-game", "the smallest (nh 2"});
  opt.width_granularity = 0;
  test::expect_error<ConfigError>(
      [&] { nemotron_h_minitron_grid(f.teacher, f.imp, f.scenario, f.plan.limits, f.calibration, opt); },
      {"width_granularity"});
}

}  // namespace
}  // namespace ac
