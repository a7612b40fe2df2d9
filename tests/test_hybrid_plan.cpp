// `plan` on hybrid models (plan/hybrid_plan.h) and the engines' rules for them
// (hardware/hybrid_structure.h): Nemotron 3 Super on one B200 at 128K does not fit and gets
// per-layer reductions that do, each re-checked with predict() and against the engine's rules;
// under llama.cpp, which reads one expert count and one experts-per-token for the model, every
// suggestion keeps its MoE layers alike; the rules name the layer and field they refuse.
#include "common/error.h"
#include "hardware/cost_model.h"
#include "hardware/granularity.h"
#include "hardware/hybrid_structure.h"
#include "hardware/validate.h"
#include "plan/plan.h"
#include "test_paths.h"
#include "test_support.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

using namespace ac;
using json = nlohmann::json;

namespace {

ModelConfig super_config() {
  return read_architecture(test::source_dir() / "architectures/nemotron-3-super-120b-a12b.json");
}

Plan plan_of(const ModelConfig& c, const Scenario& s) {
  PlanOptions o;
  o.width_granularity = width_granularity_for(nullptr, s.device_spec);
  return make_plan(c, s, nullptr, o);
}

std::vector<const PlanSuggestion*> suggestions(const Plan& p) {
  std::vector<const PlanSuggestion*> all;
  if (p.per_layer) all.push_back(&*p.per_layer);
  for (const auto& s : p.levers) all.push_back(&s);
  return all;
}

// Every suggestion meets the limits by an independent predict() and loads in the engine.
void expect_sound(const Plan& p) {
  for (const PlanSuggestion* s : suggestions(p)) {
    const CostEstimate e = predict(s->config, p.scenario, nullptr);
    EXPECT_EQ(check_limits(e, p.limits), "") << s->label;
    EXPECT_EQ(structure_violations(s->config, p.scenario.engine_spec,
                                   p.scenario.workload.tensor_parallel),
              std::vector<std::string>{})
        << s->label;
    EXPECT_EQ(s->config.num_layers(), p.config.num_layers()) << s->label;
  }
}

}  // namespace

TEST(HybridPlan, NemotronSuperOnOneB200) {
  const ModelConfig c = super_config();
  const Plan p = plan_of(c, find_scenario("b200-128k", test::source_dir()));
  EXPECT_EQ(p.verdict, "fits_after_changes");
  EXPECT_NE(p.broken.find("peak_memory_bytes"), std::string::npos);
  ASSERT_TRUE(p.per_layer.has_value());
  const double kept = double(p.per_layer->config.num_parameters()) / double(c.num_parameters());
  EXPECT_GT(kept, 0.5);
  EXPECT_LT(kept, 0.8);
  EXPECT_FALSE(p.per_layer->changes.empty());
  expect_sound(p);
  const std::string text = p.to_text();
  EXPECT_NE(text.find("Mamba-2 state"), std::string::npos);
  EXPECT_NE(text.find("active"), std::string::npos);
  const json j = p.to_json();
  EXPECT_EQ(j["per_layer"]["config"]["model_type"], "nemotron_h_puzzle");
}

// llama.cpp's nemotron_h graph reads one expert count and one experts-per-token for the model:
// its suggestions move every MoE layer together.
TEST(HybridPlan, LlamaCppKeepsMoeLayersAlike) {
  json j = {{"name", "b200-llamacpp"}, {"device", "b200"}, {"engine", "llama.cpp"},
            {"workload", {{"prompt_tokens", 126976}, {"output_tokens", 4096}, {"batch_size", 4},
                          {"weight_dtype", "bf16"}, {"kv_cache_dtype", "bf16"}}},
            {"limits", {{"peak_memory_bytes", 180000000000}}}};
  const Scenario s = scenario_from_json(j, "b200-llamacpp.json", test::source_dir());
  const Plan p = plan_of(super_config(), s);
  ASSERT_EQ(p.verdict, "fits_after_changes");
  expect_sound(p);
  for (const PlanSuggestion* sg : suggestions(p)) {
    const MoeConfig* first = nullptr;
    for (const auto& l : sg->config.layers) {
      if (!l.has_moe()) continue;
      if (!first) first = &*l.moe;
      EXPECT_EQ(l.moe->num_experts, first->num_experts) << sg->label;
      EXPECT_EQ(l.moe->num_experts_per_tok, first->num_experts_per_tok) << sg->label;
      EXPECT_EQ(l.moe->moe_intermediate_size, first->moe_intermediate_size) << sg->label;
    }
  }
}

