#include "importance/importance_file.h"

#include <fmt/format.h>

#include "common/error.h"

namespace ac {

std::map<std::string, std::string> importance_file_metadata(const std::string& format,
                                                            int64_t num_layers,
                                                            int64_t num_tokens) {
  return {{"format", format},
          {"num_layers", std::to_string(num_layers)},
          {"num_tokens", std::to_string(num_tokens)}};
}

namespace {

int64_t meta_count(const std::map<std::string, std::string>& meta, const char* key,
                   const std::string& file, const char* where) {
  const auto it = meta.find(key);
  int64_t v = -1;
  try {
    if (it != meta.end()) v = std::stoll(it->second);
  } catch (const std::exception&) {
  }
  if (v < 0)
    throw FormatError(fmt::format("[{}] {}: metadata '{}' must be a count, found '{}'", where,
                                  file, key, it == meta.end() ? "nothing" : it->second));
  return v;
}

}  // namespace

ImportanceFileHeader read_importance_file_header(const SafetensorsFile& f,
                                                 const std::string& format, const char* where,
                                                 const char* what) {
  const std::string file = f.path().string();
  const auto& meta = f.metadata();
  const auto it = meta.find("format");
  if (it == meta.end() || it->second != format)
    throw FormatError(fmt::format("[{}] {}: format '{}', expected '{}': not {}?", where, file,
                                  it == meta.end() ? "" : it->second, format, what));
  ImportanceFileHeader h;
  h.num_layers = meta_count(meta, "num_layers", file, where);
  h.num_tokens = meta_count(meta, "num_tokens", file, where);
  return h;
}

}  // namespace ac
