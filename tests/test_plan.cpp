// `plan` and the deployment scenarios: the published configs parse to their published parameter
// counts; the shipped GPU scenarios load with a source for every value; a fused-attention engine
// holds no [T, T] scores (activation bytes by hand); every suggestion of a plan meets the limits
// when re-checked independently with predict() + check_limits(); a model that fits gets no
// change; an impossible scenario gets a no-fit verdict with numbers.
#include <cstdio>
#include <fstream>

#include "pipeline/limits.h"
#include "common/error.h"
#include "common/json_io.h"
#include "hardware/cost_model.h"
#include "hardware/data_dir.h"
#include "hardware/engine.h"
#include "hardware/granularity.h"
#include "hardware/validate.h"
#include "plan/plan.h"
#include "test_util.h"

using namespace ac;
using ac::test::TempDir;

namespace {

fs::path data_root() { return ac::test::source_dir(); }
fs::path fixture(const std::string& name) {
  return ac::test::source_dir() / "tests/fixtures/configs" / (name + ".json");
}
ModelConfig published(const std::string& name) { return read_architecture(fixture(name)); }

// The plan of `c` for `s` without a profile: widths on the scenario device's width step.
Plan plan_of(const ModelConfig& c, const Scenario& s) {
  PlanOptions o;
  o.width_granularity = width_granularity_for(nullptr, s.device_spec);
  return make_plan(c, s, nullptr, o);
}

const std::vector<std::string> kGpuScenarios = {"rtx5070-coding", "h100-serving", "rtx5080-game",
                                                "b200-128k"};

// Re-checks a suggestion without the plan's code: its own predict() against the scenario's
// limits resolved against the parent's own predict().
void expect_meets_limits(const PlanSuggestion& s, const ModelConfig& parent, const Scenario& sc) {
  Limits limits = resolve_limits(sc.limits, predict(parent, sc, nullptr));
  CostEstimate e = predict(s.config, sc, nullptr);
  EXPECT_EQ(check_limits(e, limits), "") << sc.name << ": " << s.label << " " << describe(s.config);
  EXPECT_LT(s.config.num_parameters(), parent.num_parameters()) << s.label;
  EXPECT_DOUBLE_EQ(e.tpot_ms, s.cost.tpot_ms);
  EXPECT_EQ(e.peak_memory_bytes, s.cost.peak_memory_bytes);
}

}  // namespace

TEST(PlanFixtures, PublishedConfigsParseToTheirParameterCounts) {
  // Parameter counts by hand from the published shapes (embedding and head untied):
  // Llama-3.1-8B: 2 * 128256 * 4096 + 32 * (2 * 4096 + 2 * 4096^2 + 2 * 4096 * 1024
  //   + 3 * 4096 * 14336) + 4096 = 8,030,261,248 (the model card's 8.03B).
  ModelConfig llama = published("llama-3.1-8b");
  EXPECT_EQ(llama.num_parameters(), 8030261248);
  EXPECT_EQ(llama.rope_scaling->rope_type, "llama3");
  EXPECT_DOUBLE_EQ(llama.rope_scaling->factor, 8.0);
  EXPECT_DOUBLE_EQ(llama.rope_theta, 500000.0);
  EXPECT_EQ(llama.max_position_embeddings, 131072);
  // Qwen2.5-7B: q/k/v biases (3584 + 2 * 512 per layer): 7,615,616,512 (the card's 7.61B).
  ModelConfig qwen = published("qwen2.5-7b");
  EXPECT_TRUE(qwen.attention_bias);
  EXPECT_FALSE(qwen.tie_word_embeddings);
  EXPECT_EQ(qwen.num_parameters(), 7615616512);
  EXPECT_EQ(qwen.layers[0].num_key_value_heads, 4);
  // Mistral-7B-v0.1: the Llama-3.1-8B body with a 32000-token vocabulary: 7,241,732,096.
  ModelConfig mistral = published("mistral-7b");
  EXPECT_EQ(mistral.num_parameters(), 7241732096);
  EXPECT_DOUBLE_EQ(mistral.rope_theta, 10000.0);
  EXPECT_EQ(mistral.extra.at("sliding_window"), 4096);
}

