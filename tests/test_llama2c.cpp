// llama2.c importer: header and tensor placement on a synthetic model.bin, the q/k row
// permutation checked by hand and by RoPE (rotate-half on the permuted rows == adjacent pairs on
// the original), size errors, the CLI, and the real stories15M imported and loaded back.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <fstream>

#include "common/error.h"
#include "test_util.h"
#include "common/json_io.h"
#include "io/checkpoint.h"
#include "io/llama2c.h"
#include "io/tokenizer.h"

namespace ac {
namespace {

using test::stories15m_dir;
using test::TempDir;

/// A synthetic version-0 model.bin: the header, then the fp32 arrays in llama2.c's order, each
/// returned (in file order) so tests can find where every value went.
struct SyntheticModel {
  int32_t dim = 8, hidden = 12, layers = 2, heads = 2, kv_heads = 1, vocab = 260, seq = 5;
  bool untied = false;
  std::map<std::string, at::Tensor> arrays;  // name -> tensor as laid out in the file

  int64_t Hd() const { return dim / heads; }
  std::string write(const fs::path& p) {
    at::manual_seed(11);
    const int64_t D = dim, F = hidden, L = layers, V = vocab, KV = Hd() * kv_heads;
    const std::vector<std::pair<std::string, std::vector<int64_t>>> order = {
        {"tok", {V, D}},    {"rms_att", {L, D}}, {"wq", {L, D, D}},   {"wk", {L, KV, D}},
        {"wv", {L, KV, D}}, {"wo", {L, D, D}},   {"rms_ffn", {L, D}}, {"w1", {L, F, D}},
        {"w2", {L, D, F}},  {"w3", {L, F, D}},   {"rms_final", {D}},  {"freq_real", {seq, Hd() / 2}},
        {"freq_imag", {seq, Hd() / 2}}};
    const int32_t header[7] = {dim, hidden, layers, heads, kv_heads, untied ? -vocab : vocab, seq};
    std::string bytes(reinterpret_cast<const char*>(header), sizeof(header));
    auto add = [&](const std::string& name, at::IntArrayRef shape) {
      at::Tensor t = at::randn(shape);
      arrays[name] = t;
      bytes.append(static_cast<const char*>(t.data_ptr()), t.nbytes());
    };
    for (const auto& [name, shape] : order) add(name, shape);
    if (untied) add("wcls", {V, D});
    std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    return bytes;
  }
};

/// A tokenizer.bin with `vocab` tokens: specials, 256 byte tokens, then " " and filler pieces.
void write_tokenizer(const fs::path& p, int64_t vocab) {
  std::string out;
  auto put = [&](const void* q, size_t n) { out.append(static_cast<const char*>(q), n); };
  const int32_t max_len = 8;
  put(&max_len, 4);
  for (int64_t id = 0; id < vocab; ++id) {
    std::string piece = id == 0 ? "<unk>" : id == 1 ? "\n<s>\n" : id == 2 ? "\n</s>\n"
                      : id < 259 ? fmt::format("<0x{:02X}>", id - 3)
                      : id == 259 ? " " : fmt::format("p{}", id);
    const float score = -float(id);
    const int32_t len = int32_t(piece.size());
    put(&score, 4);
    put(&len, 4);
    put(piece.data(), piece.size());
  }
  std::ofstream(p, std::ios::binary).write(out.data(), std::streamsize(out.size()));
}

TEST(Llama2c, PermuteRotaryRowsByHand) {
  // Two heads of Hd = 4, one input column holding the row index: within each head, rows
  // (0, 1, 2, 3) = (pair0.x, pair0.y, pair1.x, pair1.y) become (pair0.x, pair1.x, pair0.y, pair1.y).
  at::Tensor w = at::arange(8, at::kFloat).reshape({8, 1});
  at::Tensor p = permute_rotary_rows(w, 2);
  const std::vector<float> expect = {0, 2, 1, 3, 4, 6, 5, 7};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(p[i][0].item<float>(), expect[size_t(i)]) << i;
  EXPECT_THROW(permute_rotary_rows(at::zeros({6, 2}), 4), ConfigError);
}

TEST(Llama2c, HeaderAndTensorPlacement) {
  TempDir tmp;
  SyntheticModel s;
  s.write(tmp.path / "model.bin");
  const LlamaModel m = read_llama2c(tmp.path / "model.bin");
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.hidden_size, 8);
  EXPECT_EQ(c.vocab_size, 260);
  EXPECT_EQ(c.num_layers(), 2);
  EXPECT_EQ(c.max_position_embeddings, 5);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.rope_theta, 10000.0);
  for (const auto& l : c.layers) {
    EXPECT_EQ(l.num_attention_heads, 2);
    EXPECT_EQ(l.num_key_value_heads, 1);
    EXPECT_EQ(l.head_dim, 4);
    EXPECT_EQ(l.intermediate_size, 12);
  }
  const ModelWeights& w = m.weights;
  EXPECT_TRUE(at::equal(w.embed_tokens, s.arrays["tok"]));
  EXPECT_TRUE(at::equal(w.lm_head, s.arrays["tok"]));
  EXPECT_TRUE(at::equal(w.norm, s.arrays["rms_final"]));
  for (int64_t l = 0; l < 2; ++l) {
    const LayerWeights& lw = w.layers[size_t(l)];
    EXPECT_TRUE(at::equal(lw.input_layernorm, s.arrays["rms_att"][l]));
    EXPECT_TRUE(at::equal(lw.post_attention_layernorm, s.arrays["rms_ffn"][l]));
    EXPECT_TRUE(at::equal(lw.q_proj, permute_rotary_rows(s.arrays["wq"][l], 2)));
    EXPECT_TRUE(at::equal(lw.k_proj, permute_rotary_rows(s.arrays["wk"][l], 1)));
    EXPECT_TRUE(at::equal(lw.v_proj, s.arrays["wv"][l]));
    EXPECT_TRUE(at::equal(lw.o_proj, s.arrays["wo"][l]));
    EXPECT_TRUE(at::equal(lw.gate_proj, s.arrays["w1"][l]));
    EXPECT_TRUE(at::equal(lw.down_proj, s.arrays["w2"][l]));
    EXPECT_TRUE(at::equal(lw.up_proj, s.arrays["w3"][l]));
  }
}

