#include "io/safetensors_header.h"

#include <algorithm>

#include "common/error.h"
#include "common/json_io.h"

namespace ac {

namespace {

struct DtypeBytes {
  const char* name;
  uint64_t bytes;
};
const DtypeBytes kDtypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                              {"I32", 4}, {"I8", 1},  {"U8", 1},  {"BOOL", 1}};

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

/// One tensor entry of the header: dtype, shape and data_offsets, checked against the data
/// section [data_begin, data_begin + data_len).
SafetensorsEntry parse_entry(const std::string& name, const json& v, uint64_t data_begin,
                             uint64_t data_len, const std::string& f) {
  auto bad = [&](const std::string& what) {
    return FormatError(msg("safetensors", "{}: tensor '{}': {}", f, name, what));
  };
  if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
      !v.contains("data_offsets"))
    throw bad("entry must be an object with dtype, shape and data_offsets, found " +
              v.dump().substr(0, 200));
  if (!v["dtype"].is_string()) throw bad("dtype is " + v["dtype"].dump() + ", expected a string");
  SafetensorsEntry e;
  e.dtype = v["dtype"].get<std::string>();
  e.element_bytes = safetensors_dtype_bytes(e.dtype);
  if (!e.element_bytes)
    throw bad(fmt::format("unknown dtype '{}' (known: F64 F32 F16 BF16 I64 I32 I8 U8 BOOL)",
                          e.dtype.substr(0, 64)));
  const json& sh = v["shape"];
  if (!sh.is_array() || sh.size() > kSafetensorsMaxRank)
    throw bad(fmt::format("shape {} must be an array of at most {} dims",
                          sh.dump().substr(0, 200), kSafetensorsMaxRank));
  uint64_t numel = 1, extent = 1;  // extent ignores zero dims, so strides cannot overflow
  for (const auto& d : sh) {
    if (!d.is_number_unsigned())
      throw bad(fmt::format("shape {} has a dim that is not a non-negative integer", sh.dump()));
    const uint64_t dim = d.get<uint64_t>();
    if (__builtin_mul_overflow(extent, std::max<uint64_t>(dim, 1), &extent) ||
        extent > uint64_t(INT64_MAX))
      throw bad(fmt::format("shape {} overflows: more than 2^63 elements", sh.dump()));
    numel *= dim;
    e.shape.push_back(int64_t(dim));
  }
  const json& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
      !off[1].is_number_unsigned())
    throw bad(fmt::format("data_offsets {} must be two non-negative integers",
                          off.dump().substr(0, 200)));
  const uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
  if (b > en || en > data_len)
    throw bad(fmt::format("data_offsets [{}, {}] outside the data section of {} bytes: "
                          "truncated?", b, en, data_len));
  uint64_t nbytes = 0;
  const bool overflow = __builtin_mul_overflow(numel, e.element_bytes, &nbytes);
  if (overflow || nbytes != en - b)
    throw bad(fmt::format("shape {} x {} needs {} bytes but data_offsets [{}, {}] hold {}",
                          sh.dump(), e.dtype,
                          overflow ? std::string("more than 2^64") : std::to_string(nbytes),
                          b, en, en - b));
  e.begin = data_begin + b;
  e.end = data_begin + en;
  return e;
}

/// The byte ranges, sorted, must tile the data section exactly (as the reference reader
/// requires): no overlap, no gap, nothing past the last tensor.
void check_tiling(const SafetensorsHeader& h, uint64_t data_begin, uint64_t size,
                  const std::string& f) {
  std::vector<std::pair<const std::string*, const SafetensorsEntry*>> order;
  for (const auto& [name, e] : h.tensors) order.emplace_back(&name, &e);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second->begin != b.second->begin ? a.second->begin < b.second->begin
                                              : a.second->end < b.second->end;
  });
  uint64_t pos = data_begin;
  std::string prev = "(start of data)";
  for (const auto& [name, entry] : order) {
    const SafetensorsEntry& e = *entry;
    if (e.begin < pos)
      throw FormatError(msg("safetensors", "{}: tensor '{}' (bytes [{}, {})) overlaps '{}', which "
                            "ends at {}", f, *name, e.begin - data_begin, e.end - data_begin,
                            prev, pos - data_begin));
    if (e.begin > pos)
      throw FormatError(msg("safetensors", "{}: gap of {} bytes before tensor '{}' at data offset "
                            "{}", f, e.begin - pos, *name, e.begin - data_begin));
    pos = e.end;
    prev = *name;
  }
  if (pos != size)
    throw FormatError(msg("safetensors", "{}: {} bytes after the last tensor: the header "
                          "describes {} data bytes, the file has {}", f, size - pos,
                          pos - data_begin, size - data_begin));
}

}  // namespace

