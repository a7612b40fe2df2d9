#include "data/token_file.h"

#include <cstring>

#include "common/error.h"

namespace ac {

static_assert(sizeof(int32_t) == 4 && sizeof(uint64_t) == 8, "token file layout");

static void check_ids(const std::vector<int32_t>& ids, int64_t vocab_size, const char* where,
                      const std::string& file, bool format_error) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= 0 && (vocab_size <= 0 || ids[i] < vocab_size)) continue;
    std::string m = msg(where, "{}: token id {} at index {} is outside [0, {})", file, ids[i], i,
                        vocab_size > 0 ? std::to_string(vocab_size) : "inf");
    if (format_error) throw FormatError(m);
    throw ConfigError(m);
  }
}

void write_token_file(const fs::path& path, const std::vector<int32_t>& ids, int64_t vocab_size) {
  check_ids(ids, vocab_size, "write_token_file", path.string(), /*format_error=*/false);
  std::string bytes(size_t(kTokenFileHeaderBytes) + ids.size() * 4, '\0');
  uint64_t count = ids.size(), vocab = uint64_t(std::max<int64_t>(vocab_size, 0));
  std::memcpy(bytes.data(), kTokenFileMagic, 8);
  std::memcpy(bytes.data() + 8, &count, 8);
  std::memcpy(bytes.data() + 16, &vocab, 8);
  if (!ids.empty()) std::memcpy(bytes.data() + kTokenFileHeaderBytes, ids.data(), ids.size() * 4);
  write_file_atomic(path, bytes);
}

TokenFile read_token_file(const fs::path& path) {
  return parse_token_file(read_file(path), path.string());
}

TokenFile parse_token_file(std::string_view bytes, const std::string& file) {
  const char* where = "read_token_file";
  if (bytes.size() < size_t(kTokenFileHeaderBytes))
    throw FormatError(msg(where, "{}: {} bytes, shorter than the {}-byte header: not a token file "
                          "or truncated", file, bytes.size(), kTokenFileHeaderBytes));
  if (std::memcmp(bytes.data(), kTokenFileMagic, 8) != 0)
    throw FormatError(msg(where, "{}: magic is '{}', expected 'ACTOK1\\0\\0': not a token file "
                          "(write one with `autocompress sample`)", file,
                          std::string(bytes.data(), 6)));
  uint64_t count = 0, vocab = 0;
  std::memcpy(&count, bytes.data() + 8, 8);
  std::memcpy(&vocab, bytes.data() + 16, 8);
  uint64_t payload = bytes.size() - uint64_t(kTokenFileHeaderBytes);
  if (count > payload / 4)
    throw FormatError(msg(where, "{}: header says {} tokens but only {} bytes ({} tokens) follow "
                          "the header: truncated?", file, count, payload, payload / 4));
  if (payload != count * 4)
    throw FormatError(msg(where, "{}: header says {} tokens ({} bytes) but {} bytes follow the "
                          "header: trailing bytes", file, count, count * 4, payload));
  if (vocab > uint64_t(1) << 31)
    throw FormatError(msg(where, "{}: vocab_size {} is larger than int32 ids allow", file, vocab));
  TokenFile out;
  out.vocab_size = int64_t(vocab);
  out.ids.resize(count);
  if (count) std::memcpy(out.ids.data(), bytes.data() + kTokenFileHeaderBytes, count * 4);
  check_ids(out.ids, out.vocab_size, where, file, /*format_error=*/true);
  return out;
}

}  // namespace ac
