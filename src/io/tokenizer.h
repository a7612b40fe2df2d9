// Tokenizer of the Llama / SentencePiece-BPE family with byte fallback, read from llama2.c's
// tokenizer.bin.
//
// tokenizer.bin layout (llama2.c, run.c build_tokenizer):
//   int32 max_token_length; then for each of vocab_size tokens:
//   float32 score, int32 len, len bytes of the piece.
// Ids 0/1/2 are <unk>/<s>/</s>; ids 3..258 are the byte-fallback tokens <0x00>..<0xFF> (stored
// in stories15M's file as the raw byte for 0x00..0x7F and as the UTF-8 of U+0080..U+00FF for
// 0x80..0xFF; "<0xNN>" in llama2.c's own export; all three are accepted). Byte tokens never
// match text and never merge: they only stand for bytes that have no piece.
// Encoding follows SentencePiece BPE as llama2.c does it: a leading space is added (the "dummy
// prefix", spaces are plain ' ' in pieces, not U+2581), characters without a piece fall back to
// their UTF-8 bytes, then the highest-score merge (leftmost on ties) is applied repeatedly.
// decode() drops BOS/EOS and the dummy-prefix space at the start, so decode(encode(x)) == x.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/fs.h"

namespace ac {

class Tokenizer {
 public:
  /// Reads tokenizer.bin for a model with `vocab_size` tokens. Throws FormatError on a truncated
  /// file, a negative or huge length, or a vocab size that disagrees.
  static Tokenizer from_llama2c(const fs::path& path, int64_t vocab_size);
  /// The same from the file's bytes already in memory; `file` names errors. Limits: vocab_size
  /// 259..2^24, max_token_length 1..65,536, every piece no longer than max_token_length, the
  /// byte-fallback ids 3..258 spelled as bytes, exactly vocab_size records and nothing after.
  static Tokenizer from_llama2c_bytes(const std::string& bytes, int64_t vocab_size,
                                      const std::string& file);
  /// Looks for tokenizer.bin in a checkpoint folder.
  static Tokenizer from_checkpoint(const fs::path& dir, int64_t vocab_size);

  /// Text -> ids. `bos` prepends id 1.
  std::vector<int64_t> encode(const std::string& text, bool bos) const;
  /// One id -> its text piece (byte tokens become their byte; the leading space after BOS is
  /// dropped as in llama2.c). `prev` is the previous id.
  std::string decode_piece(int64_t prev, int64_t id) const;
  /// Ids -> text.
  std::string decode(const std::vector<int64_t>& ids) const;

  int64_t vocab_size() const { return int64_t(pieces_.size()); }
  const std::string& piece(int64_t id) const { return pieces_.at(size_t(id)); }
  float score(int64_t id) const { return scores_.at(size_t(id)); }
  int64_t bos_id() const { return 1; }
  int64_t eos_id() const { return 2; }
  int64_t unk_id() const { return 0; }
  /// True for ids 3..258 (byte fallback); `byte` receives the byte value.
  bool is_byte_token(int64_t id, uint8_t* byte = nullptr) const;

 private:
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::unordered_map<std::string, int64_t> lookup_;
  int32_t max_token_length_ = 0;
};

}  // namespace ac
