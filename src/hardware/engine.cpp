#include "hardware/engine.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "common/error.h"
#include "hardware/data_dir.h"
#include "hardware/hybrid_structure.h"

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

namespace {

const char* const kStructureRules[] = {
    "per_layer_query_heads", "query_heads_divisible_by_kv_heads", "per_layer_head_dim",
    "head_dim_explicit",     "attention_removed",                 "ffn_removed",
    "block_removed",         "ffn_width_multiple",                "tensor_parallel_divides",
    "per_layer_mamba",       "per_layer_num_experts",             "per_layer_expert_width",
    "per_layer_experts_per_token"};
const std::set<std::string> kShardedFields = {"num_attention_heads", "num_key_value_heads",
                                              "intermediate_size"};

// One rule: {"value": ..., "source": "loader file and function"}. Returns the value.
const json& rule_value(const json& st, const std::string& rule, const std::string& f,
                       EngineStructure& r) {
  const json& v = st.at(rule);
  if (!v.is_object() || !v.contains("value") || !v.contains("source") ||
      !v.at("source").is_string() || v.at("source").get<std::string>().empty())
    throw FormatError(msg("load_engine", "{}.{}: expected {{\"value\": ..., \"source\": the loader "
                                         "file and function}}, found {}",
                          f, rule, v.dump()));
  r.sources[rule] = v.at("source").get<std::string>();
  return v.at("value");
}

bool rule_bool(const json& st, const std::string& rule, const std::string& f, EngineStructure& r,
               bool fallback) {
  if (!st.contains(rule)) return fallback;
  const json& v = rule_value(st, rule, f, r);
  if (!v.is_boolean())
    throw FormatError(msg("load_engine", "{}.{}.value: expected true or false, found {}", f, rule,
                          v.dump()));
  return v.get<bool>();
}

EngineStructure structure_from_json(const json& st, const std::string& file) {
  const std::string f = file + ": structure";
  if (!st.is_object())
    throw FormatError(msg("load_engine", "{}: expected an object, found {}", f, st.dump()));
  for (const auto& [k, v] : st.items())
    if (k != "source" && std::find(std::begin(kStructureRules), std::end(kStructureRules), k) ==
                             std::end(kStructureRules))
      throw FormatError(msg("load_engine", "{}: unknown field '{}', expected one of {}, source", f,
                            k, fmt::join(kStructureRules, ", ")));
  EngineStructure r;
  r.per_layer_query_heads = rule_bool(st, "per_layer_query_heads", f, r, true);
  r.query_heads_divisible_by_kv_heads =
      rule_bool(st, "query_heads_divisible_by_kv_heads", f, r, true);
  r.per_layer_head_dim = rule_bool(st, "per_layer_head_dim", f, r, true);
  r.head_dim_explicit = rule_bool(st, "head_dim_explicit", f, r, true);
  r.attention_removed = rule_bool(st, "attention_removed", f, r, true);
  r.ffn_removed = rule_bool(st, "ffn_removed", f, r, true);
  r.block_removed = rule_bool(st, "block_removed", f, r, true);
  r.per_layer_mamba = rule_bool(st, "per_layer_mamba", f, r, true);
  r.per_layer_num_experts = rule_bool(st, "per_layer_num_experts", f, r, true);
  r.per_layer_expert_width = rule_bool(st, "per_layer_expert_width", f, r, true);
  r.per_layer_experts_per_token = rule_bool(st, "per_layer_experts_per_token", f, r, true);
  if (st.contains("ffn_width_multiple")) {
    const json& v = rule_value(st, "ffn_width_multiple", f, r);
    if (!json_holds<int64_t>(v) || v.get<int64_t>() < 1)
      throw FormatError(msg("load_engine", "{}.ffn_width_multiple.value: expected an integer >= 1, "
                                           "found {}", f, v.dump()));
    r.ffn_width_multiple = v.get<int64_t>();
  }
  if (st.contains("tensor_parallel_divides")) {
    const json& v = rule_value(st, "tensor_parallel_divides", f, r);
    if (!v.is_array())
      throw FormatError(msg("load_engine", "{}.tensor_parallel_divides.value: expected an array "
                                           "of field names, found {}", f, v.dump()));
    for (const json& name : v) {
      const std::string n = name.is_string() ? name.get<std::string>() : name.dump();
      if (!kShardedFields.count(n))
        throw FormatError(msg("load_engine", "{}.tensor_parallel_divides: unknown field '{}', "
                                             "expected num_attention_heads, num_key_value_heads "
                                             "or intermediate_size", f, n));
      r.tensor_parallel_divides.insert(n);
    }
  }
  r.source = json_get_or<std::string>(st, "source", "", f);
  if (r.source.empty())
    throw FormatError(msg("load_engine", "{}: the rules need a 'source' (the loader file and "
                                         "function they are read from)", f));
  return r;
}

}  // namespace

bool EngineStructure::shards(const std::string& field, int64_t n, int64_t tensor_parallel) const {
  if (tensor_parallel <= 1 || !tensor_parallel_divides.count(field)) return true;
  if (field == "num_key_value_heads" && n < tensor_parallel) return tensor_parallel % n == 0;
  return n % tensor_parallel == 0;
}

EngineStructure decilm_format_structure() {
  EngineStructure r;
  r.per_layer_query_heads = false;
  r.per_layer_head_dim = false;
  r.ffn_width_multiple = 256;
  r.source = "DeciLM config.json: global num_attention_heads and head_dim, block_configs[i] "
             "{attention: {no_op, n_heads_in_group}, ffn: {no_op, ffn_mult}}, FFN width "
             "find_multiple(int(2*ffn_mult*hidden_size/3), 256) (model/config.h decilm_ffn_width)";
  return r;
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
  if (j.contains("structure")) e.structure = structure_from_json(j.at("structure"), file);
  return e;
}

