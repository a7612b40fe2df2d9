// A llama2.c tokenizer.bin built in memory, shared by the corrupt-file and output-safety tests.
#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace ac::test {

/// tokenizer.bin bytes with `vocab` tokens: specials, 256 byte tokens "<0xNN>", " ", fillers
/// "pN"; score of id i is -i; max_token_length 8 (llama2.c run.c layout).
inline std::string tokenizer_bytes(int64_t vocab) {
  std::string out;
  auto put = [&](const void* q, size_t n) { out.append(static_cast<const char*>(q), n); };
  const int32_t max_len = 8;
  put(&max_len, 4);
  for (int64_t id = 0; id < vocab; ++id) {
    const std::string piece = id == 0 ? "<unk>" : id == 1 ? "<s>" : id == 2 ? "</s>"
                            : id < 259 ? fmt::format("<0x{:02X}>", id - 3)
                            : id == 259 ? " " : fmt::format("p{}", id);
    const float score = -float(id);
    const int32_t len = int32_t(piece.size());
    put(&score, 4);
    put(&len, 4);
    put(piece.data(), piece.size());
  }
  return out;
}

}  // namespace ac::test
