// AutoCompress's differentiable search on a Nemotron-H teacher (search/nemotron_h_differentiable.h)
// on the transformers fixture nemotronh-mix-fp32 (Mamba-2 nh 6 in 2 groups, P 5; MLP F 26; MoE
// E 5, k 2, Fe 12; 2 attention layers) under a predicted GPU scenario. Checked against what the
// search does not compute itself: the limits by predict(), the pruning's own validation, the
// engine's rule that Mamba-2 layers are alike, the plan's removal caps, the token count by hand;
// and the soft block gate it learns through against the forward's own removal and central
// finite differences.
#include <gtest/gtest.h>

#include <set>

#include "hardware/cost_model.h"
#include "hardware/scenario.h"
#include "importance/nemotron_h_importance.h"
#include "io/nemotron_h_checkpoint.h"
#include "nemotron_h_fixture.h"
#include "plan/plan.h"
#include "prune/nemotron_h_prune.h"
#include "search/nemotron_h_differentiable.h"
#include "search/nemotron_h_minitron.h"
#include "test_support.h"

namespace ac {
namespace {

struct SearchFixture {
  NemotronHModel teacher =
      load_nemotron_h_checkpoint(test::nemotron_h_fixture_dir("nemotronh-mix-fp32"));
  std::vector<at::Tensor> calibration;
  NemotronHImportance imp;
  Scenario scenario = find_scenario("stories15m-game");
  Plan plan;
  SearchFixture() {
    at::manual_seed(7);
    for (int i = 0; i < 2; ++i)
      calibration.push_back(at::randint(teacher.config.vocab_size, {2, 16}, at::kLong));
    imp = compute_nemotron_h_importance(teacher, calibration);
    plan = plan_deployment(teacher.config, "config.json", scenario, nullptr);
    // The memory of the teacher with 2 of its 5 experts and 4 of its 6 Mamba-2 heads: every
    // lever can help meet it (a tiny model's TPOT on a GPU's roofline is fixed costs that only
    // depth lowers).
    ModelConfig reference = teacher.config;
    for (LayerConfig& l : reference.layers) {
      if (l.has_moe()) l.moe->num_experts = 2;
      if (l.has_mamba()) l.mamba->mamba_num_heads = 4;
    }
    plan.limits = Limits{};
    plan.limits.peak_memory_bytes = predict(reference, scenario, nullptr).peak_memory_bytes;
  }
};

TEST(NemotronHDifferentiable, PicksAnArchitectureThatMeetsTheLimitsAndTheEngineRules) {
  SearchFixture f;
  HybridSearchOptions opt;
  opt.steps = 24;
  opt.seed = 3;
  const HybridSearchResult r =
      nemotron_h_differentiable_search(f.teacher, f.imp, f.plan, f.calibration, opt);
  ASSERT_TRUE(r.suggestion.has_value()) << r.to_json().dump(2);
  const ModelConfig& c = r.suggestion->config;
  const ModelConfig& p = f.teacher.config;
  EXPECT_EQ(check_limits(predict(c, f.scenario, nullptr), f.plan.limits), "");
  EXPECT_GT(predict(p, f.scenario, nullptr).peak_memory_bytes, *f.plan.limits.peak_memory_bytes);
  EXPECT_NO_THROW(validate_nemotron_h_target(p, c, f.teacher.router.n_group));
  EXPECT_LT(c.num_parameters(), p.num_parameters());
  // Mamba-2 layers alike; removals within the plan's caps, never the first or the last layer.
  std::set<std::pair<int64_t, int64_t>> mamba;
  int64_t removed = 0, attention = 0, parent_attention = 0;
  for (size_t l = 0; l < c.layers.size(); ++l) {
    if (c.layers[l].has_mamba())
      mamba.insert({c.layers[l].mamba->mamba_num_heads, c.layers[l].mamba->mamba_head_dim});
    if (!c.layers[l].is_present()) {
      ++removed;
      EXPECT_NE(l, 0u);
      EXPECT_NE(l + 1, c.layers.size());
    }
    attention += c.layers[l].has_attention();
    parent_attention += p.layers[l].has_attention();
  }
  EXPECT_LE(mamba.size(), 1u);
  EXPECT_LE(removed, int64_t(f.plan.options.max_ffn_removed_fraction * double(p.num_layers())));
  EXPECT_GE(attention, 1);
  // No slack left: one Mamba-2 step (n_groups heads in every Mamba-2 layer), one more expert (in
  // every MoE layer: this engine keeps them alike) or a removed layer given back breaks the limit.
  auto breaks = [&](const ModelConfig& n) {
    return !check_limits(predict(n, f.scenario, nullptr), f.plan.limits).empty();
  };
  ModelConfig up = c;
  bool moved = false;
  for (LayerConfig& l : up.layers)
    if (l.has_mamba() && l.mamba->mamba_num_heads < 6) l.mamba->mamba_num_heads += 2, moved = true;
  if (moved) {
    EXPECT_TRUE(breaks(up)) << describe(up);
  }
  up = c, moved = false;
  for (LayerConfig& l : up.layers)
    if (l.has_moe() && l.moe->num_experts < 5) l.moe->num_experts += 1, moved = true;
  if (moved) {
    EXPECT_TRUE(breaks(up)) << describe(up);
  }
  for (size_t l = 0; l < c.layers.size(); ++l)
    if (!c.layers[l].is_present() && !p.layers[l].has_mamba() && !p.layers[l].has_moe()) {
      up = c;
      up.layers[l] = p.layers[l];
      EXPECT_TRUE(breaks(up)) << describe(up);
    }
  // The relaxation itself moved (not only the repair): its last expected memory is below the
  // parent's, and its argmax is not the parent.
  EXPECT_LT(r.trajectory.back()["peak_memory_bytes"].get<double>(),
            double(predict(p, f.scenario, nullptr).peak_memory_bytes));
  EXPECT_NE(r.argmax.layers, p.layers);
  // Tokens by hand: the teacher's log-probabilities of every batch, KL_0's batch, each step's.
  const int64_t batch = f.calibration[0].numel();
  EXPECT_GE(r.steps_run, 1);
  EXPECT_LE(r.steps_run, opt.steps);
  EXPECT_EQ(r.search_tokens, 2 * batch + batch + r.steps_run * batch);
  ASSERT_EQ(int64_t(r.trajectory.size()), r.steps_run);
  EXPECT_GT(r.kl_scale, 0);
  // Probabilities are distributions over each decision's ladder, the parent's value first.
  ASSERT_FALSE(r.decisions.empty());
  for (const auto& d : r.decisions) {
    double sum = 0;
    for (double q : d["probabilities"]) sum += q;
    EXPECT_NEAR(sum, 1.0, 1e-9) << d.dump();
    EXPECT_EQ(d["values"].size(), d["probabilities"].size());
  }
  // The same seed gives the same search.
  const HybridSearchResult again =
      nemotron_h_differentiable_search(f.teacher, f.imp, f.plan, f.calibration, opt);
  EXPECT_EQ(again.to_json(), r.to_json());
}

// The soft removal the search learns through: gate 0 is the forward's own removal, gate 1 the
// plain block, and the KL's gradient with respect to a gate is the central finite difference.
TEST(NemotronHDifferentiable, TheBlockGateIsTheRemovalAndItsGradientIsRight) {
  SearchFixture f;
  const int64_t L = f.teacher.config.num_layers();
  const at::Tensor& batch = f.calibration[0];
  at::NoGradGuard outer;
  const at::Tensor plain = f.teacher.forward(batch);
  for (int64_t i : {int64_t(1), L / 2}) {
    SCOPED_TRACE(i);
    NemotronHMasks removed, gate0, gate1;
    removed.layers.resize(size_t(L));
    gate0.layers = gate1.layers = removed.layers;
    removed.layers[size_t(i)].removed = true;
    gate0.layers[size_t(i)].gate = at::zeros({}, at::kFloat);
    gate1.layers[size_t(i)].gate = at::ones({}, at::kFloat);
    NemotronHForwardOptions o;
    o.masks = &removed;
    const at::Tensor want0 = f.teacher.forward(batch, o);
    o.masks = &gate0;
    EXPECT_TRUE(at::allclose(f.teacher.forward(batch, o), want0, 1e-5, 1e-6));
    o.masks = &gate1;
    EXPECT_TRUE(at::allclose(f.teacher.forward(batch, o), plain, 1e-5, 1e-6));
  }
  // d KL / d gate at 0.6 against (KL(0.6 + h) - KL(0.6 - h)) / 2h (the KL in float64).
  const at::Tensor ref = at::log_softmax(plain.to(at::kDouble), -1);
  auto kl_at = [&](const at::Tensor& g) {
    NemotronHMasks m;
    m.layers.resize(size_t(L));
    m.layers[size_t(L / 2)].gate = g;
    NemotronHForwardOptions o;
    o.masks = &m;
    const at::Tensor lp = at::log_softmax(f.teacher.forward(batch, o).to(at::kDouble), -1);
    return (ref.exp() * (ref - lp)).sum() / double(batch.numel());
  };
  double analytic = 0;
  {
    at::AutoGradMode on(true);
    at::Tensor g = at::full({}, 0.6, at::kFloat).requires_grad_(true);
    kl_at(g).backward();
    analytic = g.grad().item<double>();
  }
  const double h = 1e-2;
  const double numeric = (kl_at(at::full({}, 0.6 + h, at::kFloat)).item<double>() -
                          kl_at(at::full({}, 0.6 - h, at::kFloat)).item<double>()) / (2 * h);
  EXPECT_GT(std::abs(analytic), 1e-6);
  EXPECT_NEAR(analytic, numeric, 2e-2 * std::abs(numeric) + 1e-6);
}

}  // namespace
}  // namespace ac
