// The vocabulary of a GGUF from tokenizer.json (io/gguf_vocab.h).
//   GgufVocab: hand-made tokenizer.json files of both families, the GGUF fields computed by hand
//     (gpt2: tokens, merges, tokenizer.ggml.pre from the Split regex, padding ids; llama: types
//     and the merge-rank scores), the refusals (a byte-level regex llama.cpp does not implement,
//     ignore_merges or a normalizer it does not run, no byte fallback), the choice of file in a
//     checkpoint folder, the GGUF round trip of the new keys, and import refusing a gpt2 GGUF;
//     the real Llama 3, Qwen3 and Llama 2 files of the parity kit give llama.cpp's pre names.
//   GgufTokenizer: a small random Llama model whose vocabulary is each real tokenizer, exported
//     to GGUF and loaded in the real llama.cpp (node-llama-cpp, tools/llamacpp/run.mjs): llama.cpp
//     tokenizes every paragraph of Moby Dick and every hard case (tests/tokenizers) as
//     HfTokenizer::encode does, but for the cases llamacpp_differs_because names (llama.cpp
//     runs no NFC; it makes the ordinary token "</s>" a control token), and its 20 greedy
//     tokens equal ours.
//   LlamaCppStage.RunsOnATokenizerJsonCheckpoint: the llama_cpp stage of compress on the
//     Hub-shaped Llama 3 checkpoint (tokenizer.json, no tokenizer.bin).
#include <gtest/gtest.h>

#include <cstdio>

#include "common/error.h"
#include "common/json_io.h"
#include "common/runtime.h"
#include "io/gguf.h"
#include "export/gguf_model.h"
#include "io/gguf_vocab.h"
#include "export/hf_export.h"
#include "hardware/profile.h"
#include "hardware/scenario.h"
#include "io/checkpoint.h"
#include "io/hf_tokenizer.h"
#include "io/hf_unicode.h"
#include "io/text_tokenizer.h"
#include "io/tokenizer.h"
#include "pipeline/llamacpp_stage.h"
#include "hub_checkpoint.h"
#include "test_util.h"

namespace ac {
namespace {

using test::expect_error;
using test::TempDir;
using Ids = std::vector<int64_t>;

// The Split regexes llama.cpp's llama-vocab.cpp quotes as "original regex from tokenizer.json"
// for its LLAMA3 ("llama-bpe") and QWEN2 ("qwen2") pre-tokenizers, and GPT-2's (ByteLevel's
// use_regex), which it names "gpt-2" and we do not write.
const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// ---- hand-made tokenizers ----

/// Byte-level BPE: id b is byte b's byte-to-unicode character, then he(256) ll(257) hell(258)
/// hello(259); merges h e, l l, he ll, hell o; added <|bos|>(260, special) and <x>(261, not);
/// Split(regex) + ByteLevel as Llama 3 / Qwen ship it.
json byte_level_json(const std::string& regex, bool ignore_merges, const json& normalizer = nullptr) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[hf::byte_to_unicode()[b]] = b;
  const std::vector<std::string> extra = {"he", "ll", "hell", "hello"};
  for (size_t k = 0; k < extra.size(); ++k) vocab[extra[k]] = 256 + int(k);
  return {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr},
          {"added_tokens", json::array({{{"id", 260}, {"content", "<|bos|>"}, {"special", true}},
                                        {{"id", 261}, {"content", "<x>"}, {"special", false}}})},
          {"normalizer", normalizer},
          {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", json::array({
              {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}})}}},
          {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}}},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
          {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"fuse_unk", false},
                     {"byte_fallback", false}, {"ignore_merges", ignore_merges}, {"vocab", vocab},
                     {"merges", json::array({"h e", "l l", "he ll", "hell o"})}}}};
}

