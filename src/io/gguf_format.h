// GGUF (version 3) container types and the validating reader core, without torch (the fuzz
// targets link only this; io/gguf.h adds the writer and tensor access).
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
//       ggml_type here: 0 F32, 1 F16, 2 Q4_0, 8 Q8_0, 30 BF16. offset is relative to the data
//       section. A row (ne[0] values) of a block type is ne[0] / 32 blocks (io/gguf_quant.h),
//       so ne[0] must be a multiple of 32; a tensor's bytes are numel / block_values *
//       block_bytes (ggml.c type_traits: F32 1 value in 4 bytes, F16 and BF16 1 in 2, Q8_0 32 in
//       34, Q4_0 32 in 18).
//   padding with 0x00 to a multiple of `general.alignment` (uint32 key; 32 when absent)
//   data section: each tensor's bytes at its offset (a multiple of the alignment), in info
//     order, each followed by zero padding to the alignment (llama.cpp checks this packing).
// Limits enforced on read (hostile files; docs/formats.md "Limits"): keys, names and string
// values <= 64 MiB, arrays <= 2^28 elements (and no more than the bytes left could hold), no
// nested arrays, <= 65,536 keys and tensors, n_dims 1..4, each ne 1..2^40 with a product
// <= 2^40 elements, ne[0] a multiple of the type's block size (32 for Q8_0 and Q4_0),
// alignment a power-of-two uint32, every tensor offset a multiple of the alignment with its
// bytes inside the file, tensors not overlapping, unique keys and names.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ac {

/// GGUF metadata value types (gguf.h enum gguf_type).
enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

/// Tensor element types we read and write (ggml.h enum ggml_type).
enum class GgmlType : uint32_t { F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 8, BF16 = 30 };

/// "f32" | "f16" | "bf16" | "q8_0" | "q4_0" -> GgmlType; throws ConfigError otherwise.
GgmlType ggml_type_from_string(const std::string& s);
/// "F32", "F16", "Q4_0", "Q8_0", "BF16" (ggml_type_name).
const char* ggml_type_name(GgmlType t);
/// The --dtype spelling, "f32" ... "q4_0": the inverse of ggml_type_from_string.
const char* ggml_dtype_string(GgmlType t);
/// Q8_0 and Q4_0: values stored in blocks of 32 with a scale (io/gguf_quant.h).
bool ggml_is_quantized(GgmlType t);
/// Values per block: 1 for F32, F16, BF16; 32 for Q8_0, Q4_0 (ggml_blck_size).
int64_t ggml_block_values(GgmlType t);
/// Bytes per block: 4 F32, 2 F16 and BF16, 34 Q8_0, 18 Q4_0 (ggml_type_size).
int64_t ggml_block_bytes(GgmlType t);
/// Bytes of `numel` values (a multiple of the block size): numel / block values * block bytes.
uint64_t ggml_bytes(GgmlType t, uint64_t numel);

inline constexpr uint64_t kGgufMaxString = 64ull << 20;
inline constexpr uint64_t kGgufMaxArray = 1ull << 28;
inline constexpr uint64_t kGgufMaxCount = 1ull << 16;
inline constexpr uint32_t kGgufMaxDims = 4;
inline constexpr uint64_t kGgufMaxElements = 1ull << 40;

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

/// One tensor info, validated against the file.
struct GgufTensorInfo {
  std::vector<int64_t> ne;  // ggml order (innermost first), each >= 1
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;  // absolute file offset of the first byte
  uint64_t bytes = 0;   // ggml_bytes(type, numel)
};

/// Everything a GGUF file holds except the tensor bytes.
struct GgufLayout {
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_start = 0;  // absolute offset of the data section
  GgufMetadata kv;
  std::map<std::string, size_t> kv_index;  // key -> index into kv
  std::vector<std::string> order;          // tensor names in file order
  std::map<std::string, GgufTensorInfo> tensors;
};

/// Parses and validates a whole GGUF file held in memory (see the limits above); `file` names
/// errors. Throws FormatError "[gguf] FILE: at byte N: ..." naming the key or tensor, e.g.
/// "key 'general.name': unknown value type 13" or "tensor 'blk.0.attn_q.weight' data [64, 1200)
/// exceeds the file (1000 bytes): truncated?". Never reads outside `bytes`.
GgufLayout parse_gguf(std::string_view bytes, const std::string& file);

}  // namespace ac
