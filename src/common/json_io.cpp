#include "common/json_io.h"

#include "common/error.h"

namespace ac {

json read_json_file(const fs::path& path) {
  std::string text = read_file(path);
  try {
    // Nesting depth is bounded by nlohmann's recursive parser; reject absurd sizes first.
    if (text.size() > (64u << 20))
      throw FormatError(msg("read_json", "{}: {} bytes, more than the 64 MiB limit for JSON",
                            path.string(), text.size()));
    return json::parse(text);
  } catch (const json::exception& e) {
    throw FormatError(msg("read_json", "{}: invalid JSON: {}", path.string(), e.what()));
  }
}

void write_json_file(const fs::path& path, const json& j) {
  write_file_atomic(path, j.dump(2) + "\n");
}

template <typename T>
T json_get(const json& j, const char* key, const std::string& file) {
  if (!j.is_object() || !j.contains(key))
    throw FormatError(msg("json", "{}: missing field '{}'", file, key));
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    throw FormatError(msg("json", "{}: field '{}' has the wrong type: found {}", file, key,
                          j.at(key).dump()));
  }
}

template <typename T>
T json_get_or(const json& j, const char* key, T fallback, const std::string& file) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return fallback;
  return json_get<T>(j, key, file);
}

#define AC_JSON_INSTANTIATE(T)                                                  \
  template T json_get<T>(const json&, const char*, const std::string&);        \
  template T json_get_or<T>(const json&, const char*, T, const std::string&);
AC_JSON_INSTANTIATE(int64_t)
AC_JSON_INSTANTIATE(int)
AC_JSON_INSTANTIATE(double)
AC_JSON_INSTANTIATE(bool)
AC_JSON_INSTANTIATE(std::string)

}  // namespace ac