TEST(Scenario, GpuScenariosLoadWithASourceForEveryValue) {
  for (const auto& name : kGpuScenarios) {
    Scenario s = find_scenario(name, data_root());
    EXPECT_EQ(s.name, name);
    EXPECT_EQ(s.device_spec.kind, "cuda") << name;
    json file = read_json_file(data_root() / "scenarios" / (name + ".json"));
    for (const char* part : {"workload", "limits"})
      for (auto it = file[part].begin(); it != file[part].end(); ++it)
        EXPECT_TRUE(s.sources.count(std::string(part) + "." + it.key()))
            << name << ": no source for " << part << "." << it.key();
    ASSERT_TRUE(s.limits.peak_memory_bytes) << name;
    EXPECT_LE(double(*s.limits.peak_memory_bytes), s.device_spec.memory_bytes->value) << name;
    EXPECT_FALSE(s.limits.has_relative()) << name;
  }
  EXPECT_EQ(find_scenario("rtx5070-coding", data_root()).workload.context_tokens(), 32768);
  EXPECT_EQ(find_scenario("b200-128k", data_root()).workload.context_tokens(), 131072);
  EXPECT_EQ(find_scenario("h100-serving", data_root()).workload.batch_size, 64);
  EXPECT_TRUE(find_scenario("h100-serving", data_root()).limits.min_throughput_tokens_per_s);
}

TEST(Scenario, SourcesMustNameAFieldOfTheFile) {
  const std::string head = R"({"name": "s", "device": "h100-sxm", "engine": "vllm",
      "workload": {"batch_size": 2}, "limits": {"tpot_ms": 10}, )";
  Scenario ok = scenario_from_json(
      json::parse(head + R"("sources": {"workload.batch_size": "two users", "limits.tpot_ms": "x"}})"),
      "s.json", data_root());
  EXPECT_EQ(ok.sources.at("workload.batch_size"), "two users");
  for (const char* bad : {R"("sources": {"workload.prompt_tokens": "not set in the file"}})",
                          R"("sources": {"limits.latency": "no such limit"}})",
                          R"("sources": {"workload.batch_size": 2}})", R"("sources": []})"}) {
    try {
      scenario_from_json(json::parse(head + bad), "s.json", data_root());
      ADD_FAILURE() << "accepted " << bad;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("s.json: sources"), std::string::npos) << e.what();
    }
  }
}

TEST(CostModel, FusedAttentionEngineHoldsNoScoresAndPrefillsInChunks) {
  // llama.cpp fuses the attention (flash attention) and prefills 512-token micro-batches:
  // attention peak = 2 bytes (fp16 activations) x (x, h [512, D] + q, out [512, H*Hd]);
  // FFN peak = 2 x (x, h [512, D] + 4 x [512, F]).
  json j = {{"name", "t"}, {"device", "rtx-5070"}, {"engine", "llama.cpp"},
            {"workload", {{"prompt_tokens", 30720}, {"output_tokens", 2048}, {"batch_size", 1},
                          {"weight_dtype", "int8"}, {"kv_cache_dtype", "fp16"}}}};
  Scenario s = scenario_from_json(j, "t.json", data_root());
  ModelConfig c = published("llama-3.1-8b");
  const LayerConfig& l = c.layers[0];
  EXPECT_EQ(attention_part_cost(c, l, s, nullptr).activation_bytes,
            2 * (2 * 512 * 4096 + 2 * 512 * 32 * 128));
  EXPECT_EQ(ffn_part_cost(c, l, s, nullptr).activation_bytes, 2 * (2 * 512 * 4096 + 4 * 512 * 14336));
  // KV cache: 2 (k, v) x 8 KV heads x 128 x 32768 tokens (a multiple of 256) x 2 bytes per layer.
  EXPECT_EQ(attention_part_cost(c, l, s, nullptr).kv_cache_bytes, int64_t(2) * 8 * 128 * 32768 * 2);
}

TEST(Plan, Llama31On8BEachGpuScenarioGivesAVerdictAndSuggestionsThatFit) {
  const ModelConfig llama = published("llama-3.1-8b");
  for (const auto& name : kGpuScenarios) {
    Scenario s = find_scenario(name, data_root());
    Plan plan = plan_of(llama, s);
    // The verdict on the full model agrees with an independent check.
    Limits limits = resolve_limits(s.limits, predict(llama, s, nullptr));
    const std::string broken = check_limits(predict(llama, s, nullptr), limits);
    EXPECT_EQ(plan.broken, broken) << name;
    EXPECT_EQ(plan.verdict == "fits", broken.empty()) << name;
    EXPECT_EQ(plan.full.source, "roofline");
    for (const auto& sug : plan.uniform) {
      expect_meets_limits(sug, llama, s);
      EXPECT_TRUE(sug.config.is_homogeneous()) << name << " " << sug.label;
    }
    if (plan.per_layer) {
      expect_meets_limits(*plan.per_layer, llama, s);
      const auto& layers = plan.per_layer->config.layers;
      ASSERT_EQ(layers.size(), llama.layers.size());
      for (size_t i : {size_t(0), layers.size() - 1})  // the end layers are never removed
        EXPECT_TRUE(layers[i].has_attention() && layers[i].has_ffn()) << name << " layer " << i;
    }
    if (plan.verdict == "fits_after_changes") {
      EXPECT_FALSE(plan.uniform.empty() && !plan.per_layer) << name;
    }
  }
}