TEST(Llama2c, UntiedHeadFollowsTheRopeTables) {
  TempDir tmp;
  SyntheticModel s;
  s.untied = true;
  s.write(tmp.path / "model.bin");
  const LlamaModel m = read_llama2c(tmp.path / "model.bin");
  EXPECT_FALSE(m.config.tie_word_embeddings);
  EXPECT_EQ(m.config.vocab_size, 260);
  EXPECT_TRUE(at::equal(m.weights.lm_head, s.arrays["wcls"]));
  EXPECT_TRUE(at::equal(m.weights.embed_tokens, s.arrays["tok"]));
}

/// RoPE on one head vector q [Hd] at position `pos`, in double. Adjacent pairs (llama2.c):
/// (q[2i], q[2i+1]) rotated by pos * theta^(-2i/Hd). Rotate-half (HF): (q[i], q[i + Hd/2]).
std::vector<double> rope(const std::vector<double>& q, int64_t pos, bool rotate_half) {
  const size_t Hd = q.size(), half = Hd / 2;
  std::vector<double> out(Hd);
  for (size_t i = 0; i < half; ++i) {
    const double a = double(pos) * std::pow(10000.0, -2.0 * double(i) / double(Hd));
    const size_t x = rotate_half ? i : 2 * i, y = rotate_half ? i + half : 2 * i + 1;
    out[x] = q[x] * std::cos(a) - q[y] * std::sin(a);
    out[y] = q[x] * std::sin(a) + q[y] * std::cos(a);
  }
  return out;
}

/// Rows [head*Hd, (head+1)*Hd) of w [R, D] times x [D], in double.
std::vector<double> head_proj(const at::Tensor& w, int64_t head, int64_t Hd, const at::Tensor& x) {
  at::Tensor y = at::matmul(w.narrow(0, head * Hd, Hd).to(at::kDouble), x.to(at::kDouble));
  return std::vector<double>(y.data_ptr<double>(), y.data_ptr<double>() + Hd);
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST(Llama2c, PermutedRowsTurnAdjacentPairRopeIntoRotateHalf) {
  TempDir tmp;
  SyntheticModel s;
  s.dim = 16, s.heads = 2, s.kv_heads = 1;  // Hd = 8, GQA: both query heads read KV head 0
  s.write(tmp.path / "model.bin");
  const LlamaModel m = read_llama2c(tmp.path / "model.bin");
  const int64_t Hd = s.Hd();
  at::manual_seed(5);
  const at::Tensor x = at::randn({s.dim}), x2 = at::randn({s.dim});
  for (int64_t head = 0; head < 2; ++head) {
    for (int64_t pos : {0, 1, 3, 4}) {
      const auto q_adj = rope(head_proj(s.arrays["wq"][1], head, Hd, x), pos, false);
      const auto q_hf = rope(head_proj(m.weights.layers[1].q_proj, head, Hd, x), pos, true);
      for (int64_t i = 0; i < Hd / 2; ++i) {  // the same rotated vector, rows permuted
        EXPECT_NEAR(q_hf[size_t(i)], q_adj[size_t(2 * i)], 1e-9);
        EXPECT_NEAR(q_hf[size_t(i + Hd / 2)], q_adj[size_t(2 * i + 1)], 1e-9);
      }
      // Attention scores q(pos) . k(pos2) agree between the conventions.
      const int64_t pos2 = (pos + 2) % 5;
      const auto k_adj = rope(head_proj(s.arrays["wk"][1], 0, Hd, x2), pos2, false);
      const auto k_hf = rope(head_proj(m.weights.layers[1].k_proj, 0, Hd, x2), pos2, true);
      EXPECT_NEAR(dot(q_hf, k_hf), dot(q_adj, k_adj), 1e-9);
    }
  }
}

void expect_format_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
    FAIL() << "no error";
  } catch (const FormatError& e) {
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what() << "\nwanted: " << n;
  }
}

