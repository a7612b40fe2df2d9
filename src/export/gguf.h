// GGUF (version 3) reader and writer: the container llama.cpp loads.
//
// Byte layout (ggml docs/gguf.md; ggml/src/gguf.cpp gguf_init_from_file_impl), all little-endian:
//   [0, 4)    magic "GGUF" (bytes 0x47 0x47 0x55 0x46)
//   [4, 8)    uint32 version = 3
//   [8, 16)   uint64 tensor_count
//   [16, 24)  uint64 metadata_kv_count
//   then metadata_kv_count key/value pairs:
//     string key; uint32 value_type; value
//       string = uint64 length + that many UTF-8 bytes (no terminator)
//       value_type: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool (1 byte), 8 string,
//                   9 array (uint32 element type, uint64 count, elements), 10 u64, 11 i64, 12 f64
//   then tensor_count tensor infos:
//     string name; uint32 n_dims (<= 4); uint64 ne[n_dims]; uint32 ggml_type; uint64 offset
//       ne is ggml order: ne[0] is the fastest-moving (innermost) dimension, i.e. the torch
//       shape REVERSED: a torch [F, D] weight (row-major) has ne = {D, F}.
//       ggml_type here: 0 F32, 1 F16, 30 BF16. offset is relative to the data section.
//   padding with 0x00 to a multiple of `general.alignment` (uint32 key; 32 when absent)
//   data section: each tensor's bytes at its offset (a multiple of the alignment), in info
//     order, each followed by zero padding to the alignment (llama.cpp checks this packing).
// Limits enforced on read (hostile files): strings <= 64 MiB, arrays <= 2^28 elements,
// <= 65,536 keys and tensors, n_dims <= 4, every offset and size inside the file, no overflow.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/fs.h"

namespace ac {

/// GGUF metadata value types (gguf.h enum gguf_type).
enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

/// Tensor element types we read and write (ggml.h enum ggml_type).
enum class GgmlType : uint32_t { F32 = 0, F16 = 1, BF16 = 30 };

/// "f32" | "f16" | "bf16" -> GgmlType; throws ConfigError otherwise.
GgmlType ggml_type_from_string(const std::string& s);
const char* ggml_type_name(GgmlType t);

/// One metadata value: a scalar (one element) or an array of `type` elements.
/// Integers are held as int64 (uint64 values above 2^63 are rejected on read), floats as double.
struct GgufValue {
  GgufType type = GgufType::UINT32;  // element type (never ARRAY; see is_array)
  bool is_array = false;
  std::vector<int64_t> ints;         // integer and bool types
  std::vector<double> floats;        // FLOAT32 / FLOAT64
  std::vector<std::string> strings;  // STRING

  static GgufValue u32(int64_t v);
  static GgufValue f32(double v);
  static GgufValue boolean(bool v);
  static GgufValue str(std::string v);
  static GgufValue i32_array(const std::vector<int64_t>& v);
  static GgufValue f32_array(const std::vector<double>& v);
  static GgufValue str_array(std::vector<std::string> v);
  size_t size() const;
};

/// Metadata in file order.
using GgufMetadata = std::vector<std::pair<std::string, GgufValue>>;

/// A tensor to write: torch order shape, converted to `type` on write (1-D tensors should be
/// F32: llama.cpp's norms are F32 in every converter).
struct GgufTensorOut {
  std::string name;
  at::Tensor data;  // any float dtype, any layout; written row-major as `type`
  GgmlType type = GgmlType::F32;
};

/// Writes a GGUF v3 file atomically. `general.alignment` from `kv` is used when present
/// (must be a power of two); otherwise 32 and the key is not written.
/// Throws ConfigError on duplicate keys or tensor names, a tensor of rank > 4 or an empty name.
void write_gguf(const fs::path& path, const GgufMetadata& kv,
                const std::vector<GgufTensorOut>& tensors);

/// A GGUF file read into memory and validated (see the limits above).
class GgufFile {
 public:
  /// Throws FormatError "[gguf] FILE: ..." naming the offset and the field on any violation,
  /// e.g. "tensor 'blk.0.attn_q.weight' data [offset 64, 1200) exceeds the file (1000 bytes):
  /// truncated?".
  explicit GgufFile(const fs::path& path);

  const std::string& file() const { return file_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const GgufMetadata& metadata() const { return kv_; }
  const GgufValue* find(const std::string& key) const;
  bool has_tensor(const std::string& name) const { return tensors_.count(name) > 0; }
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
  /// The tensor in its stored dtype (float, half or bfloat16), torch order, owning its memory.
  at::Tensor tensor(const std::string& name) const;

 private:
  struct Info {
    std::vector<int64_t> ne;
    GgmlType type;
    uint64_t offset;  // absolute
    uint64_t bytes;
  };
  const Info& info(const std::string& name) const;
  std::string file_;
  std::string bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  GgufMetadata kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<std::string> order_;
  std::map<std::string, Info> tensors_;
};

}  // namespace ac