TEST(Plan, ModelsThatCannotFitByHandGetChangesOnBothCards) {
  // By hand: Llama-3.1-8B at int8 is 8,030,261,248 bytes of weights plus a 32K-token f16 KV
  // cache of 32 x 2 x 8 x 128 x 32768 x 2 = 4,294,967,296 bytes = 12.33e9 > 11 GiB (rtx5070);
  // at int4 its weights alone are 4.02e9 bytes > 3 GiB (rtx5080-game). Both need changes, and
  // both must get a uniform and a per-layer suggestion that fit.
  const ModelConfig llama = published("llama-3.1-8b");
  for (const char* name : {"rtx5070-coding", "rtx5080-game"}) {
    Scenario s = find_scenario(name, data_root());
    Plan plan = plan_of(llama, s);
    EXPECT_EQ(plan.verdict, "fits_after_changes") << name;
    EXPECT_NE(plan.broken.find("peak_memory_bytes"), std::string::npos) << plan.broken;
    ASSERT_FALSE(plan.uniform.empty()) << name;
    ASSERT_TRUE(plan.per_layer) << name;
    EXPECT_FALSE(plan.per_layer->config.is_homogeneous()) << describe(plan.per_layer->config);
    EXPECT_EQ(plan.uniform[0].label, "most parameters kept");
    for (const auto& sug : plan.uniform)  // ranked by parameters kept
      EXPECT_LE(sug.config.num_parameters(), plan.uniform[0].config.num_parameters());
  }
}

TEST(Plan, AModelThatFitsNeedsNoChange) {
  // stories15M's shape in BF16 on the H100: a few MB of weights, far under every limit.
  ModelConfig tiny = stories15m_shape();
  Scenario s = find_scenario("h100-serving", data_root());
  Plan plan = plan_of(tiny, s);
  EXPECT_EQ(plan.verdict, "fits");
  EXPECT_TRUE(plan.uniform.empty());
  EXPECT_FALSE(plan.per_layer);
  EXPECT_EQ(plan.uniform_checked, 0);
  CostEstimate e = predict(tiny, s, nullptr);
  EXPECT_DOUBLE_EQ(plan.full.tpot_ms, e.tpot_ms);
  for (const auto& sl : plan.full_slack) EXPECT_TRUE(sl.holds()) << sl.name;
  EXPECT_NE(plan.to_text().find("FITS as it is"), std::string::npos);
}

TEST(Plan, AnImpossibleScenarioSaysNoFitWithTheNumbers) {
  // vLLM spends 1.0 ms of host time per step (engines/vllm.json) whatever the model: a TPOT
  // limit of 0.5 ms cannot be met by any architecture.
  json j = read_json_file(data_root() / "scenarios/h100-serving.json");
  j["limits"] = {{"tpot_ms", 0.5}};
  j.erase("sources");
  Scenario s = scenario_from_json(j, "impossible.json", data_root());
  const ModelConfig llama = published("llama-3.1-8b");
  Plan plan = plan_of(llama, s);
  EXPECT_EQ(plan.verdict, "no_fit");
  EXPECT_TRUE(plan.uniform.empty());
  EXPECT_FALSE(plan.per_layer);
  ASSERT_EQ(plan.reachable.size(), 1u);
  const Reachable& r = plan.reachable[0];
  EXPECT_EQ(r.name, "tpot_ms");
  EXPECT_DOUBLE_EQ(r.limit, 0.5);
  EXPECT_DOUBLE_EQ(r.full, predict(llama, s, nullptr).tpot_ms);
  EXPECT_GT(r.best, 1.0);  // the per-step overhead alone
  EXPECT_LT(r.best, r.full);
  const std::string text = plan.to_text();
  EXPECT_NE(text.find("DOES NOT FIT"), std::string::npos) << text;
  EXPECT_NE(text.find("best reached"), std::string::npos) << text;
  EXPECT_EQ(plan.to_json()["verdict"], "no_fit");
}

TEST(Plan, RelativeLimitsResolveAgainstTheFullModel) {
  json j = read_json_file(data_root() / "scenarios/h100-serving.json");
  j["limits"] = {{"tpot_ms", {{"fraction_of_teacher", 0.7}}}};
  j.erase("sources");
  Scenario s = scenario_from_json(j, "relative.json", data_root());
  const ModelConfig mistral = published("mistral-7b");
  Plan plan = plan_of(mistral, s);
  EXPECT_DOUBLE_EQ(*plan.limits.tpot_ms, 0.7 * predict(mistral, s, nullptr).tpot_ms);
  EXPECT_NE(plan.to_text().find("{\"tpot_ms\":{\"fraction_of_teacher\":0.7}}"),
            std::string::npos) << plan.to_text();  // the table's absolute limit, explained
  EXPECT_EQ(plan.verdict, "fits_after_changes");
  ASSERT_TRUE(plan.per_layer);
  for (const auto& sug : plan.uniform) expect_meets_limits(sug, mistral, s);
  expect_meets_limits(*plan.per_layer, mistral, s);
}

