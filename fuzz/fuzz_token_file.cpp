// Token files written by `autocompress sample` (data/token_file.h).
#include "data/token_file.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* file = "fuzz.tokens";
  ac::fuzz::expect_ok_or_error([&] {
    const ac::TokenFile t = ac::parse_token_file(ac::fuzz::as_text(data, size), file);
    const int64_t header = t.version == 1 ? ac::kTokenFileV1HeaderBytes : ac::kTokenFileHeaderBytes;
    AC_FUZZ_ASSERT(uint64_t(header) + 4 * t.ids.size() == size);
    for (int32_t id : t.ids) AC_FUZZ_ASSERT(id >= 0 && (t.vocab_size == 0 || id < t.vocab_size));
  }, file);
  return 0;
}
