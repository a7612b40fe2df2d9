#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/json_io.h"
#include "io/safetensors_header.h"

namespace ac {

namespace {

struct DtypeInfo {
  const char* name;
  at::ScalarType type;
  uint64_t bytes;
};
const DtypeInfo kDtypes[] = {
    {"F64", at::kDouble, 8}, {"F32", at::kFloat, 4}, {"F16", at::kHalf, 2},
    {"BF16", at::kBFloat16, 2}, {"I64", at::kLong, 8}, {"I32", at::kInt, 4},
    {"I8", at::kChar, 1},    {"U8", at::kByte, 1},   {"BOOL", at::kBool, 1},
};

const DtypeInfo* dtype_by_name(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

const DtypeInfo& dtype_by_type(at::ScalarType t, const std::string& tensor) {
  for (const auto& d : kDtypes)
    if (d.type == t) return d;
  throw ConfigError(msg("save_safetensors", "tensor '{}': dtype {} has no safetensors code",
                        tensor, c10::toString(t)));
}

std::string file_name(const fs::path& p) { return p.filename().string(); }

/// Maps the whole file privately (copy-on-write: a tensor written in place never reaches the
/// file) and returns the mapping, unmapped when the last owner lets go.
std::shared_ptr<void> map_file(const fs::path& path, uint64_t* size) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    throw FormatError(msg("safetensors", "{}: cannot open ({})", path.string(),
                          std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw FormatError(msg("safetensors", "{}: not a regular file", path.string()));
  }
  *size = uint64_t(st.st_size);
  if (*size < 8) {
    ::close(fd);
    throw FormatError(msg("safetensors", "{}: file is {} bytes, shorter than the 8-byte header "
                          "length: truncated?", path.string(), *size));
  }
  void* p = ::mmap(nullptr, *size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    throw FormatError(msg("safetensors", "{}: mmap failed ({})", path.string(),
                          std::strerror(errno)));
  const uint64_t n = *size;
  return std::shared_ptr<void>(p, [n](void* q) { ::munmap(q, n); });
}

}  // namespace

SafetensorsFile::SafetensorsFile(const fs::path& path) : path_(path) {
  map_ = map_file(path, &size_);
  SafetensorsHeader h =
      parse_safetensors_header(static_cast<const uint8_t*>(map_.get()), size_, path.string());
  metadata_ = std::move(h.metadata);
  for (auto& [name, t] : h.tensors) {
    const DtypeInfo* dt = dtype_by_name(t.dtype);
    AC_CHECK(dt && dt->bytes == t.element_bytes, "dtype {} of the header parser", t.dtype);
    entries_.emplace(name, Entry{dt->type, std::move(t.shape), t.begin, t.end});
  }
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

bool SafetensorsFile::contains(const std::string& name) const { return entries_.count(name) > 0; }

std::vector<int64_t> SafetensorsFile::shape(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end())
    throw FormatError(msg("safetensors", "{}: no tensor '{}'", path_.string(), name));
  return it->second.shape;
}

at::Tensor SafetensorsFile::get(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end())
    throw FormatError(msg("safetensors", "{}: no tensor '{}'", path_.string(), name));
  const Entry& e = it->second;
  auto* data = static_cast<uint8_t*>(map_.get()) + e.begin;
  std::shared_ptr<void> keep = map_;
  return at::from_blob(data, e.shape, [keep](void*) mutable { keep.reset(); },
                       at::TensorOptions().dtype(e.dtype));
}

namespace {

std::string header_json(const TensorMap& tensors, const std::map<std::string, std::string>& meta,
                        std::vector<at::Tensor>* contiguous) {
  json header = json::object();
  if (!meta.empty()) header["__metadata__"] = meta;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (!t.defined())
      throw ConfigError(msg("save_safetensors", "tensor '{}' is undefined", name));
    const DtypeInfo& dt = dtype_by_type(t.scalar_type(), name);
    at::Tensor c = t.to(at::kCPU).contiguous();
    const uint64_t nbytes = uint64_t(c.numel()) * dt.bytes;
    header[name] = {{"dtype", dt.name},
                    {"shape", c.sizes().vec()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    contiguous->push_back(std::move(c));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // tensor data starts 8-byte aligned
  return text;
}

void write_all(int fd, const void* data, size_t n, const fs::path& path) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w <= 0)
      throw FormatError(msg("save_safetensors", "{}: write failed ({})", path.string(),
                            std::strerror(errno)));
    p += w;
    n -= size_t(w);
  }
}

}  // namespace

void save_safetensors(const fs::path& path, const TensorMap& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Streamed tensor by tensor to a temporary file, then renamed: peak memory is one tensor.
  std::vector<at::Tensor> data;
  const std::string header = header_json(tensors, metadata, &data);
  fs::path tmp = path;
  tmp += fmt::format(".tmp-{}", ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    throw FormatError(msg("save_safetensors", "{}: cannot create ({}); does the folder exist?",
                          path.string(), std::strerror(errno)));
  try {
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
    write_all(fd, len, 8, path);
    write_all(fd, header.data(), header.size(), path);
    for (const auto& t : data) write_all(fd, t.data_ptr(), t.nbytes(), path);
    if (::fsync(fd) != 0)
      throw FormatError(msg("save_safetensors", "{}: fsync failed ({})", path.string(),
                            std::strerror(errno)));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw FormatError(msg("save_safetensors", "{}: rename failed ({})", path.string(),
                          ec.message()));
  }
}

namespace {

TensorMap load_sharded(const fs::path& dir, const fs::path& index_path) {
  const std::map<std::string, std::vector<std::string>> by_shard =
      parse_safetensors_index(read_json_file(index_path), index_path.string());
  TensorMap out;
  for (const auto& [shard, names] : by_shard) {
    const fs::path p = dir / shard;
    std::error_code ec;
    if (!fs::is_regular_file(p, ec))
      throw FormatError(msg("load_safetensors", "{}: shard '{}' listed in {} does not exist",
                            p.string(), shard, file_name(index_path)));
    SafetensorsFile file(p);
    for (const auto& name : names) {
      if (!file.contains(name))
        throw FormatError(msg("load_safetensors", "{}: tensor '{}' listed in {} is not in the "
                              "shard", p.string(), name, file_name(index_path)));
      out[name] = file.get(name);
    }
  }
  return out;
}

}  // namespace

TensorMap load_safetensors_dir(const fs::path& dir) {
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index)) return load_sharded(dir, index);
  const fs::path single = dir / "model.safetensors";
  if (!fs::exists(single))
    throw FormatError(msg("load_safetensors", "{}: neither model.safetensors nor "
                          "model.safetensors.index.json found", dir.string()));
  SafetensorsFile file(single);
  TensorMap out;
  for (const auto& name : file.names()) out[name] = file.get(name);
  return out;
}

}  // namespace ac
