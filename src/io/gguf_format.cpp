#include "io/gguf_format.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "common/error.h"
#include "io/gguf_quant.h"

namespace ac {

namespace {

constexpr uint32_t kVersion = 3;

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

bool is_known(uint32_t t) { return t <= uint32_t(GgufType::FLOAT64); }

bool is_known_tensor_type(uint32_t t) {
  for (GgmlType k : {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::BF16})
    if (t == uint32_t(k)) return true;
  return false;
}

uint64_t pad_to(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }

/// Little-endian fields of the file, with the offset at hand for error messages. `what` and
/// `key` name the field; the message is only formatted on failure (arrays can be long).
struct In {
  std::string_view b;
  const std::string& file;
  uint64_t off = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw FormatError(msg("gguf", "{}: at byte {}: {}", file, off, what));
  }
  void need(uint64_t n, const char* what, const std::string& key = {}) const {
    if (b.size() - off < n)
      fail(fmt::format("truncated reading {}{} ({} bytes needed, {} left)", what,
                       key.empty() ? "" : " of '" + key + "'", n, b.size() - off));
  }
  template <typename T>
  T pod(const char* what, const std::string& key = {}) {
    need(sizeof(T), what, key);
    T v;
    std::memcpy(&v, b.data() + off, sizeof(T));
    off += sizeof(T);
    return v;
  }
  std::string str(const char* what, const std::string& key = {}) {
    const auto n = pod<uint64_t>(what, key);
    if (n > kGgufMaxString)
      fail(fmt::format("{}{} has length {} (limit {})", what,
                       key.empty() ? "" : " of '" + key + "'", n, kGgufMaxString));
    need(n, what, key);
    std::string s(b.data() + off, n);
    off += n;
    return s;
  }
  void element(GgufType t, GgufValue& v, const std::string& key) {
    switch (t) {
      case GgufType::UINT8: v.ints.push_back(pod<uint8_t>("u8 value", key)); break;
      case GgufType::INT8: v.ints.push_back(pod<int8_t>("i8 value", key)); break;
      case GgufType::BOOL: {
        const auto x = pod<uint8_t>("bool value", key);
        if (x > 1) fail(fmt::format("key '{}': bool value {} is neither 0 nor 1", key, x));
        v.ints.push_back(x);
        break;
      }
      case GgufType::UINT16: v.ints.push_back(pod<uint16_t>("u16 value", key)); break;
      case GgufType::INT16: v.ints.push_back(pod<int16_t>("i16 value", key)); break;
      case GgufType::UINT32: v.ints.push_back(pod<uint32_t>("u32 value", key)); break;
      case GgufType::INT32: v.ints.push_back(pod<int32_t>("i32 value", key)); break;
      case GgufType::UINT64: {
        const auto x = pod<uint64_t>("u64 value", key);
        if (x > uint64_t(INT64_MAX)) fail(fmt::format("key '{}': u64 value {} too large", key, x));
        v.ints.push_back(int64_t(x));
        break;
      }
      case GgufType::INT64: v.ints.push_back(pod<int64_t>("i64 value", key)); break;
      case GgufType::FLOAT32: v.floats.push_back(pod<float>("f32 value", key)); break;
      case GgufType::FLOAT64: v.floats.push_back(pod<double>("f64 value", key)); break;
      case GgufType::STRING: v.strings.push_back(str("string value", key)); break;
      default: fail(fmt::format("key '{}': unknown value type {}", key, uint32_t(t)));
    }
  }
  GgufValue value(const std::string& key) {
    GgufValue v;
    const auto raw = pod<uint32_t>("value type", key);
    if (!is_known(raw))
      fail(fmt::format("key '{}': unknown value type {} (known: 0..12)", key, raw));
    auto t = GgufType(raw);
    uint64_t n = 1;
    if (t == GgufType::ARRAY) {
      v.is_array = true;
      const auto raw_elem = pod<uint32_t>("array element type", key);
      if (!is_known(raw_elem))
        fail(fmt::format("key '{}': unknown array element type {} (known: 0..12)", key,
                         raw_elem));
      t = GgufType(raw_elem);
      n = pod<uint64_t>("array length", key);
      if (t == GgufType::ARRAY) fail(fmt::format("key '{}': nested arrays are not supported", key));
      if (n > kGgufMaxArray)
        fail(fmt::format("key '{}': array length {} (limit {})", key, n, kGgufMaxArray));
      // Each element takes at least its fixed size (a string its 8-byte length): a length the
      // rest of the file cannot hold is rejected before anything is allocated.
      const uint64_t min_bytes = t == GgufType::STRING ? 8 : scalar_bytes(t);
      need(n * min_bytes, "array elements", key);
      if (t == GgufType::STRING) v.strings.reserve(n);
      else if (is_float(t)) v.floats.reserve(n);
      else v.ints.reserve(n);
    }
    v.type = t;
    for (uint64_t i = 0; i < n; ++i) element(t, v, key);
    return v;
  }
};

/// One tensor info (name, n_dims, ne, type, offset relative to the data section).
std::pair<std::string, GgufTensorInfo> tensor_info(In& in, uint64_t alignment) {
  std::string name = in.str("tensor name");
  const auto n_dims = in.pod<uint32_t>("tensor n_dims", name);
  if (n_dims < 1 || n_dims > kGgufMaxDims)
    in.fail(fmt::format("tensor '{}' has {} dimensions, expected 1..{}", name, n_dims,
                        kGgufMaxDims));
  GgufTensorInfo info;
  uint64_t numel = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const auto ne = in.pod<uint64_t>("tensor ne", name);
    if (ne == 0 || ne > kGgufMaxElements || numel > kGgufMaxElements / ne)
      in.fail(fmt::format("tensor '{}' ne[{}] is {}: expected 1..2^40 with at most 2^40 "
                          "elements in all", name, d, ne));
    numel *= ne;
    info.ne.push_back(int64_t(ne));
  }
  const auto type = in.pod<uint32_t>("tensor type", name);
  if (!is_known_tensor_type(type))
    in.fail(fmt::format("tensor '{}' has ggml type {}; F32 (0), F16 (1), Q4_0 (2), Q8_0 (8) and "
                        "BF16 (30) are read (other quantizations are not supported)", name, type));
  info.type = GgmlType(type);
  if (info.ne[0] % ggml_block_values(info.type))
    in.fail(fmt::format("tensor '{}' of type {} has rows of ne[0] = {} values, not a multiple of "
                        "its block size {}", name, ggml_type_name(info.type), info.ne[0],
                        ggml_block_values(info.type)));
  info.offset = in.pod<uint64_t>("tensor offset", name);
  if (info.offset % alignment)
    in.fail(fmt::format("tensor '{}' offset {} is not a multiple of the alignment {}", name,
                        info.offset, alignment));
  info.bytes = ggml_bytes(info.type, numel);
  return {std::move(name), info};
}

