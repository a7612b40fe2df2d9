// llama2.c tokenizer.bin (io/tokenizer.h). Input: a little-endian uint32 vocab_size (what the
// model's config would say), then the file. An accepted tokenizer must encode and decode text
// (valid and invalid UTF-8) without failing, and decode every id it holds.
#include <cstring>

#include "fuzz_util.h"
#include "io/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* file = "tokenizer.bin";
  if (size < 4) return 0;
  uint32_t vocab = 0;
  std::memcpy(&vocab, data, 4);
  const std::string bytes(reinterpret_cast<const char*>(data) + 4, size - 4);
  ac::fuzz::expect_ok_or_error([&] {
    const ac::Tokenizer t = ac::Tokenizer::from_llama2c_bytes(bytes, int64_t(vocab), file);
    AC_FUZZ_ASSERT(t.vocab_size() == int64_t(vocab));
    for (const char* text : {"Once upon a time", " a  b\n", "\xc3\xa9t\xc3\xa9 \xe2\x82\xac",
                             "\xff\xfe\x80 bad utf-8 \xc3", ""}) {
      const std::vector<int64_t> ids = t.encode(text, /*bos=*/true);
      for (int64_t id : ids) AC_FUZZ_ASSERT(id >= 0 && id < t.vocab_size());
      (void)t.decode(ids);
    }
    for (int64_t id = 0; id < t.vocab_size() && id < 4096; ++id) (void)t.decode_piece(1, id);
  }, file);
  return 0;
}
