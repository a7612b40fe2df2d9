// safetensors reader and writer.
//
// Byte layout (https://github.com/huggingface/safetensors, "Format"):
//   [0, 8)        N: little-endian uint64, size of the JSON header
//   [8, 8+N)      UTF-8 JSON: {"__metadata__": {str: str}?,
//                              NAME: {"dtype": "F32"|"F16"|"BF16"|..., "shape": [..],
//                                     "data_offsets": [begin, end]}, ...}
//                 (may be padded with spaces)
//   [8+N, EOF)    tensor bytes; offsets are relative to 8+N, little-endian, row-major
// Limits enforced on read (hostile files): header <= 100 MiB, <= 1,000,000 tensors, rank <= 8,
// offsets inside the file, not overlapping, byte length == numel * dtype size, no overflow.
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>

#include "common/fs.h"
#include "model/weights.h"

namespace ac {

/// A memory-mapped safetensors file. Tensors returned by `get` view the mapping (no copy)
/// and keep it alive.
class SafetensorsFile {
 public:
  /// Maps and validates the file. Throws FormatError naming the file and what is wrong, e.g.
  /// "[safetensors] model.safetensors: header length 4096 exceeds file size 100: truncated?"
  explicit SafetensorsFile(const fs::path& path);
  const fs::path& path() const { return path_; }
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  /// Shape of a tensor without reading it.
  std::vector<int64_t> shape(const std::string& name) const;
  /// The tensor in its stored dtype (F32/F16/BF16/I32/I64/...), viewing the mapping.
  at::Tensor get(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  struct Entry {
    at::ScalarType dtype;
    std::vector<int64_t> shape;
    uint64_t begin, end;  // absolute file offsets
  };
  fs::path path_;
  std::shared_ptr<void> map_;  // munmap on last release
  uint64_t size_ = 0;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

/// Writes tensors (any of F32/F16/BF16/I32/I64, contiguous or not) atomically to `path`,
/// names sorted, 8-byte aligned data, optional __metadata__.
void save_safetensors(const fs::path& path, const TensorMap& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Loads every tensor of a checkpoint folder: `model.safetensors`, or the shards listed in
/// `model.safetensors.index.json` ("weight_map": name -> shard file). Tensors view the mappings.
/// Throws FormatError if the index names a missing shard or a tensor absent from its shard.
TensorMap load_safetensors_dir(const fs::path& dir);

}  // namespace ac
