#include "hardware/engine.h"

#include "common/error.h"
#include "hardware/data_dir.h"

namespace ac {

static SpecValue engine_value(const json& j, const char* key, const std::string& file,
                              SpecValue fallback) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_object() || !v.contains("value") || !v.at("value").is_number() ||
      v.at("value").get<double>() < 0)
    throw FormatError(msg("load_engine", "{}: field '{}': expected {{\"value\": non-negative "
                                         "number, \"source\": text}}, found {}",
                          file, key, v.dump()));
  SpecValue s;
  s.value = v.at("value").get<double>();
  s.source = json_get_or<std::string>(v, "source", "", file + ": " + key);
  s.estimated = json_get_or<bool>(v, "estimated", false, file + ": " + key);
  if (s.source.empty())
    throw FormatError(msg("load_engine", "{}: field '{}': every number needs a 'source'", file,
                          key));
  return s;
}

EngineSpec engine_from_json(const json& j, const std::string& file) {
  static const std::set<std::string> known_ops = {"qkv_proj", "gate_up_proj", "silu_mul",
                                                  "add_rmsnorm", "rope", "attention"};
  EngineSpec e;
  e.name = json_get<std::string>(j, "name", file);
  e.per_step_overhead_ms = engine_value(j, "per_step_overhead_ms", file, e.per_step_overhead_ms);
  e.memory_reserved_fraction =
      engine_value(j, "memory_reserved_fraction", file, e.memory_reserved_fraction);
  if (e.memory_reserved_fraction.value >= 1)
    throw FormatError(msg("load_engine", "{}: field 'memory_reserved_fraction': expected a "
                                         "value in [0, 1), found {}",
                          file, e.memory_reserved_fraction.value));
  e.reserve_bytes = engine_value(j, "reserve_bytes", file, e.reserve_bytes);
  e.prefill_chunk_tokens = engine_value(j, "prefill_chunk_tokens", file, e.prefill_chunk_tokens);
  e.cuda_graphs = json_get_or<bool>(j, "cuda_graphs", false, file);
  e.notes = json_get_or<std::string>(j, "notes", "", file);
  if (j.contains("fused_ops")) {
    if (!j.at("fused_ops").is_array())
      throw FormatError(msg("load_engine", "{}: field 'fused_ops': expected an array of names, "
                                           "found {}", file, j.at("fused_ops").dump()));
    for (const auto& op : j.at("fused_ops")) {
      std::string name = op.is_string() ? op.get<std::string>() : op.dump();
      if (!known_ops.count(name))
        throw FormatError(msg("load_engine", "{}: field 'fused_ops': unknown op '{}', expected "
                                             "one of qkv_proj, gate_up_proj, silu_mul, "
                                             "add_rmsnorm, rope, attention", file, name));
      e.fused_ops.insert(name);
    }
  }
  if (j.contains("kv_cache")) {
    const json& kv = j.at("kv_cache");
    std::string f = file + ": kv_cache";
    e.kv_layout = json_get_or<std::string>(kv, "layout", e.kv_layout, f);
    if (e.kv_layout != "contiguous" && e.kv_layout != "paged")
      throw FormatError(msg("load_engine", "{}.layout: expected \"contiguous\" or \"paged\", "
                                           "found \"{}\"", f, e.kv_layout));
    e.kv_block_size_tokens = json_get_or<int64_t>(kv, "block_size_tokens", 1, f);
    if (e.kv_block_size_tokens < 1)
      throw FormatError(msg("load_engine", "{}.block_size_tokens: expected >= 1, found {}", f,
                            e.kv_block_size_tokens));
  }
  return e;
}

EngineSpec load_engine(const std::string& name_or_path, const fs::path& data_root) {
  fs::path file = find_data_file("engines", name_or_path, data_root);
  return engine_from_json(read_json_file(file), file.string());
}

}  // namespace ac
