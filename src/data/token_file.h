// Token files: a flat stream of token ids, written by `autocompress sample` and read by
// `distill`, `eval`, `importance` and `search`.
//
// Byte layout (all little-endian; this project only targets little-endian hosts):
//   [0, 8)     magic "ACTOK1\0\0"
//   [8, 16)    uint64 count: number of token ids
//   [16, 24)   uint64 vocab_size: the vocabulary the ids index (0 = unknown, not checked)
//   [24, 24 + 4*count)  int32 ids, each in [0, vocab_size)
// Nothing follows the ids. Documents are separated by BOS (id 1 for Llama / llama2.c): each
// document starts with BOS, as in llama2.c's pretokenized TinyStories shards.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/fs.h"

namespace ac {

/// The 8 magic bytes that open every token file.
inline constexpr char kTokenFileMagic[8] = {'A', 'C', 'T', 'O', 'K', '1', '\0', '\0'};
/// Bytes before the first id.
inline constexpr int64_t kTokenFileHeaderBytes = 24;

/// A token stream read from a file: ids [N] and the vocabulary size it was written for.
struct TokenFile {
  std::vector<int32_t> ids;  // [N]
  int64_t vocab_size = 0;    // 0 = unknown
};

/// Writes `ids` atomically (temporary file + rename). Throws ConfigError if an id is negative or
/// not below a positive `vocab_size`; FormatError if the file cannot be written.
void write_token_file(const fs::path& path, const std::vector<int32_t>& ids,
                      int64_t vocab_size = 0);

/// Reads and validates a token file. Throws FormatError naming the file and what is wrong:
/// wrong magic ("not a token file"), a size that disagrees with the count (truncated or
/// trailing bytes), or an id outside [0, vocab_size).
TokenFile read_token_file(const fs::path& path);

/// The same from the file's bytes already in memory; `file` names errors.
TokenFile parse_token_file(std::string_view bytes, const std::string& file);

}  // namespace ac
