// The engine rules (engines/*.json "structure", hardware/engine.h EngineStructure) for hybrid and
// MoE models: which per-layer differences an engine's loader builds for Nemotron-H
// (nemotron_h_puzzle block_configs), Qwen3-MoE and Mixtral.
//
//   per_layer_mamba              every Mamba-2 layer alike unless true (vLLM sizes the Mamba
//                                state from the global config; llama.cpp reads one ssm_d_inner,
//                                ssm_d_state, ssm_n_group)
//   per_layer_num_experts        num_experts alike over the MoE layers unless true
//   per_layer_expert_width       moe_intermediate_size alike unless true
//   per_layer_experts_per_token  num_experts_per_tok alike unless true
// and, as for dense models, per_layer_query_heads / per_layer_head_dim over the attention
// layers. Removing whole layers is always allowed: a shorter pattern (hybrid_override_pattern,
// block_configs) is a model every loader builds. A Qwen3-MoE or Mixtral config.json has no
// per-layer MoE fields at all (model/moe_family_config.h): its MoE layers must be alike in every
// engine, whatever the rules say.
#pragma once
#include <string>
#include <vector>

#include "hardware/engine.h"
#include "model/config.h"

namespace ac {

/// Appends to `bad` one line per rule of `engine` that hybrid model `c` breaks, naming the
/// layer, the field, its value and the first layer of the kind it must equal. Never throws.
void hybrid_structure_violations(const ModelConfig& c, const EngineSpec& engine,
                                 std::vector<std::string>& bad);

}  // namespace ac
