// Loading takes a checkpoint only when the forward computes all of it, and an export carries all
// of it. For each family (Llama, Mistral, Qwen2, Qwen3, DeciLM), on a hand-made Hub-style folder
// (config.json as transformers writes it, with metadata that changes nothing, random weights):
//
//   LoadFamily.EveryFamilyLoadsAndRefusesATensorWithoutARole: the folder loads; with one tensor
//     more (another family's norm) it is refused, naming the file, the tensor and the families;
//   LoadFamily.EveryFamilyRefusesFieldsTheForwardDoesNotCompute: mlp_bias, a YaRN RoPE, partial
//     RoPE, another activation, another model_type; DeciLM's window and sink blocks and a block
//     field DeciLM does not define;
//   LoadFamily.ExportCarriesMetadataFilesAndEveryTensor: the HF export keeps every config.json
//     field that changes nothing (transformers_version, pad_token_id, a custom field, the
//     sliding-window fields Qwen2 does not use), copies generation_config.json, the chat template
//     and the slow tokenizer's files byte for byte, and writes exactly the source's tensors;
//   LoadFamily.AnOProjBiasIsRefusedOnLoadAndOnExport: attention_bias as Llama means it (o_proj
//     too) is refused by name; our q/k/v biases are not written as a Llama;
//   ExportTensorSet.NamesMissingExtraAndReshapedTensors: the reload check's tensor comparison.
#include <gtest/gtest.h>

#include <set>

#include "common/error.h"
#include "common/fs.h"
#include "common/json_io.h"
#include "export/checks.h"
#include "export/hf_export.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/weights.h"
#include "test_util.h"

