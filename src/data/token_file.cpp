#include "data/token_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "io/text_tokenizer.h"

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

std::string TokenizerFingerprint::describe() const {
  if (!known()) return "an unknown tokenizer";
  return fmt::format("a tokenizer of {} tokens (vocabulary hash {:016x})", vocab_size, hash);
}

TokenizerFingerprint tokenizer_fingerprint(const TextTokenizer& tokenizer) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis
  auto mix = [&h](const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  };
  const int64_t V = tokenizer.vocab_size();
  for (int64_t id = 0; id < V; ++id) {
    const std::string bytes = tokenizer.token_bytes(id);
    const uint64_t n = bytes.size();  // length first: "ab"+"c" differs from "a"+"bc"
    mix(&n, 8);
    mix(bytes.data(), bytes.size());
  }
  const int64_t bos = tokenizer.bos_id().value_or(-1), eos = tokenizer.eos_id().value_or(-1);
  mix(&bos, 8);
  mix(&eos, 8);
  return {V, h == 0 ? 1 : h};  // 0 means unknown
}

/// The version-2 header for `count` ids of a `vocab_size` vocabulary made by `tokenizer`.
static std::string token_file_header(uint64_t count, int64_t vocab_size,
                                     const TokenizerFingerprint& tokenizer) {
  std::string bytes(size_t(kTokenFileHeaderBytes), '\0');
  const uint64_t vocab = uint64_t(std::max<int64_t>(vocab_size, 0));
  const uint64_t tok_vocab = uint64_t(std::max<int64_t>(tokenizer.vocab_size, 0));
  std::memcpy(bytes.data(), kTokenFileMagic, 8);
  std::memcpy(bytes.data() + 8, &count, 8);
  std::memcpy(bytes.data() + 16, &vocab, 8);
  std::memcpy(bytes.data() + 24, &tok_vocab, 8);
  std::memcpy(bytes.data() + 32, &tokenizer.hash, 8);
  return bytes;
}

void write_token_file(const fs::path& path, const std::vector<int32_t>& ids, int64_t vocab_size,
                      const TokenizerFingerprint& tokenizer) {
  check_ids(ids, vocab_size, "write_token_file", path.string(), /*format_error=*/false);
  std::string bytes = token_file_header(ids.size(), vocab_size, tokenizer);
  bytes.resize(size_t(kTokenFileHeaderBytes) + ids.size() * 4);
  if (!ids.empty()) std::memcpy(bytes.data() + kTokenFileHeaderBytes, ids.data(), ids.size() * 4);
  write_file_atomic(path, bytes);
}

TokenFileWriter::TokenFileWriter(const fs::path& path, int64_t vocab_size,
                                 const TokenizerFingerprint& tokenizer)
    : file_(path), vocab_size_(vocab_size), tokenizer_(tokenizer) {
  file_.write_at(0, token_file_header(0, vocab_size, tokenizer));
  buffer_.reserve(kBufferIds);
}

void TokenFileWriter::append(const int32_t* ids, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (ids[i] < 0 || (vocab_size_ > 0 && ids[i] >= vocab_size_))
      throw ConfigError(msg("write_token_file", "{}: token id {} at index {} is outside [0, {})",
                            path().string(), ids[i], count_ + int64_t(i),
                            vocab_size_ > 0 ? std::to_string(vocab_size_) : "inf"));
  for (size_t i = 0; i < n; ++i) {
    buffer_.push_back(ids[i]);
    if (buffer_.size() == kBufferIds) flush();
  }
  count_ += int64_t(n);
}

void TokenFileWriter::flush() {
  if (buffer_.empty()) return;
  file_.write_at(uint64_t(kTokenFileHeaderBytes) + uint64_t(flushed_) * 4,
                 std::string_view(reinterpret_cast<const char*>(buffer_.data()),
                                  buffer_.size() * 4));
  flushed_ += int64_t(buffer_.size());
  buffer_.clear();
}

