#include "export/gguf.h"

#include <cstring>
#include <set>

#include "common/error.h"

namespace ac {

namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint64_t kMaxString = 64ull << 20;
constexpr uint64_t kMaxArray = 1ull << 28;
constexpr uint64_t kMaxCount = 1ull << 16;
constexpr uint32_t kMaxDims = 4;

size_t scalar_bytes(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
    default: return 0;  // STRING, ARRAY: variable
  }
}

bool is_float(GgufType t) { return t == GgufType::FLOAT32 || t == GgufType::FLOAT64; }

size_t element_bytes(GgmlType t) { return t == GgmlType::F32 ? 4 : 2; }

at::ScalarType torch_dtype(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return at::kFloat;
    case GgmlType::F16: return at::kHalf;
    case GgmlType::BF16: return at::kBFloat16;
  }
  return at::kFloat;
}

uint64_t pad_to(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }

// ---------------------------------------------------------------------------------------------
// writer

struct Out {
  std::string b;
  template <typename T>
  void pod(T v) {
    b.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    b += s;
  }
  void element(GgufType t, const GgufValue& v, size_t i) {
    switch (t) {
      case GgufType::UINT8: pod<uint8_t>(uint8_t(v.ints[i])); break;
      case GgufType::INT8: pod<int8_t>(int8_t(v.ints[i])); break;
      case GgufType::BOOL: pod<uint8_t>(v.ints[i] ? 1 : 0); break;
      case GgufType::UINT16: pod<uint16_t>(uint16_t(v.ints[i])); break;
      case GgufType::INT16: pod<int16_t>(int16_t(v.ints[i])); break;
      case GgufType::UINT32: pod<uint32_t>(uint32_t(v.ints[i])); break;
      case GgufType::INT32: pod<int32_t>(int32_t(v.ints[i])); break;
      case GgufType::UINT64: pod<uint64_t>(uint64_t(v.ints[i])); break;
      case GgufType::INT64: pod<int64_t>(v.ints[i]); break;
      case GgufType::FLOAT32: pod<float>(float(v.floats[i])); break;
      case GgufType::FLOAT64: pod<double>(v.floats[i]); break;
      case GgufType::STRING: str(v.strings[i]); break;
      default: AC_CHECK(false, "bad gguf element type {}", uint32_t(t));
    }
  }
  void value(const GgufValue& v) {
    if (v.is_array) {
      pod<uint32_t>(uint32_t(GgufType::ARRAY));
      pod<uint32_t>(uint32_t(v.type));
      pod<uint64_t>(v.size());
    } else {
      AC_CHECK(v.size() == 1, "scalar gguf value holds {} elements", v.size());
      pod<uint32_t>(uint32_t(v.type));
    }
    for (size_t i = 0; i < v.size(); ++i) element(v.type, v, i);
  }
  void pad(uint64_t align) { b.append(pad_to(b.size(), align) - b.size(), '\0'); }
};

uint64_t alignment_of(const GgufMetadata& kv) {
  for (const auto& [k, v] : kv)
    if (k == "general.alignment") {
      const int64_t a = v.ints.empty() ? 0 : v.ints[0];
      if (v.type != GgufType::UINT32 || v.is_array || a <= 0 || (a & (a - 1)))
        throw ConfigError(msg("write_gguf", "general.alignment must be a power-of-two uint32, "
                              "found {}", a));
      return uint64_t(a);
    }
  return kDefaultAlignment;
}

}  // namespace

GgmlType ggml_type_from_string(const std::string& s) {
  if (s == "f32") return GgmlType::F32;
  if (s == "f16") return GgmlType::F16;
  if (s == "bf16") return GgmlType::BF16;
  throw ConfigError(msg("gguf", "dtype '{}' is not supported: expected f32, f16 or bf16", s));
}

const char* ggml_type_name(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return "F32";
    case GgmlType::F16: return "F16";
    case GgmlType::BF16: return "BF16";
  }
  return "?";
}

