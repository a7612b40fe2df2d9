// Helpers of the export tests (test_export.cpp: HF / DeciLM; test_gguf_export.cpp: the GGUF
// container and model files; test_llamacpp_export.cpp: llama.cpp running our GGUFs): small random
// models, their logits on a fixed prompt, checkpoint folders with a synthetic tokenizer.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "common/json_io.h"
#include "io/checkpoint.h"
#include "io/llama2c.h"
#include "model/llama.h"
#include "gguf_fixture.h"
#include "test_util.h"

namespace ac::export_test {

using test::synthetic_vocab;

/// The bytes of a file.
inline std::string bytes_of(const fs::path& p) { return read_file(p); }

/// A T read from `b` at byte `off` (host byte order: little-endian, as GGUF).
template <typename T>
T at_offset(const std::string& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}

/// max |a - b| over every element.
inline double max_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

/// The model's logits [1, 13, V] on a fixed 13-token prompt (ids 0, 7, 14, ... mod V).
inline at::Tensor logits(const LlamaModel& m) {
  at::NoGradGuard g;
  const int64_t V = m.config.vocab_size;
  return m.forward(at::arange(0, 13, at::kLong).mul(7).remainder(V).view({1, -1}));  // [1, 13, V]
}

/// A checkpoint folder of a random model with a tokenizer.bin (synthetic vocabulary).
inline fs::path write_checkpoint(const fs::path& dir, const LlamaModel& m) {
  fs::create_directories(dir);
  save_checkpoint(dir, m);
  write_file_atomic(dir / "tokenizer.bin",
                    llama2c_tokenizer_bytes(synthetic_vocab(m.config.vocab_size), "test"));
  return dir;
}

/// The layer with its attention removed (no heads).
inline LayerConfig no_attn(LayerConfig l) {
  l.attention_no_op = true;
  l.num_attention_heads = l.num_key_value_heads = 0;
  return l;
}
/// The layer with its FFN removed.
inline LayerConfig no_ffn(LayerConfig l) {
  l.ffn_no_op = true;
  l.intermediate_size = 0;
  return l;
}

/// Heterogeneous, DeciLM-expressible: D 96, H 4 everywhere, Hd 16 (!= 96/4), widths multiples
/// of 256; an attention-free layer, an FFN-free layer, a GQA layer; llama3 rope scaling.
inline ModelConfig deci_config() {
  const LayerConfig base{/*H=*/4, /*G=*/4, /*Hd=*/16, /*F=*/512};
  ModelConfig c = ModelConfig::uniform(/*V=*/300, /*D=*/96, /*L=*/5, base);
  c.layers[1] = no_attn(c.layers[1]);
  c.layers[1].intermediate_size = 256;
  c.layers[2] = no_ffn(c.layers[2]);
  c.layers[3].num_key_value_heads = 2;
  c.layers[4].intermediate_size = 768;
  c.rope_theta = 500000.0;
  c.rope_scaling = test::llama3_rope_scaling(/*original_max_position_embeddings=*/16);
  c.max_position_embeddings = 4096;
  c.extra["my_field"] = "kept";
  return c;
}

}  // namespace ac::export_test
