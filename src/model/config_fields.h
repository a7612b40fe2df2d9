// Field access for the config.json readers (model/config.cpp and the readers of each family,
// model/nemotron_h_config.cpp, model/moe_family_config.cpp): every error names the reader, the
// file and the field, and says what was expected and what was found.
#pragma once
#include <fmt/format.h>

#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/json_io.h"

namespace ac::config_fields {

/// j[key] as a T. Throws FormatError "[load_config] FILE: missing field 'KEY'" when it is absent
/// or null, "... has the wrong type or range: found V" when it is not a T (json_holds). `j` may be
/// any JSON value (contains() is false for non-objects).
template <typename T>
T get(const nlohmann::json& j, const char* key, const std::string& file) {
  if (!j.contains(key) || j[key].is_null())
    throw FormatError(fmt::format("[load_config] {}: missing field '{}'", file, key));
  if (!json_holds<T>(j[key]))
    throw FormatError(fmt::format("[load_config] {}: field '{}' has the wrong type or range: "
                                  "found {}", file, key, j[key].dump().substr(0, 200)));
  return j[key].get<T>();
}

/// j[key] as a T, or `fallback` when it is absent or null; throws as get() on a wrong type.
template <typename T>
T get_or(const nlohmann::json& j, const char* key, T fallback, const std::string& file) {
  return (!j.contains(key) || j[key].is_null()) ? fallback : get<T>(j, key, file);
}

/// A positive integer field (sizes and counts), or `fallback` when absent and fallback >= 0;
/// fallback < 0 makes the field required. Throws FormatError naming the field and value.
inline int64_t positive(const nlohmann::json& j, const char* key, const std::string& file,
                        int64_t fallback = -1) {
  const int64_t v = fallback < 0 ? get<int64_t>(j, key, file) : get_or<int64_t>(j, key, fallback, file);
  if (v <= 0)
    throw FormatError(fmt::format("[load_config] {}: field '{}' must be positive, found {}", file,
                                  key, v));
  return v;
}

/// An id field that may be a list (Llama 3.1 lists several EOS ids): its first entry, or
/// `fallback` when absent, null or empty. Throws FormatError on a non-integer id.
inline int64_t first_id(const nlohmann::json& j, const char* key, int64_t fallback, const std::string& file) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (j[key].is_array()) {
    if (j[key].empty()) return fallback;
    if (!json_holds<int64_t>(j[key][0]))
      throw FormatError(fmt::format("[load_config] {}: field '{}' must hold integer ids, found {}",
                                    file, key, j[key].dump().substr(0, 200)));
    return j[key][0].get<int64_t>();
  }
  return get<int64_t>(j, key, file);
}

}  // namespace ac::config_fields
