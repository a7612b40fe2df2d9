// safetensors file: the 8-byte header length, the JSON header, dtypes, shapes, data_offsets
// against the file (io/safetensors_header.h).
#include <algorithm>
#include <vector>

#include "fuzz_util.h"
#include "io/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* file = "fuzz.safetensors";
  ac::fuzz::expect_ok_or_error([&] {
    const ac::SafetensorsHeader h = ac::parse_safetensors_header(data, size, file);
    // What the reader promises: each tensor inside the data section, numel x dtype bytes long,
    // no two overlapping.
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (const auto& [name, e] : h.tensors) {
      uint64_t numel = 1;
      for (int64_t d : e.shape) numel *= uint64_t(d);
      AC_FUZZ_ASSERT(e.begin >= 8 + h.header_bytes && e.begin <= e.end && e.end <= size);
      AC_FUZZ_ASSERT(e.end - e.begin == numel * e.element_bytes);
      ranges.emplace_back(e.begin, e.end);
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      AC_FUZZ_ASSERT(ranges[i].first >= ranges[i - 1].second);
  }, file);
  return 0;
}
