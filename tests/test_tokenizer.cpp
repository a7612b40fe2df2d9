// Tokenizer: ids on the real stories15M tokenizer.bin against the python port of llama2.c's
// encode (tests/golden/llama2c_tokenizer.py), the heap merge against a plain run.c-style loop,
// decode(encode(x)) == x, and hostile tokenizer.bin files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

#include "common/error.h"
#include "test_util.h"
#include "io/tokenizer.h"

namespace ac {
namespace {

using test::stories15m_dir;
using test::TempDir;

const Tokenizer& stories_tokenizer() {
  static const Tokenizer t = [] {
    const fs::path p = stories15m_dir() / "tokenizer.bin";
    if (!fs::exists(p))
      throw std::runtime_error(p.string() + " missing: run scripts/fetch_stories15m.sh");
    return Tokenizer::from_llama2c(p, 32000);
  }();
  return t;
}

/// Serializes a tokenizer.bin: int32 max_len, then per token float32 score, int32 len, bytes.
std::string tokenizer_bytes(const std::vector<std::string>& pieces,
                            const std::vector<float>& scores, int32_t max_len) {
  std::string out;
  auto put = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
  put(&max_len, 4);
  for (size_t i = 0; i < pieces.size(); ++i) {
    const int32_t len = int32_t(pieces[i].size());
    put(&scores[i], 4);
    put(&len, 4);
    put(pieces[i].data(), pieces[i].size());
  }
  return out;
}

/// A tiny vocab: specials, the 256 byte tokens as "<0xNN>", then the given pieces.
std::vector<std::string> tiny_vocab(const std::vector<std::string>& extra) {
  std::vector<std::string> v = {"<unk>", "\n<s>\n", "\n</s>\n"};
  for (int b = 0; b < 256; ++b) v.push_back(fmt::format("<0x{:02X}>", b));
  v.insert(v.end(), extra.begin(), extra.end());
  return v;
}

void write_bytes(const fs::path& p, const std::string& b) {
  std::ofstream(p, std::ios::binary).write(b.data(), std::streamsize(b.size()));
}

TEST(Tokenizer, Stories15mEncodeMatchesPythonPortOfLlama2c) {
  const Tokenizer& tok = stories_tokenizer();
  // Produced by this one command line (bash quoting):
  //   /usr/bin/python3 tests/golden/llama2c_tokenizer.py ~/.cache/autocompress/stories15m/tokenizer.bin
  //     "Once upon a time" "café ☃" "Lily and Ben went to the park.  They saw a big dog!"
  //     "🤖 x" " leading, trailing  " $'a\tb\nc\n' $'\x01\x7f' "Ünïcödé über 日本語"
  const std::vector<std::pair<std::string, std::vector<int64_t>>> golden = {
      {"Once upon a time", {1, 9038, 2501, 263, 931}},
      {"café ☃", {1, 274, 28059, 29871, 229, 155, 134}},
      {"Lily and Ben went to the park.  They saw a big dog!",
       {1, 365, 2354, 322, 4111, 3512, 304, 278, 14089, 29889, 29871, 2688, 4446, 263, 4802,
        11203, 29991}},
      {"🤖 x", {1, 29871, 243, 162, 167, 153, 921}},
      {" leading, trailing  ", {1, 29871, 8236, 29892, 25053, 259}},
      {"a\tb\nc\n", {1, 263, 12, 29890, 13, 29883, 13}},
      {"\x01\x7f", {1, 29871, 4, 130}},
      {"Ünïcödé über 日本語",
       {1, 7189, 29876, 30085, 29883, 9289, 29948, 2939, 29871, 30325, 30346, 30968}},
  };
  for (const auto& [text, ids] : golden) {
    EXPECT_EQ(tok.encode(text, /*bos=*/true), ids) << text;
    std::vector<int64_t> no_bos(ids.begin() + 1, ids.end());
    EXPECT_EQ(tok.encode(text, /*bos=*/false), no_bos) << text;
  }
  EXPECT_EQ(tok.encode("", /*bos=*/true), std::vector<int64_t>{1});
  EXPECT_TRUE(tok.encode("", /*bos=*/false).empty());
}

TEST(Tokenizer, Stories15mDecodeRoundTrips) {
  const Tokenizer& tok = stories_tokenizer();
  EXPECT_EQ(tok.vocab_size(), 32000);
  EXPECT_EQ(tok.decode_piece(1, 9038), "Once");   // leading space dropped after BOS
  EXPECT_EQ(tok.decode_piece(9038, 2501), " upon");
  EXPECT_EQ(tok.decode_piece(1, 13), "\n");        // byte token <0x0A>
  uint8_t b = 0;
  EXPECT_TRUE(tok.is_byte_token(229, &b));
  EXPECT_EQ(b, 0xE2);
  EXPECT_FALSE(tok.is_byte_token(259));
  EXPECT_EQ(tok.decode_piece(1, 258), std::string(1, char(0xFF)));  // stored as U+00FF
  for (const std::string text :
       {"Once upon a time, there was a little girl named Lily.", "café ☃", "🤖 x",
        " leading, trailing  ", "a\tb\nc\n", "\x01\x7f", "Ünïcödé über 日本語", "  two\n\nlines"}) {
    EXPECT_EQ(tok.decode(tok.encode(text, true)), text);
    EXPECT_EQ(tok.decode(tok.encode(text, false)), text);
  }
  EXPECT_THROW(tok.decode({32000}), ConfigError);
}

/// run.c's encode, literally (byte tokens excluded from lookups and merges, see
/// tests/golden/llama2c_tokenizer.py): code points, then rescan every adjacent pair and merge
/// the best, leftmost on ties, until nothing merges.
std::vector<int64_t> plain_encode(const Tokenizer& tok, const std::string& text) {
  static const auto lookup = [&] {
    std::unordered_map<std::string, int64_t> m;
    for (int64_t i = tok.vocab_size() - 1; i >= 0; --i)
      if (!tok.is_byte_token(i)) m[tok.piece(i)] = i;  // lowest id wins
    return m;
  }();
  std::vector<int64_t> ids = {1};
  if (!text.empty()) ids.push_back(lookup.at(" "));
  std::string s;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = uint8_t(text[i]);
    if ((c & 0xC0) != 0x80) s.clear();
    s += char(c);
    const uint8_t next = i + 1 < text.size() ? uint8_t(text[i + 1]) : 0;
    if ((next & 0xC0) == 0x80 && s.size() < 4) continue;
    if (lookup.count(s)) {
      ids.push_back(lookup.at(s));
    } else {
      for (char b : s) ids.push_back(int64_t(uint8_t(b)) + 3);
    }
    s.clear();
  }
  while (true) {
    float best = -1e10f;
    int64_t best_id = -1, best_i = -1;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      if (tok.is_byte_token(ids[i]) || tok.is_byte_token(ids[i + 1])) continue;
      auto it = lookup.find(tok.piece(ids[i]) + tok.piece(ids[i + 1]));
      if (it != lookup.end() && tok.score(it->second) > best)
        best = tok.score(it->second), best_id = it->second, best_i = int64_t(i);
    }
    if (best_i < 0) return ids;
    ids[size_t(best_i)] = best_id;
    ids.erase(ids.begin() + best_i + 1);
  }
}

