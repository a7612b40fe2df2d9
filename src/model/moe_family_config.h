// The MoE layers of Qwen3-MoE (model_type "qwen3_moe") and Mixtral ("mixtral") config.json:
// which layers are sparse and the experts' sizes, over the Llama-like rest that
// config_from_hf_json reads (attention with RoPE, RMSNorm, SwiGLU).
//
// Qwen3-MoE (transformers models/qwen3_moe modeling_qwen3_moe.py Qwen3MoeDecoderLayer.__init__):
// layer i is sparse when i is not in mlp_only_layers and num_experts > 0 and (i + 1) %
// decoder_sparse_step == 0, else a dense Qwen3MoeMLP of intermediate_size. The sparse block
// (Qwen3MoeSparseMoeBlock) has a router gate [num_experts, D] without bias, num_experts SwiGLU
// experts of moe_intermediate_size, softmax top-num_experts_per_tok, no shared expert.
// Defaults (configuration_qwen3_moe.py): decoder_sparse_step 1, moe_intermediate_size 768,
// num_experts_per_tok 8, num_experts 128, mlp_only_layers []. Attention has q_norm / k_norm.
// Mixtral (models/mixtral modeling_mixtral.py MixtralSparseMoeBlock): every layer sparse, router
// gate [num_local_experts, D], num_local_experts SwiGLU experts (w1, w3, w2) of
// intermediate_size, softmax top-num_experts_per_tok. Defaults (configuration_mixtral.py):
// num_local_experts 8, num_experts_per_tok 2.
//
// Neither format has per-layer expert sizes; a model whose MoE layers differ is written with
// "moe_block_configs" (our extension, docs/formats.md: one object a layer, null for a dense one,
// {"num_experts", "num_experts_per_tok", "moe_intermediate_size"} for a sparse one), which
// no engine loads (engines/*.json "structure").
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "model/config.h"

namespace ac {

/// Whether config.json's model_type is an MoE family read by apply_moe_family.
bool is_moe_family_model_type(const std::string& model_type);

/// Turns the sparse layers of `c` (read by config_from_hf_json as dense layers of
/// intermediate_size) into MoE layers by the family's rules above. Throws FormatError naming
/// `file` and the field on a missing or mistyped field, a layer index outside 0..L-1 in
/// mlp_only_layers, a malformed moe_block_configs, a DeciLM block_configs, or a dense layer
/// without intermediate_size: what it accepts, moe_family_config_to_hf_json writes back.
void apply_moe_family(const nlohmann::json& j, const std::string& file, ModelConfig& c);

/// Writes config.json of a Qwen3-MoE / Mixtral model: the Llama-like fields, then the MoE
/// fields of its first sparse layer (and mlp_only_layers for Qwen3-MoE), and moe_block_configs
/// when the sparse layers differ. Removed blocks are left out. Throws ConfigError when the
/// attention differs by layer (no field expresses it) or a layer lost only one of its parts.
nlohmann::json moe_family_config_to_hf_json(const ModelConfig& c);

}  // namespace ac
