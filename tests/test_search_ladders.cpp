// The ladders every search builds its choices from (search/ladders.h), against values computed by
// hand, and the refusal of an unset width granularity by every builder (the differentiable
// search's space, Minitron's grid, `plan`).
#include <gtest/gtest.h>

#include "common/error.h"
#include "hardware/scenario.h"
#include "plan/plan.h"
#include "search/ladders.h"
#include "search/minitron.h"
#include "search/search_space.h"
#include "search_fixture.h"
#include "test_support.h"

using namespace ac;
using test::expect_error;
using V = std::vector<int64_t>;

TEST(SearchLadders, WidthAndCountLaddersByHand) {
  // Multiples of 16 below 100, down to ceil(0.4 x 100) = 40: 96, 80, 64, 48.
  EXPECT_EQ(widths_below(100, 16, 0.4), (V{96, 80, 64, 48}));
  // Spread: 3 of the 4 at indices round(i x 3 / 2) = 0, 2, 3; all 4 when they fit; none at 1.
  EXPECT_EQ(spread_width_ladder(100, 16, 0.4, 4), (V{100, 96, 64, 48}));
  EXPECT_EQ(spread_width_ladder(100, 16, 0.4, 6), (V{100, 96, 80, 64, 48}));
  EXPECT_EQ(spread_width_ladder(100, 16, 0.4, 1), (V{100}));
  // stories15M's hidden size 288 on a 64 grid: ceil(0.4 x 288) = 116, so 256, 192, 128.
  EXPECT_EQ(spread_width_ladder(288, 64, 0.4, 6), (V{288, 256, 192, 128}));
  // Stepped by 32 (two multiples of 16): from 96 (the nearest below 100), or from
  // (100 - 32) rounded down to 16 = 64.
  EXPECT_EQ(stepped_width_ladder(100, 16, 0.4, 32, FirstRung::nearest), (V{100, 96, 64}));
  EXPECT_EQ(stepped_width_ladder(100, 16, 0.4, 32, FirstRung::one_step_down), (V{100, 64}));
  // A step below the granularity is the granularity; 40 is a multiple of 8 and kept.
  EXPECT_EQ(stepped_width_ladder(56, 8, 0.7, 3, FirstRung::nearest), (V{56, 48, 40}));
  // `plan` on Llama-3.1-8B's FFN: step 14336 / 32 = 448 = 7 x 64, first rung 14336 - 448 =
  // 13888, then down by 448 to 0.25 x 14336 = 3584 = 13888 - 23 x 448: 1 + 24 entries.
  const V ffn = stepped_width_ladder(14336, 64, 0.25, 14336 / 32, FirstRung::one_step_down);
  ASSERT_EQ(ffn.size(), 25u);
  EXPECT_EQ(ffn[0], 14336);
  EXPECT_EQ(ffn[1], 13888);
  EXPECT_EQ(ffn[2], 13440);
  EXPECT_EQ(ffn.back(), 3584);
  // Counts: ceil(0.4 x 8) = 4; never below 1.
  EXPECT_EQ(count_ladder(8, 0.4), (V{8, 7, 6, 5, 4}));
  EXPECT_EQ(count_ladder(2, 0.4), (V{2, 1}));
  EXPECT_EQ(count_ladder(1, 0.25), (V{1}));
  EXPECT_EQ(smallest_count(7, 0.5), 4);
}

TEST(SearchLadders, EngineRulesAndUniformShapes) {
  EngineStructure rules;
  EXPECT_EQ(ffn_width_step(64, rules, 4), 64);
  rules.ffn_width_multiple = 256;
  EXPECT_EQ(ffn_width_step(64, rules, 3), 256);  // the FFN is not sharded: tp does not count
  rules.tensor_parallel_divides = {"intermediate_size"};
  EXPECT_EQ(ffn_width_step(64, rules, 3), 768);  // lcm(64, 256, 3)
  // D 64, 8 query heads of head_dim 8: a loader that derives head_dim = D / 8 reads 8 back only
  // at D = 64.
  const ModelConfig parent = test::small_model().config;
  EXPECT_EQ(hidden_sizes_the_engine_loads({64, 48, 32}, parent, rules), (V{64, 48, 32}));
  rules.head_dim_explicit = false;
  EXPECT_EQ(hidden_sizes_the_engine_loads({64, 48, 32}, parent, rules), (V{64}));
  // 4 KV heads x 2 query heads each against 2 x 4: the same query heads, more KV heads, so it
  // keeps as many of every count (Minitron's dominance), but not a superset of the heads.
  const UniformShape a{64, 4, 2, 96, 4}, b{64, 2, 4, 96, 4};
  EXPECT_TRUE(covers_counts(a, b));
  EXPECT_FALSE(covers(a, b));
  EXPECT_TRUE(covers(a, UniformShape{48, 4, 1, 96, 3}));
  EXPECT_EQ(uniform_shape_of(parent, "search"), (UniformShape{64, 2, 4, 96, 4}));
  ModelConfig no_full_layer = parent;
  for (auto& l : no_full_layer.layers) l.ffn_no_op = true;
  expect_error<ConfigError>([&] { reference_layer(no_full_layer, "plan"); },
                            {"[plan]", "no layer with both attention and FFN"});
}

TEST(SearchLadders, AnUnsetWidthGranularityIsAClearConfigError) {
  const LlamaModel m = test::small_model();
  const std::vector<std::string> unset = {"width_granularity is unset", "width_granularity_for",
                                          "hardware/granularity.h"};
  auto with = [](std::vector<std::string> v, const std::string& where) {
    v.insert(v.begin(), where);
    return v;
  };
  SearchSpaceOptions space;  // width_granularity left unset
  expect_error<ConfigError>(
      [&] { build_search_space(m.config, test::importance_of(m), space); }, with(unset, "[search]"));
  expect_error<ConfigError>([&] { uniform_space(m.config, MinitronOptions{}); },
                            with(unset, "[search]"));
  Scenario sc = test::gpu_scenario();
  sc.limits.tpot_ms = 1e-6;  // broken: plan searches
  expect_error<ConfigError>([&] { make_plan(m.config, sc, nullptr, PlanOptions{}); },
                            with(unset, "[plan]"));
  space.width_granularity = -16;
  expect_error<ConfigError>([&] { build_search_space(m.config, test::importance_of(m), space); },
                            {"[search]", "width_granularity: expected >= 1, found -16"});
}
