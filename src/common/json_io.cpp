#include "common/json_io.h"

#include "common/error.h"

namespace ac {

namespace {

/// Rejects arrays/objects nested deeper than kMaxJsonDepth before the parser sees the text, so
/// no later recursive walk (dump, destruction, our readers) can exhaust the stack. Brackets
/// inside strings do not count; the parser itself reports any other syntax error.
void check_json_depth(std::string_view text, const std::string& file) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        throw FormatError(msg("read_json", "{}: nesting depth exceeds {} at byte {}", file,
                              kMaxJsonDepth, i));
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

}  // namespace

json parse_json_text(std::string_view text, const std::string& file) {
  if (text.size() > kMaxJsonBytes)
    throw FormatError(msg("read_json", "{}: {} bytes, more than the {} MiB limit for JSON", file,
                          text.size(), kMaxJsonBytes >> 20));
  check_json_depth(text, file);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw FormatError(msg("read_json", "{}: invalid JSON: {}", file, e.what()));
  }
}

json read_json_file(const fs::path& path) {
  return parse_json_text(read_file(path), path.string());
}

void write_json_file(const fs::path& path, const json& j) {
  write_file_atomic(path, j.dump(2) + "\n");
}

template <typename T>
T json_get(const json& j, const char* key, const std::string& file) {
  if (!j.is_object() || !j.contains(key))
    throw FormatError(msg("json", "{}: missing field '{}'", file, key));
  const json& v = j.at(key);
  if (!json_holds<T>(v))
    throw FormatError(msg("json", "{}: field '{}' has the wrong type or range: found {}", file,
                          key, v.dump().substr(0, 200)));
  return v.get<T>();
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