/// Llama-2-style SentencePiece BPE: <unk> <s> </s>, <0x00>..<0xFF> (3..258), ▁(259) a(260)
/// b(261) ab(262) ▁a(263) ▁ab(264) zz(265, no merge makes it); merges (ranks 0..3) a b, ▁ a,
/// ▁a b, ▁ ab; Prepend ▁ + Replace ' ' -> ▁.
json sentencepiece_json(bool byte_fallback) {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) vocab[fmt::format("<0x{:02X}>", b)] = 3 + b;
  const std::vector<std::string> extra = {"\u2581", "a", "b", "ab", "\u2581a", "\u2581ab", "zz"};
  for (size_t k = 0; k < extra.size(); ++k) vocab[extra[k]] = 259 + int(k);
  auto special = [](int id, const char* s) {
    return json{{"id", id}, {"content", s}, {"special", true}, {"normalized", false}};
  };
  return {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr},
          {"added_tokens", json::array({special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")})},
          {"normalizer", {{"type", "Sequence"}, {"normalizers", json::array({
              {{"type", "Prepend"}, {"prepend", "\u2581"}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}})}}},
          {"pre_tokenizer", nullptr},
          {"post_processor", {{"type", "TemplateProcessing"},
              {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                      {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
              {"pair", json::array()},
              {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
          {"decoder", nullptr},
          {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"}, {"fuse_unk", true},
                     {"byte_fallback", byte_fallback}, {"vocab", vocab},
                     {"merges", json::array({"a b", "\u2581 a", "\u2581a b", "\u2581 ab"})}}}};
}

HfTokenizer load(const json& j, const json& config = json()) {
  return HfTokenizer::from_json(j, config, "tokenizer.json");
}

TEST(GgufVocab, ByteLevelTokenizerJsonGivesGpt2KeysAndLlama3Pre) {
  const json config = {{"bos_token", "<|bos|>"}, {"eos_token", "<|bos|>"}, {"pad_token", "<x>"},
                       {"add_bos_token", true}, {"chat_template", "{{ messages }}"}};
  const HfTokenizer tok = load(byte_level_json(kLlama3Regex, /*ignore_merges=*/true), config);
  const GgufVocab v = vocab_from_hf_tokenizer(tok, /*vocab_size=*/264);
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, "llama-bpe");
  ASSERT_EQ(v.tokens.size(), 264u);
  EXPECT_EQ(v.tokens[32], "\u0120");  // ' ' in the byte-to-unicode form
  EXPECT_EQ(v.tokens[259], "hello");
  EXPECT_EQ(v.tokens[260], "<|bos|>");  // added tokens: their raw content
  EXPECT_EQ(v.tokens[262], "[PAD262]");  // beyond the tokenizer: padded as convert_hf_to_gguf does
  EXPECT_EQ(v.tokens[263], "[PAD263]");
  EXPECT_EQ(v.types[32], 1);
  EXPECT_EQ(v.types[260], 3);  // special: CONTROL
  EXPECT_EQ(v.types[261], 4);  // not special: USER_DEFINED
  EXPECT_EQ(v.types[262], 5);  // UNUSED
  EXPECT_EQ(v.merges, (std::vector<std::string>{"h e", "l l", "he ll", "hell o"}));
  EXPECT_TRUE(v.scores.empty());
  EXPECT_EQ(v.bos_id, 260);
  EXPECT_EQ(v.eos_id, 260);
  EXPECT_EQ(v.pad_id, 261);
  EXPECT_EQ(v.unk_id, -1);
  EXPECT_TRUE(v.add_bos);
  EXPECT_FALSE(v.add_eos);
  EXPECT_EQ(v.chat_template, "{{ messages }}");
}

TEST(GgufVocab, QwenRegexGivesQwen2PreAndNfcIsAcceptedThere) {
  const HfTokenizer tok = load(byte_level_json(kQwen2Regex, /*ignore_merges=*/false, {{"type", "NFC"}}));
  const GgufVocab v = vocab_from_hf_tokenizer(tok, 262);
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, "qwen2");
  EXPECT_EQ(v.bos_id, -1);  // tokenizer_config.json names none: no key
  EXPECT_FALSE(v.add_bos);
}

TEST(GgufVocab, RefusesAByteLevelPipelineLlamaCppDoesNotRun) {
  // GPT-2's regex: llama.cpp has it ("gpt-2") but we map only the two above; any other regex
  // would make llama.cpp split the text differently.
  expect_error<ConfigError>([] { vocab_from_hf_tokenizer(load(byte_level_json(kGpt2Regex, false)), 262); },
                            {"tokenizer.json", "pre_tokenizer", "'llama-bpe' (Llama 3)",
                             "'qwen2' (Qwen2, Qwen3)", "llama.cpp would split this text differently"});
  json bare = byte_level_json(kLlama3Regex, true);
  bare["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                           {"use_regex", true}};
  expect_error<ConfigError>([&] { vocab_from_hf_tokenizer(load(bare), 262); },
                            {"tokenizer.json", "is not one llama.cpp implements"});
  // llama.cpp runs "llama-bpe" with ignore_merges and "qwen2" without.
  expect_error<ConfigError>([] { vocab_from_hf_tokenizer(load(byte_level_json(kLlama3Regex, false)), 262); },
                            {"tokenizer.json", "model.ignore_merges is false", "'llama-bpe'"});
  expect_error<ConfigError>([] { vocab_from_hf_tokenizer(load(byte_level_json(kQwen2Regex, true)), 262); },
                            {"model.ignore_merges is true", "'qwen2'"});
  // No normalizer runs in llama.cpp's BPE path; NFC only where Qwen ships it.
  expect_error<ConfigError>(
      [] { vocab_from_hf_tokenizer(load(byte_level_json(kLlama3Regex, true, {{"type", "NFC"}})), 262); },
      {"tokenizer.json", "normalizer", "'llama-bpe'"});
  expect_error<ConfigError>(
      [] { vocab_from_hf_tokenizer(load(byte_level_json(kQwen2Regex, false, {{"type", "NFKC"}})), 262); },
      {"normalizer", "'qwen2'"});
  // More ids in the tokenizer than in the model.
  expect_error<FormatError>([] { vocab_from_hf_tokenizer(load(byte_level_json(kLlama3Regex, true)), 200); },
                            {"tokenizer.json", "ids up to 261", "vocab_size is 200"});
}

TEST(GgufVocab, SentencePieceTokenizerJsonScoresFollowTheMergeRanks) {
  const HfTokenizer tok = load(sentencepiece_json(/*byte_fallback=*/true));
  const GgufVocab v = vocab_from_hf_tokenizer(tok, 267);
  EXPECT_EQ(v.model, "llama");
  EXPECT_EQ(v.pre, "default");
  EXPECT_TRUE(v.merges.empty());
  ASSERT_EQ(v.tokens.size(), 267u);
  ASSERT_EQ(v.scores.size(), 267u);
  EXPECT_EQ(v.tokens[13], "<0x0A>");
  EXPECT_EQ(v.tokens[263], "\u2581a");
  EXPECT_EQ(v.tokens[266], "[PAD266]");
  EXPECT_EQ(v.types[0], 2);    // <unk>: UNKNOWN
  EXPECT_EQ(v.types[1], 3);    // <s>: CONTROL
  EXPECT_EQ(v.types[13], 6);   // <0x0A>: BYTE
  EXPECT_EQ(v.types[260], 1);  // a
  EXPECT_EQ(v.types[266], 5);  // padding
  // By hand: ab is made by rank 0, ▁a by rank 1, ▁ab by ranks 2 and 3 (the lowest counts); the
  // others no merge makes score -(4 merges).
  EXPECT_EQ(v.scores[262], 0.0f);
  EXPECT_EQ(v.scores[263], -1.0f);
  EXPECT_EQ(v.scores[264], -2.0f);
  for (int64_t id : {0, 1, 13, 259, 260, 265, 266}) EXPECT_EQ(v.scores[size_t(id)], -4.0f) << id;
  EXPECT_EQ(v.bos_id, 1);
  EXPECT_EQ(v.eos_id, -1);  // no tokenizer_config.json: the template names only <s>
  EXPECT_EQ(v.unk_id, 0);
  EXPECT_TRUE(v.add_bos);  // the template adds <s>
  expect_error<ConfigError>([] { vocab_from_hf_tokenizer(load(sentencepiece_json(false)), 266); },
                            {"tokenizer.json", "model.byte_fallback is false"});
  json no_prepend = sentencepiece_json(true);
  no_prepend["normalizer"] = nullptr;
  expect_error<ConfigError>([&] { vocab_from_hf_tokenizer(load(no_prepend), 266); },
                            {"tokenizer.json", "normalizer null and pre_tokenizer null"});
}

TEST(GgufVocab, FromCheckpointPicksTokenizerJsonThenTokenizerBin) {
  TempDir tmp;
  expect_error<ConfigError>([&] { vocab_from_checkpoint(tmp.path, 300); },
                            {tmp.path.string(), "no tokenizer.json or tokenizer.bin", "save_pretrained"});
  // tokenizer.bin: llama2.c's vocabulary (vocab_from_tokenizer).
  std::string bin(4, '\0');
  const int32_t max_len = 8;
  std::memcpy(&bin[0], &max_len, 4);
  for (int id = 0; id < 300; ++id) {
    const std::string piece = id >= 3 && id <= 258 ? fmt::format("<0x{:02X}>", id - 3)
                              : id == 259          ? std::string(" ")  // the dummy prefix
                                                   : fmt::format("p{}", id);
    const float score = -float(id);
    const int32_t len = int32_t(piece.size());
    bin.append(reinterpret_cast<const char*>(&score), 4);
    bin.append(reinterpret_cast<const char*>(&len), 4);
    bin += piece;
  }
  write_file_atomic(tmp.path / "tokenizer.bin", bin);
  const GgufVocab from_bin = vocab_from_checkpoint(tmp.path, 300);
  EXPECT_EQ(from_bin.model, "llama");
  EXPECT_EQ(from_bin.tokens[1], "<s>");
  EXPECT_EQ(from_bin.scores[299], -299.0f);
  // tokenizer.json beside it wins, as in load_tokenizer.
  write_json_file(tmp.path / "tokenizer.json", byte_level_json(kLlama3Regex, true));
  EXPECT_EQ(vocab_from_checkpoint(tmp.path, 300).model, "gpt2");
}

TEST(GgufVocab, Gpt2KeysRoundTripThroughGgufAndImportRefusesThem) {
  TempDir tmp;
  const json config = {{"bos_token", "<|bos|>"}, {"eos_token", "<|bos|>"}, {"pad_token", "<x>"},
                       {"chat_template", "T"}};
  const GgufVocab v = vocab_from_hf_tokenizer(load(byte_level_json(kQwen2Regex, false), config), 264);
  ModelConfig c = ModelConfig::uniform(264, 32, 1, LayerConfig{2, 2, 16, 64});
  c.bos_token_id = c.eos_token_id = 260;
  const fs::path gguf = tmp.path / "model.gguf";
  write_model_gguf(gguf, LlamaModel{c, random_weights(c, 1)}, v);
  const GgufFile f(gguf);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "qwen2");
  EXPECT_EQ(f.get_string("tokenizer.chat_template"), "T");
  EXPECT_EQ(f.get_int("tokenizer.ggml.padding_token_id"), 261);
  EXPECT_EQ(f.find("tokenizer.ggml.scores"), nullptr);            // as _set_vocab_gpt2
  EXPECT_EQ(f.find("tokenizer.ggml.unknown_token_id"), nullptr);  // the tokenizer names none
  const GgufVocab back = read_model_gguf(gguf).vocab;
  EXPECT_EQ(back.model, v.model);
  EXPECT_EQ(back.pre, v.pre);
  EXPECT_EQ(back.tokens, v.tokens);
  EXPECT_EQ(back.types, v.types);
  EXPECT_EQ(back.merges, v.merges);
  EXPECT_TRUE(back.scores.empty());
  EXPECT_EQ(back.bos_id, v.bos_id);
  EXPECT_EQ(back.eos_id, v.eos_id);
  EXPECT_EQ(back.unk_id, -1);
  EXPECT_EQ(back.pad_id, 261);
  EXPECT_EQ(back.add_bos, v.add_bos);
  EXPECT_EQ(back.chat_template, "T");
  expect_error<ConfigError>([&] { import_gguf(gguf, tmp.path / "imported"); },
                            {gguf.string(), "tokenizer.ggml.model is 'gpt2'", "tokenizer.bin"});
  EXPECT_FALSE(fs::exists(tmp.path / "imported"));
}

TEST(GgufVocab, SentencePieceKeysRoundTripThroughGgufAndImport) {
  TempDir tmp;
  const GgufVocab v = vocab_from_hf_tokenizer(load(sentencepiece_json(true), {{"eos_token", "</s>"}}), 266);
  ModelConfig c = ModelConfig::uniform(266, 32, 1, LayerConfig{2, 2, 16, 64});
  const fs::path gguf = tmp.path / "model.gguf";
  write_model_gguf(gguf, LlamaModel{c, random_weights(c, 1)}, v);
  EXPECT_EQ(GgufFile(gguf).get_string("tokenizer.ggml.pre"), "default");
  EXPECT_EQ(GgufFile(gguf).find("tokenizer.ggml.merges"), nullptr);
  const GgufVocab back = read_model_gguf(gguf).vocab;
  EXPECT_EQ(back.tokens, v.tokens);
  EXPECT_EQ(back.scores, v.scores);
  EXPECT_EQ(back.types, v.types);
  // Imported as llama2.c's tokenizer.bin, which merges by the same scores.
  import_gguf(gguf, tmp.path / "imported");
  const Tokenizer t = Tokenizer::from_checkpoint(tmp.path / "imported", 266);
  const HfTokenizer hf = load(sentencepiece_json(true));
  for (const char* text : {"ab a b", "aab\nb", " abab"})
    EXPECT_EQ(t.encode(text, true), hf.encode(text, true)) << text;
}

// ---- the real tokenizer files (parity kit) ----

fs::path kit(const std::string& family) {
  const fs::path dir = test::kit_tokenizer_dir(family);
  if (!fs::exists(dir / "tokenizer.json"))
    throw std::runtime_error(dir.string() + ": run scripts/setup_tokenizers.sh");
  return dir;
}

TEST(GgufVocab, RealTokenizersGetLlamaCppsNames) {
  // The names convert_hf_to_gguf_update.py gives these models: "llama-bpe" for
  // meta-llama/Meta-Llama-3-8B, "qwen2" for Qwen; _set_vocab_llama_hf writes "default".
  const HfTokenizer llama3 = HfTokenizer::from_folder(kit("llama3"));
  const GgufVocab v3 = vocab_from_hf_tokenizer(llama3, 128256);
  EXPECT_EQ(v3.model, "gpt2");
  EXPECT_EQ(v3.pre, "llama-bpe");
  EXPECT_EQ(v3.merges.size(), llama3.merges().size());
  EXPECT_EQ(v3.tokens[128000], "<|begin_of_text|>");
  EXPECT_EQ(v3.types[128000], 3);
  EXPECT_EQ(v3.bos_id, 128000);
  const GgufVocab q = vocab_from_hf_tokenizer(HfTokenizer::from_folder(kit("qwen3")), 151936);
  EXPECT_EQ(q.pre, "qwen2");
  EXPECT_EQ(q.tokens[151935], "[PAD151935]");  // Qwen3's config.json has 151936 ids
  EXPECT_EQ(q.types[151935], 5);
  EXPECT_EQ(q.pad_id, 151643);  // <|endoftext|>
  const GgufVocab l2 = vocab_from_hf_tokenizer(HfTokenizer::from_folder(kit("llama2")), 32000);
  EXPECT_EQ(l2.model, "llama");
  EXPECT_EQ(l2.pre, "default");
  for (int64_t id = 3; id <= 258; ++id) EXPECT_EQ(l2.types[size_t(id)], 6) << id;
  EXPECT_EQ(l2.tokens[3 + 0x0A], "<0x0A>");
}

// ---- llama.cpp ----

/// Why llama.cpp, for a reason of its own, tokenizes `text` otherwise than the tokenizers library
/// does; "" when it must tokenize it the same.
std::string llamacpp_differs_because(const HfTokenizer& tok, const std::string& text) {
  // llama.cpp's BPE path runs no normalizer (llama-vocab.cpp llm_tokenizer_bpe_session); Qwen's
  // tokenizer.json has NFC, which composes e + U+0301 and Hangul jamo (hard case 2).
  const json& norm = tok.normalizer_json();
  if (norm.is_object() && norm.value("type", "") == "NFC" && tok.normalize(text) != text)
    return "not in NFC: llama.cpp does not normalize";
  // llama-vocab.cpp makes every token whose text is "</s>" an end-of-generation CONTROL token
  // (its EOG list, for PaddleOCR), and llama_tokenize with parse_special then takes that text in
  // the input as the token. Qwen's vocabulary has "</s>" as an ordinary token (id 128247), which
  // the tokenizers library never makes from text: its regex splits "</", "s", ">".
  const auto id = tok.token_to_id("</s>");
  if (id && tok.token_type(*id) == HfTokenType::kNormal && text.find("</s>") != std::string::npos)
    return "holds '</s>', an ordinary token that llama.cpp makes a control token";
  return "";
}

/// A small random Llama model whose vocabulary is `family`'s real tokenizer, as a checkpoint
/// folder (config.json, model.safetensors, tokenizer.json, tokenizer_config.json).
struct RealVocabModel {
  TempDir tmp;
  fs::path dir = tmp.path / "ckpt";
  HfTokenizer tok;
  LlamaModel model;
  RealVocabModel(const std::string& family, int64_t vocab_size)
      : tok(HfTokenizer::from_folder(kit(family))) {
    ModelConfig c = ModelConfig::uniform(vocab_size, 64, 2, LayerConfig{4, 2, 16, 128});
    if (tok.bos_id() >= 0) c.bos_token_id = tok.bos_id();
    if (tok.eos_id() >= 0) c.eos_token_id = tok.eos_id();
    // Weights large enough that the logits are far from ties: llama.cpp's float sums differ
    // from ours in the last bits.
    model = LlamaModel{c, random_weights(c, 11, 0.5)};
    fs::create_directories(dir);
    save_checkpoint(dir, model, kit(family));
  }
};

/// Exports `m` to GGUF; llama.cpp tokenizes every Moby Dick paragraph and hard case as
/// HfTokenizer::encode (no special tokens added) does, and continues a prompt greedily as ours.
void expect_llamacpp_parity(const std::string& family, int64_t vocab_size) {
  init_torch_threads();
  RealVocabModel m(family, vocab_size);
  const ExportOptions opt = ExportOptions::gguf_only();
  export_model(m.dir, m.tmp.path / "out", opt);
  const fs::path gguf = m.tmp.path / "out/model.gguf";

  std::vector<std::string> texts = test::paragraphs_of(read_file(test::moby_dick_file()));
  const size_t n_moby = texts.size();
  for (auto& h : test::hard_cases_of(read_file(test::source_dir() / "tests/tokenizers/hard_cases.txt")))
    texts.push_back(std::move(h));
  const std::vector<Ids> theirs = test::llamacpp_tokenize(gguf, texts, m.tmp.path);
  ASSERT_EQ(theirs.size(), texts.size());
  size_t compared = 0, identical = 0, excluded = 0, reported = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string why = llamacpp_differs_because(m.tok, texts[i]);
    if (!why.empty()) {
      std::printf("[gguf-tokenizer] %s: %s %zu excluded: %s\n", family.c_str(),
                  i < n_moby ? "Moby Dick paragraph" : "hard case", i < n_moby ? i : i - n_moby,
                  why.c_str());
      ++excluded;
      continue;
    }
    const Ids ours = m.tok.encode(texts[i], /*add_special_tokens=*/false);
    ++compared;
    if (ours == theirs[i]) {
      ++identical;
      continue;
    }
    auto head = [](const Ids& ids) {  // the first 40 ids, for the failure message
      return fmt::format("{}", fmt::join(ids.begin(), ids.begin() + long(std::min<size_t>(ids.size(), 40)), " "));
    };
    if (reported++ < 8)
      ADD_FAILURE() << family << (i < n_moby ? " Moby Dick paragraph " : " hard case ")
                    << (i < n_moby ? i : i - n_moby) << ": ours " << ours.size()
                    << " ids, llama.cpp " << theirs[i].size() << "\ntext: " << texts[i].substr(0, 200)
                    << "\nours:      " << head(ours) << "\nllama.cpp: " << head(theirs[i]);
  }
  std::printf("[gguf-tokenizer] %s: %zu/%zu texts identical to llama.cpp (of %zu Moby Dick "
              "paragraphs and %zu hard cases, %zu excluded above)\n",
              family.c_str(), identical, compared, n_moby, texts.size() - n_moby, excluded);
  EXPECT_EQ(identical, compared) << family;
  EXPECT_LE(excluded, 3u) << family << ": the exclusions are for a few hard cases";

  // Greedy continuation: llama.cpp's 20 tokens equal ours.
  const std::string text = "Once upon a time";
  Ids prompt;
  if (m.tok.add_bos() && m.tok.bos_id() >= 0) prompt.push_back(m.tok.bos_id());
  const Ids words = m.tok.encode(text, false);
  prompt.insert(prompt.end(), words.begin(), words.end());
  GenerateOptions g;
  g.max_new_tokens = 20;
  g.stop_at_eos = false;
  const Ids ours = generate(m.model, prompt, g);
  const json r = test::run_llamacpp(gguf, text, prompt, 20, m.tmp.path / "run.json");
  const Ids greedy = r["continuation"].get<Ids>();
  size_t same = 0;
  while (same < ours.size() && same < greedy.size() && ours[same] == greedy[same]) ++same;
  std::printf("[gguf-tokenizer] %s: greedy continuation: %zu/%zu tokens equal (llama.cpp %s)\n",
              family.c_str(), same, ours.size(), r["llama_cpp"].dump().c_str());
  EXPECT_EQ(greedy, ours) << family;
  EXPECT_EQ(r["prompt_tokens_llama_cpp"].get<Ids>(), words) << family;
}

TEST(GgufTokenizer, Llama3TokenizesAndContinuesAsLlamaCpp) { expect_llamacpp_parity("llama3", 128256); }
TEST(GgufTokenizer, Qwen3TokenizesAndContinuesAsLlamaCpp) { expect_llamacpp_parity("qwen3", 151936); }
TEST(GgufTokenizer, Llama2TokenizesAndContinuesAsLlamaCpp) { expect_llamacpp_parity("llama2", 32000); }

// ---- the llama_cpp stage of compress ----

TEST(LlamaCppStage, RunsOnATokenizerJsonCheckpoint) {
  init_torch_threads();
  TempDir tmp;
  test::write_hub_checkpoint(tmp.path / "hub");
  const LlamaModel teacher = load_checkpoint(tmp.path / "hub");
  LlamaModel narrow = teacher;  // two FFNs removed: a deci GGUF with the same vocabulary
  narrow.config.layers[1].ffn_no_op = narrow.config.layers[2].ffn_no_op = true;
  LlamaCppStageOptions opt;
  opt.tokenizer_dir = tmp.path / "hub";
  opt.work_dir = tmp.path / "work";
  opt.prompt_tokens = 16;
  opt.output_tokens = 8;
  opt.repeats = 1;
  Scenario scenario = find_scenario("cpu-local");
  scenario.workload.prompt_tokens = opt.prompt_tokens;
  scenario.workload.output_tokens = opt.output_tokens;
  ProfileOptions quick;  // the prediction beside the measurement needs a profile; a rough one
  quick.warmup = 1;
  quick.min_repeats = quick.max_repeats = 2;
  quick.min_time_ms = 0;
  quick.width_scan = false;
  quick.progress = false;
  const Profile profile = run_profile({teacher.config}, scenario.workload, quick);
  const json r = run_llamacpp_stage(teacher, narrow, scenario, &profile, opt);
  ASSERT_TRUE(r.value("ran", false)) << r.dump(2);
  EXPECT_EQ(r["prompt_tokens"].get<int64_t>(), 16);
  for (const char* name : {"teacher", "compressed"})
    EXPECT_GT(r[name]["generated_tokens"].get<int64_t>(), 0) << r.dump(2);
}

}  // namespace
}  // namespace ac
