#include "model/nemotron_h_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <set>

#include "common/error.h"
#include "model/config_fields.h"

namespace ac {
using json = nlohmann::json;
using config_fields::first_id;
using config_fields::get;
using config_fields::get_or;
using config_fields::positive;

namespace {

// The layer types of layers_block_type / block_configs[i].block_type and their pattern
// characters (configuration_nemotron_h.py _pattern_to_list; "mlp" / "-" from vLLM's config).
// transformers 5.25 saves "linear_attention" and "full_attention" for the Mamba-2 and attention
// layers (configuration_utils.py remap_legacy_layer_types maps the older "mamba" and
// "attention" to them); both spellings are read.
constexpr std::array<std::pair<const char*, char>, 4> kKinds = {
    {{"mamba", 'M'}, {"attention", '*'}, {"mlp", '-'}, {"moe", 'E'}}};
constexpr std::array<std::pair<const char*, char>, 2> kNewKinds = {
    {{"linear_attention", 'M'}, {"full_attention", '*'}}};

char kind_char(const std::string& name, const std::string& where) {
  for (const auto& [n, ch] : kKinds)
    if (name == n) return ch;
  for (const auto& [n, ch] : kNewKinds)
    if (name == n) return ch;
  throw FormatError(fmt::format("[load_config] {}: layer type '{}' is not one of mamba "
                                "(linear_attention), attention (full_attention), mlp, moe",
                                where, name));
}

// The name of pattern character `ch`; transformers 5's spelling when `new_names`.
const char* kind_name(char ch, bool new_names = false) {
  if (new_names)
    for (const auto& [n, c] : kNewKinds)
      if (c == ch) return n;
  for (const auto& [n, c] : kKinds)
    if (c == ch) return n;
  return "?";
}

// Whether config.json's layers_block_type spells its layers as transformers 5 saves them.
bool uses_new_kind_names(const json& j) {
  if (!j.contains("layers_block_type") || !j["layers_block_type"].is_array()) return false;
  for (const json& t : j["layers_block_type"])
    if (t == "linear_attention" || t == "full_attention") return true;
  return false;
}

// A field config.json may spell two ways (the attribute transformers saves, then its __init__
// parameter): the spelling present, the attribute's when neither is.
const char* spelling(const json& j, const char* attr, const char* param) {
  if (j.contains(attr) && !j[attr].is_null()) return attr;
  if (param && j.contains(param) && !j[param].is_null()) return param;
  return attr;
}

int64_t read_size(const json& j, const char* attr, const char* param, int64_t fallback,
                  const std::string& where) {
  if (param && j.contains(attr) && j.contains(param) && !j[attr].is_null() &&
      !j[param].is_null() && j[attr] != j[param])
    throw FormatError(fmt::format("[load_config] {}: '{}' {} and '{}' {} name one field and "
                                  "disagree", where, attr, j[attr].dump(), param, j[param].dump()));
  const char* key = spelling(j, attr, param);
  if (j.contains(key) && j[key].is_array())
    throw FormatError(fmt::format("[load_config] {}: field '{}' is a list {}: per-layer values "
                                  "are read from block_configs (nemotron_h_puzzle)", where, key,
                                  j[key].dump().substr(0, 120)));
  return positive(j, key, where, fallback);
}

bool read_flag(const json& j, const char* attr, const char* param, bool fallback,
               const std::string& where) {
  return get_or<bool>(j, spelling(j, attr, param), fallback, where);
}

Mamba2Config read_mamba(const json& m, const std::string& where) {
  Mamba2Config r;
  r.mamba_num_heads = read_size(m, "mamba_num_heads", nullptr, 128, where);
  r.mamba_head_dim = read_size(m, "mamba_head_dim", nullptr, 64, where);
  r.ssm_state_size = read_size(m, "ssm_state_size", nullptr, 128, where);
  r.n_groups = read_size(m, "n_groups", "mamba_n_groups", 8, where);
  r.conv_kernel = read_size(m, "conv_kernel", "mamba_d_conv", 4, where);
  r.chunk_size = read_size(m, "chunk_size", "mamba_chunk_size", 128, where);
  r.use_conv_bias = read_flag(m, "use_conv_bias", "mamba_conv_bias", true, where);
  r.use_bias = read_flag(m, "use_bias", nullptr, false, where);
  r.ssm_state_dtype = get_or<std::string>(m, "mamba_ssm_cache_dtype", "float32", where);
  return r;
}

// NemotronHMoE: a sigmoid router with e_score_correction_bias, relu² experts, one shared expert
// of moe_shared_expert_intermediate_size when n_shared_experts > 0, latent projections when
// moe_latent_size is set (modeling_nemotron_h.py NemotronHMoE, NemotronHTopKRouter).
MoeConfig read_moe(const json& m, const std::string& where) {
  MoeConfig r;
  r.num_experts = read_size(m, "n_routed_experts", nullptr, 8, where);
  r.num_experts_per_tok = read_size(m, "num_experts_per_tok", nullptr, 2, where);
  r.moe_intermediate_size = read_size(m, "moe_intermediate_size", nullptr, 7688, where);
  const int64_t shared = get_or<int64_t>(m, "n_shared_experts", 1, where);
  r.shared_expert_intermediate_size =
      shared > 0 ? read_size(m, "moe_shared_expert_intermediate_size", nullptr, 7688, where) : 0;
  r.moe_latent_size = get_or<int64_t>(m, "moe_latent_size", 0, where);
  if (r.moe_latent_size < 0)
    throw FormatError(fmt::format("[load_config] {}: field 'moe_latent_size' must be positive "
                                  "or null, found {}", where, r.moe_latent_size));
  r.gated = false;
  r.router_bias = true;
  r.scoring_func = "sigmoid";
  return r;
}

LayerConfig read_layer(const json& m, char kind, const std::string& where) {
  LayerConfig l;
  l.attention_no_op = kind != '*';
  l.ffn_no_op = kind != '-';
  if (kind == '*') {
    l.num_attention_heads = read_size(m, "num_attention_heads", nullptr, 32, where);
    l.num_key_value_heads = read_size(m, "num_key_value_heads", nullptr, l.num_attention_heads, where);
    l.head_dim = read_size(m, "head_dim", nullptr, 128, where);
  } else if (kind == '-') {
    l.intermediate_size = read_size(m, "intermediate_size", nullptr, 21504, where);
  } else if (kind == 'M') {
    l.mamba = read_mamba(m, where);
  } else {
    l.moe = read_moe(m, where);
  }
  return l;
}

// The fields a block_configs entry may override: the layer fields read above.
const std::set<std::string> kLayerFields = {
    "block_type", "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size",
    "mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "mamba_n_groups",
    "conv_kernel", "mamba_d_conv", "chunk_size", "mamba_chunk_size", "use_conv_bias",
    "mamba_conv_bias", "use_bias", "n_routed_experts", "num_experts_per_tok",
    "moe_intermediate_size", "n_shared_experts", "moe_shared_expert_intermediate_size",
    "moe_latent_size"};

std::string pattern_of(const json& j, const std::string& file) {
  std::string pattern;
  if (j.contains("layers_block_type") && !j["layers_block_type"].is_null()) {
    const json& types = j["layers_block_type"];
    if (!types.is_array() || types.empty())
      throw FormatError(fmt::format("[load_config] {}: field 'layers_block_type' must be a "
                                    "non-empty list of layer types, found {}", file,
                                    types.dump().substr(0, 200)));
    for (size_t i = 0; i < types.size(); ++i) {
      const std::string where = fmt::format("{} layers_block_type[{}]", file, i);
      if (!types[i].is_string())
        throw FormatError(fmt::format("[load_config] {}: expected a string, found {}", where,
                                      types[i].dump()));
      pattern += kind_char(types[i].get<std::string>(), where);
    }
    return pattern;
  }
  if (!j.contains("hybrid_override_pattern")) return pattern;
  pattern = get<std::string>(j, "hybrid_override_pattern", file);
  for (size_t i = 0; i < pattern.size(); ++i)
    if (std::string("M*-E").find(pattern[i]) == std::string::npos)
      throw FormatError(fmt::format("[load_config] {}: hybrid_override_pattern[{}] is '{}', "
                                    "expected one of M (Mamba-2), * (attention), - (MLP), E (MoE)",
                                    file, i, pattern[i]));
  return pattern;
}

std::vector<LayerConfig> read_layers(const json& j, const std::string& file) {
  const std::string pattern = pattern_of(j, file);
  std::vector<LayerConfig> layers;
  if (!j.contains("block_configs") || j["block_configs"].is_null()) {
    if (pattern.empty())
      throw FormatError(fmt::format("[load_config] {}: missing field 'hybrid_override_pattern' "
                                    "(or layers_block_type, or block_configs)", file));
    for (size_t i = 0; i < pattern.size(); ++i)
      layers.push_back(read_layer(j, pattern[i], file));
    return layers;
  }
  const json& blocks = j["block_configs"];
  if (!blocks.is_array() || blocks.empty() || blocks.size() > size_t(kMaxLayers))
    throw FormatError(fmt::format("[load_config] {}: block_configs must be a list of 1..{} "
                                  "blocks", file, kMaxLayers));
  std::string from_blocks;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string where = fmt::format("{} block_configs[{}]", file, i);
    const json& b = blocks[i];
    if (!b.is_object())
      throw FormatError(fmt::format("[load_config] {}: expected an object, found {}", where,
                                    b.dump().substr(0, 200)));
    const char kind = kind_char(get<std::string>(b, "block_type", where), where + ".block_type");
    json merged = j;  // the global fields, each one the block sets replaced
    for (const auto& [k, v] : b.items()) {
      if (v.is_null()) continue;
      if (!kLayerFields.count(k))
        throw FormatError(fmt::format("[load_config] {}: field '{}' is not a layer field this "
                                      "reader models (expected block_type and any of {})",
                                      where, k, fmt::join(kLayerFields, ", ")));
      merged[k] = v;
    }
    merged.erase("layers_block_type");
    layers.push_back(read_layer(merged, kind, where));
    from_blocks += kind;
  }
  if (!pattern.empty() && pattern != from_blocks)
    throw FormatError(fmt::format("[load_config] {}: the layer pattern {} disagrees with "
                                  "block_configs' block types {}", file, pattern, from_blocks));
  return layers;
}

}  // namespace

