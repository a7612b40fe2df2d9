// JSON files: read with a clear error (file, line, what failed), written atomically.
#pragma once
#include <nlohmann/json.hpp>
#include <limits>
#include <string_view>
#include <type_traits>

#include "common/fs.h"

namespace ac {
using json = nlohmann::json;

/// Limits every JSON reader of autocompress enforces (docs/formats.md, "Limits"): a document of
/// at most kMaxJsonBytes bytes, arrays and objects nested at most kMaxJsonDepth deep.
inline constexpr size_t kMaxJsonBytes = 64u << 20;
inline constexpr int kMaxJsonDepth = 64;

/// Parses JSON text (RFC 8259) with the limits above. `file` names errors:
/// "[read_json] FILE: nesting depth exceeds 64 at byte 1234", "[read_json] FILE: invalid JSON:
/// ...". Throws FormatError; never any other exception type.
json parse_json_text(std::string_view text, const std::string& file);

/// Parses a JSON file (parse_json_text). Throws FormatError naming the file.
json read_json_file(const fs::path& path);
/// Writes JSON (indented 2) atomically.
void write_json_file(const fs::path& path, const json& j);

/// True when `v` holds a T exactly: a boolean for bool, a string for std::string, any number
/// for floating point, and for integers an integer (never a float, which nlohmann would
/// truncate, or cast with undefined behaviour when out of range) within T's range.
template <typename T>
bool json_holds(const json& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v.is_boolean();
  } else if constexpr (std::is_integral_v<T>) {
    if (v.is_number_unsigned()) return v.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max());
    if (!v.is_number_integer()) return false;
    const int64_t x = v.get<int64_t>();
    if (x < 0) return std::is_signed_v<T> && x >= int64_t(std::numeric_limits<T>::min());
    return uint64_t(x) <= uint64_t(std::numeric_limits<T>::max());
  } else if constexpr (std::is_floating_point_v<T>) {
    return v.is_number();
  } else if constexpr (std::is_same_v<T, std::string>) {
    return v.is_string();
  } else {
    static_assert(sizeof(T) == 0, "json_holds: unsupported type");
  }
}

/// Field access with errors that name the file and field: expected type vs found (integers
/// checked with json_holds). Throw FormatError; never any other exception type.
template <typename T>
T json_get(const json& j, const char* key, const std::string& file);
template <typename T>
T json_get_or(const json& j, const char* key, T fallback, const std::string& file);

}  // namespace ac
