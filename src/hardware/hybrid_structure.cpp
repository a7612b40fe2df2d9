#include "hardware/hybrid_structure.h"

#include <fmt/format.h>

#include "model/moe_family_config.h"

namespace ac {

namespace {

// One "must equal the first layer of its kind" rule over the layers `has` selects.
template <typename Has, typename Value>
void same_over_layers(const ModelConfig& c, bool allowed, const char* field, const char* kind,
                      const std::string& engine, Has has, Value value,
                      std::vector<std::string>& bad) {
  if (allowed) return;
  int64_t first = -1;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerConfig& l = c.layers[i];
    if (!has(l)) continue;
    if (first < 0) {
      first = int64_t(i);
      continue;
    }
    const auto v = value(l), f = value(c.layers[size_t(first)]);
    if (v != f)
      bad.push_back(fmt::format("layer {}: {} {}, but {} builds every {} layer with one value "
                                "(layer {} has {})", i, field, v, engine, kind, first, f));
  }
}

}  // namespace

void hybrid_structure_violations(const ModelConfig& c, const EngineSpec& engine,
                                 std::vector<std::string>& bad) {
  const EngineStructure& r = engine.structure;
  const std::string& e = engine.name;
  // Qwen3-MoE and Mixtral: config.json has one set of MoE fields (moe_block_configs is ours).
  const bool global_moe = is_moe_family_model_type(c.model_type);
  auto attn = [](const LayerConfig& l) { return l.has_attention(); };
  auto mamba = [](const LayerConfig& l) { return l.has_mamba(); };
  auto moe = [](const LayerConfig& l) { return l.has_moe(); };
  same_over_layers(c, r.per_layer_query_heads, "num_attention_heads", "attention", e, attn,
                   [](const LayerConfig& l) { return l.num_attention_heads; }, bad);
  same_over_layers(c, r.per_layer_head_dim, "head_dim", "attention", e, attn,
                   [](const LayerConfig& l) { return l.head_dim; }, bad);
  same_over_layers(c, r.per_layer_mamba, "Mamba-2 shape (mamba_num_heads x mamba_head_dim)",
                   "Mamba-2", e, mamba, [](const LayerConfig& l) {
                     const Mamba2Config& m = *l.mamba;
                     return fmt::format("{}x{} N{} groups {} conv {}", m.mamba_num_heads,
                                        m.mamba_head_dim, m.ssm_state_size, m.n_groups,
                                        m.conv_kernel);
                   }, bad);
  same_over_layers(c, r.per_layer_num_experts && !global_moe, "num_experts", "MoE", e, moe,
                   [](const LayerConfig& l) { return l.moe->num_experts; }, bad);
  same_over_layers(c, r.per_layer_expert_width && !global_moe, "moe_intermediate_size", "MoE", e,
                   moe, [](const LayerConfig& l) { return l.moe->moe_intermediate_size; }, bad);
  same_over_layers(c, r.per_layer_experts_per_token && !global_moe, "num_experts_per_tok", "MoE",
                   e, moe, [](const LayerConfig& l) { return l.moe->num_experts_per_tok; }, bad);
}

}  // namespace ac
