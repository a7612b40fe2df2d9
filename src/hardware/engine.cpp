#include "hardware/engine.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

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
  if (j.contains("structure")) {
    const json& st = j.at("structure");
    const std::string f = file + ": structure";
    if (!st.is_object())
      throw FormatError(msg("load_engine", "{}: expected an object, found {}", f, st.dump()));
    static const std::set<std::string> known = {"per_layer_query_heads", "attention_removed",
                                                "ffn_removed", "ffn_width_multiple", "source"};
    for (const auto& [k, v] : st.items())
      if (!known.count(k))
        throw FormatError(msg("load_engine", "{}: unknown field '{}', expected one of "
                                             "per_layer_query_heads, attention_removed, "
                                             "ffn_removed, ffn_width_multiple, source", f, k));
    EngineStructure& r = e.structure;
    r.per_layer_query_heads = json_get_or<bool>(st, "per_layer_query_heads", true, f);
    r.attention_removed = json_get_or<bool>(st, "attention_removed", true, f);
    r.ffn_removed = json_get_or<bool>(st, "ffn_removed", true, f);
    r.ffn_width_multiple = json_get_or<int64_t>(st, "ffn_width_multiple", 1, f);
    r.source = json_get_or<std::string>(st, "source", "", f);
    if (r.ffn_width_multiple < 1)
      throw FormatError(msg("load_engine", "{}.ffn_width_multiple: expected >= 1, found {}", f,
                            r.ffn_width_multiple));
    if (r.source.empty())
      throw FormatError(msg("load_engine", "{}: the rules need a 'source' (the loader file and "
                                           "function they are read from)", f));
  }
  return e;
}

std::vector<std::string> structure_violations(const ModelConfig& c, const EngineSpec& engine) {
  std::vector<std::string> bad;
  // A layer with neither attention nor FFN is a removed block: dropped before export (depth
  // pruning), so it is no structure the engine builds. What remains, if every layer is alike, is
  // a plain model of the parent's class.
  std::vector<size_t> kept;
  for (size_t i = 0; i < c.layers.size(); ++i)
    if (c.layers[i].has_attention() || c.layers[i].has_ffn()) kept.push_back(i);
  if (std::all_of(kept.begin(), kept.end(),
                  [&](size_t i) { return c.layers[i] == c.layers[kept.front()]; }))
    return bad;
  const EngineStructure& r = engine.structure;
  int64_t first = -1;
  for (size_t i : kept) {
    const LayerConfig& l = c.layers[i];
    if (l.has_attention()) {
      if (first < 0) first = int64_t(i);
      const int64_t H = c.layers[size_t(first)].num_attention_heads;
      if (!r.per_layer_query_heads && l.num_attention_heads != H)
        bad.push_back(fmt::format("layer {}: num_attention_heads {}, but {} builds every attention "
                                  "layer with one count (layer {} has {})",
                                  i, l.num_attention_heads, engine.name, first, H));
    } else if (!r.attention_removed) {
      bad.push_back(fmt::format("layer {}: attention removed, which {} cannot build", i,
                                engine.name));
    }
    if (l.has_ffn()) {
      if (l.intermediate_size % r.ffn_width_multiple != 0)
        bad.push_back(fmt::format("layer {}: intermediate_size {}, but {} builds FFN widths that "
                                  "are multiples of {} only", i, l.intermediate_size, engine.name,
                                  r.ffn_width_multiple));
    } else if (!r.ffn_removed) {
      bad.push_back(fmt::format("layer {}: FFN removed, which {} cannot build", i, engine.name));
    }
  }
  return bad;
}

void check_engine_loads(const ModelConfig& c, const EngineSpec& engine, const std::string& where) {
  const std::vector<std::string> bad = structure_violations(c, engine);
  if (bad.empty()) return;
  throw ConfigError(msg(where.c_str(), "{} cannot load {}: {} (engines/{}.json \"structure\": {})",
                        engine.name, describe(c), fmt::join(bad, "; "), engine.name,
                        engine.structure.source.empty() ? std::string("no source")
                                                        : engine.structure.source));
}

EngineSpec load_engine(const std::string& name_or_path, const fs::path& data_root) {
  fs::path file = find_data_file("engines", name_or_path, data_root);
  return engine_from_json(read_json_file(file), file.string());
}

}  // namespace ac
