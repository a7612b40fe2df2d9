#include "io/llama2c.h"

#include <fstream>

#include "common/error.h"
#include "common/json_io.h"
#include "io/checkpoint.h"
#include "io/tokenizer.h"

namespace ac {

namespace {

/// The seven int32 of the version-0 header.
struct Llama2cHeader {
  int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};
constexpr uint64_t kHeaderBytes = 7 * sizeof(int32_t);
constexpr int32_t kMaxDim = 1 << 20;  // far above any real model; keeps the size math in range

Llama2cHeader read_header(std::ifstream& in, const std::string& file, uint64_t file_bytes) {
  if (file_bytes < kHeaderBytes)
    throw FormatError(msg("llama2c", "{}: file is {} bytes, shorter than the {}-byte header",
                          file, file_bytes, kHeaderBytes));
  Llama2cHeader h{};
  in.read(reinterpret_cast<char*>(&h), kHeaderBytes);
  const std::pair<const char*, int32_t> fields[] = {
      {"dim", h.dim},         {"hidden_dim", h.hidden_dim}, {"n_layers", h.n_layers},
      {"n_heads", h.n_heads}, {"n_kv_heads", h.n_kv_heads}, {"seq_len", h.seq_len}};
  for (const auto& [name, v] : fields)
    if (v <= 0 || v > kMaxDim)
      throw FormatError(msg("llama2c", "{}: header field {} = {}, expected 1..{}", file, name, v,
                            kMaxDim));
  if (h.vocab_size == 0 || h.vocab_size < -kMaxDim || h.vocab_size > kMaxDim)
    throw FormatError(msg("llama2c", "{}: header field vocab_size = {}, expected a non-zero "
                          "value within +-{}", file, h.vocab_size, kMaxDim));
  if (h.dim % h.n_heads != 0 || (h.dim / h.n_heads) % 2 != 0)
    throw FormatError(msg("llama2c", "{}: dim {} is not n_heads {} times an even head_dim", file,
                          h.dim, h.n_heads));
  if (h.n_kv_heads > h.n_heads || h.n_heads % h.n_kv_heads != 0)
    throw FormatError(msg("llama2c", "{}: n_heads {} is not a multiple of n_kv_heads {}", file,
                          h.n_heads, h.n_kv_heads));
  return h;
}

ModelConfig config_of(const Llama2cHeader& h) {
  LayerConfig layer;
  layer.num_attention_heads = h.n_heads;
  layer.num_key_value_heads = h.n_kv_heads;
  layer.head_dim = h.dim / h.n_heads;
  layer.intermediate_size = h.hidden_dim;
  ModelConfig c = ModelConfig::uniform(std::abs(int64_t(h.vocab_size)), h.dim, h.n_layers, layer);
  c.architecture = "LlamaForCausalLM";
  c.model_type = "llama";
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.max_position_embeddings = h.seq_len;
  c.tie_word_embeddings = h.vocab_size > 0;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  c.torch_dtype = "float32";
  return c;
}

/// Bytes the header implies (all int64 math: every field is <= 2^20, so no product overflows).
uint64_t expected_bytes(const Llama2cHeader& h) {
  const uint64_t D = h.dim, F = h.hidden_dim, L = h.n_layers, V = std::abs(int64_t(h.vocab_size));
  const uint64_t Hd = D / h.n_heads, KV = Hd * h.n_kv_heads;
  uint64_t floats = V * D                    // token_embedding
                    + L * D                  // rms_att
                    + L * D * D + 2 * L * KV * D + L * D * D  // wq, wk, wv, wo
                    + L * D                  // rms_ffn
                    + 3 * L * F * D          // w1, w2, w3
                    + D                      // rms_final
                    + uint64_t(h.seq_len) * Hd;  // freq_cis_real + freq_cis_imag, [seq, Hd/2] each
  if (h.vocab_size < 0) floats += V * D;     // wcls
  return kHeaderBytes + 4 * floats;
}

/// Reads the next fp32 array of `shape` from the file.
at::Tensor read_floats(std::ifstream& in, at::IntArrayRef shape, const std::string& file,
                       const char* what) {
  at::Tensor t = at::empty(shape, at::kFloat);
  in.read(reinterpret_cast<char*>(t.data_ptr<float>()), std::streamsize(t.nbytes()));
  if (!in)
    throw FormatError(msg("llama2c", "{}: read failed in '{}'", file, what));
  return t;
}

}  // namespace

at::Tensor permute_rotary_rows(const at::Tensor& w, int64_t n_heads) {
  const int64_t rows = w.size(0), D = w.size(1);
  if (n_heads <= 0 || rows % n_heads != 0 || (rows / n_heads) % 2 != 0)
    throw ConfigError(msg("permute_rotary_rows", "{} rows do not split into {} heads of an even "
                          "head_dim", rows, n_heads));
  const int64_t Hd = rows / n_heads;
  // [H*Hd, D] -> [H, Hd/2, 2, D] -> [H, 2, Hd/2, D]: row 2i+j of a head moves to j*Hd/2 + i.
  return w.reshape({n_heads, Hd / 2, 2, D}).transpose(1, 2).reshape({rows, D}).contiguous();
}

LlamaModel read_llama2c(const fs::path& model_bin) {
  const std::string file = model_bin.string();
  std::ifstream in(model_bin, std::ios::binary);
  if (!in) throw FormatError(msg("llama2c", "{}: no such file or not readable", file));
  const uint64_t found = fs::file_size(model_bin);
  const Llama2cHeader h = read_header(in, file, found);
  const uint64_t expected = expected_bytes(h);
  if (found != expected)
    throw FormatError(msg("llama2c", "{}: file is {} bytes, expected {} from the header (dim {}, "
                          "hidden_dim {}, n_layers {}, n_heads {}, n_kv_heads {}, vocab_size {}, "
                          "seq_len {}): truncated or not a version-0 llama2.c model?",
                          file, found, expected, h.dim, h.hidden_dim, h.n_layers, h.n_heads,
                          h.n_kv_heads, h.vocab_size, h.seq_len));

  LlamaModel m;
  m.config = config_of(h);
  const int64_t V = m.config.vocab_size, D = h.dim, L = h.n_layers, F = h.hidden_dim;
  const int64_t Hd = D / h.n_heads, KV = Hd * h.n_kv_heads;
  ModelWeights& w = m.weights;
  w.embed_tokens = read_floats(in, {V, D}, file, "token_embedding");  // [V, D]
  at::Tensor rms_att = read_floats(in, {L, D}, file, "rms_att");
  at::Tensor wq = read_floats(in, {L, D, D}, file, "wq");    // [L, H*Hd, D]
  at::Tensor wk = read_floats(in, {L, KV, D}, file, "wk");   // [L, G*Hd, D]
  at::Tensor wv = read_floats(in, {L, KV, D}, file, "wv");   // [L, G*Hd, D]
  at::Tensor wo = read_floats(in, {L, D, D}, file, "wo");    // [L, D, H*Hd]
  at::Tensor rms_ffn = read_floats(in, {L, D}, file, "rms_ffn");
  at::Tensor w1 = read_floats(in, {L, F, D}, file, "w1");    // gate_proj [L, F, D]
  at::Tensor w2 = read_floats(in, {L, D, F}, file, "w2");    // down_proj [L, D, F]
  at::Tensor w3 = read_floats(in, {L, F, D}, file, "w3");    // up_proj [L, F, D]
  w.norm = read_floats(in, {D}, file, "rms_final");
  in.seekg(std::streamoff(2 * h.seq_len * (Hd / 2) * 4), std::ios::cur);  // RoPE tables: unused
  w.lm_head = h.vocab_size > 0 ? w.embed_tokens : read_floats(in, {V, D}, file, "wcls");

  for (int64_t l = 0; l < L; ++l) {
    LayerWeights lw;
    lw.input_layernorm = rms_att[l].clone();
    lw.q_proj = permute_rotary_rows(wq[l], h.n_heads);
    lw.k_proj = permute_rotary_rows(wk[l], h.n_kv_heads);
    lw.v_proj = wv[l].clone();
    lw.o_proj = wo[l].clone();
    lw.post_attention_layernorm = rms_ffn[l].clone();
    lw.gate_proj = w1[l].clone();
    lw.up_proj = w3[l].clone();
    lw.down_proj = w2[l].clone();
    w.layers.push_back(std::move(lw));
  }
  m.config.validate("llama2c " + file);
  return m;
}

namespace {

void write_tokenizer_files(const fs::path& dir, const ModelConfig& c) {
  write_json_file(dir / "special_tokens_map.json",
                  {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"}});
  write_json_file(dir / "tokenizer_config.json",
                  {{"bos_token", "<s>"},
                   {"eos_token", "</s>"},
                   {"unk_token", "<unk>"},
                   {"add_bos_token", true},
                   {"add_eos_token", false},
                   {"model_max_length", c.max_position_embeddings},
                   {"clean_up_tokenization_spaces", false}});
  write_json_file(dir / "generation_config.json",
                  {{"bos_token_id", c.bos_token_id},
                   {"eos_token_id", c.eos_token_id},
                   {"_from_model_config", true}});
}

}  // namespace

void import_llama2c(const fs::path& model_bin, const fs::path& tokenizer_bin,
                    const fs::path& out_dir) {
  check_not_overwriting_input(model_bin, out_dir, "import llama2c");
  check_not_overwriting_input(tokenizer_bin, out_dir, "import llama2c");
  const LlamaModel m = read_llama2c(model_bin);
  Tokenizer::from_llama2c(tokenizer_bin, m.config.vocab_size);  // validates before writing
  StagingDir staging(out_dir);
  save_checkpoint(staging.path(), m);
  fs::copy_file(tokenizer_bin, staging.path() / "tokenizer.bin");
  write_tokenizer_files(staging.path(), m.config);
  staging.commit();
}

}  // namespace ac
