// Nemotron-H config.json (model_type "nemotron_h", NemotronHForCausalLM; and "nemotron_h_puzzle",
// NemotronHPuzzleForCausalLM, whose layers differ) read into the heterogeneous ModelConfig, one
// part per layer, and written back.
//
// The layer pattern: transformers 5 writes "layers_block_type", a list of "mamba", "attention",
// "moe" (and "mlp" in NVIDIA's remote code and vLLM's config); older configs write
// "hybrid_override_pattern", one character a layer, "M" Mamba-2, "*" attention, "-" MLP, "E" MoE
// (transformers models/nemotron_h configuration_nemotron_h.py NemotronHConfig._pattern_to_list;
// vLLM transformers_utils/configs/nemotron_h.py adds "-" / "mlp"). transformers reads
// layers_block_type when both are given, and the pattern's length, not num_hidden_layers, is the
// depth. A puzzle config's "block_configs" gives one object a layer, {"block_type": ..., and the
// fields that layer overrides}, each applied over the global fields (vLLM
// transformers_utils/configs/nemotron_h.py NemotronHPuzzleConfig.get_nemotron_h_config_for_layer;
// TensorRT-LLM _torch/models/modeling_nemotron_h.py _get_layer_moe_param: moe_intermediate_size,
// n_routed_experts, num_experts_per_tok, moe_latent_size, moe_shared_expert_intermediate_size).
//
// Fields and their defaults are NemotronHConfig.__init__'s (configuration_nemotron_h.py):
// mamba_num_heads 128, mamba_head_dim 64, ssm_state_size 128, mamba_n_groups 8 (attribute and
// saved name n_groups), mamba_d_conv 4 (conv_kernel), mamba_chunk_size 128 (chunk_size),
// mamba_conv_bias true (use_conv_bias), use_bias false; n_routed_experts 8, num_experts_per_tok
// 2, moe_intermediate_size 7688, moe_shared_expert_intermediate_size 7688, n_shared_experts 1,
// moe_latent_size null; intermediate_size 21504 with mlp_hidden_act "relu2" (the MLPs and the
// experts are relu², not gated); num_attention_heads 32, num_key_value_heads 8, head_dim 128;
// layer_norm_epsilon 1e-5. Either spelling of a renamed field is read (the attribute name
// first); the writer writes a field under the spelling it was read with. The attention has no
// RoPE (ModelConfig::rope false).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "model/config.h"

namespace ac {

/// Whether config.json's model_type is read by nemotron_h_config_from_hf_json.
bool is_nemotron_h_model_type(const std::string& model_type);

/// Parses a Nemotron-H / nemotron_h_puzzle config.json. `file` is used in error messages.
/// Throws FormatError naming the file and field on a missing or mistyped field, an unknown layer
/// type or pattern character, a pattern that disagrees with block_configs, an activation other
/// than relu2, or an override in block_configs[i] that is not a layer field.
ModelConfig nemotron_h_config_from_hf_json(const nlohmann::json& j, const std::string& file);

/// Writes config.json in the Nemotron-H layout: nemotron_h when every layer of a kind is alike,
/// nemotron_h_puzzle with block_configs (and the pattern) when they differ. Removed blocks are
/// left out (an export drops them). Throws ConfigError on a layer with two parts (attention and
/// an MoE: Nemotron-H has one part a layer).
nlohmann::json nemotron_h_config_to_hf_json(const ModelConfig& c);

/// The hybrid_override_pattern character of a layer: 'M', '*', '-', 'E', or 0 for a removed
/// block. Throws ConfigError naming the layer when it has more than one part.
char nemotron_h_layer_char(const LayerConfig& l, int64_t index);

}  // namespace ac
