// Hand-made corrupt and hostile files, format by format (docs/fuzzing.md): every one must be
// refused with the typed error (FormatError for a bad file) whose message names the file and the
// field. Truncations are exhaustive where the file is small (every prefix), so no cut point can
// slip through. The "Regression" tests at the end replay what the fuzz targets found (fuzz/).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>

#include "common/error.h"
#include "common/json_io.h"
#include "data/dataset.h"
#include "data/token_file.h"
#include "distill/distill.h"
#include "io/gguf.h"
#include "export/gguf_model.h"
#include "hardware/profile.h"
#include "hardware/scenario.h"
#include "importance/importance.h"
#include "io/checkpoint.h"
#include "io/llama2c.h"
#include "io/llama2c_header.h"
#include "io/safetensors.h"
#include "io/safetensors_header.h"
#include "io/tokenizer.h"
#include "model/config.h"
#include "model/finite.h"
#include "prune/arch.h"
#include "test_util.h"
#include "tokenizer_fixture.h"

namespace ac {
namespace {

using test::TempDir;

void write_bytes(const fs::path& p, const std::string& b) {
  std::ofstream(p, std::ios::binary).write(b.data(), std::streamsize(b.size()));
}

template <typename E = FormatError>
void expect_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
  test::expect_error<E>(f, needles);
}

/// A tiny Llama: V = 300, D = 8, L = 2, H = 2, G = 1, Hd = 4, F = 16; random weights.
LlamaModel tiny_model(uint64_t seed = 1) {
  LayerConfig l;
  l.num_attention_heads = 2;
  l.num_key_value_heads = 1;
  l.head_dim = 4;
  l.intermediate_size = 16;
  LlamaModel m;
  m.config = ModelConfig::uniform(300, 8, 2, l);
  m.weights = random_weights(m.config, seed);
  return m;
}

using test::tokenizer_bytes;

/// A llama2.c model.bin for `h`: the header, then deterministic floats of the implied size.
std::string llama2c_bytes(const Llama2cHeader& h) {
  std::string out(reinterpret_cast<const char*>(&h), kLlama2cHeaderBytes);
  const uint64_t floats = (llama2c_expected_bytes(h) - kLlama2cHeaderBytes) / 4;
  for (uint64_t i = 0; i < floats; ++i) {
    const float x = 0.01f * float(int64_t(i % 17) - 8);
    out.append(reinterpret_cast<const char*>(&x), 4);
  }
  return out;
}

/// A GGUF holding one key of every value type (scalars and arrays) and a tensor of every
/// tensor type written: F32 (two), F16, Q8_0, Q4_0.
std::string every_type_gguf(const fs::path& path) {
  auto v = [](GgufType t, bool arr, std::vector<int64_t> i, std::vector<double> f = {},
              std::vector<std::string> s = {}) { return GgufValue{t, arr, i, f, s}; };
  GgufMetadata kv = {
      {"t.u8", v(GgufType::UINT8, false, {255})},
      {"t.i8", v(GgufType::INT8, false, {-128})},
      {"t.u16", v(GgufType::UINT16, false, {65535})},
      {"t.i16", v(GgufType::INT16, false, {-32768})},
      {"t.u32", GgufValue::u32(4000000000)},
      {"t.i32", v(GgufType::INT32, false, {-2000000000})},
      {"t.f32", GgufValue::f32(0.5)},
      {"t.bool", GgufValue::boolean(true)},
      {"t.str", GgufValue::str("h\xC3\xA9llo")},
      {"t.u64", v(GgufType::UINT64, false, {int64_t(1) << 62})},
      {"t.i64", v(GgufType::INT64, false, {-(int64_t(1) << 62)})},
      {"t.f64", v(GgufType::FLOAT64, false, {}, {1e300})},
      {"t.arr_i32", GgufValue::i32_array({1, -2, 3})},
      {"t.arr_f32", GgufValue::f32_array({0.25, -1})},
      {"t.arr_str", GgufValue::str_array({"a", "", "ccc"})},
      {"t.arr_bool", v(GgufType::BOOL, true, {0, 1})},
      {"t.arr_u8", v(GgufType::UINT8, true, {1, 2, 3, 4, 5})},
  };
  write_gguf(path, kv,
             {{"a.weight", at::arange(12, at::kFloat).view({3, 4}), GgmlType::F32},
              {"b.weight", at::ones({5}), GgmlType::F32},
              {"c.weight", at::full({2, 2}, 3.0), GgmlType::F16},
              {"d.weight", at::arange(128, at::kFloat).view({2, 64}).sin(), GgmlType::Q8_0},
              {"e.weight", at::arange(96, at::kFloat).view({3, 32}).cos(), GgmlType::Q4_0}});
  return read_file(path);
}

/// Offset of the u32 value type that follows metadata key `key` in GGUF bytes.
size_t gguf_type_offset(const std::string& b, const std::string& key) {
  const size_t at = b.find(key);
  EXPECT_NE(at, std::string::npos) << key;
  return at + key.size();
}

// ---------------------------------------------------------------------------------------------
// truncated files at every point

TEST(Corrupt, SafetensorsTruncatedAtEveryPoint) {
  TempDir tmp;
  const fs::path good = tmp.path / "good.safetensors", cut = tmp.path / "cut.safetensors";
  save_safetensors(good, {{"a", at::randn({3, 4})}, {"b", at::randn({5}).to(at::kHalf)}});
  const std::string full = read_file(good);
  // Every prefix: the 8-byte length, the JSON header, each tensor's bytes, up to one byte short.
  for (size_t n = 0; n < full.size(); ++n) {
    write_bytes(cut, full.substr(0, n));
    expect_error([&] { SafetensorsFile f(cut); }, {cut.string(), "truncated?"});
  }
  write_bytes(cut, full);
  EXPECT_EQ(SafetensorsFile(cut).names().size(), 2u);  // the whole file still reads
}

TEST(Corrupt, GgufTruncatedAtEveryPoint) {
  TempDir tmp;
  const std::string full = every_type_gguf(tmp.path / "every.gguf");
  const GgufFile whole(full, "every.gguf");
  uint64_t end = 0;  // end of the last tensor's bytes (the padding after it is optional)
  for (const auto& name : whole.tensor_names()) {
    uint64_t numel = 1;
    for (int64_t d : whole.ggml_ne(name)) numel *= uint64_t(d);
    end = std::max(end, whole.data_offset(name) + ggml_bytes(whole.type(name), numel));
  }
  for (size_t n = 0; n < end; ++n)
    expect_error([&] { GgufFile g(full.substr(0, n), "cut.gguf"); }, {"cut.gguf", "truncated"});
  EXPECT_EQ(GgufFile(full.substr(0, end), "end.gguf").tensor_names().size(), 5u);
}

TEST(Corrupt, TokenizerTruncatedAtEveryPoint) {
  const std::string full = tokenizer_bytes(300);
  for (size_t n = 0; n < full.size(); ++n)
    expect_error([&] { Tokenizer::from_llama2c_bytes(full.substr(0, n), 300, "tok.bin"); },
                 {"tok.bin"});
  EXPECT_EQ(Tokenizer::from_llama2c_bytes(full, 300, "tok.bin").vocab_size(), 300);
}

TEST(Corrupt, Llama2cTruncatedAtSeveralPoints) {
  TempDir tmp;
  const Llama2cHeader h{8, 16, 2, 2, 1, 300, 4};
  const std::string full = llama2c_bytes(h);
  const fs::path p = tmp.path / "model.bin";
  for (size_t n : {size_t(0), size_t(3), size_t(27), size_t(28), size_t(29), full.size() / 2,
                   full.size() - 4, full.size() - 1}) {
    write_bytes(p, full.substr(0, n));
    if (n < kLlama2cHeaderBytes)
      expect_error([&] { read_llama2c(p); }, {p.string(), "shorter than the 28-byte header"});
    else
      expect_error([&] { read_llama2c(p); },
                   {p.string(), fmt::format("file is {} bytes, expected {}", n, full.size())});
  }
  write_bytes(p, full);
  EXPECT_EQ(read_llama2c(p).config.num_layers(), 2);
}

TEST(Corrupt, TokenFileTruncatedAtEveryPoint) {
  TempDir tmp;
  const fs::path p = tmp.path / "data.tokens";
  write_token_file(p, {1, 5, 7, 299, 1, 4}, 300);
  const std::string full = read_file(p);
  for (size_t n = 0; n < full.size(); ++n)
    expect_error([&] { parse_token_file(full.substr(0, n), "cut.tokens"); }, {"cut.tokens"});
}

// ---------------------------------------------------------------------------------------------
// lying headers

TEST(Corrupt, SafetensorsHeaderLengthLargerThanTheFile) {
  TempDir tmp;
  const fs::path p = tmp.path / "lies.safetensors";
  save_safetensors(p, {{"w", at::ones({4})}});
  std::string b = read_file(p);
  const uint64_t claimed = b.size();  // one more than the header and data after the 8 bytes
  std::memcpy(&b[0], &claimed, 8);
  write_bytes(p, b);
  expect_error([&] { SafetensorsFile f(p); },
               {p.string(), fmt::format("header length {} exceeds file size {}", claimed,
                                        b.size())});
}

TEST(Corrupt, SafetensorsOverlappingTensors) {
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  std::string file(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(&file[0], &n, 8);
  file += header + std::string(12, '\0');
  expect_error(
      [&] {
        parse_safetensors_header(reinterpret_cast<const uint8_t*>(file.data()), file.size(),
                                 "overlap.safetensors");
      },
      {"overlap.safetensors", "tensor 'b'", "overlaps 'a'"});
}

TEST(Corrupt, GgufOverlappingTensorsAndBadOffsets) {
  TempDir tmp;
  const fs::path good = tmp.path / "two.gguf";
  write_gguf(good, {}, {{"a", at::ones({8}), GgmlType::F32}, {"b", at::ones({8}), GgmlType::F32}});
  const std::string b = read_file(good);
  // Tensor infos: name, n_dims, ne, type, then the u64 offset; "b"'s offset -> 0 (= "a"'s).
  const size_t b_info = b.find(std::string("\x01\0\0\0\0\0\0\0b", 9));
  ASSERT_NE(b_info, std::string::npos);
  const size_t b_offset = b_info + 9 + 4 + 8 + 4;
  std::string overlap = b;
  std::memset(&overlap[b_offset], 0, 8);
  expect_error([&] { GgufFile g(overlap, "overlap.gguf"); },
               {"overlap.gguf", "tensor 'b'", "overlaps tensor 'a'"});
  std::string unaligned = b;
  unaligned[b_offset] = 4;
  expect_error([&] { GgufFile g(unaligned, "unaligned.gguf"); },
               {"unaligned.gguf", "tensor 'b' offset", "alignment 32"});
  std::string outside = b;
  const uint64_t far = 1ull << 40;
  std::memcpy(&outside[b_offset], &far, 8);
  expect_error([&] { GgufFile g(outside, "outside.gguf"); },
               {"outside.gguf", "tensor 'b' data", "exceeds the file"});
}

TEST(Corrupt, GgufUnknownValueTypes) {
  TempDir tmp;
  const std::string b = every_type_gguf(tmp.path / "every.gguf");
  std::string scalar = b;
  scalar[gguf_type_offset(b, "t.u16")] = 13;
  expect_error([&] { GgufFile g(scalar, "scalar.gguf"); },
               {"scalar.gguf", "key 't.u16'", "unknown value type 13"});
  std::string element = b;  // array header: u32 ARRAY (9), u32 element type, u64 count
  element[gguf_type_offset(b, "t.arr_i32") + 4] = 99;
  expect_error([&] { GgufFile g(element, "element.gguf"); },
               {"element.gguf", "key 't.arr_i32'", "unknown array element type 99"});
  std::string nested = b;
  nested[gguf_type_offset(b, "t.arr_u8") + 4] = 9;  // an array of arrays
  expect_error([&] { GgufFile g(nested, "nested.gguf"); },
               {"nested.gguf", "key 't.arr_u8'", "nested arrays"});
  std::string huge = b;  // an array length the rest of the file cannot hold
  const uint64_t count = uint64_t(1) << 27;
  std::memcpy(&huge[gguf_type_offset(b, "t.arr_u8") + 8], &count, 8);
  expect_error([&] { GgufFile g(huge, "huge.gguf"); }, {"huge.gguf", "t.arr_u8", "truncated"});
  std::string boolean = b;  // the bool's byte follows its u32 type
  boolean[gguf_type_offset(b, "t.bool") + 4] = 2;
  expect_error([&] { GgufFile g(boolean, "bool.gguf"); },
               {"bool.gguf", "key 't.bool'", "neither 0 nor 1"});
}

TEST(Corrupt, Llama2cHeaderFieldsOutOfRange) {
  TempDir tmp;
  const fs::path p = tmp.path / "model.bin";
  const Llama2cHeader ok{8, 16, 2, 2, 1, 300, 4};
  auto check = [&](Llama2cHeader h, const std::string& needle) {
    std::string b = llama2c_bytes(ok);
    std::memcpy(&b[0], &h, kLlama2cHeaderBytes);
    write_bytes(p, b);
    expect_error([&] { read_llama2c(p); }, {p.string(), needle});
  };
  Llama2cHeader h = ok;
  h.dim = -8;
  check(h, "header field dim = -8, expected 1..1048576");
  h = ok;
  h.n_kv_heads = 3;
  check(h, "header field n_heads 2 is not a multiple of n_kv_heads 3");
  h = ok;
  h.vocab_size = 0;
  check(h, "header field vocab_size = 0");
  h = ok;
  h.n_layers = 3;  // a valid header that does not match the file size
  check(h, "expected");
  // The largest header: 4 x (7 x 2^60) floats overflow 64 bits; the size saturates instead of
  // wrapping to a small number that a short file could match.
  const int32_t M = kLlama2cMaxField;
  EXPECT_EQ(llama2c_expected_bytes({M, M, M, M, M, M, M}), UINT64_MAX);
}

// ---------------------------------------------------------------------------------------------
// disagreements between files

TEST(Corrupt, TensorShapeDisagreesWithConfigJson) {
  TempDir tmp;
  const fs::path dir = tmp.path / "ckpt";
  fs::create_directories(dir);
  save_checkpoint(dir, tiny_model());
  json cfg = read_json_file(dir / "config.json");
  cfg["intermediate_size"] = 32;
  write_json_file(dir / "config.json", cfg);
  expect_error([&] { load_checkpoint(dir); },
               {(dir / "model.safetensors").string(), "model.layers.0.mlp.gate_proj.weight",
                "has shape [16, 8], expected [32, 8]", "config.json intermediate_size"});
}

TEST(Corrupt, TokenIdsOutOfRange) {
  TempDir tmp;
  // A token file whose ids exceed its vocabulary.
  const fs::path tokens = tmp.path / "data.tokens";
  write_token_file(tokens, {1, 2, 3}, 300);
  std::string b = read_file(tokens);
  const int32_t bad = 300;
  std::memcpy(&b[kTokenFileHeaderBytes + 4], &bad, 4);
  write_bytes(tokens, b);
  expect_error([&] { read_token_file(tokens); },
               {tokens.string(), "token id 300 at index 1 is outside [0, 300)"});
  // config.json special ids outside the vocabulary.
  const fs::path dir = tmp.path / "ckpt";
  fs::create_directories(dir);
  save_checkpoint(dir, tiny_model());
  json cfg = read_json_file(dir / "config.json");
  cfg["bos_token_id"] = 300;
  write_json_file(dir / "config.json", cfg);
  expect_error([&] { load_checkpoint(dir); },
               {(dir / "config.json").string(), "bos_token_id must be in 0..299, found 300"});
  // A GGUF whose tokenizer's EOS id is outside its 300 tokens.
  LlamaModel m = tiny_model();
  GgufVocab v;
  const std::string tok = tokenizer_bytes(300);
  const Tokenizer t = Tokenizer::from_llama2c_bytes(tok, 300, "tok.bin");
  v = vocab_from_tokenizer(t);
  const fs::path gguf = tmp.path / "model.gguf";
  write_model_gguf(gguf, m, v);
  std::string g = read_file(gguf);
  const size_t eos = gguf_type_offset(g, "tokenizer.ggml.eos_token_id");
  const uint32_t far = 70000;
  std::memcpy(&g[eos + 4], &far, 4);
  write_bytes(gguf, g);
  expect_error([&] { read_model_gguf(gguf); },
               {gguf.string(), "tokenizer.ggml.eos_token_id = 70000 is outside the vocabulary"});
  // Decoding an id the tokenizer does not have is a caller's mistake.
  expect_error<ConfigError>([&] { t.decode_piece(1, 300); }, {"token id 300 outside [0, 300)"});
}

TEST(Corrupt, NonFiniteWeightsWarnOnLoadAndAreRefusedByImportanceAndDistill) {
  TempDir tmp;
  const fs::path dir = tmp.path / "nan";
  fs::create_directories(dir);
  LlamaModel m = tiny_model();
  m.weights.layers[1].up_proj[3][2] = NAN;
  m.weights.embed_tokens[7][1] = -INFINITY;
  save_checkpoint(dir, m);

  testing::internal::CaptureStderr();
  LlamaModel loaded = load_checkpoint(dir);
  const std::string warned = testing::internal::GetCapturedStderr();
  EXPECT_NE(warned.find("non-finite weights"), std::string::npos) << warned;
  EXPECT_NE(warned.find("'model.layers.1.mlp.up_proj.weight' has 1 NaN and 0 Inf of 128"),
            std::string::npos) << warned;
  EXPECT_NE(warned.find("'model.embed_tokens.weight' has 0 NaN and 1 Inf of 2400"),
            std::string::npos) << warned;
  EXPECT_EQ(find_nonfinite(loaded).size(), 2u);
  EXPECT_TRUE(find_nonfinite(tiny_model()).empty());

  const std::vector<at::Tensor> batches = {test::random_tokens(2, 8, 300, 5)};
  expect_error([&] { compute_importance(loaded, batches); },
               {"[importance]", "model.layers.1.mlp.up_proj.weight", "--allow-nonfinite"});
  ImportanceOptions forced;
  forced.allow_nonfinite = true;
  forced.show_progress = false;
  testing::internal::CaptureStderr();
  EXPECT_NO_THROW(compute_importance(loaded, batches, forced));
  testing::internal::GetCapturedStderr();

  LlamaModel student = tiny_model(2);
  TokenDataset data(std::vector<int32_t>(64, 5), 300, 1);
  DistillOptions dopt;
  dopt.token_budget = 16;
  dopt.batch_size = 1;
  dopt.seq_len = 8;
  dopt.show_progress = false;
  expect_error([&] { distill(loaded, student, data, dopt); },
               {"[distill]", "the teacher", "model.embed_tokens.weight", "--allow-nonfinite"});
  expect_error([&] { distill(tiny_model(), loaded, data, dopt); },
               {"[distill]", "the student", "model.layers.1.mlp.up_proj.weight"});
}

TEST(Corrupt, NonFiniteWeightsAreRefusedByTheCliUnlessForced) {
  TempDir tmp;
  const fs::path dir = tmp.path / "nan";
  fs::create_directories(dir);
  LlamaModel m = tiny_model();
  m.weights.layers[0].q_proj[0][0] = NAN;
  save_checkpoint(dir, m);
  write_token_file(tmp.path / "calib.tokens", std::vector<int32_t>(64, 5), 300);
  const char* env = std::getenv("AC_BIN");
  const std::string cli = env ? env : (ac::test::binary_dir() / "autocompress").string();
  const std::string base = cli + " importance --model " + dir.string() + " --data " +
                           (tmp.path / "calib.tokens").string() +
                           " --batch-size 2 --seq-len 8 --out " +
                           (tmp.path / "imp.safetensors").string();
  const fs::path log = tmp.path / "log.txt";
  EXPECT_NE(std::system((base + " > " + log.string() + " 2>&1").c_str()), 0);
  const std::string out = read_file(log);
  EXPECT_NE(out.find(dir.string() + ": non-finite weights"), std::string::npos) << out;
  EXPECT_NE(out.find("model.layers.0.self_attn.q_proj.weight"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(tmp.path / "imp.safetensors"));
  EXPECT_EQ(std::system((base + " --allow-nonfinite > " + log.string() + " 2>&1").c_str()), 0)
      << read_file(log);
  EXPECT_TRUE(fs::exists(tmp.path / "imp.safetensors"));
}

// ---------------------------------------------------------------------------------------------
// JSON limits and fields

TEST(Corrupt, JsonNestingDepthIsBounded) {
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  expect_error([&] { parse_json_text(deep, "deep.json"); },
               {"deep.json", "nesting depth exceeds 64 at byte 64"});
  EXPECT_NO_THROW(parse_json_text(std::string(64, '[') + std::string(64, ']'), "ok.json"));
  // Brackets inside strings are text, not nesting (escaped quotes included).
  EXPECT_NO_THROW(parse_json_text("{\"k\": \"\\\"" + std::string(100, '[') + "\"}", "s.json"));
  expect_error([&] { parse_json_text("{\"a\": [1, 2}", "bad.json"); },
               {"bad.json", "invalid JSON"});
}

TEST(Corrupt, ConfigJsonWrongTypesAndRanges) {
  const json base = config_to_hf_json(tiny_model().config);
  auto with = [&](const char* key, const json& value) {
    json j = base;
    j[key] = value;
    return j;
  };
  auto check = [&](const json& j, const std::string& needle) {
    expect_error([&] { config_from_hf_json(j, "cfg.json"); }, {"cfg.json", needle});
  };
  check(with("hidden_size", 1e300), "field 'hidden_size' has the wrong type or range");
  check(with("hidden_size", 2.5), "field 'hidden_size' has the wrong type or range");
  check(with("vocab_size", "300"), "field 'vocab_size' has the wrong type or range");
  check(with("vocab_size", int64_t(1) << 40), "vocab_size must be in 1..16777216");
  check(with("num_hidden_layers", 1000000), "num_hidden_layers 1000000 out of range");
  check(with("architectures", json::array({5})), "field 'architectures' must hold strings");
  check(with("eos_token_id", json::array({1.5, 2})), "field 'eos_token_id' must hold integer ids");
  check(with("rms_norm_eps", -1), "rms_norm_eps must be positive");
  check(with("num_key_value_heads", -1), "num_key_value_heads -1");
  // DeciLM block_configs: an ffn_mult that gives no FFN width, a head group that does not divide.
  json deci = base;
  deci["block_configs"] = json::array(
      {{{"attention", {{"n_heads_in_group", 1}}}, {"ffn", {{"ffn_mult", 1e300}}}}});
  check(deci, "block_configs[0]: ffn_mult 1e+300 with hidden_size 8 gives no FFN width");
  deci["block_configs"] = json::array(
      {{{"attention", {{"n_heads_in_group", 3}}}, {"ffn", {{"ffn_mult", 1.0}}}}});
  check(deci, "block_configs[0]: n_heads_in_group 3 does not divide num_attention_heads 2");
  deci["block_configs"] = json::array();
  check(deci, "block_configs must be an array of 1..100000 blocks");
  // arch.json wraps a config.
  expect_error([&] { arch_from_json(json::array(), "arch.json"); },
               {"arch.json", "expected an object with a \"config\" object"});
}

TEST(Corrupt, ShardedIndexNamesOnlyPlainFilesInTheFolder) {
  auto index = [](const json& map) { return json{{"weight_map", map}}; };
  expect_error([&] { parse_safetensors_index(index({{"w", "../model.safetensors"}}), "i.json"); },
               {"i.json", "weight_map['w'] = '../model.safetensors' is not a plain file name"});
  expect_error([&] { parse_safetensors_index(index({{"w", 3}}), "i.json"); },
               {"i.json", "weight_map['w'] is 3, expected a file name"});
  expect_error([&] { parse_safetensors_index(json{{"metadata", {}}}, "i.json"); },
               {"i.json", "missing object field 'weight_map'"});
  TempDir tmp;  // a shard that lacks a tensor the index lists
  save_safetensors(tmp.path / "s1.safetensors", {{"a", at::ones({2})}});
  write_json_file(tmp.path / "model.safetensors.index.json",
                  index({{"a", "s1.safetensors"}, {"b", "s1.safetensors"}}));
  expect_error([&] { load_safetensors_dir(tmp.path); },
               {"s1.safetensors", "tensor 'b' listed in model.safetensors.index.json"});
}

TEST(Corrupt, ScenarioAndProfileValuesOutOfRange) {
  const fs::path root = test::source_dir();
  auto scenario = [&](const json& workload, const json& limits) {
    return json{{"name", "s"}, {"device", "cpu"}, {"engine", "native"}, {"workload", workload},
                {"limits", limits}};
  };
  expect_error([&] { scenario_from_json(scenario({{"batch_size", 1e300}}, {}), "s.json", root); },
               {"s.json: workload.batch_size: expected a positive integer"});
  expect_error(
      [&] { scenario_from_json(scenario({{"prompt_tokens", int64_t(1) << 40}}, {}), "s.json", root); },
      {"s.json: workload.prompt_tokens: 1099511627776 is above the limit 16777216"});
  expect_error(
      [&] { scenario_from_json(scenario(json::object(), {{"peak_memory_bytes", 1e300}}), "s.json", root); },
      {"s.json: limits.peak_memory_bytes", "below 2^62"});
  expect_error<ConfigError>(
      [&] { scenario_from_json(scenario({{"kv_cache_dtype", "fp64"}}, {}), "s.json", root); },
      {"s.json: workload.kv_cache_dtype: unknown dtype 'fp64'"});
  const json table = {{"dims", {"M"}}, {"entries", {{{"dims", {4}}, {"median_ms", 1e300}}}}};
  const json profile = {{"format", "autocompress-profile"}, {"device", "cpu"},
                        {"tables", {{"gemm", table}}}};
  expect_error([&] { Profile::from_json(profile, "p.json"); },
               {"p.json: tables.gemm.entries[0].median_ms: expected 0..1000000000000 ms"});
  json arrays = profile;
  arrays["tables"] = json::array();
  expect_error([&] { Profile::from_json(arrays, "p.json"); },
               {"p.json", "field 'tables': expected an object"});
  expect_error([&] { Profile::from_json(json::array(), "p.json"); }, {"p.json", "'format'"});
}

// ---------------------------------------------------------------------------------------------
// Regressions: inputs the fuzz targets (fuzz/, docs/fuzzing.md) found, kept as plain tests.

// fuzz_scenario: an engine name longer than the file system allows made find_data_file's
// fs::exists throw std::filesystem_error (ENAMETOOLONG) instead of "unknown engine".
TEST(Regression, ScenarioWithAnOverlongEngineName) {
  const json s = {{"name", "s"}, {"device", "cpu"}, {"engine", std::string(300, 'x')}};
  expect_error<ConfigError>([&] { scenario_from_json(s, "s.json", test::source_dir()); },
                            {"unknown engine '" + std::string(300, 'x') + "'", "known: "});
  // The same for a shard name in a sharded checkpoint's index.
  TempDir tmp;
  write_json_file(tmp.path / "model.safetensors.index.json",
                  json{{"weight_map", {{"w", std::string(300, 's')}}}});
  expect_error([&] { load_safetensors_dir(tmp.path); }, {"is not a plain file name"});
}

}  // namespace
}  // namespace ac
