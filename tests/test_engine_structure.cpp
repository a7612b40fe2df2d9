// The serving engine's loader rules (engines/*.json "structure", hardware/engine.h) and their use:
// every architecture of the search space, every search result and every `plan` suggestion for a
// scenario is one its engine loads; the rules agree with the DeciLM export's own check.
#include <gtest/gtest.h>

#include <random>

#include "pipeline/limits.h"
#include "common/error.h"
#include "export/checks.h"
#include "hardware/engine.h"
#include "hardware/granularity.h"
#include "hardware/validate.h"
#include "plan/plan.h"
#include "prune/depth.h"
#include "prune/prune.h"
#include "search/outcome.h"
#include "search_fixture.h"
#include "test_support.h"

namespace ac {
namespace {

using test::expect_error;

const std::vector<std::string> kEngines = {"native", "llama.cpp", "vllm", "tensorrt-llm"};

// D 64, 4 layers, FFN 512: every width of the DeciLM step (256) is reachable.
LlamaModel parent_model(int64_t heads, int64_t kv, uint64_t seed) {
  ModelConfig c = ModelConfig::uniform(/*V=*/97, /*D=*/64, /*L=*/4, LayerConfig{heads, kv, 64 / heads, 512});
  c.tie_word_embeddings = false;
  return LlamaModel{c, random_weights(c, seed, /*std=*/0.3)};
}

TEST(EngineStructure, ShippedEnginesStateTheirRulesWithASource) {
  const std::set<std::string> sharded = {"num_attention_heads", "num_key_value_heads",
                                         "intermediate_size"};
  for (const std::string& name : kEngines) {
    const EngineSpec e = load_engine(name, test::source_dir());
    const EngineStructure& r = e.structure;
    EXPECT_FALSE(r.source.empty()) << name;
    // Every rule states the loader file and function it is read from.
    for (const char* rule : {"per_layer_query_heads", "query_heads_divisible_by_kv_heads",
                             "per_layer_head_dim", "head_dim_explicit", "attention_removed",
                             "ffn_removed", "block_removed", "ffn_width_multiple",
                             "tensor_parallel_divides"})
      EXPECT_FALSE(r.sources.count(rule) ? r.sources.at(rule).empty() : true) << name << " " << rule;
    const bool decilm = name == "vllm" || name == "tensorrt-llm";
    EXPECT_EQ(r.per_layer_query_heads, !decilm) << name;
    EXPECT_EQ(r.ffn_width_multiple, decilm ? 256 : 1) << name;
    EXPECT_TRUE(r.attention_removed && r.ffn_removed && r.block_removed) << name;
    EXPECT_TRUE(r.query_heads_divisible_by_kv_heads) << name;
    EXPECT_EQ(r.per_layer_head_dim, name == "native") << name;  // GGUF key_length is global too
    EXPECT_EQ(r.head_dim_explicit, name != "tensorrt-llm") << name;
    EXPECT_EQ(r.tensor_parallel_divides, decilm ? sharded : std::set<std::string>{}) << name;
  }
}

// The DeciLM loaders state at least what the DeciLM format itself imposes (export's check).
TEST(EngineStructure, TheDecilmLoadersStateAtLeastTheFormatsRules) {
  const EngineStructure f = decilm_format_structure();
  for (const std::string name : {"vllm", "tensorrt-llm"}) {
    const EngineStructure r = load_engine(name, test::source_dir()).structure;
    EXPECT_TRUE(!r.per_layer_query_heads || f.per_layer_query_heads) << name;
    EXPECT_TRUE(!r.per_layer_head_dim || f.per_layer_head_dim) << name;
    EXPECT_TRUE(r.query_heads_divisible_by_kv_heads || !f.query_heads_divisible_by_kv_heads) << name;
    EXPECT_EQ(r.ffn_width_multiple % f.ffn_width_multiple, 0) << name;
  }
}

// The FFN rule "a multiple of 256" is exactly DeciLM's ffn_mult rule: every multiple of 256
// (and nothing else) is given back by some ffn_mult, for odd and even hidden sizes.
TEST(EngineStructure, MultiplesOf256AreExactlyTheWidthsFfnMultGives) {
  for (int64_t D : {31, 64, 257, 288, 4096, 8192}) {
    for (int64_t F = 1; F <= 8 * 4096; F += (F < 1024 ? 1 : 97)) {
      const std::optional<double> m = decilm_ffn_mult_for(F, D);
      EXPECT_EQ(m.has_value(), F % 256 == 0) << "D " << D << " F " << F;
      if (m) { EXPECT_EQ(decilm_ffn_width(*m, D), F) << "D " << D << " F " << F; }
    }
    for (int64_t F = 256; F <= 65536; F += 256)
      EXPECT_TRUE(decilm_ffn_mult_for(F, D).has_value()) << "D " << D << " F " << F;
  }
}

TEST(EngineStructure, ABadRuleNamesTheFileAndTheField) {
  auto with = [](json st) {
    return json{{"name", "x"}, {"structure", std::move(st)}};
  };
  auto rule = [](json v) { return json{{"value", std::move(v)}, {"source", "loader.py f"}}; };
  expect_error<FormatError>(
      [&] { engine_from_json(with({{"ffn_width_multiple", rule(0)}, {"source", "s"}}), "x.json"); },
      {"x.json: structure.ffn_width_multiple.value", "expected an integer >= 1, found 0"});
  expect_error<FormatError>(
      [&] { engine_from_json(with({{"per_layer_heads", rule(false)}, {"source", "s"}}), "x.json"); },
      {"x.json: structure", "unknown field 'per_layer_heads'"});
  expect_error<FormatError>([&] { engine_from_json(with({{"ffn_removed", rule(false)}}), "x.json"); },
                            {"x.json: structure", "'source'"});
  expect_error<FormatError>([&] { engine_from_json(with(json::array()), "x.json"); },
                            {"x.json: structure", "expected an object"});
  // A rule without its source, a bare value, a wrong type, an unknown sharded field.
  expect_error<FormatError>(
      [&] {
        engine_from_json(with({{"head_dim_explicit", {{"value", false}}}, {"source", "s"}}), "x.json");
      },
      {"x.json: structure.head_dim_explicit", "\"source\": the loader file and function"});
  expect_error<FormatError>(
      [&] { engine_from_json(with({{"ffn_removed", false}, {"source", "s"}}), "x.json"); },
      {"x.json: structure.ffn_removed", "found false"});
  expect_error<FormatError>(
      [&] { engine_from_json(with({{"per_layer_head_dim", rule(1)}, {"source", "s"}}), "x.json"); },
      {"x.json: structure.per_layer_head_dim.value", "expected true or false, found 1"});
  expect_error<FormatError>(
      [&] {
        engine_from_json(with({{"tensor_parallel_divides", rule({"hidden_size"})}, {"source", "s"}}),
                         "x.json");
      },
      {"x.json: structure.tensor_parallel_divides", "unknown field 'hidden_size'"});
}

TEST(EngineStructure, ViolationsNameTheLayerTheFieldAndTheRule) {
  const EngineSpec vllm = load_engine("vllm", test::source_dir());
  ModelConfig c = ModelConfig::uniform(97, 64, 4, LayerConfig{8, 2, 8, 512});
  EXPECT_TRUE(structure_violations(c, vllm).empty());
  c.layers[1].num_attention_heads = 4, c.layers[1].num_key_value_heads = 1;
  c.layers[2].intermediate_size = 320;
  const std::vector<std::string> bad = structure_violations(c, vllm);
  ASSERT_EQ(bad.size(), 2u);
  EXPECT_EQ(bad[0], "layer 1: num_attention_heads 4, but vllm builds every attention layer with "
                    "one count (layer 0 has 8)");
  EXPECT_EQ(bad[1], "layer 2: intermediate_size 320, but vllm builds FFN widths that are "
                    "multiples of 256 only (nearest: 256 or 512)");
  expect_error<ConfigError>([&] { check_engine_loads(c, vllm, "export"); },
                            {"[export] vllm cannot load", "layer 1: num_attention_heads 4",
                             "nemotron_nas.py"});
  // llama.cpp builds both.
  EXPECT_TRUE(structure_violations(c, load_engine("llama.cpp", test::source_dir())).empty());
  // A homogeneous model loads as its parent's class, whatever its widths.
  ModelConfig u = ModelConfig::uniform(97, 64, 4, LayerConfig{4, 1, 8, 320});
  EXPECT_TRUE(structure_violations(u, vllm).empty());
  // A removed block is dropped before export: the rest is homogeneous.
  u.layers[2].attention_no_op = u.layers[2].ffn_no_op = true;
  u.layers[2].num_attention_heads = u.layers[2].num_key_value_heads = u.layers[2].intermediate_size = 0;
  EXPECT_TRUE(structure_violations(u, vllm).empty());
  // An engine that cannot remove attention says so for the layer.
  EngineSpec strict = vllm;
  strict.structure.attention_removed = false;
  ModelConfig r = ModelConfig::uniform(97, 64, 4, LayerConfig{8, 2, 8, 512});
  r.layers[3].attention_no_op = true, r.layers[3].num_attention_heads = r.layers[3].num_key_value_heads = 0;
  ASSERT_EQ(structure_violations(r, strict).size(), 1u);
  EXPECT_EQ(structure_violations(r, strict)[0], "layer 3: attention removed, which vllm cannot build");
}

// The engine rules of vLLM / TensorRT-LLM and the DeciLM export check (export/checks.h, written
// from the loaders' code) agree on random heterogeneous models without removed blocks.
TEST(EngineStructure, TheDecilmRulesAgreeWithTheExportCheck) {
  const EngineSpec vllm = load_engine("vllm", test::source_dir());
  std::mt19937 rng(7);
  int heterogeneous = 0, loadable = 0;
  for (int trial = 0; trial < 300; ++trial) {
    ModelConfig c = ModelConfig::uniform(97, 256, 4, LayerConfig{8, 2, 32, 1024});
    for (LayerConfig& l : c.layers) {
      const int kind = int(rng() % 6);
      if (kind == 0) l.num_key_value_heads = 1, l.num_attention_heads = 4 * (1 + int64_t(rng() % 2));
      if (kind == 1) l.intermediate_size = 128 * (1 + int64_t(rng() % 8));
      if (kind == 2) l.attention_no_op = true, l.num_attention_heads = l.num_key_value_heads = 0;
      if (kind == 3) l.num_key_value_heads = 1 + int64_t(rng() % 2) * 3, l.num_attention_heads = 8;
    }
    bool removed_block = false;
    for (const LayerConfig& l : c.layers) removed_block |= !l.has_attention() && !l.has_ffn();
    if (c.is_homogeneous() || removed_block) continue;
    ++heterogeneous;
    bool export_ok = true;
    try {
      check_decilm_loadable(c);
    } catch (const ConfigError&) {
      export_ok = false;
    }
    const bool rules_ok = structure_violations(c, vllm).empty();
    loadable += rules_ok;
    EXPECT_EQ(rules_ok, export_ok) << describe(c);
  }
  EXPECT_GT(heterogeneous, 100);
  EXPECT_GT(loadable, 10);
  EXPECT_LT(loadable, heterogeneous);
}

// Every architecture of the space built for an engine is one that engine loads: random choices
// over random parents (MHA and GQA), for each shipped engine and one that builds per-layer heads
// but shards them, split over 1, 2 and 4 GPUs.
TEST(EngineStructure, EveryArchitectureOfTheSpaceLoadsInItsEngine) {
  std::mt19937 rng(11);
  std::vector<EngineSpec> engines;
  for (const std::string& name : kEngines) engines.push_back(load_engine(name, test::source_dir()));
  EngineSpec sharded = load_engine("vllm", test::source_dir());
  sharded.name = "sharded";
  sharded.structure.per_layer_query_heads = true;
  engines.push_back(sharded);
  int with_tp_cuts = 0;  // options a tensor-parallel rule left out
  for (const EngineSpec& engine : engines) {
    for (const int64_t tp : {1, 2, 4}) {
      for (const auto& [heads, kv] : std::vector<std::pair<int64_t, int64_t>>{{8, 2}, {4, 4}, {8, 8}}) {
        const LlamaModel m = parent_model(heads, kv, 3 + uint64_t(heads + kv));
        SearchSpaceOptions o = test::space_options();
        o.structure = engine.structure;
        o.tensor_parallel = tp;
        const SearchSpace s = build_search_space(m.config, test::importance_of(m), o);
        if (tp > 1) {
          o.tensor_parallel = 1;
          const SearchSpace free = build_search_space(m.config, test::importance_of(m), o);
          for (size_t l = 0; l < s.attention.size(); ++l)
            with_tp_cuts += int(free.attention[l].size() - s.attention[l].size());
        }
        for (int trial = 0; trial < 200; ++trial) {
          ArchChoice c = s.full();
          c.hidden = int64_t(rng() % s.hidden_sizes.size());
          for (int64_t l = 0; l < s.num_layers(); ++l) {
            c.attention[size_t(l)] = int64_t(rng() % s.attention[size_t(l)].size());
            c.ffn[size_t(l)] = int64_t(rng() % s.ffn[size_t(l)].size());
          }
          if (!structural_violation(s, c).empty()) continue;
          const ModelConfig t = target_of(s, c);
          EXPECT_TRUE(structure_violations(t, engine, tp).empty())
              << engine.name << " tp " << tp << ": " << describe(t) << ": "
              << structure_violations(t, engine, tp).front();
        }
        EXPECT_TRUE(structure_violations(target_of(s, smallest_choice(s)), engine, tp).empty())
            << engine.name;
        if (!engine.structure.per_layer_query_heads)
          for (const auto& layer : s.attention)
            for (const LayerConfig& a : layer)
              if (a.has_attention()) { EXPECT_EQ(a.num_attention_heads, heads) << engine.name; }
        // A derived head_dim (TensorRT-LLM's DeciLM): the hidden size stays the parent's.
        if (!engine.structure.head_dim_explicit) EXPECT_EQ(s.hidden_sizes.size(), 1u) << engine.name;
        else EXPECT_GT(s.hidden_sizes.size(), 1u) << engine.name;
      }
    }
  }
  EXPECT_GT(with_tp_cuts, 0);
}

// The differentiable search under random binding budgets, through run_search_method with the
// scenario's engine: what it returns is loadable there and meets the budget.
TEST(EngineStructure, SearchesUnderRandomBudgetsReturnWhatTheEngineLoads) {
  const LlamaModel m = parent_model(8, 2, 5);
  const Importance imp = test::importance_of(m);
  TokenDataset calibration = test::random_text(2000, 97, 17);
  std::mt19937 rng(3);
  for (const auto& [engine, tp] : std::vector<std::pair<std::string, int64_t>>{
           {"vllm", 1}, {"llama.cpp", 1}, {"tensorrt-llm", 2}}) {
    Scenario sc = test::gpu_scenario({}, engine);
    sc.workload.tensor_parallel = tp;
    CostFn cost = [&](const ModelConfig& c) { return predict(c, sc, nullptr); };
    SearchSpaceOptions o = test::space_options();
    o.structure = sc.engine_spec.structure;
    o.tensor_parallel = tp;
    const double full = cost(m.config).tpot_ms;
    const double least = smallest_reachable(build_search_space(m.config, imp, o), cost).tpot_ms;
    for (int trial = 0; trial < 3; ++trial) {
      Limits lim;
      lim.tpot_ms = least + (0.1 + 0.8 * double(rng() % 1000) / 1000.0) * (full - least);
      SearchSettings st;
      st.autocompress.space = test::space_options();  // run_search_method adds the engine's rules
      st.autocompress.steps = 8;
      st.autocompress.show_progress = false;
      st.autocompress_batch_size = 2;
      st.autocompress_seq_len = 16;
      st.autocompress_batches = 1;
      // (Minitron's shapes are uniform: they load everywhere, and its grid cannot reach every
      // budget of the per-layer space.)
      const SearchOutcome r =
          run_search_method("autocompress", m, imp, sc, nullptr, RunLimits::absolute(lim, 0),
                            calibration, 16, st);
      EXPECT_TRUE(structure_violations(r.best.target, sc.engine_spec, tp).empty())
          << engine << ": " << describe(r.best.target);
      EXPECT_LE(r.best.cost.tpot_ms, *lim.tpot_ms * (1 + 1e-9)) << engine;
      // The pruned model passes what the DeciLM export checks for vLLM.
      const LlamaModel pruned = drop_removed_blocks(prune_model(m, imp, r.best.target));
      if (engine != "llama.cpp" && !pruned.config.is_homogeneous()) {
        EXPECT_NO_THROW(check_decilm_loadable(pruned.config)) << describe(pruned.config);
      }
    }
  }
}

// A parent whose FFN width the engine cannot express in a heterogeneous model: one error that
// says which layer, which width and what to do, before any search work.
TEST(EngineStructure, AParentWidthTheEngineCannotExpressIsOneClearError) {
  const LlamaModel m = test::small_model();  // FFN 96
  const Importance imp = test::importance_of(m);
  TokenDataset calibration = test::random_text(500, 97, 17);
  SearchSettings st;
  st.autocompress.space = test::space_options();
  st.autocompress.show_progress = false;
  Limits lim;
  lim.tpot_ms = 1e-6;
  expect_error<ConfigError>(
      [&] {
        run_search_method("autocompress", m, imp, test::gpu_scenario({}, "vllm"), nullptr,
                          RunLimits::absolute(lim, 0.05),
                          calibration, 16, st);
      },
      {"[search]", "layer 0", "intermediate_size 96", "multiple of 256", "--method minitron"});
}

// plan's suggestions for the shipped GPU scenarios load in each scenario's engine, also when the
// workload splits the model over 8 GPUs.
TEST(EngineStructure, PlanSuggestionsLoadInTheScenarioEngine) {
  const ModelConfig c =
      read_architecture(test::source_dir() / "tests/fixtures/configs/llama-3.1-8b.json");
  for (const char* name : {"h100-serving", "rtx5080-game", "rtx5070-coding"}) {
    for (const int64_t tp : {1, 8}) {
      Scenario sc = find_scenario(name, test::source_dir());
      if (tp > 1 && sc.engine_spec.structure.tensor_parallel_divides.empty()) continue;
      sc.workload.tensor_parallel = tp;
      PlanOptions o;
      o.width_granularity = width_granularity_for(nullptr, sc.device_spec);
      const Plan p = make_plan(c, sc, nullptr, o);
      if (p.per_layer) {
        EXPECT_TRUE(structure_violations(p.per_layer->config, sc.engine_spec, tp).empty())
            << name << " tp " << tp << ": " << describe(p.per_layer->config);
      }
      for (const PlanSuggestion& u : p.uniform)
        EXPECT_TRUE(structure_violations(u.config, sc.engine_spec, tp).empty())
            << name << " tp " << tp << ": " << describe(u.config);
    }
  }
}

}  // namespace
}  // namespace ac