GgufValue GgufValue::u32(int64_t v) { return {GgufType::UINT32, false, {v}, {}, {}}; }
GgufValue GgufValue::f32(double v) { return {GgufType::FLOAT32, false, {}, {v}, {}}; }
GgufValue GgufValue::boolean(bool v) { return {GgufType::BOOL, false, {v ? 1 : 0}, {}, {}}; }
GgufValue GgufValue::str(std::string v) {
  return {GgufType::STRING, false, {}, {}, {std::move(v)}};
}
GgufValue GgufValue::i32_array(const std::vector<int64_t>& v) {
  return {GgufType::INT32, true, v, {}, {}};
}
GgufValue GgufValue::f32_array(const std::vector<double>& v) {
  return {GgufType::FLOAT32, true, {}, v, {}};
}
GgufValue GgufValue::str_array(std::vector<std::string> v) {
  return {GgufType::STRING, true, {}, {}, std::move(v)};
}
size_t GgufValue::size() const {
  return type == GgufType::STRING ? strings.size() : is_float(type) ? floats.size() : ints.size();
}

void write_gguf(const fs::path& path, const GgufMetadata& kv,
                const std::vector<GgufTensorOut>& tensors) {
  const uint64_t align = alignment_of(kv);
  std::set<std::string> seen;
  for (const auto& [k, v] : kv)
    if (!seen.insert(k).second)
      throw ConfigError(msg("write_gguf", "{}: duplicate metadata key '{}'", path.string(), k));
  seen.clear();
  Out o;
  o.b.append("GGUF", 4);
  o.pod<uint32_t>(kVersion);
  o.pod<uint64_t>(tensors.size());
  o.pod<uint64_t>(kv.size());
  for (const auto& [k, v] : kv) {
    o.str(k);
    o.value(v);
  }
  // Tensor data is converted first so that the infos can carry the final offsets.
  std::vector<at::Tensor> data;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name.empty() || !seen.insert(t.name).second)
      throw ConfigError(msg("write_gguf", "{}: empty or duplicate tensor name '{}'",
                            path.string(), t.name));
    if (!t.data.defined() || t.data.dim() < 1 || t.data.dim() > int64_t(kMaxDims))
      throw ConfigError(msg("write_gguf", "{}: tensor '{}' must have 1..4 dimensions",
                            path.string(), t.name));
    data.push_back(t.data.to(torch_dtype(t.type)).contiguous());
    o.str(t.name);
    o.pod<uint32_t>(uint32_t(t.data.dim()));
    for (int64_t d = t.data.dim() - 1; d >= 0; --d) o.pod<uint64_t>(uint64_t(t.data.size(d)));
    o.pod<uint32_t>(uint32_t(t.type));
    o.pod<uint64_t>(offset);
    offset += pad_to(data.back().nbytes(), align);
  }
  o.pad(align);
  o.b.reserve(o.b.size() + offset);
  for (const auto& d : data) {
    o.b.append(static_cast<const char*>(d.data_ptr()), d.nbytes());
    o.pad(align);
  }
  write_file_atomic(path, o.b);
}

// ---------------------------------------------------------------------------------------------
// reader

