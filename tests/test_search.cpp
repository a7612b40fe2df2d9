// The differentiable search (search/differentiable.h, search_space.h, repair.h) on a small
// random model with the roofline cost model of a GPU spec:
//   - repair never returns an architecture over a limit (property test over random budgets,
//     from random start points); it fails only where even the smallest architecture does;
//   - no binding limit keeps the full model; a zero-weight cost term keeps the full model as
//     the argmax (and the multiplier keeps rising while the expected cost is over budget);
//   - an impossible budget fails with InfeasibleError naming the smallest reachable cost,
//     computed here by hand from the space's narrowest shape;
//   - the Lagrangian cost term's gradient w.r.t. the logits matches central differences;
//   - one-hot supernet masks give the physically pruned model's logits;
//   - the SVG writer escapes text and draws one polyline per series.
#include <cstdio>
#include <random>

#include "common/error.h"
#include "common/svg.h"
#include "hardware/cost_model.h"
#include "hardware/expected_cost.h"
#include "prune/depth.h"
#include "prune/prune.h"
#include "pipeline/steps.h"
#include "search/differentiable.h"
#include "search/plots.h"
#include "search_fixture.h"
#include "test_util.h"

using namespace ac;
using ac::test::random_tokens;
using ac::test::gpu_scenario;
using ac::test::importance_of;
using ac::test::small_model;
using ac::test::space_options;

namespace {

DifferentiableOptions search_options() {
  DifferentiableOptions o;
  o.space = space_options();
  o.steps = 30;
  o.show_progress = false;
  o.seed = 3;
  // The step sizes these tests were written for. With the defaults (0.3 / 2, tuned on
  // stories15M) the zero-cost-weight search drifts here: its argmax dropped layer 3's attention
  // on this random model (soft Gumbel samples, KL gradient noise at a larger step).
  o.logit_lr = 0.1;
  o.dual_lr = 0.5;
  return o;
}

// Same architecture: hidden size and every layer's shape.
bool same_shape(const ModelConfig& a, const ModelConfig& b) {
  return a.hidden_size == b.hidden_size && a.layers == b.layers;
}

// True if no limit lies beyond what the space can reach on that metric.
bool reachable_fits(const ReachableCost& r, const Limits& l) {
  return !(l.ttft_ms && r.ttft_ms > *l.ttft_ms) && !(l.tpot_ms && r.tpot_ms > *l.tpot_ms) &&
         !(l.peak_memory_bytes && r.peak_memory_bytes > *l.peak_memory_bytes) &&
         !(l.min_throughput_tokens_per_s && r.throughput_tokens_per_s < *l.min_throughput_tokens_per_s);
}

std::vector<at::Tensor> calibration(const LlamaModel& m) {
  return {random_tokens(2, 16, m.config.vocab_size, 8), random_tokens(2, 16, m.config.vocab_size, 9)};
}

}  // namespace

TEST(Search, SpaceOfTheSmallModel) {
  LlamaModel m = small_model();
  SearchSpace s = build_search_space(m.config, importance_of(m), space_options());
  // Hidden 64 -> multiples of 16 down to ceil(0.4 * 64) = 26: 64, 48, 32.
  EXPECT_EQ(s.hidden_sizes, (std::vector<int64_t>{64, 48, 32}));
  // KV groups {2, 1} x heads per group {4, 3, 2}, by heads kept, then removal.
  std::vector<std::string> att;
  for (int64_t a = 0; a < int64_t(s.attention[0].size()); ++a) att.push_back(s.attention_label(0, a));
  EXPECT_EQ(att, (std::vector<std::string>{"H8/G2", "H6/G2", "H4/G2", "H4/G1", "H3/G1", "H2/G1", "removed"}));
  std::vector<std::string> ffn;
  for (int64_t f = 0; f < int64_t(s.ffn[0].size()); ++f) ffn.push_back(s.ffn_label(0, f));
  EXPECT_EQ(ffn, (std::vector<std::string>{"96", "80", "64", "48", "removed"}));
  EXPECT_EQ(s.max_blocks_removed, 1);  // 4 / 3
  EXPECT_TRUE(same_shape(target_of(s, s.full()), m.config));
  EXPECT_EQ(importance_lost(s, s.full()), 0.0);
  // Masks are nested: each narrower FFN option keeps a subset of the wider one.
  for (size_t f = 1; f < s.ffn[0].size(); ++f)
    EXPECT_TRUE((s.ffn_masks[0][int64_t(f)] <= s.ffn_masks[0][int64_t(f) - 1]).all().item<bool>());
}

