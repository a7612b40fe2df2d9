#include "prune/pruning_map.h"

#include <fmt/format.h>

#include <set>

#include "common/error.h"
#include "common/json_io.h"
#include "prune/prune.h"

namespace ac {

namespace {

constexpr const char* kFormat = "autocompress.pruning_map";

std::vector<int64_t> int_list(const json& j, const char* key, const std::string& file) {
  if (!j.contains(key) || !j.at(key).is_array())
    throw FormatError(msg("read_pruning_map", "{}: field '{}' must be an array of integers",
                          file, key));
  std::vector<int64_t> out;
  for (const json& v : j.at(key)) {
    if (!json_holds<int64_t>(v))
      throw FormatError(msg("read_pruning_map", "{}: field '{}' holds {}, expected integers",
                            file, key, v.dump().substr(0, 100)));
    out.push_back(v.get<int64_t>());
  }
  return out;
}

}  // namespace

PruningMap pruning_map_from_plan(const ModelConfig& parent, const PrunePlan& plan,
                                 bool blocks_dropped) {
  PruningMap map;
  map.teacher_hidden_size = parent.hidden_size;
  map.teacher_num_layers = parent.num_layers();
  map.hidden_channels = plan.hidden.to(at::kLong).contiguous();
  for (int64_t i = 0; i < plan.config.num_layers(); ++i) {
    const LayerConfig& l = plan.config.layers[size_t(i)];
    if (!blocks_dropped || l.has_attention() || l.has_ffn()) map.layers.push_back(i);
  }
  return map;
}

PruningMap identity_pruning_map(const ModelConfig& c) {
  PruningMap map;
  map.teacher_hidden_size = c.hidden_size;
  map.teacher_num_layers = c.num_layers();
  map.hidden_channels = at::arange(c.hidden_size, at::kLong);
  for (int64_t i = 0; i < c.num_layers(); ++i) map.layers.push_back(i);
  return map;
}

void check_pruning_map(const PruningMap& map, const ModelConfig& teacher,
                       const ModelConfig& student, const std::string& source) {
  auto bad = [&](const std::string& what) {
    throw ConfigError(msg("pruning_map", "{}: {} (the map must come from the `prune` run that "
                          "made this student from this teacher)", source, what));
  };
  if (map.teacher_hidden_size != teacher.hidden_size || map.teacher_num_layers != teacher.num_layers())
    bad(fmt::format("made for a teacher with hidden_size {} and {} layers, the teacher has {} "
                    "and {}", map.teacher_hidden_size, map.teacher_num_layers, teacher.hidden_size,
                    teacher.num_layers()));
  if (!map.hidden_channels.defined() || map.hidden_channels.dim() != 1 ||
      map.hidden_channels.size(0) != student.hidden_size)
    bad(fmt::format("hidden_channels has {} entries, the student's hidden_size is {}",
                    map.hidden_channels.defined() ? map.hidden_channels.numel() : 0,
                    student.hidden_size));
  if (int64_t(map.layers.size()) != student.num_layers())
    bad(fmt::format("layers has {} entries, the student has {} layers", map.layers.size(),
                    student.num_layers()));
  at::Tensor ch = map.hidden_channels.to(at::kLong).contiguous();
  std::set<int64_t> seen;
  for (int64_t j = 0; j < ch.numel(); ++j) {
    int64_t c = ch.data_ptr<int64_t>()[j];
    if (c < 0 || c >= teacher.hidden_size)
      bad(fmt::format("hidden_channels[{}] = {} outside [0, {})", j, c, teacher.hidden_size));
    if (!seen.insert(c).second) bad(fmt::format("hidden channel {} appears twice", c));
  }
  for (size_t i = 0; i < map.layers.size(); ++i) {
    if (map.layers[i] < 0 || map.layers[i] >= teacher.num_layers())
      bad(fmt::format("layers[{}] = {} outside [0, {})", i, map.layers[i], teacher.num_layers()));
    if (i > 0 && map.layers[i] <= map.layers[i - 1])
      bad(fmt::format("layers must strictly increase, found {} after {}", map.layers[i],
                      map.layers[i - 1]));
  }
}

void write_pruning_map(const fs::path& path, const PruningMap& map) {
  at::Tensor ch = map.hidden_channels.to(at::kLong).contiguous();
  std::vector<int64_t> channels(ch.data_ptr<int64_t>(), ch.data_ptr<int64_t>() + ch.numel());
  json j = {{"format", kFormat},
            {"version", 1},
            {"teacher_hidden_size", map.teacher_hidden_size},
            {"teacher_num_layers", map.teacher_num_layers},
            {"hidden_channels", channels},
            {"layers", map.layers}};
  write_json_file(path, j);
}

PruningMap read_pruning_map(const fs::path& path) {
  const std::string file = path.string();
  if (!fs::exists(path))
    throw FormatError(msg("read_pruning_map", "{}: no such file; pruning_map.json is written by "
                          "`autocompress prune` next to the pruned checkpoint (the hidden-state "
                          "loss needs it)", file));
  json j = read_json_file(path);
  if (!j.is_object() || json_get_or<std::string>(j, "format", "", file) != kFormat)
    throw FormatError(msg("read_pruning_map", "{}: not a pruning map (expected an object with "
                          "\"format\": \"{}\")", file, kFormat));
  if (int64_t v = json_get<int64_t>(j, "version", file); v != 1)
    throw FormatError(msg("read_pruning_map", "{}: version {}, this build reads version 1", file,
                          v));
  PruningMap map;
  map.teacher_hidden_size = json_get<int64_t>(j, "teacher_hidden_size", file);
  map.teacher_num_layers = json_get<int64_t>(j, "teacher_num_layers", file);
  std::vector<int64_t> ch = int_list(j, "hidden_channels", file);
  map.hidden_channels = at::tensor(ch, at::kLong);
  if (ch.empty()) map.hidden_channels = at::empty({0}, at::kLong);
  map.layers = int_list(j, "layers", file);
  return map;
}

}  // namespace ac