TEST(Tokenizer, HeapMergeEqualsPlainLoopOnRandomText) {
  const Tokenizer& tok = stories_tokenizer();
  const std::vector<std::string> parts = {"a", "e", " ", "  ", "the", "Once", " upon", "é", "☃",
                                          "🤖", "\n", "\t", "ing", "!", ".", "x", "Z", "日", "ll",
                                          "o", "tt", "\x80", "\xff"};
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    const int n = 1 + int(rng() % 40);
    for (int i = 0; i < n; ++i) text += parts[rng() % parts.size()];
    const std::vector<int64_t> fast = tok.encode(text, true);
    ASSERT_EQ(fast, plain_encode(tok, text)) << "text: " << text;
    ASSERT_EQ(tok.decode(fast), text);  // stray bytes 0x80 / 0xFF come back through byte tokens
  }
}

TEST(Tokenizer, SyntheticVocabMergesByHand) {
  TempDir tmp;
  // Extra pieces get ids 259.. in order.
  const auto vocab = tiny_vocab({" ", "a", "b", " a", "ab", " ab"});
  std::vector<float> scores(vocab.size(), 0.0f);
  scores[259] = -10, scores[260] = -11, scores[261] = -12;
  scores[262] = -1, scores[263] = -2, scores[264] = -3;
  write_bytes(tmp.path / "tokenizer.bin", tokenizer_bytes(vocab, scores, 6));
  const Tokenizer tok = Tokenizer::from_checkpoint(tmp.path, int64_t(vocab.size()));
  // " ","a","b"," ","a","b" -> " a" (-1, leftmost) -> second " a" -> " ab" -> " ab".
  EXPECT_EQ(tok.encode("ab ab", true), (std::vector<int64_t>{1, 264, 264}));
  // "c" has no piece: byte fallback 0x63 + 3.
  EXPECT_EQ(tok.encode("ac", false), (std::vector<int64_t>{262, 0x63 + 3}));
  EXPECT_EQ(tok.decode({1, 262, 0x63 + 3}), "ac");
  EXPECT_EQ(tok.decode_piece(262, 0x63 + 3), "c");  // "<0x63>" spelling decodes to the byte
}

