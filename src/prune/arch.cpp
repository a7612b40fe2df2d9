#include "prune/arch.h"

#include "common/error.h"
#include "common/json_io.h"
#include "model/nemotron_h_config.h"

namespace ac {

namespace {

void check_arch_json(const json& j, const std::string& file) {
  if (!j.is_object() || !j.contains("config") || !j["config"].is_object())
    throw FormatError(msg("read_arch", "{}: expected an object with a \"config\" object (the "
                          "target's config.json), found {}",
                          file, j.is_object() ? "no \"config\" object" : j.type_name()));
}

// A Nemotron-H config.json leaves removed blocks out (nemotron_h_config_to_hf_json); arch.json
// lists them so that a target keeps the parent's layer indices.
bool writes_removed_layers(const ModelConfig& c) {
  return c.is_hybrid() && is_nemotron_h_model_type(c.model_type);
}

// `c` (the kept layers, in order) with a removed block inserted at each index of `removed`.
ModelConfig with_removed_layers(ModelConfig c, const json& removed, const std::string& file) {
  if (!writes_removed_layers(c))
    throw FormatError(msg("read_arch", "{}: \"removed_layers\" is for a Nemotron-H target "
                          "(whose config.json leaves removed blocks out); model_type '{}' marks "
                          "removed blocks in block_configs", file, c.model_type));
  const int64_t total = c.num_layers() + int64_t(removed.is_array() ? removed.size() : 0);
  auto refuse = [&] {
    return FormatError(msg("read_arch", "{}: \"removed_layers\" must list ascending, distinct "
                           "layer indices in [0, {}) (the kept layers plus the removed ones), "
                           "found {}", file, total, removed.dump()));
  };
  if (!removed.is_array()) throw refuse();
  LayerConfig gone;  // a removed block (model/config.h)
  gone.attention_no_op = gone.ffn_no_op = true;
  std::vector<LayerConfig> layers;
  size_t kept = 0;
  int64_t previous = -1;
  for (const json& r : removed) {
    const int64_t i = r.is_number_integer() ? r.get<int64_t>() : -1;
    if (i <= previous || i >= total) throw refuse();
    while (int64_t(layers.size()) < i) layers.push_back(c.layers[kept++]);
    layers.push_back(gone);
    previous = i;
  }
  while (kept < c.layers.size()) layers.push_back(c.layers[kept++]);
  c.layers = std::move(layers);
  return c;
}

}  // namespace

json read_arch_json(const fs::path& path) {
  json j = read_json_file(path);
  check_arch_json(j, path.string());
  return j;
}

ModelConfig arch_from_json(const json& j, const std::string& file) {
  check_arch_json(j, file);
  ModelConfig c = config_from_hf_json(j["config"], file + " \"config\"");
  if (j.contains("removed_layers"))
    c = with_removed_layers(std::move(c), j["removed_layers"], file);
  return c;
}

ModelConfig read_arch(const fs::path& path) {
  return arch_from_json(read_json_file(path), path.string());
}

json arch_to_json(const ModelConfig& target, const json& extra, const std::string& file) {
  if (!extra.is_null() && !extra.is_object())
    throw ConfigError(msg("write_arch", "{}: extra must be a JSON object, found {}", file,
                          extra.type_name()));
  for (const char* key : {"config", "removed_layers"})
    if (extra.is_object() && extra.contains(key))
      throw ConfigError(msg("write_arch", "{}: extra must not hold \"{}\"", file, key));
  json j = extra.is_null() ? json::object() : extra;
  j["config"] = config_to_hf_json(target);
  if (writes_removed_layers(target)) {
    json removed = json::array();
    for (int64_t i = 0; i < target.num_layers(); ++i)
      if (!target.layers[size_t(i)].is_present()) removed.push_back(i);
    if (!removed.empty()) j["removed_layers"] = removed;
  }
  return j;
}

void write_arch(const fs::path& path, const ModelConfig& target, const json& extra) {
  write_json_file(path, arch_to_json(target, extra, path.string()));
}

}  // namespace ac