bool is_nemotron_h_model_type(const std::string& t) {
  return t == "nemotron_h" || t == "nemotron_h_puzzle";
}

ModelConfig nemotron_h_config_from_hf_json(const json& j, const std::string& file) {
  ModelConfig c;
  c.model_type = get<std::string>(j, "model_type", file);
  c.architecture = c.model_type == "nemotron_h_puzzle" ? "NemotronHPuzzleForCausalLM"
                                                        : "NemotronHForCausalLM";
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    c.architecture = j["architectures"][0].get<std::string>();
  c.vocab_size = get<int64_t>(j, "vocab_size", file);
  c.hidden_size = get<int64_t>(j, "hidden_size", file);
  c.max_position_embeddings = get_or<int64_t>(j, "max_position_embeddings", 4096, file);
  c.rms_norm_eps = get_or<double>(j, "layer_norm_epsilon", 1e-5, file);
  c.tie_word_embeddings = get_or<bool>(j, "tie_word_embeddings", false, file);
  c.attention_bias = get_or<bool>(j, "attention_bias", false, file);
  c.bos_token_id = first_id(j, "bos_token_id", 1, file);
  c.eos_token_id = first_id(j, "eos_token_id", 2, file);
  c.hf_spelling.dtype = !j.contains("torch_dtype") && j.contains("dtype");
  c.torch_dtype = get_or<std::string>(j, c.hf_spelling.dtype ? "dtype" : "torch_dtype",
                                      "bfloat16", file);
  c.rope = false;
  c.mlp_gated = false;
  const std::string act = get_or<std::string>(j, "mlp_hidden_act", "relu2", file);
  if (act != "relu2")
    throw FormatError(fmt::format("[load_config] {}: mlp_hidden_act '{}' is not supported "
                                  "(expected relu2: Nemotron-H's MLPs and experts are relu²)",
                                  file, act));
  c.layers = read_layers(j, file);
  c.extra = j;  // every field, written back over by nemotron_h_config_to_hf_json
  try {
    c.validate("load_config");
  } catch (const ConfigError& e) {
    throw FormatError(fmt::format("{} (in {})", e.what(), file));
  }
  return c;
}