TEST(Llama2c, WrongSizeOrHeaderThrows) {
  TempDir tmp;
  SyntheticModel s;
  const std::string good = s.write(tmp.path / "model.bin");
  const fs::path p = tmp.path / "cut.bin";
  auto write = [&](const std::string& b) {
    std::ofstream(p, std::ios::binary).write(b.data(), std::streamsize(b.size()));
  };
  const std::string expected = fmt::format("expected {}", good.size());
  write(good.substr(0, good.size() - 4));
  expect_format_error([&] { read_llama2c(p); },
                      {"cut.bin", fmt::format("{} bytes", good.size() - 4), expected});
  write(good + "xxxx");
  expect_format_error([&] { read_llama2c(p); },
                      {fmt::format("{} bytes", good.size() + 4), expected});
  write(good.substr(0, 10));
  expect_format_error([&] { read_llama2c(p); }, {"shorter than the 28-byte header"});
  std::string bad = good;
  const int32_t zero = 0, seven = 7;
  std::memcpy(&bad[12], &zero, 4);  // n_heads
  write(bad);
  expect_format_error([&] { read_llama2c(p); }, {"n_heads = 0"});
  std::memcpy(&bad[12], &seven, 4);
  write(bad);
  expect_format_error([&] { read_llama2c(p); }, {"dim 8 is not n_heads 7"});
  expect_format_error([&] { read_llama2c(tmp.path / "absent.bin"); }, {"absent.bin"});
}

TEST(Llama2c, ImportWritesACheckpointThatLoadsBack) {
  TempDir tmp;
  SyntheticModel s;
  s.untied = true;
  s.write(tmp.path / "model.bin");
  write_tokenizer(tmp.path / "tokenizer.bin", 260);
  const fs::path out = tmp.path / "ckpt";
  import_llama2c(tmp.path / "model.bin", tmp.path / "tokenizer.bin", out);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.bin", "tokenizer_config.json",
                        "special_tokens_map.json", "generation_config.json"})
    EXPECT_TRUE(fs::exists(out / f)) << f;
  EXPECT_EQ(read_file(out / "tokenizer.bin"), read_file(tmp.path / "tokenizer.bin"));
  const json cfg = read_json_file(out / "config.json");
  EXPECT_EQ(cfg["head_dim"], 4);
  EXPECT_EQ(cfg["num_key_value_heads"], 1);
  EXPECT_EQ(cfg["tie_word_embeddings"], false);
  EXPECT_EQ(read_json_file(out / "special_tokens_map.json")["bos_token"], "<s>");

  const LlamaModel a = read_llama2c(tmp.path / "model.bin");
  const LlamaModel b = load_checkpoint(out);
  EXPECT_EQ(b.config.layers, a.config.layers);
  EXPECT_TRUE(at::equal(b.weights.lm_head, a.weights.lm_head));
  EXPECT_TRUE(at::equal(b.weights.layers[1].k_proj, a.weights.layers[1].k_proj));
  EXPECT_TRUE(at::equal(b.weights.layers[0].down_proj, a.weights.layers[0].down_proj));
  EXPECT_EQ(Tokenizer::from_checkpoint(out, 260).vocab_size(), 260);

  // A tokenizer whose size disagrees with the model is refused before anything is written.
  write_tokenizer(tmp.path / "small.bin", 259 + 5);
  EXPECT_THROW(import_llama2c(tmp.path / "model.bin", tmp.path / "small.bin", tmp.path / "x"),
               FormatError);
  EXPECT_FALSE(fs::exists(tmp.path / "x"));
}