std::vector<int32_t> TokenFileWriter::read(int64_t first, int64_t n) {
  AC_CHECK(first >= 0 && n >= 0 && first + n <= count_, "read [{}, {}) of {} ids", first,
           first + n, count_);
  flush();
  std::vector<int32_t> out(static_cast<size_t>(n));
  if (n > 0)
    file_.read_at(uint64_t(kTokenFileHeaderBytes) + uint64_t(first) * 4,
                  reinterpret_cast<char*>(out.data()), size_t(n) * 4);
  return out;
}

void TokenFileWriter::truncate(int64_t new_count) {
  AC_CHECK(new_count >= 0 && new_count <= count_, "truncate to {} of {} ids", new_count, count_);
  flush();
  file_.resize(uint64_t(kTokenFileHeaderBytes) + uint64_t(new_count) * 4);
  count_ = flushed_ = new_count;
}

void TokenFileWriter::commit() {
  flush();
  file_.write_at(0, token_file_header(uint64_t(count_), vocab_size_, tokenizer_));
  file_.commit();
}

TokenFile read_token_file(const fs::path& path) {
  return parse_token_file(read_file(path), path.string());
}

TokenFile parse_token_file(std::string_view bytes, const std::string& file) {
  const char* where = "read_token_file";
  if (bytes.size() < size_t(kTokenFileV1HeaderBytes))
    throw FormatError(msg(where, "{}: {} bytes, shorter than the {}-byte header: not a token file "
                          "or truncated", file, bytes.size(), kTokenFileV1HeaderBytes));
  TokenFile out;
  if (std::memcmp(bytes.data(), kTokenFileMagicV1, 8) == 0) {
    out.version = 1;
  } else if (std::memcmp(bytes.data(), kTokenFileMagic, 8) != 0) {
    throw FormatError(msg(where, "{}: magic is '{}', expected 'ACTOK2\\0\\0' (or version 1's "
                          "'ACTOK1\\0\\0'): not a token file (write one with `autocompress "
                          "sample`)", file, std::string(bytes.data(), 6)));
  }
  const int64_t header = out.version == 1 ? kTokenFileV1HeaderBytes : kTokenFileHeaderBytes;
  if (bytes.size() < size_t(header))
    throw FormatError(msg(where, "{}: {} bytes, shorter than the {}-byte header of version {}: "
                          "truncated", file, bytes.size(), header, out.version));
  uint64_t count = 0, vocab = 0;
  std::memcpy(&count, bytes.data() + 8, 8);
  std::memcpy(&vocab, bytes.data() + 16, 8);
  if (out.version >= 2) {
    uint64_t tok_vocab = 0;
    std::memcpy(&tok_vocab, bytes.data() + 24, 8);
    std::memcpy(&out.tokenizer.hash, bytes.data() + 32, 8);
    if (tok_vocab > uint64_t(1) << 31)
      throw FormatError(msg(where, "{}: tokenizer_vocab_size {} is larger than int32 ids allow",
                            file, tok_vocab));
    out.tokenizer.vocab_size = int64_t(tok_vocab);
  }
  uint64_t payload = bytes.size() - uint64_t(header);
  if (count > payload / 4)
    throw FormatError(msg(where, "{}: header says {} tokens but only {} bytes ({} tokens) follow "
                          "the header: truncated?", file, count, payload, payload / 4));
  if (payload != count * 4)
    throw FormatError(msg(where, "{}: header says {} tokens ({} bytes) but {} bytes follow the "
                          "header: trailing bytes", file, count, count * 4, payload));
  if (vocab > uint64_t(1) << 31)
    throw FormatError(msg(where, "{}: vocab_size {} is larger than int32 ids allow", file, vocab));
  out.vocab_size = int64_t(vocab);
  out.ids.resize(count);
  if (count) std::memcpy(out.ids.data(), bytes.data() + header, count * 4);
  check_ids(out.ids, out.vocab_size, where, file, /*format_error=*/true);
  return out;
}

}  // namespace ac
