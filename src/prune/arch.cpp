#include "prune/arch.h"

#include "common/error.h"
#include "common/json_io.h"

namespace ac {

json read_arch_json(const fs::path& path) {
  json j = read_json_file(path);
  if (!j.is_object() || !j.contains("config") || !j["config"].is_object())
    throw FormatError(msg("read_arch", "{}: expected an object with a \"config\" object (the "
                          "target's config.json), found {}",
                          path.string(), j.is_object() ? "no \"config\" object" : j.type_name()));
  return j;
}

ModelConfig read_arch(const fs::path& path) {
  return config_from_hf_json(read_arch_json(path)["config"], path.string() + " \"config\"");
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
