#include "prune/arch.h"

#include "common/error.h"
#include "common/json_io.h"

namespace ac {

namespace {

void check_arch_json(const json& j, const std::string& file) {
  if (!j.is_object() || !j.contains("config") || !j["config"].is_object())
    throw FormatError(msg("read_arch", "{}: expected an object with a \"config\" object (the "
                          "target's config.json), found {}",
                          file, j.is_object() ? "no \"config\" object" : j.type_name()));
}

}  // namespace

json read_arch_json(const fs::path& path) {
  json j = read_json_file(path);
  check_arch_json(j, path.string());
  return j;
}

ModelConfig arch_from_json(const json& j, const std::string& file) {
  check_arch_json(j, file);
  return config_from_hf_json(j["config"], file + " \"config\"");
}

ModelConfig read_arch(const fs::path& path) {
  return arch_from_json(read_json_file(path), path.string());
}

void write_arch(const fs::path& path, const ModelConfig& target, const json& extra) {
  if (!extra.is_null() && !extra.is_object())
    throw ConfigError(msg("write_arch", "{}: extra must be a JSON object, found {}",
                          path.string(), extra.type_name()));
  if (extra.is_object() && extra.contains("config"))
    throw ConfigError(msg("write_arch", "{}: extra must not hold \"config\"", path.string()));
  json j = extra.is_null() ? json::object() : extra;
  j["config"] = config_to_hf_json(target);
  write_json_file(path, j);
}

}  // namespace ac
