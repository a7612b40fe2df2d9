#include "io/llama2c.h"

#include <fstream>

#include "common/error.h"
#include "common/json_io.h"
#include "io/checkpoint.h"
#include "io/llama2c_header.h"
#include "io/tokenizer.h"

namespace ac {

namespace {

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

/// Opens model.bin and reads its header (validated against the file size); `in` is left at
/// the first weight.
Llama2cHeader open_llama2c(const fs::path& model_bin, std::ifstream& in) {
  const std::string file = model_bin.string();
  std::error_code ec;
  if (!fs::is_regular_file(model_bin, ec))
    throw FormatError(msg("llama2c", "{}: no such file or not a regular file", file));
  in.open(model_bin, std::ios::binary);
  if (!in) throw FormatError(msg("llama2c", "{}: not readable", file));
  const uint64_t found = fs::file_size(model_bin);
  uint8_t head[kLlama2cHeaderBytes] = {};
  in.read(reinterpret_cast<char*>(head), kLlama2cHeaderBytes);
  return parse_llama2c_header(head, uint64_t(in.gcount()), found, file);
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

ModelConfig read_llama2c_config(const fs::path& model_bin) {
  std::ifstream in;
  ModelConfig c = config_of(open_llama2c(model_bin, in));
  c.validate("llama2c " + model_bin.string());
  return c;
}

LlamaModel read_llama2c(const fs::path& model_bin) {
  const std::string file = model_bin.string();
  std::ifstream in;
  const Llama2cHeader h = open_llama2c(model_bin, in);

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
