#include "hardware/llamacpp_buffers.h"

#include <algorithm>

#include "common/error.h"

namespace ac {

namespace {

constexpr uint64_t kTensorAlignment = 32;  // ggml-impl.h TENSOR_ALIGNMENT

uint64_t pad(uint64_t n) { return (n + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment; }

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

GgmlType gguf_type_for(const std::string& weight_dtype) {
  if (weight_dtype == "fp32") return GgmlType::F32;
  if (weight_dtype == "fp16") return GgmlType::F16;
  if (weight_dtype == "bf16") return GgmlType::BF16;
  if (weight_dtype == "q8_0") return GgmlType::Q8_0;
  if (weight_dtype == "q4_0") return GgmlType::Q4_0;
  throw ConfigError(msg("llama.cpp", "weight_dtype '{}' has no GGUF type here: expected fp32, "
                        "fp16, bf16, q8_0 or q4_0", weight_dtype));
}

bool amx_takes(GgmlType type, int64_t rows, int64_t row_length) {
  if (rows % 32) return false;  // op->ne[0] % (TILE_N * 2)
  switch (type) {
    case GgmlType::Q4_0:
    case GgmlType::Q8_0:
      return row_length % 32 == 0;  // TILE_K
    case GgmlType::F16:
      return row_length % 16 == 0;
    default:
      return false;
  }
}

uint64_t amx_bytes(GgmlType type, int64_t rows, int64_t row_length) {
  if (!amx_takes(type, rows, row_length)) return 0;
  const uint64_t blocks = uint64_t(row_length / 32);
  if (type == GgmlType::Q8_0) return pad(uint64_t(rows) * blocks * (34 + 4));  // + compensation
  if (type == GgmlType::Q4_0) return pad(uint64_t(rows) * blocks * 18);
  return pad(ggml_bytes(type, uint64_t(rows * row_length)));  // F16: copied as it is
}

bool is_matmul_weight_name(const std::string& name) {
  if (name == "output.weight") return true;
  for (const char* t : {".attn_q.weight", ".attn_k.weight", ".attn_v.weight", ".attn_output.weight",
                        ".ffn_gate.weight", ".ffn_up.weight", ".ffn_down.weight"})
    if (ends_with(name, t)) return true;
  return false;
}

LlamaCppModelBuffers llamacpp_model_buffers(const std::vector<GgufTensorExtent>& tensors,
                                            bool tied_output, const std::string& repacked_into) {
  if (tensors.empty())
    throw ConfigError(msg("llamacpp_model_buffers", "no tensors: expected a GGUF's tensor list"));
  if (!repacked_into.empty() && repacked_into != "AMX")
    throw ConfigError(msg("llamacpp_model_buffers", "repacked into '{}': only llama.cpp's AMX "
                          "buffers are modelled (hardware/llamacpp_buffers.h)", repacked_into));
  const bool amx = repacked_into == "AMX";
  LlamaCppModelBuffers b;
  uint64_t first = UINT64_MAX, last = 0;
  for (const GgufTensorExtent& t : tensors) {
    if (amx && t.matmul_weight && amx_takes(t.type, t.rows, t.row_length)) {
      b.repacked += amx_bytes(t.type, t.rows, t.row_length);
      continue;
    }
    first = std::min(first, t.offset);
    last = std::max(last, t.offset + t.bytes);
  }
  // The tied head: token_embd (the first tensor of our files) loaded again as output.
  if (amx && tied_output) {
    const GgufTensorExtent& e = tensors.front();
    b.repacked += amx_bytes(e.type, e.rows, e.row_length);
  }
  b.mapped = last > first ? last - first : 0;
  return b;
}

}  // namespace ac