// A hidden size whose profile passes disagreed by more than max_width_spread is left out; the
// parent's width stays whatever its spread, and without the limit every width is offered.
TEST(Search, WidthsTheProfileCannotRepeatAreLeftOut) {
  LlamaModel m = small_model();
  SearchSpaceOptions o = space_options();
  o.width_repeatability = {{32, 0.02, 0.01}, {48, 0.01, 0.25}, {64, 0.30, 0.30}};
  o.max_width_spread = 0.10;
  SearchSpace s = build_search_space(m.config, importance_of(m), o);
  EXPECT_EQ(s.hidden_sizes, (std::vector<int64_t>{64, 32}));  // 48: its TPOT moved 25%
  EXPECT_EQ(s.widths_left_out, (std::vector<int64_t>{48}));
  EXPECT_EQ(s.hidden_masks.size(0), 2);
  o.max_width_spread = 0;
  EXPECT_EQ(build_search_space(m.config, importance_of(m), o).hidden_sizes,
            (std::vector<int64_t>{64, 48, 32}));
  // Only the latencies the limits bind count: a TTFT limit keeps 48 (its TTFT spread is 1%).
  Limits ttft_only;
  ttft_only.ttft_ms = 1.0;
  o.width_repeatability = repeatability_that_matters(o.width_repeatability, ttft_only);
  o.max_width_spread = 0.10;
  EXPECT_EQ(o.width_repeatability[1].ttft_spread, 0.01);
  EXPECT_EQ(o.width_repeatability[1].tpot_spread, 0.0);
  EXPECT_EQ(build_search_space(m.config, importance_of(m), o).hidden_sizes,
            (std::vector<int64_t>{64, 48, 32}));
  Limits throughput;
  throughput.min_throughput_tokens_per_s = 10.0;  // a request's TTFT and TPOT both count
  const auto both = repeatability_that_matters({{48, 0.01, 0.25}}, throughput);
  EXPECT_EQ(both[0].ttft_spread, 0.01);
  EXPECT_EQ(both[0].tpot_spread, 0.25);
}

