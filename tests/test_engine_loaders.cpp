// The exported files against checkers written from each engine's loader source
// (export/engine_loaders.h): random heterogeneous architectures that an engine's rules allow
// (engines/*.json "structure", hardware/engine.h structure_violations) export to files its
// loader builds, and the rules and the checkers agree on the ones they refuse; hand-broken
// exports (another query-head count in one layer, an FFN width ffn_mult cannot give, a head_dim
// the loader reads otherwise, a missing tensor) are refused with the layer and the field named.
#include <gtest/gtest.h>

#include <random>

#include "common/error.h"
#include "common/json_io.h"
#include "export/engine_loaders.h"
#include "io/gguf.h"
#include "export/gguf_model.h"
#include "export/hf_export.h"
#include "hardware/engine.h"
#include "hardware/validate.h"
#include "io/checkpoint.h"
#include "model/llama.h"
#include "test_util.h"

namespace ac {
namespace {
using json = nlohmann::json;
using test::TempDir;

// Layers the engine's rules should allow or refuse, drawn at random: D in {64, 96, 128}, head_dim
// D / H or 16 or 32 (so hidden_size / num_attention_heads is the head_dim for some and not for
// others),
// per-layer query and KV heads, FFN widths on and off the DeciLM step, removed parts.
ModelConfig random_config(std::mt19937& rng, bool one_query_count) {
  auto pick = [&](std::vector<int64_t> v) { return v[rng() % v.size()]; };
  const int64_t D = pick({64, 96, 128}), L = 2 + int64_t(rng() % 3);
  const int64_t H0 = pick({2, 4, 6, 8});
  // Half the time head_dim = hidden_size / num_attention_heads where that divides.
  const int64_t Hd = D % H0 == 0 && rng() % 2 ? D / H0 : pick({16, 32});
  ModelConfig c = ModelConfig::uniform(/*V=*/61, D, L, LayerConfig{H0, H0, Hd, 256});
  c.tie_word_embeddings = rng() % 2;
  for (LayerConfig& l : c.layers) {
    const int64_t H = one_query_count ? H0 : pick({2, 4, 6, 8});
    std::vector<int64_t> groups;
    for (int64_t g = 1; g <= H; ++g)
      if (H % g == 0) groups.push_back(g);
    l.num_attention_heads = H;
    l.num_key_value_heads = pick(groups);
    l.intermediate_size = rng() % 3 ? pick({256, 512, 768}) : pick({96, 160, 320});
    const int kind = int(rng() % 8);
    if (kind == 0) l.attention_no_op = true, l.num_attention_heads = l.num_key_value_heads = 0;
    if (kind == 1) l.ffn_no_op = true, l.intermediate_size = 0;
  }
  // At least one layer keeps its attention and none is removed whole.
  c.layers[0].attention_no_op = false;
  if (!c.layers[0].num_attention_heads) c.layers[0].num_attention_heads = c.layers[0].num_key_value_heads = H0;
  for (LayerConfig& l : c.layers)
    if (!l.has_attention() && !l.has_ffn()) l.ffn_no_op = false, l.intermediate_size = 256;
  return c;
}

fs::path write_model(const fs::path& dir, const ModelConfig& c, uint64_t seed) {
  fs::create_directories(dir);
  save_checkpoint(dir, LlamaModel{c, random_weights(c, seed, /*std=*/0.2)});
  return dir;
}

fs::path export_hf(const TempDir& tmp, const ModelConfig& c, uint64_t seed) {
  const fs::path src = write_model(tmp.path / "src", c, seed);
  ExportOptions o;
  o.dtype = GgmlType::F16;
  export_model(src, tmp.path / "out", o);
  return tmp.path / "out";
}

// A SentencePiece-like vocabulary of V tokens with llama2.c's layout (<unk> <s> </s>, bytes).
GgufVocab vocab_of(int64_t V) {
  GgufVocab v;
  for (int64_t id = 0; id < V; ++id) {
    v.tokens.push_back(id == 0 ? "<unk>" : id == 1 ? "<s>" : id == 2 ? "</s>"
                                                           : fmt::format("\xE2\x96\x81t{}", id));
    v.scores.push_back(-float(id));
    v.types.push_back(id == 0 ? 2 : id < 3 ? 3 : 1);
  }
  return v;
}

fs::path export_gguf(const TempDir& tmp, const ModelConfig& c, uint64_t seed) {
  const fs::path f = tmp.path / "model.gguf";
  write_model_gguf(f, LlamaModel{c, random_weights(c, seed, 0.2)}, vocab_of(c.vocab_size));
  return f;
}

std::string joined(const std::vector<std::string>& v) { return fmt::format("{}", fmt::join(v, "\n")); }

bool has(const std::vector<std::string>& errors, const std::vector<std::string>& needles) {
  for (const std::string& e : errors) {
    bool all = true;
    for (const std::string& n : needles) all &= e.find(n) != std::string::npos;
    if (all) return true;
  }
  return false;
}

// Every random architecture the engine's rules allow exports to files its loader builds, with
// and without tensor parallelism; and for the HF engines the rules and the checker agree on
// every architecture the DeciLM export writes (heterogeneous or not).
TEST(EngineLoaders, WhatTheRulesAllowLoadsAndTheRulesAgreeWithTheLoaders) {
  std::mt19937 rng(17);
  for (const std::string name : {"vllm", "tensorrt-llm", "llama.cpp"}) {
    const EngineSpec engine = load_engine(name, test::source_dir());
    int allowed = 0, refused = 0;
    for (int trial = 0; trial < 100; ++trial) {
      const ModelConfig c = random_config(rng, /*one_query_count=*/name != "llama.cpp" && trial % 4);
      const int64_t tp = trial % 3 == 0 ? 2 : 1;
      bool rules_ok = structure_violations(c, engine, tp).empty();
      ModelConfig written = c;  // what the files hold: the HF export widens FFNs DeciLM cannot state
      TempDir tmp;
      std::vector<std::string> errors;
      if (name == "llama.cpp") {
        errors = llama_cpp_load_errors(export_gguf(tmp, c, uint64_t(trial)));
      } else {
        fs::path out;
        try {
          out = export_hf(tmp, c, uint64_t(trial));
        } catch (const ConfigError& e) {  // DeciLM cannot express it: the rules refuse it too
          EXPECT_FALSE(rules_ok) << name << ": " << describe(c) << ": " << e.what();
          ++refused;
          continue;
        }
        written = read_architecture(out);
        rules_ok = structure_violations(written, engine, tp).empty();
        errors = engine_load_errors(name, out, tp);
      }
      EXPECT_EQ(rules_ok, errors.empty())
          << name << " tp " << tp << ": " << describe(written) << "\nrules: "
          << joined(structure_violations(written, engine, tp)) << "\nloader: " << joined(errors);
      (rules_ok ? allowed : refused) += 1;
    }
    EXPECT_GE(allowed, 8) << name;
    if (name != "llama.cpp") {  // the HF export widens what DeciLM cannot state (zero heads
      EXPECT_GE(refused, 2) << name;  // and channels): refusals come from tensor parallelism
    }
  }
}

// A heterogeneous model with one query-head count per layer (our own config.json extension):
// the DeciLM loaders read the global count, so the layer and the field are named.
TEST(EngineLoaders, ALayerWithAnotherQueryHeadCountIsRefused) {
  ModelConfig c = ModelConfig::uniform(61, 64, 3, LayerConfig{4, 2, 16, 256});
  c.layers[1].num_attention_heads = 2, c.layers[1].num_key_value_heads = 1;
  TempDir tmp;
  const fs::path dir = write_model(tmp.path / "m", c, 1);  // no export check: written as is
  for (const auto& [name, errors] :
       {std::pair{"vLLM", vllm_load_errors(dir)}, std::pair{"TensorRT-LLM", tensorrt_llm_load_errors(dir)}}) {
    EXPECT_TRUE(has(errors, {"layer 1: block_configs[1].attention.num_attention_heads 2 is not "
                             "read", "num_attention_heads 4"}))
        << name << ":\n" << joined(errors);
    EXPECT_TRUE(has(errors, {"layer 1: tensor 'model.layers.1.self_attn.q_proj.weight' has shape "
                             "[32, 64]", "builds [64, 64]"}))
        << name << ":\n" << joined(errors);
  }
  // llama.cpp reads per-layer head counts: the same model as a GGUF loads.
  EXPECT_TRUE(llama_cpp_load_errors(export_gguf(tmp, c, 1)).empty());
}

// An FFN width that no ffn_mult gives (320): both loaders compute the width from ffn_mult and
// ignore the block's intermediate_size, so the tensors do not fit.
TEST(EngineLoaders, AnFfnWidthFfnMultCannotGiveIsRefused) {
  ModelConfig c = ModelConfig::uniform(61, 64, 3, LayerConfig{4, 2, 16, 256});
  c.layers[2].intermediate_size = 320;
  TempDir tmp;
  const fs::path dir = write_model(tmp.path / "m", c, 2);
  const json blocks = read_json_file(dir / "config.json")["block_configs"];
  ASSERT_EQ(blocks[2]["ffn"]["intermediate_size"], 320);
  const int64_t F = decilm_ffn_width(blocks[2]["ffn"]["ffn_mult"].get<double>(), 64);
  for (const auto& [name, errors] :
       {std::pair{"vLLM", vllm_load_errors(dir)}, std::pair{"TensorRT-LLM", tensorrt_llm_load_errors(dir)}}) {
    EXPECT_TRUE(has(errors, {"layer 2: block_configs[2].ffn.intermediate_size 320 is not read",
                             fmt::format("intermediate_size {}", F)}))
        << name << ":\n" << joined(errors);
    EXPECT_TRUE(has(errors, {"layer 2: tensor 'model.layers.2.mlp.up_proj.weight' has shape "
                             "[320, 64]", fmt::format("builds [{}, 64]", F)}))
        << name << ":\n" << joined(errors);
  }
  EXPECT_TRUE(llama_cpp_load_errors(export_gguf(tmp, c, 2)).empty());
}

// head_dim: vLLM reads config.json's; TensorRT-LLM's DeciConfig derives hidden_size /
// num_attention_heads; a config.json whose head_dim disagrees with the tensors is refused by
// both, naming the layer.
TEST(EngineLoaders, AHeadDimTheLoaderReadsOtherwiseIsRefused) {
  // D 96, 4 heads of 16: an explicit head_dim (96 / 4 = 24 would be derived).
  ModelConfig c = ModelConfig::uniform(61, 96, 3, LayerConfig{4, 2, 16, 256});
  c.layers[1].num_key_value_heads = 1;
  TempDir tmp;
  const fs::path out = export_hf(tmp, c, 3);
  EXPECT_EQ(read_json_file(out / "config.json")["head_dim"], 16);
  EXPECT_TRUE(vllm_load_errors(out).empty()) << joined(vllm_load_errors(out));
  const std::vector<std::string> trt = tensorrt_llm_load_errors(out);
  EXPECT_TRUE(has(trt, {"config.json: head_dim 16 is not read", "96 // 4 = 24"})) << joined(trt);
  EXPECT_TRUE(has(trt, {"layer 0: tensor 'model.layers.0.self_attn.q_proj.weight' has shape "
                        "[64, 96], TensorRT-LLM builds [96, 96]"})) << joined(trt);
  EXPECT_FALSE(structure_violations(c, load_engine("tensorrt-llm", test::source_dir())).empty());

  // A head_dim edited in config.json: vLLM builds 8-wide heads the tensors do not have.
  json cfg = read_json_file(out / "config.json");
  cfg["head_dim"] = 8;
  write_json_file(out / "config.json", cfg);
  const std::vector<std::string> v = vllm_load_errors(out);
  EXPECT_TRUE(has(v, {"layer 1: tensor 'model.layers.1.self_attn.k_proj.weight' has shape [16, 96]",
                      "vLLM builds [8, 96] (KV heads 1 x head_dim 8)"})) << joined(v);

  // GGUF: key_length is global; one edited makes every attention tensor misfit.
  const GgufFile g(export_gguf(tmp, c, 3));
  GgufMetadata kv = g.metadata();
  for (auto& [k, val] : kv)
    if (k == "deci.attention.key_length" || k == "deci.rope.dimension_count") val = GgufValue::u32(8);
  std::vector<GgufTensorOut> tensors;
  for (const std::string& n : g.tensor_names()) tensors.push_back({n, g.tensor(n), g.type(n)});
  write_gguf(tmp.path / "edited.gguf", kv, tensors);
  const std::vector<std::string> l = llama_cpp_load_errors(tmp.path / "edited.gguf");
  EXPECT_TRUE(has(l, {"layer 1: tensor 'blk.1.attn_k.weight' has ne {96, 16}, llama.cpp creates "
                      "{96, 8}"})) << joined(l);
}

// GGUF per-layer arrays: a head count array of the wrong length, and one layer's count edited.
TEST(EngineLoaders, AGgufWithAnotherLayerHeadCountIsRefused) {
  ModelConfig c = ModelConfig::uniform(61, 64, 3, LayerConfig{4, 2, 16, 256});
  c.layers[2].intermediate_size = 96;
  TempDir tmp;
  const GgufFile g(export_gguf(tmp, c, 4));
  ASSERT_TRUE(llama_cpp_load_errors(g.file()).empty()) << joined(llama_cpp_load_errors(g.file()));
  auto rewrite = [&](const std::string& key, GgufValue v, const std::string& file) {
    GgufMetadata kv = g.metadata();
    for (auto& [k, val] : kv)
      if (k == key) val = std::move(v);
    std::vector<GgufTensorOut> tensors;
    for (const std::string& n : g.tensor_names()) tensors.push_back({n, g.tensor(n), g.type(n)});
    write_gguf(tmp.path / file, kv, tensors);
    return llama_cpp_load_errors(tmp.path / file);
  };
  const auto heads = rewrite("deci.attention.head_count", GgufValue::i32_array({4, 8, 4}), "h.gguf");
  EXPECT_TRUE(has(heads, {"layer 1: tensor 'blk.1.attn_q.weight' has ne {64, 64}, llama.cpp "
                          "creates {64, 128}"})) << joined(heads);
  const auto len = rewrite("deci.feed_forward_length", GgufValue::i32_array({256, 256}), "f.gguf");
  EXPECT_TRUE(has(len, {"deci.feed_forward_length has wrong array length; expected 3, got 2"}))
      << joined(len);
}

// TensorRT-LLM's DeciLM loader reads lm_head.weight even when the embeddings are tied: a tied
// checkpoint without it is refused, and export writes it.
TEST(EngineLoaders, TensorRtLlmReadsTheTiedHead) {
  ModelConfig c = ModelConfig::uniform(61, 64, 3, LayerConfig{4, 2, 16, 256});
  c.layers[1].num_key_value_heads = 1;
  c.tie_word_embeddings = true;
  TempDir tmp;
  const fs::path raw = write_model(tmp.path / "m", c, 5);
  EXPECT_TRUE(has(tensorrt_llm_load_errors(raw), {"tensor 'lm_head.weight' is missing"}));
  EXPECT_TRUE(vllm_load_errors(raw).empty()) << joined(vllm_load_errors(raw));
  const fs::path out = export_hf(tmp, c, 5);
  EXPECT_TRUE(tensorrt_llm_load_errors(out).empty()) << joined(tensorrt_llm_load_errors(out));
  EXPECT_TRUE(vllm_load_errors(out).empty()) << joined(vllm_load_errors(out));
}

// Tensor parallelism: heads and widths the loaders shard must divide by it.
TEST(EngineLoaders, TensorParallelDivisibilityIsChecked) {
  ModelConfig c = ModelConfig::uniform(61, 96, 3, LayerConfig{6, 3, 16, 768});
  c.layers[1].num_key_value_heads = 1;
  c.layers[2].intermediate_size = 1536;
  TempDir tmp;
  const fs::path out = export_hf(tmp, c, 6);
  const EngineSpec vllm = load_engine("vllm", test::source_dir());
  EXPECT_TRUE(vllm_load_errors(out, 3).empty()) << joined(vllm_load_errors(out, 3));
  EXPECT_TRUE(structure_violations(c, vllm, 3).empty());
  // 2 GPUs: 6 query heads split, 1 KV head replicated, but 3 KV heads split unevenly.
  const std::vector<std::string> bad = vllm_load_errors(out, 2);
  EXPECT_TRUE(has(bad, {"layer 0: 3 KV heads neither a multiple nor a divisor of tensor_parallel 2"}))
      << joined(bad);
  EXPECT_EQ(bad.size(), 2u) << joined(bad);  // layers 0 and 2
  const std::vector<std::string> rules = structure_violations(c, vllm, 2);
  ASSERT_EQ(rules.size(), 2u) << joined(rules);
  EXPECT_EQ(rules[0], "layer 0: num_key_value_heads 3, but vllm splits it over tensor_parallel 2 "
                      "(it must be a multiple of it, or divide it to be replicated)");
  EXPECT_TRUE(has(tensorrt_llm_load_errors(out, 4),
                  {"layer 1: num_attention_heads 6 is not a multiple of tensor_parallel 4"}));
  // llama.cpp splits by layers: nothing to divide.
  EXPECT_TRUE(structure_violations(c, load_engine("llama.cpp", test::source_dir()), 4).empty());
}

TEST(EngineLoaders, AnEngineWithoutAChecker) {
  test::expect_error<ConfigError>([] { engine_load_errors("native", "/nonexistent"); },
                                  {"engine 'native' has no loader checker"});
}

}  // namespace
}  // namespace ac