char nemotron_h_layer_char(const LayerConfig& l, int64_t index) {
  const int parts = int(l.has_attention()) + int(l.has_mamba()) + int(l.has_ffn()) + int(l.has_moe());
  if (parts > 1)
    throw ConfigError(fmt::format("[nemotron_h] layer {}: {} parts (attention {}, Mamba-2 {}, "
                                  "MLP {}, MoE {}); a Nemotron-H layer has one", index, parts,
                                  l.has_attention(), l.has_mamba(), l.has_ffn(), l.has_moe()));
  if (l.has_mamba()) return 'M';
  if (l.has_attention()) return '*';
  if (l.has_ffn()) return '-';
  if (l.has_moe()) return 'E';
  return 0;
}

namespace {

// Writes `v` under the spelling `j` already has for the field (see spelling()).
template <typename T>
void put(json& j, const char* attr, const char* param, const T& v) {
  j[spelling(j, attr, param)] = v;
}

json mamba_fields(const Mamba2Config& m, const json& like) {
  json f = json::object();
  f[spelling(like, "mamba_num_heads", nullptr)] = m.mamba_num_heads;
  f[spelling(like, "mamba_head_dim", nullptr)] = m.mamba_head_dim;
  f[spelling(like, "ssm_state_size", nullptr)] = m.ssm_state_size;
  f[spelling(like, "n_groups", "mamba_n_groups")] = m.n_groups;
  f[spelling(like, "conv_kernel", "mamba_d_conv")] = m.conv_kernel;
  f[spelling(like, "chunk_size", "mamba_chunk_size")] = m.chunk_size;
  f[spelling(like, "use_conv_bias", "mamba_conv_bias")] = m.use_conv_bias;
  f["use_bias"] = m.use_bias;
  return f;
}

json moe_fields(const MoeConfig& m) {
  return {{"n_routed_experts", m.num_experts},
          {"num_experts_per_tok", m.num_experts_per_tok},
          {"moe_intermediate_size", m.moe_intermediate_size},
          {"n_shared_experts", m.shared_expert_intermediate_size > 0 ? 1 : 0},
          {"moe_shared_expert_intermediate_size", m.shared_expert_intermediate_size},
          {"moe_latent_size", m.moe_latent_size > 0 ? json(m.moe_latent_size) : json(nullptr)}};
}

json attention_fields(const LayerConfig& l) {
  return {{"num_attention_heads", l.num_attention_heads},
          {"num_key_value_heads", l.num_key_value_heads},
          {"head_dim", l.head_dim}};
}

// The fields of `layer` that differ from `global` (a block_configs entry's overrides).
json overrides(const json& layer, const json& global) {
  json out = json::object();
  for (const auto& [k, v] : layer.items())
    if (!global.contains(k) || global[k] != v) out[k] = v;
  return out;
}

json layer_fields(const LayerConfig& l, char kind, const json& like) {
  if (kind == 'M') return mamba_fields(*l.mamba, like);
  if (kind == 'E') return moe_fields(*l.moe);
  if (kind == '*') return attention_fields(l);
  return {{"intermediate_size", l.intermediate_size}};
}

}  // namespace

