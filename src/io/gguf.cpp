#include "io/gguf.h"

#include <cstring>
#include <set>

#include "common/error.h"
#include "io/gguf_quant.h"

namespace ac {

namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = kGgufMaxDims;

bool is_float(GgufType t) { return t == GgufType::FLOAT32 || t == GgufType::FLOAT64; }

/// The torch dtype a tensor of `t` is read as: quantized types are dequantized to float32.
at::ScalarType torch_dtype(GgmlType t) {
  switch (t) {
    case GgmlType::F16: return at::kHalf;
    case GgmlType::BF16: return at::kBFloat16;
    default: return at::kFloat;
  }
}

/// A tensor's bytes as the file stores them: the float types cast, Q8_0 / Q4_0 rows quantized
/// into a flat uint8 tensor of blocks. `where` names errors.
at::Tensor encode(const at::Tensor& t, GgmlType type, const std::string& where) {
  if (!ggml_is_quantized(type)) return t.to(torch_dtype(type)).contiguous();
  const int64_t block = ggml_block_values(type);
  if (t.dim() < 1 || t.size(-1) % block)
    throw ConfigError(msg("write_gguf", "{}: rows of {} values cannot be written as {}: blocks of "
                          "{} values (io/gguf_quant.h); write it as F16 instead", where,
                          t.dim() ? t.size(-1) : 0, ggml_type_name(type), block));
  const at::Tensor x = t.to(at::kFloat).contiguous();
  at::Tensor out = at::empty({int64_t(ggml_bytes(type, uint64_t(x.numel())))}, at::kByte);
  // Rows are whole blocks, so the tensor quantizes as one long row.
  const float* src = x.data_ptr<float>();
  if (type == GgmlType::Q8_0) quantize_row_q8_0(src, out.data_ptr<uint8_t>(), x.numel());
  else quantize_row_q4_0(src, out.data_ptr<uint8_t>(), x.numel());
  return out;
}

/// `numel` values of `type` stored at `bytes` -> float32 `out` (quantized types only).
void dequantize(GgmlType type, const char* bytes, int64_t numel, float* out) {
  const auto* in = reinterpret_cast<const uint8_t*>(bytes);
  if (type == GgmlType::Q8_0) dequantize_row_q8_0(in, out, numel);
  else dequantize_row_q4_0(in, out, numel);
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
    data.push_back(encode(t.data, t.type, path.string() + ": tensor '" + t.name + "'"));
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

GgufFile::GgufFile(const fs::path& path) : GgufFile(read_file(path), path.string()) {}

GgufFile::GgufFile(std::string bytes, std::string file)
    : file_(std::move(file)), bytes_(std::move(bytes)), layout_(parse_gguf(bytes_, file_)) {}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = layout_.kv_index.find(key);
  return it == layout_.kv_index.end() ? nullptr : &layout_.kv[it->second].second;
}

std::vector<std::string> GgufFile::tensor_names() const { return layout_.order; }

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

const GgufTensorInfo& GgufFile::info(const std::string& name) const {
  auto it = layout_.tensors.find(name);
  if (it == layout_.tensors.end())
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
  const GgufTensorInfo& i = info(name);
  at::Tensor t = at::empty(shape(name), torch_dtype(i.type));
  if (ggml_is_quantized(i.type))
    dequantize(i.type, bytes_.data() + i.offset, t.numel(), t.data_ptr<float>());
  else
    std::memcpy(t.data_ptr(), bytes_.data() + i.offset, i.bytes);
  return t;
}

at::Tensor ggml_round_trip(const at::Tensor& t, GgmlType type) {
  if (!ggml_is_quantized(type)) return t.to(torch_dtype(type)).to(at::kFloat);
  const at::Tensor bytes = encode(t, type, "ggml_round_trip");
  at::Tensor out = at::empty(t.sizes(), at::kFloat);
  dequantize(type, reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()), out.numel(),
             out.data_ptr<float>());
  return out;
}

}  // namespace ac