// --max-attention-free-layers N: "attention removed" is offered in the N layers of lowest block
// influence only (0: nowhere), so no architecture of the space has more attention-free layers.
TEST(Search, AttentionFreeLayersAreCappedByBlockInfluence) {
  LlamaModel m = small_model();
  Importance imp = importance_of(m);
  imp.block_influence = at::tensor({0.5, 0.1, 0.3, 0.2}, at::kFloat);  // lowest: 1, then 3
  auto removable = [&](int64_t cap) {
    SearchSpaceOptions o = space_options();
    o.max_attention_removed = cap;
    SearchSpace s = build_search_space(m.config, imp, o);
    std::vector<int64_t> layers;
    for (int64_t l = 0; l < s.num_layers(); ++l)
      if (removed_option(s.attention[size_t(l)], /*attention=*/true) >= 0) layers.push_back(l);
    // The smallest architecture of the space obeys the cap too.
    int64_t free = 0;
    for (const LayerConfig& l : target_of(s, smallest_choice(s)).layers) free += !l.has_attention();
    EXPECT_LE(free, cap < 0 ? s.num_layers() - 1 : cap);
    return layers;
  };
  EXPECT_EQ(removable(-1), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(removable(0), (std::vector<int64_t>{}));
  EXPECT_EQ(removable(1), (std::vector<int64_t>{1}));
  EXPECT_EQ(removable(2), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(removable(9), (std::vector<int64_t>{0, 1, 2, 3}));
}

// A candidate's JSON carries the target (the parent's layer count, removed parts marked), which
// `prune --arch` takes, beside the deployed config (removed blocks dropped).
TEST(Search, CandidateJsonCarriesTheTargetThatPruneTakes) {
  LlamaModel m = small_model();
  ModelConfig target = m.config;
  target.layers[2].attention_no_op = target.layers[2].ffn_no_op = true;  // a whole block
  target.layers[2].num_attention_heads = target.layers[2].num_key_value_heads = 0;
  target.layers[2].intermediate_size = 0;
  target.layers[1].attention_no_op = true;
  target.layers[1].num_attention_heads = target.layers[1].num_key_value_heads = 0;
  Candidate c = costed_candidate(target, [](const ModelConfig&) { return CostEstimate{}; }, {});
  nlohmann::json j = c.to_json();
  ModelConfig back = config_from_hf_json(j["target"], "candidate");
  EXPECT_EQ(back.layers, target.layers);
  EXPECT_EQ(config_from_hf_json(j["config"], "candidate").num_layers(), 3);
}

TEST(Search, OneHotSupernetMasksEqualThePrunedModel) {
  LlamaModel m = small_model();
  Importance imp = importance_of(m);
  SearchSpace s = build_search_space(m.config, imp, space_options());
  ArchChoice c = s.full();
  c.hidden = 1;
  c.attention = {3, 6, 1, 0};  // H4/G1, removed, H6/G2, full
  c.ffn = {2, 4, 0, 3};        // 64, removed (block 1 removed), 96, 48
  ASSERT_EQ(structural_violation(s, c), "");
  ArchLogits y;
  auto hot = [](int64_t n, int64_t k) { return at::one_hot(at::tensor(k), n).view({n}).to(at::kFloat); };
  y.hidden = hot(int64_t(s.hidden_sizes.size()), c.hidden);
  for (size_t l = 0; l < 4; ++l) {
    y.attention.push_back(hot(int64_t(s.attention[l].size()), c.attention[l]));
    y.ffn.push_back(hot(int64_t(s.ffn[l].size()), c.ffn[l]));
  }
  Masks masks = supernet_masks(s, y);
  ForwardOptions fo;
  fo.masks = &masks;
  at::Tensor tokens = random_tokens(2, 13, m.config.vocab_size, 4);
  at::NoGradGuard no_grad;
  LlamaModel pruned = drop_removed_blocks(prune_model(m, imp, target_of(s, c)));
  EXPECT_EQ(pruned.config.num_layers(), 3);
  at::Tensor want = pruned.forward(tokens);
  double diff = (m.forward(tokens, fo) - want).abs().max().item<double>();
  double scale = want.abs().max().item<double>();
  // fp32: the masked sums run over all D / F channels (zeros included), the pruned ones over
  // the kept channels only, so the rounding differs (test_prune.cpp allows 1e-5 absolute).
  EXPECT_LT(diff, 1e-5 * std::max(1.0, scale))
      << "largest difference masked supernet vs pruned model " << diff << ", max |logit| " << scale;
}

TEST(Search, RepairNeverReturnsAnArchitectureOverALimit) {
  LlamaModel m = small_model();
  SearchSpace s = build_search_space(m.config, importance_of(m), space_options());
  Scenario sc = gpu_scenario();
  CostFn cost = [&](const ModelConfig& c) { return predict(c, sc, nullptr); };
  const CostEstimate full = cost(m.config);
  const ReachableCost small = smallest_reachable(s, cost);
  ASSERT_LT(small.tpot_ms, full.tpot_ms);
  ASSERT_LT(small.peak_memory_bytes, full.peak_memory_bytes);
  // The reachable minimum is no worse than the smallest_choice architecture on every metric.
  const CostEstimate sm = choice_cost(s, smallest_choice(s), cost);
  EXPECT_LE(small.ttft_ms, sm.ttft_ms);
  EXPECT_LE(small.tpot_ms, sm.tpot_ms);
  EXPECT_LE(small.peak_memory_bytes, sm.peak_memory_bytes);
  EXPECT_GE(small.throughput_tokens_per_s, sm.throughput_tokens_per_s);
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> u(-0.3, 1.1);  // < 0: below the smallest reachable
  auto between = [&](double lo, double hi) { return lo + u(rng) * (hi - lo); };
  int repaired = 0, feasible_start = 0, infeasible = 0;
  for (int trial = 0; trial < 60; ++trial) {
    Limits lim;
    if (rng() % 2) lim.ttft_ms = between(small.ttft_ms, full.ttft_ms);
    if (rng() % 2) lim.tpot_ms = between(small.tpot_ms, full.tpot_ms);
    if (rng() % 2) lim.peak_memory_bytes = int64_t(between(double(small.peak_memory_bytes), double(full.peak_memory_bytes)));
    if (rng() % 3 == 0) lim.min_throughput_tokens_per_s = between(full.throughput_tokens_per_s, small.throughput_tokens_per_s);
    ArchChoice start;
    start.hidden = int64_t(rng() % s.hidden_sizes.size());
    for (size_t l = 0; l < 4; ++l) {
      start.attention.push_back(int64_t(rng() % s.attention[l].size()));
      start.ffn.push_back(int64_t(rng() % s.ffn[l].size()));
    }
    const bool smallest_fits = reachable_fits(small, lim);
    try {
      RepairResult r = repair_architecture(s, start, cost, lim);
      CostEstimate again = cost(drop_removed_blocks(r.target));
      EXPECT_EQ(check_limits(again, lim), "") << "trial " << trial;
      EXPECT_EQ(structural_violation(s, r.choice), "") << "trial " << trial;
      EXPECT_EQ(describe(r.config), describe(drop_removed_blocks(r.target)));
      EXPECT_TRUE(smallest_fits) << "trial " << trial << ": a limit below the smallest cost was "
                                 << "met by " << describe(r.config) << " " << again.to_json().dump();
      repaired += !r.steps.empty();
      feasible_start += r.steps.empty();
      for (size_t k = 0; k + 1 < r.steps.size(); ++k) EXPECT_NE(r.steps[k].violation, "");
    } catch (const InfeasibleError& e) {
      ++infeasible;
      EXPECT_FALSE(smallest_fits) << "trial " << trial << ": repair gave up although the "
                                  << "smallest architecture meets the limits: " << e.what();
    }
  }
  // The property is exercised: many repairs with steps, some infeasible budgets.
  EXPECT_GE(repaired, 15);
  EXPECT_GE(infeasible, 3);
  std::printf("repaired %d, already feasible %d, infeasible %d\n", repaired, feasible_start, infeasible);
}

TEST(Search, NoBindingLimitKeepsTheFullModel) {
  LlamaModel m = small_model();
  Importance imp = importance_of(m);
  Scenario sc = gpu_scenario();
  const CostEstimate full = predict(m.config, sc, nullptr);
  for (bool any : {false, true}) {
    Limits lim;
    if (any) lim.tpot_ms = 2 * full.tpot_ms, lim.peak_memory_bytes = 2 * full.peak_memory_bytes;
    DifferentiableResult r = differentiable_search(m, imp, sc, nullptr, lim, calibration(m), search_options());
    EXPECT_TRUE(r.parent_meets_limits);
    EXPECT_TRUE(same_shape(r.search.best.target, m.config)) << describe(r.search.best.target);
    EXPECT_EQ(r.search.search_tokens, 0);
    EXPECT_TRUE(r.trajectory.empty());
  }
}

TEST(Search, ZeroWeightCostTermKeepsTheFullModelAndTheMultiplierRises) {
  LlamaModel m = small_model();
  Importance imp = importance_of(m);
  Scenario sc = gpu_scenario();
  const double full = predict(m.config, sc, nullptr).tpot_ms;
  const double least = smallest_reachable(build_search_space(m.config, imp, space_options()),
                                          [&](const ModelConfig& c) { return predict(c, sc, nullptr); })
                           .tpot_ms;
  Limits lim;
  lim.tpot_ms = least + 0.6 * (full - least);  // binding, reachable
  DifferentiableOptions o = search_options();
  o.cost_weight = 0;
  DifferentiableResult r = differentiable_search(m, imp, sc, nullptr, lim, calibration(m), o);
  EXPECT_FALSE(r.parent_meets_limits);
  EXPECT_TRUE(same_shape(r.argmax_target, m.config)) << describe(r.argmax_target);
  // The distillation loss alone never pays for a smaller model. The multiplier follows dual
  // ascent, lambda <- max(0, lambda + dual_lr (E[TPOT] - b) / s), rising while over budget.
  ASSERT_EQ(r.trajectory.size(), size_t(r.steps_run));
  double lambda = 0;
  int rises = 0;
  for (const auto& t : r.trajectory) {
    // Violation in units of the range the search controls (full - least).
    const double next = std::max(0.0, lambda + o.dual_lr * (t.tpot_ms - *lim.tpot_ms) / (full - least));
    EXPECT_NEAR(t.multipliers.at("tpot_ms"), next, 1e-12) << "step " << t.step;
    rises += t.tpot_ms > *lim.tpot_ms && next > lambda;
    lambda = t.multipliers.at("tpot_ms");
  }
  EXPECT_GT(rises, 0);
  EXPECT_GT(r.trajectory.back().tpot_ms, *lim.tpot_ms);  // nothing pulled the cost down
  // The repair still brings it under the limit.
  EXPECT_EQ(check_limits(predict(r.search.best.config, sc, nullptr), lim), "");
  EXPECT_FALSE(r.repair.steps.empty());
  // Tokens: 2 teacher batches once, one batch per step, then both batches per KL evaluation of
  // the ranking and the refinement (rank_batches = 2 by default).
  EXPECT_EQ(r.evaluation_tokens, 2 * 32);
  EXPECT_GT(r.evaluations, 0);
  EXPECT_EQ(r.search.search_tokens, 2 * 32 + r.steps_run * 32 + r.evaluations * 2 * 32);
}

// Searches that share a SharedSearchState (the restarts of compress) give the results they give
// alone, and the search tokens count what was computed: the teacher's pass once, and each
// target's KL after pruning once however many searches rank it.
TEST(Search, SearchesSharingTheTeachersPassAndTheKlsGiveTheSameResults) {
  LlamaModel m = small_model();
  Importance imp = importance_of(m);
  Scenario sc = gpu_scenario();
  const double full = predict(m.config, sc, nullptr).tpot_ms;
  const double least = smallest_reachable(build_search_space(m.config, imp, search_options().space),
                                          [&](const ModelConfig& c) { return predict(c, sc, nullptr); })
                           .tpot_ms;
  Limits lim;
  lim.tpot_ms = least + 0.5 * (full - least);
  DifferentiableOptions o = search_options();
  const std::vector<at::Tensor> batches = calibration(m);
  SharedSearchState shared;
  int64_t alone_tokens = 0, shared_tokens = 0;
  const uint64_t seeds[] = {1, 1, 1001};  // a repeat: every KL is the first search's
  for (size_t i = 0; i < 3; ++i) {
    o.seed = seeds[i];
    const DifferentiableResult a = differentiable_search(m, imp, sc, nullptr, lim, batches, o);
    const DifferentiableResult b = differentiable_search(m, imp, sc, nullptr, lim, batches, o, &shared);
    EXPECT_EQ(describe(a.search.best.config), describe(b.search.best.config)) << i;
    ASSERT_EQ(a.search.candidates.size(), b.search.candidates.size()) << i;
    for (size_t k = 0; k < a.search.candidates.size(); ++k)
      EXPECT_EQ(a.search.candidates[k].loss_after_prune, b.search.candidates[k].loss_after_prune);
    alone_tokens += a.search.search_tokens;
    shared_tokens += b.search.search_tokens;
    // Alone: the teacher's pass, the steps, every evaluation; shared: the teacher's pass in the
    // first search only, and the evaluations of targets no earlier search measured.
    EXPECT_EQ(a.search.search_tokens, 2 * 32 + a.steps_run * 32 + a.evaluations * 2 * 32);
    EXPECT_EQ(b.search.search_tokens, (i == 0 ? 2 * 32 : 0) + b.steps_run * 32 + b.evaluations * 2 * 32);
    if (i == 0) {
      EXPECT_EQ(b.evaluations, a.evaluations);
    } else if (i == 1) {
      EXPECT_EQ(b.evaluations, 0);
    }
    EXPECT_LE(b.evaluations, a.evaluations);
  }
  EXPECT_EQ(shared.teacher_reference.size(), batches.size());
  EXPECT_LT(shared_tokens, alone_tokens);
}

TEST(Search, BindingLimitIsMetAndTheCostTermSteersTheSearch) {
  LlamaModel m = small_model();
  Importance imp = importance_of(m);
  Scenario sc = gpu_scenario();
  const CostEstimate full = predict(m.config, sc, nullptr);
  SearchSpace space = build_search_space(m.config, imp, space_options());
  const ReachableCost least = smallest_reachable(space, [&](const ModelConfig& c) { return predict(c, sc, nullptr); });
  Limits lim;
  lim.peak_memory_bytes = (least.peak_memory_bytes + full.peak_memory_bytes) / 2;
  DifferentiableResult r = differentiable_search(m, imp, sc, nullptr, lim, calibration(m), search_options());
  EXPECT_EQ(check_limits(predict(r.search.best.config, sc, nullptr), lim), "");
  ASSERT_FALSE(r.trajectory.empty());
  // The cost term steered the relaxation: its expected memory and its argmax are below the
  // parent's, and the multiplier moved.
  EXPECT_LT(r.trajectory.back().peak_memory_bytes, double(full.peak_memory_bytes));
  EXPECT_LT(predict(drop_removed_blocks(r.argmax_target), sc, nullptr).peak_memory_bytes,
            full.peak_memory_bytes);
  double lambda_max = 0;
  for (const auto& t : r.trajectory) lambda_max = std::max(lambda_max, t.multipliers.at("peak_memory_bytes"));
  EXPECT_GT(lambda_max, 0);
  ASSERT_EQ(r.slack.size(), 1u);
  EXPECT_GE(r.slack[0].slack, 0);
}

TEST(Search, ImpossibleBudgetNamesTheSmallestReachableCost) {
  LlamaModel m = small_model();
  Importance imp = importance_of(m);
  Scenario sc = gpu_scenario();
  // Without removal, the narrowest shape of the space by hand: D 32, every layer one KV group
  // of 2 heads (ceil(0.4 * 2) = 1 group, ceil(0.4 * 4) = 2 heads per group), FFN 48.
  ModelConfig smallest = m.config;
  smallest.hidden_size = 32;
  for (auto& l : smallest.layers) l = LayerConfig{2, 1, 8, 48};
  const double tpot = predict(smallest, sc, nullptr).tpot_ms;
  Limits lim;
  lim.tpot_ms = 0.5 * tpot;
  DifferentiableOptions o = search_options();
  o.space.allow_removal = false;
  try {
    differentiable_search(m, imp, sc, nullptr, lim, calibration(m), o);
    FAIL() << "expected InfeasibleError";
  } catch (const InfeasibleError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(fmt::format("smallest reachable {:.6g} ms", tpot)), std::string::npos) << what;
    // ... and what the space held, so that the user sees which bound to widen.
    EXPECT_NE(what.find("The space searched: hidden sizes "), std::string::npos) << what;
    EXPECT_NE(what.find(fmt::format("of {} layers removed whole (--max-removed-layers)",
                                    m.config.num_layers())), std::string::npos) << what;
  }
}

TEST(Search, LagrangianTermGradientMatchesFiniteDifferences) {
  LlamaModel m = small_model();
  SearchSpace s = build_search_space(m.config, importance_of(m), space_options());
  Scenario sc = gpu_scenario();
  ChoiceTables t = build_choice_tables(m.config, s.attention, s.ffn, s.hidden_sizes, sc, nullptr);
  const CostEstimate full = predict(m.config, sc, nullptr);
  Limits lim;
  lim.ttft_ms = 0.8 * full.ttft_ms;
  lim.tpot_ms = 0.7 * full.tpot_ms;
  lim.peak_memory_bytes = int64_t(0.9 * double(full.peak_memory_bytes));
  lim.min_throughput_tokens_per_s = 1.3 * full.throughput_tokens_per_s;
  std::vector<CostBudget> budgets = cost_budgets(lim);
  ASSERT_EQ(budgets.size(), 4u);
  const std::vector<double> lambda{1.5, 0.7, 2.0, 0.3};
  at::manual_seed(5);
  ArchLogits a;
  a.hidden = at::randn({int64_t(s.hidden_sizes.size())}, at::kDouble);
  for (size_t l = 0; l < 4; ++l) {
    a.attention.push_back(at::randn({int64_t(s.attention[l].size())}, at::kDouble));
    a.ffn.push_back(at::randn({int64_t(s.ffn[l].size())}, at::kDouble));
  }
  auto term = [&](const ArchLogits& x) {
    return lagrangian_cost_term(t, choice_probabilities(x), budgets, lambda);
  };
  std::vector<at::Tensor*> all{&a.hidden};
  for (size_t l = 0; l < 4; ++l) all.push_back(&a.attention[l]), all.push_back(&a.ffn[l]);
  for (auto* p : all) p->requires_grad_(true);
  term(a).backward();
  double worst = 0;
  const double h = 1e-6;
  for (auto* p : all)
    for (int64_t k = 0; k < p->size(0); ++k) {
      at::NoGradGuard no_grad;
      const double ad = p->grad()[k].item<double>();
      at::Tensor v = p->detach();  // shares storage
      v[k] += h;
      const double plus = term(a).item<double>();
      v[k] -= 2 * h;
      const double minus = term(a).item<double>();
      v[k] += h;
      const double fd = (plus - minus) / (2 * h);
      worst = std::max(worst, std::fabs(fd - ad) / std::max(1.0, std::fabs(fd)));
    }
  EXPECT_LT(worst, 1e-6) << "largest relative difference autograd vs central differences";
}

TEST(Search, SvgWriterEscapesAndDrawsEverySeries) {
  EXPECT_EQ(xml_escape("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  std::vector<TrajectoryPoint> tr(3);
  for (int i = 0; i < 3; ++i) {
    tr[size_t(i)].step = i;
    tr[size_t(i)].loss = 1.0 / (i + 1);
    tr[size_t(i)].tpot_ms = 10 - i;
    tr[size_t(i)].temperature = 1 - 0.3 * i;
    tr[size_t(i)].multipliers["tpot_ms"] = 0.1 * i;
  }
  std::string svg = trajectory_svg(tr, {{"tpot_ms", 8.0, false}}, "t<1>");
  size_t polylines = 0;
  for (size_t p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1)) ++polylines;
  EXPECT_EQ(polylines, 5u);  // loss, KL, tpot / budget, multiplier, temperature
  EXPECT_NE(svg.find("t&lt;1&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("t<1>"), std::string::npos);
}