TEST(Llama2c, SaveCheckpointAtomicCopiesTokenizerFiles) {
  TempDir tmp;
  SyntheticModel s;
  s.write(tmp.path / "model.bin");
  write_tokenizer(tmp.path / "tokenizer.bin", 260);
  import_llama2c(tmp.path / "model.bin", tmp.path / "tokenizer.bin", tmp.path / "a");
  const LlamaModel m = load_checkpoint(tmp.path / "a");
  save_checkpoint_atomic(tmp.path / "b", m, tmp.path / "a");
  for (const char* f : {"tokenizer.bin", "tokenizer_config.json", "special_tokens_map.json"})
    EXPECT_EQ(read_file(tmp.path / "b" / f), read_file(tmp.path / "a" / f)) << f;
  EXPECT_EQ(read_file(tmp.path / "b" / "model.safetensors"),
            read_file(tmp.path / "a" / "model.safetensors"));  // save -> load -> save is exact
  expect_format_error([&] { load_checkpoint(tmp.path / "nope"); }, {"nope"});
  fs::remove(tmp.path / "a" / "config.json");
  expect_format_error([&] { load_checkpoint(tmp.path / "a"); }, {"config.json"});
}

TEST(Llama2c, CliImport) {
  TempDir tmp;
  const char* env = std::getenv("AC_BIN");
  const fs::path bin = env ? fs::path(env) : ac::test::binary_dir() / "autocompress";
  ASSERT_TRUE(fs::exists(bin)) << bin << " not built: build the `autocompress` target";
  SyntheticModel s;
  s.write(tmp.path / "model.bin");
  write_tokenizer(tmp.path / "tokenizer.bin", 260);
  const std::string cmd = fmt::format("AC_QUIET=1 '{}' import llama2c '{}' '{}' --out '{}' >/dev/null",
                                      bin.string(), (tmp.path / "model.bin").string(),
                                      (tmp.path / "tokenizer.bin").string(),
                                      (tmp.path / "out").string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_EQ(load_checkpoint(tmp.path / "out").config.hidden_size, 8);
  // A truncated model.bin makes the CLI fail with a non-zero status and no output folder.
  std::filesystem::resize_file(tmp.path / "model.bin", 100);
  const std::string bad = fmt::format("AC_QUIET=1 '{}' import llama2c '{}' '{}' --out '{}' 2>/dev/null",
                                      bin.string(), (tmp.path / "model.bin").string(),
                                      (tmp.path / "tokenizer.bin").string(),
                                      (tmp.path / "out2").string());
  EXPECT_NE(std::system(bad.c_str()), 0);
  EXPECT_FALSE(fs::exists(tmp.path / "out2"));
}

TEST(Llama2c, ImportsRealStories15m) {
  const fs::path src = stories15m_dir();
  ASSERT_TRUE(fs::exists(src / "model.bin")) << src << ": run scripts/fetch_stories15m.sh";
  TempDir tmp;
  const fs::path out = tmp.path / "stories15m";
  import_llama2c(src / "model.bin", src / "tokenizer.bin", out);
  const json cfg = read_json_file(out / "config.json");
  EXPECT_EQ(cfg["hidden_size"], 288);
  EXPECT_EQ(cfg["num_hidden_layers"], 6);
  EXPECT_EQ(cfg["num_attention_heads"], 6);
  EXPECT_EQ(cfg["intermediate_size"], 768);
  EXPECT_EQ(cfg["vocab_size"], 32000);
  EXPECT_EQ(cfg["head_dim"], 48);
  EXPECT_EQ(cfg["tie_word_embeddings"], true);
  EXPECT_EQ(cfg["max_position_embeddings"], 256);
  EXPECT_EQ(cfg["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(read_file(out / "tokenizer.bin"), read_file(src / "tokenizer.bin"));
  const LlamaModel m = load_checkpoint(out);
  EXPECT_EQ(m.config.num_parameters(), 15191712);  // 60816028 bytes: 28 header, 12288 RoPE floats
  // The first embedding value, read straight from the file: float at byte offset 28.
  float first = 0;
  std::ifstream(src / "model.bin", std::ios::binary).seekg(28).read(reinterpret_cast<char*>(&first), 4);
  EXPECT_EQ(m.weights.embed_tokens[0][0].item<float>(), first);
  EXPECT_EQ(Tokenizer::from_checkpoint(out, m.config.vocab_size).encode("Once upon a time", true),
            (std::vector<int64_t>{1, 9038, 2501, 263, 931}));
}

}  // namespace
}  // namespace ac