namespace ac {
namespace {

using json = nlohmann::json;
using test::TempDir;

/// config.json of a tiny model of `family` as transformers writes it: D 32, 2 layers, 4 query
/// heads in 2 KV groups of head_dim 8, FFN 48 (DeciLM: 256, a width its ffn_mult rule gives,
/// and no attention in layer 1), vocab 64; with metadata that changes nothing.
json family_config(const std::string& family) {
  json j = {{"vocab_size", 64}, {"hidden_size", 32}, {"intermediate_size", 48},
            {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
            {"head_dim", 8}, {"max_position_embeddings", 128}, {"rms_norm_eps", 1e-5},
            {"rope_theta", 10000.0}, {"rope_scaling", nullptr}, {"hidden_act", "silu"},
            {"tie_word_embeddings", false}, {"bos_token_id", 1}, {"eos_token_id", 2},
            {"torch_dtype", "bfloat16"}, {"transformers_version", "4.46.0"},
            {"pad_token_id", 0}, {"attention_dropout", 0.0}, {"initializer_range", 0.02},
            {"use_cache", true}, {"my_custom_field", {{"origin", "test"}, {"steps", 3}}}};
  if (family == "llama") {
    j["architectures"] = {"LlamaForCausalLM"};
    j["model_type"] = "llama";
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
    j["pretraining_tp"] = 1;
  } else if (family == "mistral") {
    j["architectures"] = {"MistralForCausalLM"};
    j["model_type"] = "mistral";
    j["sliding_window"] = nullptr;  // Mistral 7B v0.3
  } else if (family == "qwen2") {
    j["architectures"] = {"Qwen2ForCausalLM"};
    j["model_type"] = "qwen2";
    j["tie_word_embeddings"] = true;
    j["use_sliding_window"] = false;  // Qwen2.5: a window written, never used
    j["sliding_window"] = 32;
    j["max_window_layers"] = 28;
  } else if (family == "qwen3") {
    j["architectures"] = {"Qwen3ForCausalLM"};
    j["model_type"] = "qwen3";
    j["attention_bias"] = false;
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
  } else if (family == "decilm") {
    j["architectures"] = {"DeciLMForCausalLM"};
    j["model_type"] = "nemotron-nas";
    j["intermediate_size"] = 256;
    const json attention = {{"n_heads_in_group", 2}, {"no_op", false},
                            {"replace_with_linear", false}, {"sparsify", nullptr},
                            {"window_length", nullptr}, {"num_sink_tokens", nullptr},
                            {"unshifted_sink", false},
                            {"use_prefill_window_in_sink_attention", false}};
    json no_attention = attention;
    no_attention["no_op"] = true;
    no_attention["n_heads_in_group"] = nullptr;
    const json ffn = {{"ffn_mult", 6.0}, {"no_op", false}, {"replace_with_linear", false},
                      {"sparsify", nullptr}};
    j["block_configs"] = {{{"attention", attention}, {"ffn", ffn}},
                          {{"attention", no_attention}, {"ffn", ffn}}};
  }
  return j;
}

const std::vector<std::string> kFamilies = {"llama", "mistral", "qwen2", "qwen3", "decilm"};

/// The files besides config.json and the weights, with contents to compare byte for byte.
const std::vector<std::pair<std::string, std::string>> kCompanions = {
    {"generation_config.json", "{\"bos_token_id\": 1, \"eos_token_id\": 2, \"temperature\": 0.7}"},
    {"chat_template.jinja", "{% for m in messages %}{{ m['content'] }}{% endfor %}"},
    {"vocab.json", "{\"a\": 0}"},
    {"merges.txt", "#version: 0.2\na b\n"}};

/// Writes `config` and random weights for it (plus `extra` tensors) into `dir`; returns the
/// tensors written.
TensorMap write_folder(const fs::path& dir, const json& config, const TensorMap& extra = {}) {
  fs::create_directories(dir);
  write_json_file(dir / "config.json", config);
  const ModelConfig c = config_from_hf_json(config, "config.json");
  TensorMap t = to_tensor_map(c, random_weights(c, 5, 0.2));
  for (const auto& [name, v] : extra) t[name] = v;
  for (auto& [name, v] : t) v = v.to(at::kBFloat16);
  save_safetensors(dir / "model.safetensors", t, {{"format", "pt"}});
  for (const auto& [name, text] : kCompanions) write_file_atomic(dir / name, text);
  return t;
}

TEST(LoadFamily, EveryFamilyLoadsAndRefusesATensorWithoutARole) {
  for (const std::string& family : kFamilies) {
    TempDir d;
    write_folder(d.path / "ok", family_config(family));
    EXPECT_NO_THROW(load_checkpoint(d.path / "ok")) << family;
    // Gemma 2's norm after the FFN: a part no family of ours has.
    const std::string extra = "model.layers.1.post_feedforward_layernorm.weight";
    write_folder(d.path / "extra", family_config(family), {{extra, at::ones({32})}});
    test::expect_error<FormatError>(
        [&] { load_checkpoint(d.path / "extra"); },
        {(d.path / "extra/model.safetensors").string(), "tensor " + extra,
         "has no place in the model config.json describes",
         "model_type " + family_config(family)["model_type"].get<std::string>(), "expected none",
         "a norm of another family", "llama, mistral, qwen2, qwen3, nemotron-nas"});
  }
}

TEST(LoadFamily, EveryFamilyRefusesFieldsTheForwardDoesNotCompute) {
  const std::string file = "dir/config.json";
  auto refused = [&](const json& j, const std::vector<std::string>& needles) {
    test::expect_error<FormatError>([&] { config_from_hf_json(j, file); }, needles);
  };
  for (const std::string& family : kFamilies) {
    SCOPED_TRACE(family);
    const json base = family_config(family);
    EXPECT_NO_THROW(config_from_hf_json(base, file));
    json j = base;
    j["mlp_bias"] = true;
    refused(j, {file, "mlp_bias true", "not implemented", "expected false or absent"});
    j = base;
    j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
    refused(j, {file, "rope_scaling.rope_type 'yarn' is not supported",
                "expected default, linear or llama3"});
    j = base;
    j["partial_rotary_factor"] = 0.5;
    refused(j, {file, "partial_rotary_factor 0.5", "expected 1.0"});
    j = base;
    j["hidden_act"] = "gelu_pytorch_tanh";
    refused(j, {file, "hidden_act 'gelu_pytorch_tanh' is not supported", "expected silu"});
    j = base;
    j["model_type"] = "granite";  // Llama's tensors, with multipliers Llama does not have
    refused(j, {file, "model_type 'granite' is not supported",
                "expected llama, mistral, qwen2, qwen3, nemotron-nas"});
  }
  const json deci = family_config("decilm");
  json j = deci;
  j["block_configs"][0]["attention"]["window_length"] = 64;
  refused(j, {file + " block_configs[0].attention.window_length 64",
              "sliding-window attention is not implemented", "expected null"});
  j = deci;
  j["block_configs"][1]["attention"]["num_sink_tokens"] = 4;
  refused(j, {file + " block_configs[1].attention.num_sink_tokens 4",
              "attention-sink attention is not implemented"});
  j = deci;
  j["block_configs"][1]["ffn"]["moe"] = {{"num_local_experts", 8}};
  refused(j, {file + " block_configs[1].ffn.moe", "unknown DeciLM block field",
              "found {\"num_local_experts\":8}", "expected only"});
}

TEST(LoadFamily, ExportCarriesMetadataFilesAndEveryTensor) {
  for (const std::string& family : kFamilies) {
    SCOPED_TRACE(family);
    TempDir d;
    const json parent = family_config(family);
    const TensorMap written = write_folder(d.path / "in", parent);
    const ExportReport r = export_model(d.path / "in", d.path / "out", ExportOptions{});
    const json out = read_json_file(d.path / "out/config.json");
    for (const char* key : {"transformers_version", "pad_token_id", "my_custom_field",
                            "attention_dropout", "initializer_range", "use_cache", "bos_token_id",
                            "eos_token_id", "rope_theta", "max_position_embeddings"})
      EXPECT_EQ(out.at(key), parent.at(key)) << key;
    for (const char* key : {"sliding_window", "use_sliding_window", "max_window_layers",
                            "pretraining_tp", "mlp_bias"}) {
      if (!parent.contains(key)) continue;
      EXPECT_EQ(out.at(key), parent.at(key)) << key;
    }
    EXPECT_EQ(out.at("torch_dtype"), "float32");  // export --dtype f32, listed with its reason
    for (const auto& [name, text] : kCompanions)
      EXPECT_EQ(read_file(d.path / "out" / name), text) << name;
    // Exactly the source's tensors, each with its shape.
    const SafetensorsFile f(d.path / "out/model.safetensors");
    const std::vector<std::string> stored = f.names();
    const std::set<std::string> names(stored.begin(), stored.end());
    std::set<std::string> expected;
    for (const auto& [name, t] : written) {
      expected.insert(name);
      if (!f.contains(name)) continue;  // the set comparison below names it
      EXPECT_EQ(f.shape(name), t.sizes().vec()) << name;
    }
    EXPECT_EQ(names, expected);
    EXPECT_NE(std::find(r.checks.begin(), r.checks.end(),
                        "model.safetensors holds every tensor of the source with its shape, and "
                        "no other"),
              r.checks.end());
  }
}

TEST(LoadFamily, AnOProjBiasIsRefusedOnLoadAndOnExport) {
  TempDir d;
  json j = family_config("llama");
  j["attention_bias"] = true;  // as transformers' Llama reads it: q, k, v and o biased
  write_folder(d.path / "llama", j,
               {{"model.layers.0.self_attn.o_proj.bias", at::zeros({32})},
                {"model.layers.1.self_attn.o_proj.bias", at::zeros({32})}});
  test::expect_error<FormatError>(
      [&] { load_checkpoint(d.path / "llama"); },
      {"tensors model.layers.0.self_attn.o_proj.bias, model.layers.1.self_attn.o_proj.bias",
       "an o_proj bias", "biases o_proj too"});
  // Our q/k/v biases on a Llama-typed model: written as LlamaForCausalLM, transformers would
  // add an o_proj bias the model does not have.
  ModelConfig c = ModelConfig::uniform(64, 32, 2, LayerConfig{4, 2, 8, 48});
  c.attention_bias = true;
  fs::create_directories(d.path / "ours");
  save_checkpoint(d.path / "ours", LlamaModel{c, random_weights(c, 3)});
  test::expect_error<ConfigError>(
      [&] { export_model(d.path / "ours", d.path / "out", ExportOptions{}); },
      {(d.path / "ours").string(), "written as model_type llama", "o_proj bias too",
       "expected model_type qwen2"});
  EXPECT_FALSE(fs::exists(d.path / "out"));
}

TEST(ExportTensorSet, NamesMissingExtraAndReshapedTensors) {
  TempDir d;
  save_safetensors(d.path / "w.safetensors",
                   {{"a", at::zeros({3, 2})}, {"c", at::zeros({1})}, {"d", at::zeros({5})}});
  const TensorShapes expected = {{"a", {2, 3}}, {"b", {4}}, {"d", {5}}};
  const std::string m = test::expect_error<InternalError>(
      [&] { check_tensor_set(expected, d.path / "w.safetensors"); },
      {(d.path / "w.safetensors").string(), "'a' has shape [3, 2], expected [2, 3]",
       "'b' [4] missing", "'c' not in the source"});
  EXPECT_EQ(m.find("'d'"), std::string::npos) << m;
  EXPECT_NO_THROW(check_tensor_set({{"a", {3, 2}}, {"c", {1}}, {"d", {5}}},
                                   d.path / "w.safetensors"));

  // The source's RoPE buffers and a tied head are left out, and said so.
  fs::create_directories(d.path / "src");
  save_safetensors(d.path / "src/model.safetensors",
                   {{"model.embed_tokens.weight", at::zeros({6, 4})},
                    {"lm_head.weight", at::zeros({6, 4})},
                    {"model.layers.0.self_attn.rotary_emb.inv_freq", at::zeros({2})}});
  std::vector<std::string> notes;
  EXPECT_EQ(expected_tensor_set(d.path / "src", /*tied=*/true, /*head_written=*/false, notes),
            (TensorShapes{{"model.embed_tokens.weight", {6, 4}}}));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("lm_head.weight, model.layers.0.self_attn.rotary_emb.inv_freq"),
            std::string::npos) << notes[0];
  notes.clear();
  EXPECT_EQ(expected_tensor_set(d.path / "src", /*tied=*/true, /*head_written=*/true, notes),
            (TensorShapes{{"model.embed_tokens.weight", {6, 4}}, {"lm_head.weight", {6, 4}}}));
}

}  // namespace
}  // namespace ac
