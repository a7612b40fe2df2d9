// GGUF v3: header, metadata of every value type, tensor infos, alignment, offsets
// (io/gguf_format.h), and the Q8_0 / Q4_0 blocks of small tensors dequantized in place
// (io/gguf_quant.h): every read must stay inside the tensor's bytes.
#include <algorithm>
#include <vector>

#include "io/gguf_format.h"
#include "io/gguf_quant.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* file = "fuzz.gguf";
  ac::fuzz::expect_ok_or_error([&] {
    const ac::GgufLayout g = ac::parse_gguf(ac::fuzz::as_text(data, size), file);
    AC_FUZZ_ASSERT(g.alignment > 0 && (g.alignment & (g.alignment - 1)) == 0);
    AC_FUZZ_ASSERT(g.kv.size() == g.kv_index.size() && g.order.size() == g.tensors.size());
    for (const auto& [key, v] : g.kv) AC_FUZZ_ASSERT(v.is_array || v.size() == 1);
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (const auto& [name, t] : g.tensors) {
      uint64_t numel = 1;
      for (int64_t ne : t.ne) numel *= uint64_t(ne);
      AC_FUZZ_ASSERT(t.ne[0] % ac::ggml_block_values(t.type) == 0);
      AC_FUZZ_ASSERT(t.bytes == ac::ggml_bytes(t.type, numel));
      AC_FUZZ_ASSERT(t.offset >= g.data_start && t.offset % g.alignment == 0);
      AC_FUZZ_ASSERT(t.offset <= size && size - t.offset >= t.bytes);
      ranges.emplace_back(t.offset, t.offset + t.bytes);
      if (ac::ggml_is_quantized(t.type) && numel <= (1u << 16)) {
        std::vector<float> y(numel);
        const uint8_t* blocks = data + t.offset;
        if (t.type == ac::GgmlType::Q8_0) ac::dequantize_row_q8_0(blocks, y.data(), int64_t(numel));
        else ac::dequantize_row_q4_0(blocks, y.data(), int64_t(numel));
      }
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      AC_FUZZ_ASSERT(ranges[i].first >= ranges[i - 1].second);
  }, file);
  return 0;
}
