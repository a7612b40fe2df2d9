// MoeConfig: one mixture-of-experts layer (in place of a dense FFN), as Nemotron-H's "E" layers,
// Qwen3-MoE's sparse blocks and Mixtral's block_sparse_moe build it (docs/design.md, "The
// architecture space").
//
// Letters: E = routed experts, k = experts per token, Fe = an expert's FFN width
// (moe_intermediate_size), Fs = the shared expert's width, Lt = the latent width (moe_latent_size:
// the routed experts work in Lt instead of D), Din = Lt or D.
// Tensors of one layer (transformers models/nemotron_h NemotronHMoE / NemotronHTopKRouter,
// models/qwen3_moe Qwen3MoeSparseMoeBlock, models/mixtral MixtralSparseMoeBlock; vLLM
// model_executor/models/nemotron_h.py NemotronHMoE):
//   gate.weight                      [E, D]       the router reads the full-width hidden state
//   gate.e_score_correction_bias     [E]          Nemotron-H (router_bias)
//   fc1_latent_proj.weight           [Lt, D]      latent MoE only (Nemotron 3 Super)
//   experts: up_proj [Fe, Din], down_proj [Din, Fe] (relu², Nemotron-H), plus gate_proj
//            [Fe, Din] when gated (SwiGLU: Qwen3-MoE gate/up/down_proj, Mixtral w1/w3/w2)
//   fc2_latent_proj.weight           [D, Lt]
//   shared_experts: up_proj [Fs, D], down_proj [D, Fs] (+ gate_proj when gated): every token,
//            on the full-width input
#pragma once
#include <cstdint>
#include <string>

namespace ac {

/// One MoE layer. Field names follow config.json: num_experts (Nemotron-H n_routed_experts,
/// Qwen3-MoE num_experts, Mixtral num_local_experts), num_experts_per_tok, moe_intermediate_size
/// (Mixtral: intermediate_size), moe_shared_expert_intermediate_size, moe_latent_size.
struct MoeConfig {
  int64_t num_experts = 0;              // E
  int64_t num_experts_per_tok = 0;      // k, 1 <= k <= E
  int64_t moe_intermediate_size = 0;    // Fe
  int64_t shared_expert_intermediate_size = 0;  // Fs; 0 = no shared expert
  int64_t moe_latent_size = 0;          // Lt; 0 = the experts see D
  bool gated = true;                    // SwiGLU experts (3 matrices); false: relu² (up, down)
  bool router_bias = false;             // e_score_correction_bias [E] (Nemotron-H)
  std::string scoring_func = "softmax"; // "softmax" (Qwen3-MoE, Mixtral) or "sigmoid" (Nemotron-H)

  /// Din: the width the routed experts read and write (moe_latent_size, else D).
  int64_t expert_input_width(int64_t hidden_size) const {
    return moe_latent_size > 0 ? moe_latent_size : hidden_size;
  }
  /// Matrices per expert: 3 gated (gate, up, down), 2 for relu² (up, down).
  int64_t matrices() const { return gated ? 3 : 2; }
  /// Parameters of one routed expert.
  int64_t expert_parameters(int64_t hidden_size) const {
    return matrices() * expert_input_width(hidden_size) * moe_intermediate_size;
  }
  /// Parameters every token uses whatever the routing: the router, the shared expert and the
  /// latent projections.
  int64_t dense_parameters(int64_t hidden_size) const;
  /// All parameters of the layer (without the block's RMSNorm): dense + E experts.
  int64_t num_parameters(int64_t hidden_size) const {
    return dense_parameters(hidden_size) + num_experts * expert_parameters(hidden_size);
  }
  /// Parameters one token uses: dense + k experts.
  int64_t active_parameters(int64_t hidden_size) const {
    return dense_parameters(hidden_size) + num_experts_per_tok * expert_parameters(hidden_size);
  }
  /// Throws ConfigError("[where] ...") naming the field on non-positive sizes, k outside 1..E,
  /// or a size above the ceilings of model/config.h.
  void validate(const std::string& where) const;

  bool operator==(const MoeConfig& o) const;
  bool operator!=(const MoeConfig& o) const { return !(*this == o); }
};

}  // namespace ac