TEST(Plan, WarnsWhenTheContextExceedsTheModelsPositions) {
  // Mistral-7B-v0.1 was trained for 32768 positions with a 4096-token sliding window.
  Plan plan = plan_of(published("mistral-7b"), find_scenario("b200-128k", data_root()));
  ASSERT_EQ(plan.warnings.size(), 2u);
  EXPECT_NE(plan.warnings[0].find("max_position_embeddings (32768)"), std::string::npos);
  EXPECT_NE(plan.warnings[1].find("4096-token sliding window"), std::string::npos);
}

TEST(Plan, CliWritesTheJsonAndPrintsTheTable) {
  TempDir tmp;
  const char* env = std::getenv("AC_BIN");
  const fs::path bin = env ? fs::path(env) : ac::test::binary_dir() / "autocompress";
  const fs::path out = tmp.path / "plan.json", txt = tmp.path / "plan.txt";
  ac::test::run_or_fail(fmt::format("AC_DATA_DIR={} {} plan --config {} --scenario rtx5080-game "
                                    "--out {} > {}", data_root().string(), bin.string(),
                                    fixture("qwen2.5-7b").string(), out.string(), txt.string()));
  json j = read_json_file(out);
  EXPECT_EQ(j["scenario"]["name"], "rtx5080-game");
  EXPECT_EQ(j["config"]["parameters"], 7615616512);
  EXPECT_EQ(j["full"]["provenance"], "predicted from specs");
  // Qwen2.5-7B at 4 bits is 3.8e9 bytes of weights: over the game's 3 GiB.
  EXPECT_EQ(j["verdict"], "fits_after_changes");
  ASSERT_TRUE(j["per_layer"].is_object());
  for (const auto& l : j["per_layer"]["limits"]) EXPECT_TRUE(l["holds"].get<bool>()) << l.dump();
  EXPECT_NE(read_file(txt).find("cheapest structural changes"), std::string::npos);
}

// The parent passes the engine's loader rules as the suggestions do: over the GPU scenarios and
// tensor-parallel degrees 1, 2, 4, 8, a parent that the scenario's engine cannot load with that
// degree never "fits as it is", the plan names the rule, and every suggestion loads and fits.
// Qwen2.5-7B (28 query heads, 4 KV heads, FFN 18944): vLLM and TensorRT-LLM shard heads and FFN
// rows over the GPUs, so 8 GPUs cannot split 28 heads; llama.cpp splits by layers (no rule).
TEST(Plan, TheParentPassesTheEnginesLoaderRulesAtEveryTensorParallelDegree) {
  const ModelConfig parent = published("qwen2.5-7b");
  int refused = 0;
  for (const std::string& name : kGpuScenarios) {
    for (int64_t tp : {1, 2, 4, 8}) {
      Scenario s = find_scenario(name, data_root());
      s.workload.tensor_parallel = tp;
      const std::vector<std::string> rules = structure_violations(parent, s.engine_spec, tp);
      const Plan p = plan_of(parent, s);
      const std::string where = name + " tp " + std::to_string(tp);
      EXPECT_EQ(p.engine_violations, rules) << where;
      if (!rules.empty()) {
        ++refused;
        EXPECT_NE(p.verdict, "fits") << where;
        EXPECT_NE(p.broken.find("cannot load it with tensor_parallel " + std::to_string(tp)),
                  std::string::npos) << where << ": " << p.broken;
        EXPECT_NE(p.to_text().find("num_attention_heads"), std::string::npos) << where;
        EXPECT_FALSE(p.to_json()["full"]["engine_loads"].get<bool>()) << where;
      }
      std::vector<const PlanSuggestion*> all;
      for (const auto& u : p.uniform) all.push_back(&u);
      if (p.per_layer) all.push_back(&*p.per_layer);
      for (const PlanSuggestion* sug : all) {
        EXPECT_EQ(structure_violations(sug->config, s.engine_spec, tp),
                  std::vector<std::string>{}) << where << ": " << sug->label;
        expect_meets_limits(*sug, parent, s);
      }
    }
  }
  // h100-serving (vLLM) at 8 GPUs and b200-128k (TensorRT-LLM) at 8 at least.
  EXPECT_GE(refused, 2);
}
