#include "model/moe_family_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "common/error.h"
#include "model/config_fields.h"

namespace ac {
using json = nlohmann::json;
using config_fields::get;
using config_fields::get_or;
using config_fields::positive;

bool is_moe_family_model_type(const std::string& t) { return t == "qwen3_moe" || t == "mixtral"; }

namespace {

// The expert count under either of its names: transformers 5's Qwen3MoeConfig and MixtralConfig
// both map num_experts to num_local_experts (attribute_map), so Qwen3-MoE's released configs
// write num_experts and transformers 5's save_pretrained writes num_local_experts, for both
// families. Two different values are refused.
int64_t expert_count(const json& j, const ModelConfig& c, const std::string& file) {
  const bool mixtral = c.model_type == "mixtral";
  const char* own = mixtral ? "num_local_experts" : "num_experts";
  const char* other = mixtral ? "num_experts" : "num_local_experts";
  const bool has_own = j.contains(own) && !j[own].is_null();
  const bool has_other = j.contains(other) && !j[other].is_null();
  if (has_own && has_other && get<int64_t>(j, own, file) != get<int64_t>(j, other, file))
    throw FormatError(fmt::format("[load_config] {}: num_experts {} and num_local_experts {} "
                                  "differ (transformers reads them as one field)", file,
                                  j["num_experts"].dump(), j["num_local_experts"].dump()));
  const char* key = has_own || !has_other ? own : other;
  return mixtral ? positive(j, key, file, 8) : get_or<int64_t>(j, key, 128, file);
}

MoeConfig family_moe(const json& j, const ModelConfig& c, const std::string& file) {
  MoeConfig m;
  m.gated = true;
  m.scoring_func = "softmax";
  m.num_experts = expert_count(j, c, file);
  if (c.model_type == "mixtral") {
    m.num_experts_per_tok = positive(j, "num_experts_per_tok", file, 2);
    m.moe_intermediate_size = positive(j, "intermediate_size", file);
  } else {
    m.num_experts_per_tok = positive(j, "num_experts_per_tok", file, 8);
    m.moe_intermediate_size = positive(j, "moe_intermediate_size", file, 768);
  }
  return m;
}

// Qwen3MoeDecoderLayer's rule for which layers are sparse (see the header).
std::vector<bool> sparse_layers(const json& j, const ModelConfig& c, const MoeConfig& m,
                                const std::string& file) {
  const size_t L = c.layers.size();
  if (c.model_type == "mixtral") return std::vector<bool>(L, true);
  std::vector<bool> sparse(L, false);
  if (m.num_experts <= 0) return sparse;
  const int64_t step = positive(j, "decoder_sparse_step", file, 1);
  std::set<int64_t> dense;
  if (j.contains("mlp_only_layers") && !j["mlp_only_layers"].is_null()) {
    const json& list = j["mlp_only_layers"];
    if (!list.is_array())
      throw FormatError(fmt::format("[load_config] {}: field 'mlp_only_layers' must be a list of "
                                    "layer indices, found {}", file, list.dump().substr(0, 200)));
    for (const json& v : list) {
      if (!json_holds<int64_t>(v) || v.get<int64_t>() < 0 || v.get<int64_t>() >= int64_t(L))
        throw FormatError(fmt::format("[load_config] {}: mlp_only_layers holds {}, expected "
                                      "layer indices in 0..{}", file, v.dump(), L - 1));
      dense.insert(v.get<int64_t>());
    }
  }
  for (size_t i = 0; i < L; ++i) sparse[i] = !dense.count(int64_t(i)) && (int64_t(i) + 1) % step == 0;
  return sparse;
}

// Our extension moe_block_configs (see the header): per-layer expert sizes over the global ones.
void apply_block_overrides(const json& j, const std::string& file, ModelConfig& c) {
  const json& blocks = j["moe_block_configs"];
  if (!blocks.is_array() || blocks.size() != c.layers.size())
    throw FormatError(fmt::format("[load_config] {}: moe_block_configs must be a list of {} "
                                  "entries (one a layer), found {}", file, c.layers.size(),
                                  blocks.dump().substr(0, 200)));
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string where = fmt::format("{} moe_block_configs[{}]", file, i);
    LayerConfig& l = c.layers[i];
    if (blocks[i].is_null() != !l.has_moe())
      throw FormatError(fmt::format("[load_config] {}: {} for a {} layer", where,
                                    blocks[i].is_null() ? "null" : "an MoE entry",
                                    l.has_moe() ? "sparse" : "dense"));
    if (blocks[i].is_null()) continue;
    l.moe->num_experts = positive(blocks[i], "num_experts", where, l.moe->num_experts);
    l.moe->num_experts_per_tok =
        positive(blocks[i], "num_experts_per_tok", where, l.moe->num_experts_per_tok);
    l.moe->moe_intermediate_size =
        positive(blocks[i], "moe_intermediate_size", where, l.moe->moe_intermediate_size);
  }
}

}  // namespace