json nemotron_h_config_to_hf_json(const ModelConfig& c) {
  json j = c.extra.is_object() ? c.extra : json::object();
  std::string pattern;
  std::vector<const LayerConfig*> kept;
  for (size_t i = 0; i < c.layers.size(); ++i)
    if (const char ch = nemotron_h_layer_char(c.layers[i], int64_t(i))) {
      pattern += ch;
      kept.push_back(&c.layers[i]);
    }
  // The first layer of each kind gives the global fields; a layer that differs makes a puzzle.
  std::map<char, json> global;
  bool puzzle = false;
  for (size_t i = 0; i < kept.size(); ++i) {
    const json f = layer_fields(*kept[i], pattern[i], c.extra);
    if (!global.count(pattern[i])) global[pattern[i]] = f;
    puzzle = puzzle || global[pattern[i]] != f;
  }
  j["architectures"] = {puzzle ? "NemotronHPuzzleForCausalLM" : "NemotronHForCausalLM"};
  j["model_type"] = puzzle ? "nemotron_h_puzzle" : "nemotron_h";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = int64_t(kept.size());
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["layer_norm_epsilon"] = c.rms_norm_eps;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["attention_bias"] = c.attention_bias;
  j["bos_token_id"] = c.bos_token_id;
  if (!(j.contains("eos_token_id") && j["eos_token_id"].is_array() &&
        !j["eos_token_id"].empty() && j["eos_token_id"][0] == c.eos_token_id))
    j["eos_token_id"] = c.eos_token_id;
  j[c.hf_spelling.dtype ? "dtype" : "torch_dtype"] = c.torch_dtype;
  j["mlp_hidden_act"] = "relu2";
  for (const auto& [kind, f] : global)
    for (const auto& [k, v] : f.items()) j[k] = v;
  const bool as_list = j.contains("layers_block_type") && !j.contains("hybrid_override_pattern");
  if (as_list) {
    json types = json::array();
    const bool new_names = uses_new_kind_names(c.extra);
    for (char ch : pattern) types.push_back(kind_name(ch, new_names));
    j["layers_block_type"] = types;
  } else {
    j["hybrid_override_pattern"] = pattern;
    j.erase("layers_block_type");
  }
  j.erase("block_configs");
  if (puzzle) {
    json blocks = json::array();
    for (size_t i = 0; i < kept.size(); ++i) {
      json b = overrides(layer_fields(*kept[i], pattern[i], c.extra), global[pattern[i]]);
      // An MoE block states its five MoE fields, as the puzzle checkpoints do (TensorRT-LLM
      // _get_layer_moe_param reads each per block).
      if (pattern[i] == 'E') b = moe_fields(*kept[i]->moe);
      b["block_type"] = kind_name(pattern[i]);
      blocks.push_back(b);
    }
    j["block_configs"] = blocks;
  }
  return j;
}

}  // namespace ac
