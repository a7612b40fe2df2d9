// llama2.c model.bin: the seven-int32 header and the file size it implies
// (io/llama2c_header.h). The input is the whole file.
#include "fuzz_util.h"
#include "io/llama2c_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* file = "model.bin";
  ac::fuzz::expect_ok_or_error([&] {
    const ac::Llama2cHeader h = ac::parse_llama2c_header(data, size, size, file);
    AC_FUZZ_ASSERT(ac::llama2c_expected_bytes(h) == size);
    AC_FUZZ_ASSERT(h.dim % h.n_heads == 0 && h.n_heads % h.n_kv_heads == 0);
  }, file);
  return 0;
}
