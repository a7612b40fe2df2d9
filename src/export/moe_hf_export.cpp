#include "export/moe_hf_export.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "common/json_io.h"
#include "io/companion_files.h"
#include "io/safetensors.h"

namespace ac {

namespace {

// The per-expert names of one family (the file header's table).
struct ExpertNames {
  std::string block;  // "model.layers.N.mlp." or "model.layers.N.block_sparse_moe."
  const char *gate, *up, *down;
};

ExpertNames expert_names(const ModelConfig& c, int64_t layer) {
  if (c.model_type == "mixtral")
    return {fmt::format("model.layers.{}.block_sparse_moe.", layer), "w1", "w3", "w2"};
  return {fmt::format("model.layers.{}.mlp.", layer), "gate_proj", "up_proj", "down_proj"};
}

}  // namespace

void check_moe_uniform(const ModelConfig& c) {
  std::vector<std::string> layers;
  const MoeConfig* first = nullptr;
  bool differ = false;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    if (!c.layers[i].has_moe()) continue;
    const MoeConfig& m = *c.layers[i].moe;
    if (!first) first = &m;
    differ = differ || m.num_experts != first->num_experts ||
             m.num_experts_per_tok != first->num_experts_per_tok ||
             m.moe_intermediate_size != first->moe_intermediate_size;
    layers.push_back(fmt::format("layer {}: {} experts, {} per token, width {}", i, m.num_experts,
                                 m.num_experts_per_tok, m.moe_intermediate_size));
  }
  if (differ)
    throw ConfigError(fmt::format(
        "[save_moe_checkpoint] {}: the sparse layers differ ({}); {} config.json holds one "
        "num_experts, num_experts_per_tok and moe_intermediate_size for all of them. Prune every "
        "sparse layer to the same sizes (the per-layer layout is not written yet)",
        describe(c), fmt::join(layers, "; "), c.model_type));
}

TensorMap moe_to_tensor_map(const MoeModel& m) {
  const ModelConfig& c = m.config;
  TensorMap t = to_tensor_map(c, m.weights);
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    if (!c.layers[size_t(i)].has_moe()) continue;
    // The roles' table gives the FFN's norm to dense FFNs only (as moe_model_from_tensor_map).
    t[fmt::format("model.layers.{}.post_attention_layernorm.weight", i)] =
        m.weights.layers[size_t(i)].post_attention_layernorm;
    const MoeLayerWeights& w = m.moe[size_t(i)];
    const ExpertNames n = expert_names(c, i);
    t[n.block + "gate.weight"] = w.router;  // [E, D]
    for (int64_t e = 0; e < w.gate_proj.size(0); ++e) {
      const std::string ex = fmt::format("{}experts.{}.", n.block, e);
      t[ex + n.gate + ".weight"] = w.gate_proj[e].contiguous();  // [Fe, D]
      t[ex + n.up + ".weight"] = w.up_proj[e].contiguous();
      t[ex + n.down + ".weight"] = w.down_proj[e].contiguous();  // [D, Fe]
    }
  }
  return t;
}

void write_moe_files(const fs::path& dir, const MoeModel& m, const fs::path& tokenizer_from) {
  check_moe_uniform(m.config);
  m.config.validate("save_moe_checkpoint");
  const nlohmann::json config = config_to_hf_json(m.config);
  const TensorMap tensors = moe_to_tensor_map(m);
  write_json_file(dir / "config.json", config);
  save_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
  if (!tokenizer_from.empty()) copy_companion_files(tokenizer_from, dir, "save_moe_checkpoint");
}

void save_moe_checkpoint(const fs::path& dir, const MoeModel& m, const fs::path& tokenizer_from) {
  check_moe_uniform(m.config);  // refused before a staging folder is made
  m.config.validate("save_moe_checkpoint");
  StagingDir staging(dir);
  write_moe_files(staging.path(), m, tokenizer_from);
  staging.commit();
}

}  // namespace ac
