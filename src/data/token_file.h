// Token files: a flat stream of token ids, written by `autocompress sample` and read by
// `distill`, `eval`, `importance` and `search`.
//
// Byte layout (all little-endian; this project only targets little-endian hosts), version 2:
//   [0, 8)     magic "ACTOK2\0\0"
//   [8, 16)    uint64 count: number of token ids
//   [16, 24)   uint64 vocab_size: the vocabulary the ids index (0 = unknown, not checked)
//   [24, 32)   uint64 tokenizer_vocab_size: tokens of the tokenizer that made the ids (0 = unknown)
//   [32, 40)   uint64 tokenizer_hash: TokenizerFingerprint::hash of that tokenizer (0 = unknown)
//   [40, 40 + 4*count)  int32 ids, each in [0, vocab_size)
// Version 1 ("ACTOK1\0\0") has no tokenizer fields: the ids start at byte 24; it is still read,
// its tokenizer unknown. The tokenizer fields exist because ids from another tokenizer that fit
// the model's vocabulary pass every other check and train or score garbage.
// Nothing follows the ids. Documents are separated by BOS (id 1 for Llama / llama2.c): each
// document starts with BOS, as in llama2.c's pretokenized TinyStories shards. Files written from
// the user's text (data/text_corpus.h) follow the tokenizer: BOS where it adds one, EOS after each
// document where it has one (a tokenizer without BOS, such as Qwen2's, leaves only the EOS).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/fs.h"

namespace ac {

class TextTokenizer;

/// The 8 magic bytes that open every token file written now (version 2).
inline constexpr char kTokenFileMagic[8] = {'A', 'C', 'T', 'O', 'K', '2', '\0', '\0'};
/// Those of version 1, still read.
inline constexpr char kTokenFileMagicV1[8] = {'A', 'C', 'T', 'O', 'K', '1', '\0', '\0'};
/// Bytes before the first id (version 2).
inline constexpr int64_t kTokenFileHeaderBytes = 40;
/// Bytes before the first id of a version-1 file.
inline constexpr int64_t kTokenFileV1HeaderBytes = 24;

/// Which tokenizer made a stream of ids: its number of tokens and a hash of its vocabulary (the
/// bytes each id stands for, and its BOS and EOS ids). Two tokenizers with the same
/// fingerprint turn the same ids into the same text. {0, 0}: unknown (a version-1 file, or ids
/// written without a tokenizer at hand).
struct TokenizerFingerprint {
  int64_t vocab_size = 0;  // the tokenizer's own (may be below the model's padded vocab_size)
  uint64_t hash = 0;       // FNV-1a 64 (see tokenizer_fingerprint)
  bool known() const { return vocab_size != 0 || hash != 0; }
  bool operator==(const TokenizerFingerprint& o) const {
    return vocab_size == o.vocab_size && hash == o.hash;
  }
  bool operator!=(const TokenizerFingerprint& o) const { return !(*this == o); }
  /// "a tokenizer of 32000 tokens (vocabulary hash 5f3a...)", or "an unknown tokenizer".
  std::string describe() const;
};

/// The fingerprint of `tokenizer`: its vocab_size() and the FNV-1a 64 hash of, for every id in
/// order, the length and bytes of token_bytes(id), then its BOS and EOS ids (-1 when none).
/// One pass over the vocabulary (milliseconds for 150k tokens).
TokenizerFingerprint tokenizer_fingerprint(const TextTokenizer& tokenizer);

/// A token stream read from a file: ids [N] and what it was written for.
struct TokenFile {
  std::vector<int32_t> ids;  // [N]
  int64_t vocab_size = 0;    // 0 = unknown
  TokenizerFingerprint tokenizer;  // unknown for version 1
  int version = 2;
};

/// Writes `ids` atomically (temporary file + rename), recording `tokenizer` (unknown by
/// default). Throws ConfigError if an id is negative or not below a positive `vocab_size`;
/// FormatError if the file cannot be written.
void write_token_file(const fs::path& path, const std::vector<int32_t>& ids,
                      int64_t vocab_size = 0, const TokenizerFingerprint& tokenizer = {});

/// A token file written id by id, for streams that do not fit in memory (data/text_corpus.h).
/// The ids go to a temporary file (common/fs.h AtomicFileWriter) behind the header, whose count
/// is filled in by commit(); destroyed without commit(), nothing is left. Memory: a buffer of
/// kBufferIds ids. The file is byte for byte what write_token_file writes for the same ids.
class TokenFileWriter {
 public:
  static constexpr size_t kBufferIds = size_t(1) << 16;

  /// Starts `path` (written at commit()) for ids in [0, vocab_size); vocab_size 0 = unchecked.
  /// `tokenizer` is recorded in the header. Throws FormatError if the temporary file cannot be
  /// created.
  TokenFileWriter(const fs::path& path, int64_t vocab_size,
                  const TokenizerFingerprint& tokenizer = {});
  /// Appends ids; throws ConfigError naming the file if one is outside [0, vocab_size).
  void append(const int32_t* ids, size_t n);
  void append(const std::vector<int32_t>& ids) { append(ids.data(), ids.size()); }
  void push_back(int32_t id) { append(&id, 1); }
  /// Ids written so far (N).
  int64_t count() const { return count_; }
  /// Ids [first, first + n) written so far (read back from the file): [n].
  std::vector<int32_t> read(int64_t first, int64_t n);
  /// Drops the ids from `new_count` on (new_count <= count()).
  void truncate(int64_t new_count);
  /// Writes the header, then renames the file into place.
  void commit();
  const fs::path& path() const { return file_.path(); }

 private:
  void flush();

  AtomicFileWriter file_;
  int64_t vocab_size_ = 0;
  TokenizerFingerprint tokenizer_;
  int64_t count_ = 0;            // ids appended, buffered ones included
  int64_t flushed_ = 0;          // ids in the file
  std::vector<int32_t> buffer_;  // ids appended after the flushed ones
};

/// Reads and validates a token file (version 2 or 1). Throws FormatError naming the file and
/// what is wrong: wrong magic ("not a token file"), a size that disagrees with the count
/// (truncated or trailing bytes), or an id outside [0, vocab_size).
TokenFile read_token_file(const fs::path& path);

/// The same from the file's bytes already in memory; `file` names errors.
TokenFile parse_token_file(std::string_view bytes, const std::string& file);

}  // namespace ac