/// Tensor byte ranges must lie inside the file and must not overlap one another.
void place_tensors(GgufLayout& g, std::vector<std::pair<std::string, GgufTensorInfo>>& infos,
                   uint64_t file_bytes, const std::string& file) {
  for (auto& [name, info] : infos) {
    const uint64_t room = file_bytes - g.data_start;  // data_start <= file_bytes (checked)
    if (info.offset > room || room - info.offset < info.bytes)
      throw FormatError(msg("gguf", "{}: tensor '{}' data [{}, {}) exceeds the file ({} bytes): "
                            "truncated?", file, name, g.data_start + info.offset,
                            g.data_start + info.offset + info.bytes, file_bytes));
    info.offset += g.data_start;
  }
  std::vector<const std::pair<std::string, GgufTensorInfo>*> by_offset;
  for (const auto& p : infos) by_offset.push_back(&p);
  // Stable: of two tensors at one offset, the later one in the file is named as overlapping.
  std::stable_sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return a->second.offset < b->second.offset;
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto& prev = *by_offset[i - 1];
    const auto& cur = *by_offset[i];
    if (cur.second.offset < prev.second.offset + prev.second.bytes)
      throw FormatError(msg("gguf", "{}: tensor '{}' data [{}, {}) overlaps tensor '{}' [{}, {})",
                            file, cur.first, cur.second.offset,
                            cur.second.offset + cur.second.bytes, prev.first, prev.second.offset,
                            prev.second.offset + prev.second.bytes));
  }
  for (auto& [name, info] : infos) g.tensors.emplace(name, info);
}

}  // namespace

