// Mamba2Config: one Mamba-2 mixer layer (a state-space layer in place of attention), as
// Nemotron-H's "M" layers build it (docs/design.md, "The architecture space").
//
// Letters: nh = mamba_num_heads, P = mamba_head_dim, N = ssm_state_size, Gm = n_groups (the
// groups B and C are shared over, as KV heads are in GQA), Kc = conv_kernel, Q = chunk_size.
//   d_inner  = nh * P                       (the mixer's inner width, x and z)
//   conv_dim = d_inner + 2 * Gm * N         (x, B and C go through the causal conv1d)
// Tensors of one mixer (transformers models/nemotron_h modeling_nemotron_h.py
// NemotronHMamba2Mixer.__init__; the same in vLLM model_executor/models/nemotron_h.py
// NemotronHMambaDecoderLayer over MambaMixer2 and llama.cpp src/models/nemotron-h.cpp
// build_mamba2_layer):
//   in_proj.weight   [d_inner + conv_dim + nh, D]   z, xBC and dt in one GEMM (+ bias: use_bias)
//   conv1d.weight    [conv_dim, 1, Kc]               depthwise causal conv (+ bias [conv_dim]:
//                                                    use_conv_bias)
//   dt_bias, A_log, D [nh]
//   norm.weight      [d_inner]                       gated RMSNorm over groups of d_inner / Gm
//   out_proj.weight  [D, d_inner]                    (+ bias: use_bias)
// The recurrent state of one sequence, instead of a KV cache (vLLM
// model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator.mamba2_state_shape):
//   conv state [Kc - 1, conv_dim] in the model dtype, SSM state [nh, P, N] in
//   mamba_ssm_cache_dtype; neither grows with the context.
#pragma once
#include <cstdint>
#include <string>

namespace ac {

/// One Mamba-2 mixer. Field names are transformers' NemotronHConfig attributes (config.json
/// spells them mamba_num_heads, mamba_head_dim, ssm_state_size, mamba_n_groups / n_groups,
/// mamba_d_conv / conv_kernel, mamba_chunk_size / chunk_size, mamba_conv_bias, use_bias).
struct Mamba2Config {
  int64_t mamba_num_heads = 0;  // nh
  int64_t mamba_head_dim = 0;   // P
  int64_t ssm_state_size = 0;   // N
  int64_t n_groups = 1;         // Gm; nh % Gm == 0
  int64_t conv_kernel = 4;      // Kc
  int64_t chunk_size = 128;     // Q, the SSD scan's chunk length in the prefill
  bool use_conv_bias = true;
  bool use_bias = false;        // in_proj / out_proj biases
  /// The SSM state's dtype in the serving cache: config.json mamba_ssm_cache_dtype
  /// (NemotronHConfig's default "float32"; vLLM's --mamba-ssm-cache-dtype follows it).
  std::string ssm_state_dtype = "float32";

  int64_t d_inner() const { return mamba_num_heads * mamba_head_dim; }
  int64_t conv_dim() const { return d_inner() + 2 * n_groups * ssm_state_size; }
  /// Output width of in_proj: z [d_inner], xBC [conv_dim], dt [nh].
  int64_t in_proj_width() const { return d_inner() + conv_dim() + mamba_num_heads; }
  /// Parameters of the mixer for hidden size D (without the block's RMSNorm).
  int64_t num_parameters(int64_t hidden_size) const;
  /// Elements of one sequence's conv state, (Kc - 1) * conv_dim.
  int64_t conv_state_elements() const { return (conv_kernel - 1) * conv_dim(); }
  /// Elements of one sequence's SSM state, nh * P * N.
  int64_t ssm_state_elements() const { return mamba_num_heads * mamba_head_dim * ssm_state_size; }
  /// Throws ConfigError("[where] layer i: ...") naming the field on non-positive sizes, a head
  /// count that is not a multiple of n_groups, or a size above the ceilings of model/config.h.
  void validate(const std::string& where) const;

  bool operator==(const Mamba2Config& o) const;
  bool operator!=(const Mamba2Config& o) const { return !(*this == o); }
};

}  // namespace ac