namespace {

struct In {
  const std::string& b;
  const std::string& file;
  uint64_t off = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw FormatError(msg("gguf", "{}: at byte {}: {}", file, off, what));
  }
  void need(uint64_t n, const char* what) const {
    if (b.size() - off < n)
      fail(fmt::format("truncated reading {} ({} bytes needed, {} left)", what, n,
                       b.size() - off));
  }
  template <typename T>
  T pod(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, b.data() + off, sizeof(T));
    off += sizeof(T);
    return v;
  }
  std::string str(const char* what) {
    const auto n = pod<uint64_t>(what);
    if (n > kMaxString) fail(fmt::format("{} has length {} (limit {})", what, n, kMaxString));
    need(n, what);
    std::string s(b.data() + off, n);
    off += n;
    return s;
  }
  void element(GgufType t, GgufValue& v, const std::string& key) {
    switch (t) {
      case GgufType::UINT8: v.ints.push_back(pod<uint8_t>("u8")); break;
      case GgufType::INT8: v.ints.push_back(pod<int8_t>("i8")); break;
      case GgufType::BOOL: {
        const auto x = pod<uint8_t>("bool");
        if (x > 1) fail(fmt::format("key '{}': bool value {} is neither 0 nor 1", key, x));
        v.ints.push_back(x);
        break;
      }
      case GgufType::UINT16: v.ints.push_back(pod<uint16_t>("u16")); break;
      case GgufType::INT16: v.ints.push_back(pod<int16_t>("i16")); break;
      case GgufType::UINT32: v.ints.push_back(pod<uint32_t>("u32")); break;
      case GgufType::INT32: v.ints.push_back(pod<int32_t>("i32")); break;
      case GgufType::UINT64: {
        const auto x = pod<uint64_t>("u64");
        if (x > uint64_t(INT64_MAX)) fail(fmt::format("key '{}': u64 value {} too large", key, x));
        v.ints.push_back(int64_t(x));
        break;
      }
      case GgufType::INT64: v.ints.push_back(pod<int64_t>("i64")); break;
      case GgufType::FLOAT32: v.floats.push_back(pod<float>("f32")); break;
      case GgufType::FLOAT64: v.floats.push_back(pod<double>("f64")); break;
      case GgufType::STRING: v.strings.push_back(str("string value")); break;
      default: fail(fmt::format("key '{}': unknown value type {}", key, uint32_t(t)));
    }
  }
  GgufValue value(const std::string& key) {
    GgufValue v;
    auto t = GgufType(pod<uint32_t>("value type"));
    uint64_t n = 1;
    if (t == GgufType::ARRAY) {
      v.is_array = true;
      t = GgufType(pod<uint32_t>("array element type"));
      n = pod<uint64_t>("array length");
      if (t == GgufType::ARRAY) fail(fmt::format("key '{}': nested arrays are not supported", key));
      if (n > kMaxArray) fail(fmt::format("key '{}': array length {} (limit {})", key, n, kMaxArray));
      // A cheap bound before reserving: each element takes at least its fixed size (or 8 bytes).
      const uint64_t min_bytes = t == GgufType::STRING ? 8 : scalar_bytes(t);
      if (min_bytes) need(n * min_bytes, "array elements");
    }
    v.type = t;
    for (uint64_t i = 0; i < n; ++i) element(t, v, key);
    return v;
  }
};

}  // namespace