TEST(HybridPlan, EngineRulesNameLayerAndField) {
  ModelConfig c = super_config();
  c.layers[3].moe->num_experts = 256;  // layer 1 is the first MoE layer
  const EngineSpec vllm = load_engine("vllm", test::source_dir());
  const EngineSpec llamacpp = load_engine("llama.cpp", test::source_dir());
  EXPECT_TRUE(structure_violations(c, vllm).empty());
  const std::vector<std::string> bad = structure_violations(c, llamacpp);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_NE(bad[0].find("layer 3: num_experts 256"), std::string::npos) << bad[0];
  EXPECT_NE(bad[0].find("layer 1 has 512"), std::string::npos) << bad[0];
  c = super_config();
  c.layers[2].mamba->mamba_num_heads = 120;
  for (const EngineSpec& e : {vllm, llamacpp, load_engine("tensorrt-llm", test::source_dir())}) {
    const std::vector<std::string> m = structure_violations(c, e);
    ASSERT_EQ(m.size(), 1u) << e.name;
    EXPECT_NE(m[0].find("layer 2: Mamba-2 shape"), std::string::npos) << m[0];
  }
}

// The plan narrows every Mamba-2 head (mamba_head_dim) in Minitron's steps (P = 64: 16), down to
// min_width_fraction P, where the quality loss prices that lever as cheap: Minitron's deeper cut
// halved head_dim where the plan could only drop heads. Every suggestion still meets the limits
// by an independent predict() and loads in the engine.
TEST(HybridPlan, NarrowsMambaHeadsWhereThatCostsLeast) {
  const ModelConfig c = super_config();
  int64_t P = 0;
  for (const auto& l : c.layers)
    if (l.has_mamba()) P = l.mamba->mamba_head_dim;
  ASSERT_EQ(P, 64);
  // Removing anything but head_dim costs 100x its parameter share.
  const QualityLoss quality = [&](const ModelConfig& from, const ModelConfig& to) {
    const double share =
        double(from.num_parameters() - to.num_parameters()) / double(c.num_parameters());
    for (size_t i = 0; i < from.layers.size(); ++i) {
      const LayerConfig& a = from.layers[i];
      const LayerConfig& b = to.layers[i];
      if (a.has_mamba() && b.has_mamba() && a.mamba->mamba_head_dim != b.mamba->mamba_head_dim)
        return share;
    }
    return 100 * share;
  };
  const Scenario s = find_scenario("b200-128k", test::source_dir());
  PlanOptions o;
  o.width_granularity = width_granularity_for(nullptr, s.device_spec);
  const Plan p = make_plan(c, s, nullptr, o, quality);
  ASSERT_TRUE(p.per_layer.has_value());
  expect_sound(p);
  const auto& layers = p.per_layer->config.layers;
  std::set<int64_t> head_dims;
  for (const auto& l : layers)
    if (l.has_mamba()) head_dims.insert(l.mamba->mamba_head_dim);
  ASSERT_EQ(head_dims.size(), 1u);  // every Mamba-2 layer alike
  const int64_t narrowed = *head_dims.begin();
  // The cheap lever is spent first, to its floor: 64 -> 48 -> 32 -> 16 (0.25 of 64).
  EXPECT_EQ(narrowed, 16);
  const std::string changes = fmt::format("{}", fmt::join(p.per_layer->changes, "; "));
  EXPECT_NE(changes.find(fmt::format("Mamba-2 head_dim 64 -> {}", narrowed)), std::string::npos)
      << changes;
}