/// Expects from_llama2c to throw FormatError mentioning the file and `needle`.
void expect_bad_tokenizer(const fs::path& p, int64_t vocab, const std::string& needle) {
  try {
    Tokenizer::from_llama2c(p, vocab);
    FAIL() << "no error (expected '" << needle << "')";
  } catch (const FormatError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(p.filename().string()), std::string::npos) << m;
    EXPECT_NE(m.find(needle), std::string::npos) << "message: " << m << "\nexpected: " << needle;
  }
}

TEST(Tokenizer, HostileFilesThrow) {
  TempDir tmp;
  const auto vocab = tiny_vocab({" ", "a"});
  const std::vector<float> scores(vocab.size(), -1.0f);
  const std::string good = tokenizer_bytes(vocab, scores, 6);
  const fs::path p = tmp.path / "tokenizer.bin";
  const int64_t V = int64_t(vocab.size());
  write_bytes(p, good);
  EXPECT_NO_THROW(Tokenizer::from_llama2c(p, V));

  write_bytes(p, good.substr(0, 2));
  expect_bad_tokenizer(p, V, "truncated at byte 0");
  write_bytes(p, good.substr(0, good.size() - 1));  // inside the last piece
  expect_bad_tokenizer(p, V, "truncated");
  write_bytes(p, good.substr(0, 4 + 3));  // inside the first score
  expect_bad_tokenizer(p, V, "reading the score of token 0");
  expect_bad_tokenizer(p, V + 1, "truncated");
  write_bytes(p, good);
  expect_bad_tokenizer(p, V - 1, "more tokens than vocab_size");
  expect_bad_tokenizer(p, 100, "vocab_size 100 is too small");

  std::string neg = good;
  const int32_t minus = -5, huge = 1 << 30;
  std::memcpy(&neg[4 + 4], &minus, 4);  // length of token 0
  write_bytes(p, neg);
  expect_bad_tokenizer(p, V, "token 0 has length -5");
  std::memcpy(&neg[4 + 4], &huge, 4);
  write_bytes(p, neg);
  expect_bad_tokenizer(p, V, "token 0 has length 1073741824");
  std::string bad_max = good;
  std::memcpy(&bad_max[0], &minus, 4);
  write_bytes(p, bad_max);
  expect_bad_tokenizer(p, V, "max_token_length -5");

  auto wrong = vocab;
  wrong[3 + 0x41] = "A!";  // byte token 0x41 spelled as something else
  write_bytes(p, tokenizer_bytes(wrong, scores, 6));
  expect_bad_tokenizer(p, V, "token 68 is 'A!'");
  expect_bad_tokenizer(tmp.path / "absent.bin", V, "no such file");
}

}  // namespace
}  // namespace ac