namespace {

// The tensor-parallel rules: every model, homogeneous or not.
void tensor_parallel_violations(const ModelConfig& c, const EngineSpec& engine, int64_t tp,
                                std::vector<std::string>& bad) {
  const EngineStructure& r = engine.structure;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerConfig& l = c.layers[i];
    auto check = [&](const char* field, int64_t n, const char* how) {
      if (!r.shards(field, n, tp))
        bad.push_back(fmt::format("layer {}: {} {}, but {} splits it over tensor_parallel {} "
                                  "({})", i, field, n, engine.name, tp, how));
    };
    if (l.has_attention()) {
      check("num_attention_heads", l.num_attention_heads, "it must be a multiple of it");
      check("num_key_value_heads", l.num_key_value_heads,
            "it must be a multiple of it, or divide it to be replicated");
    }
    if (l.has_ffn()) check("intermediate_size", l.intermediate_size, "it must be a multiple of it");
  }
}

// The per-layer rules of a heterogeneous model (`kept`: the layers export keeps).
void per_layer_violations(const ModelConfig& c, const EngineSpec& engine,
                          const std::vector<size_t>& kept, std::vector<std::string>& bad) {
  const EngineStructure& r = engine.structure;
  int64_t first = -1;
  for (size_t i : kept) {
    const LayerConfig& l = c.layers[i];
    if (l.has_attention()) {
      if (first < 0) first = int64_t(i);
      const LayerConfig& f = c.layers[size_t(first)];
      if (!r.per_layer_query_heads && l.num_attention_heads != f.num_attention_heads)
        bad.push_back(fmt::format("layer {}: num_attention_heads {}, but {} builds every attention "
                                  "layer with one count (layer {} has {})",
                                  i, l.num_attention_heads, engine.name, first, f.num_attention_heads));
      if (r.query_heads_divisible_by_kv_heads &&
          (l.num_key_value_heads <= 0 || l.num_attention_heads % l.num_key_value_heads != 0))
        bad.push_back(fmt::format("layer {}: num_attention_heads {} is not a multiple of "
                                  "num_key_value_heads {}, which {} needs (n_heads_in_group = "
                                  "num_attention_heads / num_key_value_heads)",
                                  i, l.num_attention_heads, l.num_key_value_heads, engine.name));
      if (!r.per_layer_head_dim && l.head_dim != f.head_dim)
        bad.push_back(fmt::format("layer {}: head_dim {}, but {} builds every attention layer "
                                  "with one head_dim (layer {} has {})",
                                  i, l.head_dim, engine.name, first, f.head_dim));
      if (!r.head_dim_explicit && c.hidden_size / l.num_attention_heads != l.head_dim)
        bad.push_back(fmt::format("layer {}: head_dim {}, but {} derives head_dim as hidden_size "
                                  "/ num_attention_heads = {} / {} = {}",
                                  i, l.head_dim, engine.name, c.hidden_size,
                                  l.num_attention_heads, c.hidden_size / l.num_attention_heads));
    } else if (!r.attention_removed) {
      bad.push_back(fmt::format("layer {}: attention removed, which {} cannot build", i,
                                engine.name));
    }
    if (l.has_ffn()) {
      if (l.intermediate_size % r.ffn_width_multiple != 0) {
        const int64_t lo = l.intermediate_size / r.ffn_width_multiple * r.ffn_width_multiple;
        bad.push_back(fmt::format("layer {}: intermediate_size {}, but {} builds FFN widths that "
                                  "are multiples of {} only (nearest: {}{})",
                                  i, l.intermediate_size, engine.name, r.ffn_width_multiple,
                                  lo > 0 ? fmt::format("{} or ", lo) : "",
                                  lo + r.ffn_width_multiple));
      }
    } else if (!r.ffn_removed) {
      bad.push_back(fmt::format("layer {}: FFN removed, which {} cannot build", i, engine.name));
    }
  }
}

}  // namespace

std::vector<std::string> structure_violations(const ModelConfig& c, const EngineSpec& engine,
                                              int64_t tensor_parallel) {
  std::vector<std::string> bad;
  if (c.is_hybrid()) {  // one part a layer or MoE layers: their own rules
    hybrid_structure_violations(c, engine, bad);
    tensor_parallel_violations(c, engine, tensor_parallel, bad);
    return bad;
  }
  // A layer with neither attention nor FFN is a removed block: dropped before export (depth
  // pruning), so it is no structure the engine builds. What remains, if every layer is alike, is
  // a plain model of the parent's class.
  std::vector<size_t> kept;
  for (size_t i = 0; i < c.layers.size(); ++i)
    if (c.layers[i].has_attention() || c.layers[i].has_ffn()) kept.push_back(i);
  const bool homogeneous = std::all_of(kept.begin(), kept.end(), [&](size_t i) {
    return c.layers[i] == c.layers[kept.front()];
  });
  if (!homogeneous) per_layer_violations(c, engine, kept, bad);
  tensor_parallel_violations(c, engine, tensor_parallel, bad);
  return bad;
}

void check_engine_loads(const ModelConfig& c, const EngineSpec& engine, const std::string& where,
                        int64_t tensor_parallel) {
  const std::vector<std::string> bad = structure_violations(c, engine, tensor_parallel);
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
