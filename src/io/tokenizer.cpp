#include "io/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <queue>

#include "common/error.h"

namespace ac {

namespace {

constexpr int64_t kFirstByteId = 3;   // <0x00>
constexpr int64_t kLastByteId = 258;  // <0xFF>
constexpr int32_t kMaxTokenLength = 1 << 16;
constexpr int64_t kMaxVocab = 1 << 24;

bool is_byte_id(int64_t id) { return id >= kFirstByteId && id <= kLastByteId; }

/// Reads the file's little-endian fields with the offset at hand for error messages.
struct Reader {
  const std::string& bytes;
  const std::string& file;
  size_t off = 0;

  template <typename T>
  T get(const char* what, int64_t token) {
    if (bytes.size() - off < sizeof(T))
      throw FormatError(msg("tokenizer", "{}: truncated at byte {} reading the {} of token {} "
                            "(file is {} bytes)", file, off, what, token, bytes.size()));
    T v;
    std::memcpy(&v, bytes.data() + off, sizeof(T));
    off += sizeof(T);
    return v;
  }
};

/// The byte a byte-fallback token stands for, whichever way the file spells it: "<0xNN>"
/// (llama2.c's export), the raw byte, or U+0080..U+00FF as UTF-8 (stories15M's file).
bool byte_of_piece(const std::string& p, int64_t id, uint8_t* out) {
  const uint8_t want = uint8_t(id - kFirstByteId);
  const auto* u = reinterpret_cast<const uint8_t*>(p.data());
  bool ok = false;
  if (p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>')
    ok = std::isxdigit(u[3]) && std::isxdigit(u[4]) &&
         std::strtoul(p.substr(3, 2).c_str(), nullptr, 16) == want;
  else if (p.size() == 1)
    ok = u[0] == want;
  else if (p.size() == 2 && want >= 0x80)
    ok = u[0] == (0xC0 | (want >> 6)) && u[1] == (0x80 | (want & 0x3F));
  if (ok && out) *out = want;
  return ok;
}

}  // namespace

Tokenizer Tokenizer::from_llama2c(const fs::path& path, int64_t vocab_size) {
  const std::string file = path.string();
  if (!fs::exists(path)) throw FormatError(msg("tokenizer", "{}: no such file", file));
  return from_llama2c_bytes(read_file(path), vocab_size, file);
}

Tokenizer Tokenizer::from_llama2c_bytes(const std::string& bytes, int64_t vocab_size,
                                        const std::string& file) {
  if (vocab_size <= kLastByteId)
    throw FormatError(msg("tokenizer", "{}: vocab_size {} is too small: ids 0..258 are the "
                          "special and byte-fallback tokens", file, vocab_size));
  if (vocab_size > kMaxVocab)
    throw FormatError(msg("tokenizer", "{}: vocab_size {} exceeds the limit {}", file, vocab_size,
                          kMaxVocab));
  Reader r{bytes, file};
  Tokenizer t;
  t.max_token_length_ = r.get<int32_t>("max_token_length", -1);
  if (t.max_token_length_ <= 0 || t.max_token_length_ > kMaxTokenLength)
    throw FormatError(msg("tokenizer", "{}: max_token_length {} outside [1, {}]: not a llama2.c "
                          "tokenizer.bin?", file, t.max_token_length_, kMaxTokenLength));
  // Each record takes at least 8 bytes: reserve no more than the file can hold.
  const size_t records = size_t(std::min<int64_t>(vocab_size, int64_t(bytes.size() / 8)));
  t.pieces_.reserve(records);
  t.scores_.reserve(records);
  for (int64_t id = 0; id < vocab_size; ++id) {
    if (r.off == bytes.size())
      throw FormatError(msg("tokenizer", "{}: holds {} tokens, expected vocab_size {} from the "
                            "model", file, id, vocab_size));
    const float score = r.get<float>("score", id);
    if (std::isnan(score))  // a NaN breaks the merge order (no strict weak ordering)
      throw FormatError(msg("tokenizer", "{}: token {} has score NaN", file, id));
    const int32_t len = r.get<int32_t>("length", id);
    if (len < 0 || len > t.max_token_length_)
      throw FormatError(msg("tokenizer", "{}: token {} has length {}, expected 0..{} "
                            "(max_token_length)", file, id, len, t.max_token_length_));
    if (bytes.size() - r.off < size_t(len))
      throw FormatError(msg("tokenizer", "{}: truncated at byte {}: token {} needs {} bytes, {} "
                            "left", file, r.off, id, len, bytes.size() - r.off));
    t.pieces_.emplace_back(bytes.data() + r.off, size_t(len));
    t.scores_.push_back(score);
    r.off += size_t(len);
  }
  if (r.off != bytes.size())
    throw FormatError(msg("tokenizer", "{}: {} bytes after token {}: the file holds more tokens "
                          "than vocab_size {} from the model", file, bytes.size() - r.off,
                          vocab_size - 1, vocab_size));
  for (int64_t id = kFirstByteId; id <= kLastByteId; ++id)
    if (!byte_of_piece(t.pieces_[size_t(id)], id, nullptr))
      throw FormatError(msg("tokenizer", "{}: token {} is '{}', expected the byte-fallback "
                            "token <0x{:02X}>", file, id, t.pieces_[size_t(id)],
                            id - kFirstByteId));
  // Byte tokens are never looked up (they may spell the same text as real pieces, e.g. " ");
  // on duplicates the lowest id wins.
  for (int64_t id = 0; id < vocab_size; ++id)
    if (!is_byte_id(id)) t.lookup_.emplace(t.pieces_[size_t(id)], id);
  if (!t.lookup_.count(" "))
    throw FormatError(msg("tokenizer", "{}: no piece ' ' (needed for the dummy prefix)", file));
  return t;
}

Tokenizer Tokenizer::from_checkpoint(const fs::path& dir, int64_t vocab_size) {
  const fs::path p = dir / "tokenizer.bin";
  if (!fs::exists(p))
    throw FormatError(msg("tokenizer", "{}: no tokenizer.bin (only llama2.c tokenizers are "
                          "read; import the model with `autocompress import llama2c`)",
                          dir.string()));
  return from_llama2c(p, vocab_size);
}

bool Tokenizer::is_byte_token(int64_t id, uint8_t* byte) const {
  if (!is_byte_id(id) || id >= vocab_size()) return false;
  if (byte) *byte = uint8_t(id - kFirstByteId);
  return true;
}

namespace {

/// Step 1 of llama2.c's encode: one token per UTF-8 code point that has a piece, else its
/// bytes as byte-fallback ids. Runs of more than 4 bytes are cut at 4 as run.c does.
std::vector<int64_t> codepoint_tokens(const std::string& text,
                                      const std::unordered_map<std::string, int64_t>& lookup) {
  std::vector<int64_t> out;
  std::string buf;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = uint8_t(text[i]);
    if ((c & 0xC0) != 0x80) buf.clear();
    buf.push_back(char(c));
    const uint8_t next = i + 1 < text.size() ? uint8_t(text[i + 1]) : 0;
    if ((next & 0xC0) == 0x80 && buf.size() < 4) continue;
    auto it = lookup.find(buf);
    if (it != lookup.end()) {
      out.push_back(it->second);
    } else {
      for (char b : buf) out.push_back(int64_t(uint8_t(b)) + kFirstByteId);
    }
    buf.clear();
  }
  return out;
}

}  // namespace

std::vector<int64_t> Tokenizer::encode(const std::string& text, bool bos) const {
  std::vector<int64_t> seq;
  if (bos) seq.push_back(bos_id());
  if (!text.empty()) seq.push_back(lookup_.at(" "));  // SentencePiece's dummy prefix
  for (int64_t id : codepoint_tokens(text, lookup_)) seq.push_back(id);

  // Step 2: merge the best-scoring adjacent pair, leftmost on ties, until none merges. run.c
  // rescans the whole sequence per merge (quadratic); a heap over a linked list gives the same
  // merges in O(n log n). A candidate is stale once either side changed (version counters).
  const int64_t n = int64_t(seq.size());
  std::vector<int64_t> prev(n), next(n), version(n, 0);
  for (int64_t i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1 < n ? i + 1 : -1;
  struct Cand {
    float score;
    int64_t left, right, merged, vl, vr;
    bool operator<(const Cand& o) const {  // max-heap: higher score, then smaller position
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::priority_queue<Cand> heap;
  auto push = [&](int64_t l) {
    const int64_t r = l < 0 ? -1 : next[l];
    if (l < 0 || r < 0 || is_byte_id(seq[l]) || is_byte_id(seq[r])) return;
    auto it = lookup_.find(pieces_[size_t(seq[l])] + pieces_[size_t(seq[r])]);
    // run.c starts its search at -1e10, so a piece scored at or below that never merges.
    if (it != lookup_.end() && scores_[size_t(it->second)] > -1e10f)
      heap.push({scores_[size_t(it->second)], l, r, it->second, version[l], version[r]});
  };
  for (int64_t i = 0; i < n; ++i) push(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    if (version[c.left] != c.vl || version[c.right] != c.vr || next[c.left] != c.right) continue;
    seq[c.left] = c.merged;
    ++version[c.left];
    version[c.right] = -1;  // removed
    next[c.left] = next[c.right];
    if (next[c.left] >= 0) prev[next[c.left]] = c.left;
    push(prev[c.left]);
    push(c.left);
  }
  std::vector<int64_t> out;
  for (int64_t i = n > 0 ? 0 : -1; i >= 0; i = next[i]) out.push_back(seq[i]);
  return out;
}

std::string Tokenizer::decode_piece(int64_t prev, int64_t id) const {
  if (id < 0 || id >= vocab_size())
    throw ConfigError(msg("tokenizer", "decode: token id {} outside [0, {})", id, vocab_size()));
  uint8_t byte;
  if (is_byte_token(id, &byte)) return std::string(1, char(byte));
  const std::string& p = pieces_[size_t(id)];
  // After BOS, SentencePiece's decoder drops the dummy-prefix space (llama2.c PR #89).
  if (prev == bos_id() && !p.empty() && p[0] == ' ') return p.substr(1);
  return p;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  int64_t prev = bos_id();  // the start of text behaves like "after BOS"
  for (int64_t id : ids) {
    if (id == bos_id() || id == eos_id()) {
      prev = id;
      continue;
    }
    out += decode_piece(prev, id);
    prev = id;
  }
  return out;
}

}  // namespace ac
