// model.safetensors.index.json: JSON limits and the weight_map (io/safetensors_header.h).
#include "common/json_io.h"
#include "fuzz_util.h"
#include "io/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* file = "model.safetensors.index.json";
  ac::fuzz::expect_ok_or_error([&] {
    const auto by_shard =
        ac::parse_safetensors_index(ac::parse_json_text(ac::fuzz::as_text(data, size), file), file);
    for (const auto& [shard, names] : by_shard) {
      AC_FUZZ_ASSERT(!shard.empty() && shard.find('/') == std::string::npos);
      AC_FUZZ_ASSERT(shard != "." && shard != "..");
    }
  }, file);
  return 0;
}