void apply_moe_family(const json& j, const std::string& file, ModelConfig& c) {
  // Both families have the same attention and dense FFN in every layer: DeciLM's per-layer
  // block_configs would give layers that moe_family_config_to_hf_json cannot write back.
  if (j.contains("block_configs") && !j["block_configs"].is_null())
    throw FormatError(fmt::format("[load_config] {}: a {} config.json has no 'block_configs' "
                                  "(DeciLM's per-layer form); per-layer expert sizes go in "
                                  "'moe_block_configs'", file, c.model_type));
  const MoeConfig m = family_moe(j, c, file);
  const std::vector<bool> sparse = sparse_layers(j, c, m, file);
  if (c.model_type == "qwen3_moe" && !c.layers.empty())  // the dense layers' width, kept
    c.extra["intermediate_size"] = c.layers.front().intermediate_size;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    if (!sparse[i] && !c.layers[i].has_ffn())
      throw FormatError(fmt::format("[load_config] {}: layer {} is dense (mlp_only_layers, "
                                    "decoder_sparse_step or num_experts 0), so "
                                    "'intermediate_size' must be positive, found {}", file, i,
                                    c.layers[i].intermediate_size));
    if (!sparse[i]) continue;
    LayerConfig& l = c.layers[i];
    l.moe = m;
    l.ffn_no_op = true;
    l.intermediate_size = 0;
  }
  if (j.contains("moe_block_configs") && !j["moe_block_configs"].is_null())
    apply_block_overrides(j, file, c);
}

json moe_family_config_to_hf_json(const ModelConfig& c) {
  const bool mixtral = c.model_type == "mixtral";
  std::vector<const LayerConfig*> kept;
  const MoeConfig* first_moe = nullptr;
  int64_t dense_width = 0;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerConfig& l = c.layers[i];
    if (!l.is_present()) continue;  // a removed block: left out, as export drops it
    if (!l.has_attention() || !(l.has_ffn() || l.has_moe()))
      throw ConfigError(fmt::format("[config_to_hf_json] layer {}: {} has attention and an FFN "
                                    "or MoE in every layer; this one lost one of them", i,
                                    c.model_type));
    if (l.has_moe() && !first_moe) first_moe = &*l.moe;
    if (l.has_ffn() && !dense_width) dense_width = l.intermediate_size;
    kept.push_back(&l);
  }
  // Without a dense layer the width is only a field to fill; a zero one (read, unused, from an
  // all-sparse config) would make the dense twin below a DeciLM with no-op FFNs.
  if (!dense_width && c.extra.contains("intermediate_size") &&
      json_holds<int64_t>(c.extra["intermediate_size"]))
    dense_width = std::max<int64_t>(c.extra["intermediate_size"].get<int64_t>(), 0);
  if (!dense_width) dense_width = first_moe ? first_moe->moe_intermediate_size : 1;
  // The Llama-like rest, written by the dense writer from a twin whose MoE layers are dense.
  ModelConfig twin = c;
  twin.layers.clear();
  json blocks = json::array();
  json mlp_only = json::array();
  bool layers_differ = false;
  for (size_t i = 0; i < kept.size(); ++i) {
    LayerConfig d = *kept[i];
    if (d.moe) {
      layers_differ = layers_differ || *d.moe != *first_moe;
      blocks.push_back({{"num_experts", d.moe->num_experts},
                        {"num_experts_per_tok", d.moe->num_experts_per_tok},
                        {"moe_intermediate_size", d.moe->moe_intermediate_size}});
      d.moe.reset();
      d.ffn_no_op = false;
      d.intermediate_size = mixtral ? first_moe->moe_intermediate_size : dense_width;
    } else {
      blocks.push_back(nullptr);
      mlp_only.push_back(int64_t(i));
    }
    twin.layers.push_back(d);
  }
  if (!twin.is_homogeneous())
    throw ConfigError(fmt::format("[config_to_hf_json] {}: the attention or the dense FFN "
                                  "differs by layer, which {} config.json cannot express",
                                  describe(c), c.model_type));
  json j = config_to_hf_json(twin);
  j.erase("moe_block_configs");
  if (!first_moe) return j;
  j["num_experts_per_tok"] = first_moe->num_experts_per_tok;
  // The expert count under the name it was read by (expert_count), the other dropped: a
  // stale copy from `extra` would give transformers two values for one field.
  const char* experts_key = c.extra.contains("num_local_experts") ? "num_local_experts"
                            : c.extra.contains("num_experts")     ? "num_experts"
                            : mixtral                             ? "num_local_experts"
                                                                  : "num_experts";
  j.erase("num_experts");
  j.erase("num_local_experts");
  j[experts_key] = first_moe->num_experts;
  if (mixtral) {
    if (!mlp_only.empty())
      throw ConfigError(fmt::format("[config_to_hf_json] {}: Mixtral has an MoE in every layer",
                                    describe(c)));
    j["intermediate_size"] = first_moe->moe_intermediate_size;
  } else {
    j["moe_intermediate_size"] = first_moe->moe_intermediate_size;
    j["intermediate_size"] = dense_width;
    j["decoder_sparse_step"] = 1;
    j["mlp_only_layers"] = mlp_only;
  }
  if (layers_differ) j["moe_block_configs"] = blocks;
  return j;
}

}  // namespace ac