namespace {
const std::pair<GgmlType, const char*> kDtypeStrings[] = {
    {GgmlType::F32, "f32"}, {GgmlType::F16, "f16"}, {GgmlType::BF16, "bf16"},
    {GgmlType::Q8_0, "q8_0"}, {GgmlType::Q4_0, "q4_0"}};
}  // namespace

GgmlType ggml_type_from_string(const std::string& s) {
  for (const auto& [type, name] : kDtypeStrings)
    if (s == name) return type;
  throw ConfigError(msg("gguf", "dtype '{}' is not supported: expected f32, f16, bf16, q8_0 or "
                        "q4_0", s));
}

const char* ggml_dtype_string(GgmlType t) {
  for (const auto& [type, name] : kDtypeStrings)
    if (t == type) return name;
  return "?";
}

const char* ggml_type_name(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return "F32";
    case GgmlType::F16: return "F16";
    case GgmlType::Q4_0: return "Q4_0";
    case GgmlType::Q8_0: return "Q8_0";
    case GgmlType::BF16: return "BF16";
  }
  return "?";
}

bool ggml_is_quantized(GgmlType t) { return t == GgmlType::Q8_0 || t == GgmlType::Q4_0; }

int64_t ggml_block_values(GgmlType t) {
  return t == GgmlType::Q8_0 ? kQ8_0BlockValues : t == GgmlType::Q4_0 ? kQ4_0BlockValues : 1;
}

int64_t ggml_block_bytes(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return 4;
    case GgmlType::F16: case GgmlType::BF16: return 2;
    case GgmlType::Q8_0: return kQ8_0BlockBytes;
    case GgmlType::Q4_0: return kQ4_0BlockBytes;
  }
  return 0;
}

uint64_t ggml_bytes(GgmlType t, uint64_t numel) {
  return numel / uint64_t(ggml_block_values(t)) * uint64_t(ggml_block_bytes(t));
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

GgufLayout parse_gguf(std::string_view bytes, const std::string& file) {
  GgufLayout g;
  In in{bytes, file};
  in.need(4, "magic");
  if (bytes.substr(0, 4) != "GGUF")
    in.fail(fmt::format("magic is {:?}, expected 'GGUF': not a GGUF file",
                        std::string(bytes.substr(0, 4))));
  in.off = 4;
  g.version = in.pod<uint32_t>("version");
  if (g.version != kVersion)
    in.fail(fmt::format("version {}, expected {} (GGUF v3)", g.version, kVersion));
  const auto n_tensors = in.pod<uint64_t>("tensor_count");
  const auto n_kv = in.pod<uint64_t>("metadata_kv_count");
  if (n_tensors > kGgufMaxCount || n_kv > kGgufMaxCount)
    in.fail(fmt::format("tensor_count {} / metadata_kv_count {} exceed the limit {}", n_tensors,
                        n_kv, kGgufMaxCount));
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = in.str("metadata key");
    if (g.kv_index.count(key)) in.fail(fmt::format("duplicate metadata key '{}'", key));
    GgufValue v = in.value(key);
    g.kv_index[key] = g.kv.size();
    g.kv.emplace_back(std::move(key), std::move(v));
  }
  if (auto it = g.kv_index.find("general.alignment"); it != g.kv_index.end()) {
    const GgufValue& a = g.kv[it->second].second;
    const int64_t x = a.ints.empty() ? 0 : a.ints[0];
    if (a.type != GgufType::UINT32 || a.is_array || x <= 0 || (x & (x - 1)))
      in.fail(fmt::format("general.alignment must be a power-of-two uint32, found {}", x));
    g.alignment = uint64_t(x);
  }
  std::vector<std::pair<std::string, GgufTensorInfo>> infos;
  std::set<std::string> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    auto info = tensor_info(in, g.alignment);
    if (!names.insert(info.first).second)
      in.fail(fmt::format("duplicate tensor name '{}'", info.first));
    g.order.push_back(info.first);
    infos.push_back(std::move(info));
  }
  g.data_start = pad_to(in.off, g.alignment);
  if (!infos.empty() && g.data_start > bytes.size())
    in.fail(fmt::format("the data section starts at {} (alignment {}), past the end of the file: "
                        "truncated?", g.data_start, g.alignment));
  place_tensors(g, infos, bytes.size(), file);
  return g;
}

}  // namespace ac
