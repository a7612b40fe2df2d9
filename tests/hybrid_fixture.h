// A tiny Nemotron-H config.json shared by the hybrid tests (config, cost, plan).
#pragma once
#include <nlohmann/json.hpp>

namespace ac::test {

/// One layer of each Nemotron-H kind, odd sizes: D 16, V 100; "M*-E": Mamba-2 nh 4 x P 6, N 5,
/// groups 2, conv 3, chunk 8; attention H4/G2 Hd 8; relu² MLP 24; MoE E6 k2 Fe10, shared 12,
/// latent 7.
inline nlohmann::json tiny_nemotron_h() {
  return {{"architectures", {"NemotronHForCausalLM"}}, {"model_type", "nemotron_h"},
          {"vocab_size", 100}, {"hidden_size", 16}, {"hybrid_override_pattern", "M*-E"},
          {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 8},
          {"intermediate_size", 24}, {"mamba_num_heads", 4}, {"mamba_head_dim", 6},
          {"ssm_state_size", 5}, {"n_groups", 2}, {"conv_kernel", 3}, {"chunk_size", 8},
          {"n_routed_experts", 6}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 10},
          {"moe_shared_expert_intermediate_size", 12}, {"moe_latent_size", 7},
          {"mlp_hidden_act", "relu2"}};
}

}  // namespace ac::test