uint64_t safetensors_dtype_bytes(const std::string& dtype) {
  for (const auto& d : kDtypes)
    if (dtype == d.name) return d.bytes;
  return 0;
}

SafetensorsHeader parse_safetensors_header(const uint8_t* data, uint64_t size,
                                           const std::string& f) {
  if (size < 8)
    throw FormatError(msg("safetensors", "{}: file is {} bytes, shorter than the 8-byte header "
                          "length: truncated?", f, size));
  SafetensorsHeader h;
  h.header_bytes = read_u64_le(data);
  if (h.header_bytes > kSafetensorsMaxHeaderBytes)
    throw FormatError(msg("safetensors", "{}: header length {} exceeds the {} byte limit: "
                          "corrupt or not a safetensors file?", f, h.header_bytes,
                          kSafetensorsMaxHeaderBytes));
  if (h.header_bytes > size - 8)
    throw FormatError(msg("safetensors", "{}: header length {} exceeds file size {}: truncated?",
                          f, h.header_bytes, size));
  json header;
  try {
    header = parse_json_text(
        std::string_view(reinterpret_cast<const char*>(data) + 8, h.header_bytes), f);
  } catch (const FormatError& e) {
    throw FormatError(msg("safetensors", "{}: header is not valid JSON: {}", f, e.what()));
  }
  if (!header.is_object())
    throw FormatError(msg("safetensors", "{}: header is a JSON {}, expected an object", f,
                          header.type_name()));
  if (header.size() > kSafetensorsMaxTensors + 1)
    throw FormatError(msg("safetensors", "{}: {} header entries, more than the limit {}", f,
                          header.size(), kSafetensorsMaxTensors));

  const uint64_t data_begin = 8 + h.header_bytes, data_len = size - data_begin;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object())
        throw FormatError(msg("safetensors", "{}: __metadata__ is not an object", f));
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string())
          throw FormatError(msg("safetensors", "{}: __metadata__['{}'] is {}, expected a string",
                                f, k, s.dump().substr(0, 200)));
        h.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    h.tensors.emplace(name, parse_entry(name, v, data_begin, data_len, f));
  }
  check_tiling(h, data_begin, size, f);
  return h;
}

std::map<std::string, std::vector<std::string>> parse_safetensors_index(const json& index,
                                                                        const std::string& idx) {
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw FormatError(msg("load_safetensors", "{}: missing object field 'weight_map'", idx));
  const json& map = index["weight_map"];
  if (map.size() > kSafetensorsMaxTensors)
    throw FormatError(msg("load_safetensors", "{}: weight_map lists {} tensors, more than the "
                          "limit {}", idx, map.size(), kSafetensorsMaxTensors));
  std::map<std::string, std::vector<std::string>> by_shard;
  for (const auto& [name, shard] : map.items()) {
    if (!shard.is_string())
      throw FormatError(msg("load_safetensors", "{}: weight_map['{}'] is {}, expected a file name",
                            idx, name, shard.dump().substr(0, 200)));
    const std::string s = shard.get<std::string>();
    if (s.empty() || s.size() > 255 || s.find('/') != std::string::npos ||
        s.find('\0') != std::string::npos || s == "." || s == "..")
      throw FormatError(msg("load_safetensors", "{}: weight_map['{}'] = '{}' is not a plain file "
                            "name in the checkpoint folder", idx, name, s.substr(0, 300)));
    by_shard[s].push_back(name);
  }
  return by_shard;
}

}  // namespace ac
