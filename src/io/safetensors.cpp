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

namespace ac {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr size_t kMaxTensors = 1000000;
constexpr size_t kMaxRank = 8;

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

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const fs::path& path) : path_(path) {
  map_ = map_file(path, &size_);
  const std::string f = path.string();
  const auto* base = static_cast<const uint8_t*>(map_.get());
  const uint64_t header_len = read_u64_le(base);
  if (header_len > kMaxHeaderBytes)
    throw FormatError(msg("safetensors", "{}: header length {} exceeds the {} byte limit: "
                          "corrupt or not a safetensors file?", f, header_len, kMaxHeaderBytes));
  if (header_len > size_ - 8)
    throw FormatError(msg("safetensors", "{}: header length {} exceeds file size {}: truncated?",
                          f, header_len, size_));
  json header;
  try {
    header = json::parse(base + 8, base + 8 + header_len);
  } catch (const json::exception& e) {
    throw FormatError(msg("safetensors", "{}: header is not valid JSON: {}", f, e.what()));
  }
  if (!header.is_object())
    throw FormatError(msg("safetensors", "{}: header is a JSON {}, expected an object", f,
                          header.type_name()));
  if (header.size() > kMaxTensors + 1)
    throw FormatError(msg("safetensors", "{}: {} header entries, more than the limit {}", f,
                          header.size(), kMaxTensors));

  const uint64_t data_begin = 8 + header_len, data_len = size_ - data_begin;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object())
        throw FormatError(msg("safetensors", "{}: __metadata__ is not an object", f));
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string())
          throw FormatError(msg("safetensors", "{}: __metadata__['{}'] is {}, expected a string",
                                f, k, s.dump()));
        metadata_[k] = s.get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& what) {
      return FormatError(msg("safetensors", "{}: tensor '{}': {}", f, name, what));
    };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      throw bad("entry must be an object with dtype, shape and data_offsets, found " +
                v.dump().substr(0, 200));
    if (!v["dtype"].is_string()) throw bad("dtype is " + v["dtype"].dump() + ", expected a string");
    const std::string dtype_name = v["dtype"].get<std::string>();
    const DtypeInfo* dt = dtype_by_name(dtype_name);
    if (!dt)
      throw bad(fmt::format("unknown dtype '{}' (known: F64 F32 F16 BF16 I64 I32 I8 U8 BOOL)",
                            dtype_name));
    const json& sh = v["shape"];
    if (!sh.is_array() || sh.size() > kMaxRank)
      throw bad(fmt::format("shape {} must be an array of at most {} dims", sh.dump(), kMaxRank));
    Entry e;
    e.dtype = dt->type;
    uint64_t numel = 1, extent = 1;  // extent ignores zero dims, so strides cannot overflow
    for (const auto& d : sh) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        throw bad(fmt::format("shape {} has a dim that is not a non-negative integer", sh.dump()));
      const uint64_t dim = d.get<uint64_t>();
      if (__builtin_mul_overflow(extent, std::max<uint64_t>(dim, 1), &extent) ||
          extent > uint64_t(INT64_MAX))
        throw bad(fmt::format("shape {} overflows", sh.dump()));
      numel *= dim;
      e.shape.push_back(int64_t(dim));
    }
    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      throw bad(fmt::format("data_offsets {} must be two non-negative integers", off.dump()));
    const uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (b > en || en > data_len)
      throw bad(fmt::format("data_offsets [{}, {}] outside the data section of {} bytes: "
                            "truncated?", b, en, data_len));
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(numel, dt->bytes, &nbytes) || nbytes != en - b)
      throw bad(fmt::format("shape {} x {} needs {} bytes but data_offsets [{}, {}] hold {}",
                            sh.dump(), dtype_name, nbytes, b, en, en - b));
    e.begin = data_begin + b;
    e.end = data_begin + en;
    entries_.emplace(name, std::move(e));
  }

  // The byte ranges, sorted, must tile the data section exactly (as the reference reader
  // requires): no overlap, no gap, nothing past the last tensor.
  std::vector<std::pair<uint64_t, std::string>> order;
  for (const auto& [name, e] : entries_) order.emplace_back(e.begin, name);
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : entries_[a.second].end < entries_[b.second].end;
  });
  uint64_t pos = data_begin;
  std::string prev = "(start of data)";
  for (const auto& [begin, name] : order) {
    const Entry& e = entries_[name];
    if (begin < pos)
      throw FormatError(msg("safetensors", "{}: tensor '{}' (bytes [{}, {})) overlaps '{}', which "
                            "ends at {}", f, name, e.begin - data_begin, e.end - data_begin, prev,
                            pos - data_begin));
    if (begin > pos)
      throw FormatError(msg("safetensors", "{}: gap of {} bytes before tensor '{}' at data offset "
                            "{}", f, begin - pos, name, begin - data_begin));
    pos = e.end;
    prev = name;
  }
  if (pos != size_)
    throw FormatError(msg("safetensors", "{}: {} bytes after the last tensor: the header "
                          "describes {} data bytes, the file has {}", f, size_ - pos,
                          pos - data_begin, data_len));
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
  const json index = read_json_file(index_path);
  const std::string idx = index_path.string();
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw FormatError(msg("load_safetensors", "{}: missing object field 'weight_map'", idx));
  std::map<std::string, std::vector<std::string>> by_shard;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string())
      throw FormatError(msg("load_safetensors", "{}: weight_map['{}'] is {}, expected a file name",
                            idx, name, shard.dump()));
    const std::string s = shard.get<std::string>();
    if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..")
      throw FormatError(msg("load_safetensors", "{}: weight_map['{}'] = '{}' is not a plain file "
                            "name in the checkpoint folder", idx, name, s));
    by_shard[s].push_back(name);
  }
  TensorMap out;
  for (const auto& [shard, names] : by_shard) {
    const fs::path p = dir / shard;
    if (!fs::exists(p))
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
