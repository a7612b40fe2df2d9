// GGUF (version 3) reader and writer: the container llama.cpp loads.
//
// The byte layout, the value types and the limits enforced on read are in io/gguf_format.h
// (torch-free, so that the fuzz targets build without torch), the Q8_0 / Q4_0 blocks in
// io/gguf_quant.h; this file adds the writer and access to the tensors as torch tensors.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/fs.h"
#include "io/gguf_format.h"

namespace ac {

/// A tensor to write: torch order shape, converted to `type` on write (1-D tensors should be
/// F32: llama.cpp's norms are F32 in every converter). Q8_0 / Q4_0 quantize each row (the last
/// torch dimension, ggml's ne[0]) in blocks of 32 from its float32 values.
struct GgufTensorOut {
  std::string name;
  at::Tensor data;  // any float dtype, any layout; written row-major as `type`
  GgmlType type = GgmlType::F32;
};

/// Writes a GGUF v3 file atomically. `general.alignment` from `kv` is used when present
/// (must be a power of two); otherwise 32 and the key is not written.
/// Throws ConfigError on duplicate keys or tensor names, a tensor of rank > 4, an empty name, or
/// a Q8_0 / Q4_0 tensor whose last dimension is not a multiple of 32.
void write_gguf(const fs::path& path, const GgufMetadata& kv,
                const std::vector<GgufTensorOut>& tensors);

/// A GGUF file read into memory and validated (see the limits above).
class GgufFile {
 public:
  /// Reads the file and validates it (parse_gguf). Throws FormatError "[gguf] FILE: ..." naming
  /// the offset and the field on any violation, e.g. "tensor 'blk.0.attn_q.weight' data
  /// [offset 64, 1200) exceeds the file (1000 bytes): truncated?".
  explicit GgufFile(const fs::path& path);
  /// The same from bytes already in memory; `file` names errors.
  GgufFile(std::string bytes, std::string file);

  const std::string& file() const { return file_; }
  uint32_t version() const { return layout_.version; }
  uint64_t alignment() const { return layout_.alignment; }
  const GgufMetadata& metadata() const { return layout_.kv; }
  const GgufValue* find(const std::string& key) const;
  bool has_tensor(const std::string& name) const { return layout_.tensors.count(name) > 0; }
  std::vector<std::string> tensor_names() const;  // in file order

  /// Typed getters. Throw FormatError naming the key on absence or a wrong type/shape.
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  /// A per-layer value: an array of exactly `n` integers, or one integer repeated n times.
  std::vector<int64_t> get_int_or_array(const std::string& key, int64_t n) const;

  /// ne as stored (ggml order, innermost first), e.g. {D, F} for a torch [F, D] weight.
  std::vector<int64_t> ggml_ne(const std::string& name) const;
  /// Torch-order shape (ne reversed).
  std::vector<int64_t> shape(const std::string& name) const;
  GgmlType type(const std::string& name) const;
  /// Absolute file offset of a tensor's first byte.
  uint64_t data_offset(const std::string& name) const;
  /// The tensor in its stored dtype (float, half or bfloat16), torch order, owning its memory;
  /// Q8_0 and Q4_0 tensors dequantized to float32 (ggml dequantize_row_q8_0 / _q4_0).
  at::Tensor tensor(const std::string& name) const;

 private:
  const GgufTensorInfo& info(const std::string& name) const;
  std::string file_;
  std::string bytes_;
  GgufLayout layout_;
};

/// The float32 values `t` reads back as once written as `type`: cast (F32, F16, BF16) or
/// quantized and dequantized row by row (Q8_0, Q4_0; the last dimension a multiple of 32,
/// ConfigError otherwise). Same shape as `t`, float32.
at::Tensor ggml_round_trip(const at::Tensor& t, GgmlType type);

}  // namespace ac