GgufFile::GgufFile(const fs::path& path) : file_(path.string()), bytes_(read_file(path)) {
  In in{bytes_, file_};
  in.need(4, "magic");
  if (bytes_.compare(0, 4, "GGUF") != 0)
    in.fail(fmt::format("magic is '{}', expected 'GGUF': not a GGUF file",
                        fmt::format("{:?}", bytes_.substr(0, 4))));
  in.off = 4;
  version_ = in.pod<uint32_t>("version");
  if (version_ != kVersion)
    in.fail(fmt::format("version {}, expected {} (GGUF v3)", version_, kVersion));
  const auto n_tensors = in.pod<uint64_t>("tensor_count");
  const auto n_kv = in.pod<uint64_t>("metadata_kv_count");
  if (n_tensors > kMaxCount || n_kv > kMaxCount)
    in.fail(fmt::format("tensor_count {} / metadata_kv_count {} exceed the limit {}", n_tensors,
                        n_kv, kMaxCount));
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = in.str("metadata key");
    if (kv_index_.count(key)) in.fail(fmt::format("duplicate metadata key '{}'", key));
    GgufValue v = in.value(key);
    kv_index_[key] = kv_.size();
    kv_.emplace_back(std::move(key), std::move(v));
  }
  if (const GgufValue* a = find("general.alignment")) {
    const int64_t x = a->ints.empty() ? 0 : a->ints[0];
    if (a->type != GgufType::UINT32 || a->is_array || x <= 0 || (x & (x - 1)))
      in.fail(fmt::format("general.alignment must be a power-of-two uint32, found {}", x));
    alignment_ = uint64_t(x);
  }
  std::vector<std::pair<std::string, Info>> infos;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    std::string name = in.str("tensor name");
    if (tensors_.count(name)) in.fail(fmt::format("duplicate tensor name '{}'", name));
    const auto n_dims = in.pod<uint32_t>("n_dims");
    if (n_dims < 1 || n_dims > kMaxDims)
      in.fail(fmt::format("tensor '{}' has {} dimensions, expected 1..{}", name, n_dims, kMaxDims));
    Info info;
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const auto ne = in.pod<uint64_t>("tensor dimension");
      if (ne == 0 || ne > (1ull << 40) || numel > (1ull << 40) / ne)
        in.fail(fmt::format("tensor '{}' dimension {} is {}: out of range", name, d, ne));
      numel *= ne;
      info.ne.push_back(int64_t(ne));
    }
    const auto type = in.pod<uint32_t>("tensor type");
    if (type != uint32_t(GgmlType::F32) && type != uint32_t(GgmlType::F16) &&
        type != uint32_t(GgmlType::BF16))
      in.fail(fmt::format("tensor '{}' has ggml type {}; only F32 (0), F16 (1) and BF16 (30) are "
                          "read (quantized files are not supported)", name, type));
    info.type = GgmlType(type);
    info.offset = in.pod<uint64_t>("tensor offset");
    if (info.offset % alignment_)
      in.fail(fmt::format("tensor '{}' offset {} is not a multiple of the alignment {}", name,
                          info.offset, alignment_));
    info.bytes = numel * element_bytes(info.type);
    order_.push_back(name);
    infos.emplace_back(std::move(name), info);
  }
  const uint64_t data_start = pad_to(in.off, alignment_);
  for (auto& [name, info] : infos) {
    if (info.offset > bytes_.size() || bytes_.size() - info.offset < data_start ||
        bytes_.size() - data_start - info.offset < info.bytes)
      throw FormatError(msg("gguf", "{}: tensor '{}' data [{}, {}) exceeds the file ({} bytes): "
                            "truncated?", file_, name, data_start + info.offset,
                            data_start + info.offset + info.bytes, bytes_.size()));
    info.offset += data_start;
    tensors_.emplace(name, info);
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

std::vector<std::string> GgufFile::tensor_names() const { return order_; }

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) throw FormatError(msg("gguf", "{}: missing key '{}'", file_, key));
  if (v->is_array || is_float(v->type) || v->type == GgufType::STRING || v->ints.size() != 1)
    throw FormatError(msg("gguf", "{}: key '{}' must be one integer", file_, key));
  return v->ints[0];
}

double GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) throw FormatError(msg("gguf", "{}: missing key '{}'", file_, key));
  if (v->is_array || !is_float(v->type))
    throw FormatError(msg("gguf", "{}: key '{}' must be one float", file_, key));
  return v->floats[0];
}

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) throw FormatError(msg("gguf", "{}: missing key '{}'", file_, key));
  if (v->is_array || v->type != GgufType::STRING)
    throw FormatError(msg("gguf", "{}: key '{}' must be one string", file_, key));
  return v->strings[0];
}

std::vector<int64_t> GgufFile::get_int_or_array(const std::string& key, int64_t n) const {
  const GgufValue* v = find(key);
  if (!v) throw FormatError(msg("gguf", "{}: missing key '{}'", file_, key));
  if (!v->is_array) return std::vector<int64_t>(size_t(n), get_int(key));
  if (is_float(v->type) || v->type == GgufType::STRING || int64_t(v->ints.size()) != n)
    throw FormatError(msg("gguf", "{}: key '{}' must be {} integers (one per layer), found {} "
                          "elements", file_, key, n, v->size()));
  return v->ints;
}

const GgufFile::Info& GgufFile::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw FormatError(msg("gguf", "{}: missing tensor '{}'", file_, name));
  return it->second;
}

std::vector<int64_t> GgufFile::ggml_ne(const std::string& name) const { return info(name).ne; }

std::vector<int64_t> GgufFile::shape(const std::string& name) const {
  std::vector<int64_t> ne = info(name).ne;
  return {ne.rbegin(), ne.rend()};
}

GgmlType GgufFile::type(const std::string& name) const { return info(name).type; }

uint64_t GgufFile::data_offset(const std::string& name) const { return info(name).offset; }

at::Tensor GgufFile::tensor(const std::string& name) const {
  const Info& i = info(name);
  at::Tensor t = at::empty(shape(name), torch_dtype(i.type));
  std::memcpy(t.data_ptr(), bytes_.data() + i.offset, i.bytes);
  return t;
}

}  // namespace ac
