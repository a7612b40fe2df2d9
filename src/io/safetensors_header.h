// safetensors header and index validation, without torch (the fuzz targets link only this).
//
// Byte layout (https://github.com/huggingface/safetensors, "Format"):
//   [0, 8)        N: little-endian uint64, size of the JSON header
//   [8, 8+N)      UTF-8 JSON: {"__metadata__": {str: str}?,
//                              NAME: {"dtype": "F32"|"F16"|"BF16"|..., "shape": [..],
//                                     "data_offsets": [begin, end]}, ...}
//                 (may be padded with spaces)
//   [8+N, EOF)    tensor bytes; offsets are relative to 8+N, little-endian, row-major
// model.safetensors.index.json: {"metadata": {...}?, "weight_map": {NAME: "shard file", ...}}.
//
// Limits (hostile files; docs/formats.md "Limits"): N <= 100 MiB and <= file size - 8, at most
// 1,000,000 tensors, rank <= 8, every dim a non-negative integer whose product (ignoring zeros)
// fits int64, data_offsets two unsigned integers with begin <= end <= data size, end - begin ==
// numel * dtype size (no overflow), byte ranges tiling the data section exactly (no overlap, no
// gap, nothing after the last tensor), JSON nesting <= 64; index shard names plain file names.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ac {

inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100ull << 20;
inline constexpr size_t kSafetensorsMaxTensors = 1000000;
inline constexpr size_t kSafetensorsMaxRank = 8;

/// One tensor as the header describes it, offsets already checked against the file.
struct SafetensorsEntry {
  std::string dtype;           // "F64" "F32" "F16" "BF16" "I64" "I32" "I8" "U8" "BOOL"
  uint64_t element_bytes = 0;  // size of one element of `dtype`
  std::vector<int64_t> shape;  // row-major, torch order
  uint64_t begin = 0, end = 0;  // absolute file offsets of the bytes, [begin, end)
};

/// A validated header: every tensor by name and the optional __metadata__.
struct SafetensorsHeader {
  uint64_t header_bytes = 0;  // N
  std::map<std::string, SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;
};

/// Bytes of one element of a safetensors dtype name, 0 when the name is unknown.
uint64_t safetensors_dtype_bytes(const std::string& dtype);

/// Validates a whole safetensors file held in memory (`data`, `size` bytes; only the 8-byte
/// length and the header are read, the tensor bytes are only bounds-checked). `file` names
/// errors. Throws FormatError "[safetensors] FILE: ..." naming the tensor and field on any
/// violation of the layout or the limits above, e.g. "header length 4096 exceeds file size 100:
/// truncated?".
SafetensorsHeader parse_safetensors_header(const uint8_t* data, uint64_t size,
                                           const std::string& file);

/// Validates model.safetensors.index.json and groups the tensor names by shard file:
/// shard file name -> tensor names (sorted). Throws FormatError naming `file` and the field when
/// "weight_map" is missing, a shard is not a string or not a plain file name in the folder.
std::map<std::string, std::vector<std::string>> parse_safetensors_index(
    const nlohmann::json& index, const std::string& file);

}  // namespace ac
