// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}), as the tokenizers library's
// models/bpe (model.rs merge_word, word.rs merge_all) computes it:
//   1. ignore_merges: a word that is itself in the vocabulary is one token;
//   2. each character of the word becomes the id of that character; a character without one
//      becomes its UTF-8 bytes' "<0xNN>" tokens (byte_fallback) or unk_token (runs of unknown
//      characters fused into one with fuse_unk), or is dropped when the model has no unk_token;
//   3. merges are applied lowest rank first, leftmost first among equal ranks (a priority queue of
//      candidate pairs; a popped pair that no longer exists is skipped).
// Results are cached per word (words shorter than 256 bytes, at most kCacheWords words, cleared
// when full, so memory stays bounded on any input).
// Not implemented (FormatError naming the JSON path at load): dropout other than null/0, a
// non-empty continuing_subword_prefix or end_of_word_suffix.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json_io.h"

namespace ac::hf {

/// Hash of a byte string (64-bit multiply-xor over 8-byte words).
uint64_t hash_bytes(std::string_view s);

/// Token text -> id, an open-addressing table probed with string_views (no allocation).
class VocabIndex {
 public:
  /// Adds or replaces `token` -> `id`.
  void insert(std::string_view token, int32_t id);
  /// The id of `token`, or -1.
  int32_t find(std::string_view token) const;
  size_t size() const { return keys_.size(); }

 private:
  void grow();
  std::vector<std::string> keys_;
  std::vector<int32_t> ids_;
  std::vector<int32_t> slots_;  // index into keys_, -1 empty
};

/// (left id, right id) -> (rank, merged id) of the BPE merges.
class MergeIndex {
 public:
  struct Merge {
    int32_t rank, new_id;
  };
  void insert(int32_t left, int32_t right, Merge m);
  /// The merge of the pair, or nullptr.
  const Merge* find(int32_t left, int32_t right) const;

 private:
  void grow();
  static uint64_t key(int32_t l, int32_t r) { return (uint64_t(uint32_t(l)) << 32) | uint32_t(r); }
  std::vector<uint64_t> keys_;  // ~0 empty
  std::vector<Merge> values_;
  size_t count_ = 0;
};

/// Word -> token ids, bounded: at most kCacheWords words and kCacheBytes bytes, cleared when full.
class WordCache {
 public:
  static constexpr size_t kCacheWords = 1 << 15;
  static constexpr size_t kMaxWordBytes = 256;
  /// Appends the cached ids of `word` to `out`; false when absent.
  bool get(std::string_view word, uint64_t hash, std::vector<int32_t>& out) const;
  void put(std::string_view word, uint64_t hash, const int32_t* ids, size_t n);
  size_t words() const { return entries_.size(); }

 private:
  struct Entry {
    uint64_t hash;
    uint32_t key_off, key_len, ids_off, ids_len;
  };
  std::vector<Entry> entries_;
  std::vector<int32_t> slots_;  // index into entries_, -1 empty
  std::string keys_;
  std::vector<int32_t> ids_;
};

/// The BPE model. tokenize() is const but uses `Scratch` and `WordCache` owned by the caller.
class BpeModel {
 public:
  /// Reads "model" of tokenizer.json. `file` names errors with JSON paths ("model.merges[12]").
  /// Throws FormatError on a malformed vocabulary or merge (a merge whose parts or result are not
  /// in the vocabulary, as the tokenizers library does) and on an unsupported option.
  /// `max_ids` bounds the ids of model.vocab (ids may leave holes, which the file's added tokens
  /// fill; more than that is not a vocabulary, and would cost memory for nothing).
  static BpeModel from_json(const json& model, const std::string& file, size_t max_ids);

  /// Reusable buffers of tokenize().
  struct Scratch {
    struct Symbol {
      int32_t id, prev, next;
      bool removed;
    };
    struct Candidate {
      int32_t rank, pos, new_id;
    };
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
  };
  /// Appends the ids of one pre-tokenized word (valid UTF-8) to `out`.
  void tokenize(std::string_view word, std::vector<int32_t>& out, Scratch& scratch,
                WordCache& cache) const;

  /// id -> token text for ids 0..vocab_size()-1 ("" where the vocabulary has a hole).
  const std::vector<std::string>& tokens() const { return tokens_; }
  /// The merges in rank order, as (left, right) token texts.
  const std::vector<std::pair<std::string, std::string>>& merges() const { return merges_; }
  int32_t find(std::string_view token) const { return index_.find(token); }
  int32_t unk_id() const { return unk_id_; }
  bool byte_fallback() const { return byte_fallback_; }
  bool ignore_merges() const { return ignore_merges_; }
  /// The id of "<0xNN>" for byte b, or -1.
  int32_t byte_id(uint8_t b) const { return byte_ids_[b]; }

 private:
  void merge_word(std::string_view word, std::vector<int32_t>& out, Scratch& scratch) const;
  void initial_symbols(std::string_view word, Scratch& scratch) const;

  std::vector<std::string> tokens_;
  VocabIndex index_;
  MergeIndex merge_index_;
  std::vector<std::pair<std::string, std::string>> merges_;
  int32_t ascii_ids_[128];
  int32_t byte_ids_[256];
  int32_t unk_id_ = -1;
  bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
};

}  // namespace ac::hf
