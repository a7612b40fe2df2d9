// The Mamba-2 mixer of Nemotron-H's "M" layers: its weights, its recurrent state, the SSD scan
// and the mixer's forward, fp32.
//
// Letters (model/mamba2_config.h): B batch, T tokens, D hidden, nh = mamba_num_heads,
// P = mamba_head_dim, N = ssm_state_size, Gm = n_groups, Kc = conv_kernel,
// d_inner = nh * P, conv_dim = d_inner + 2 * Gm * N.
//
// Reference, transformers 5.25 (the goldens' pinned version, tests/golden/hf_golden_nemotron_h.py)
// models/nemotron_h/modeling_nemotron_h.py, its PyTorch path (neither mamba-ssm nor causal-conv1d
// installed):
//   NemotronHMamba2Mixer.forward: in_proj -> z [d_inner], xBC [conv_dim], dt [nh];
//   causal_conv1d_forward / causal_conv1d_fn: depthwise conv1d over xBC with Kc - 1 zeros on the
//     left (padding Kc - 1, the first T outputs), its bias, then SiLU (mamba_hidden_act);
//   mamba2_scan_forward -> mamba2_chunk_scan (prefill) / mamba2_selective_state_update (decode):
//     dt = softplus(dt + dt_bias) (torch's threshold 20), A = -exp(A_log) in fp32, B and C shared
//     by the nh / Gm heads of a group, the state recurrence in fp32 and y += D * x;
//   NemotronHRMSNormGated: y * silu(z) in fp32, RMS-normalised over groups of d_inner / Gm
//     (eps = layer_norm_epsilon), times norm.weight; then out_proj.
// The recurrence, per head h, for t = 1..T (Mamba-2, Dao & Gu 2024, "Transformers are SSMs",
// eq. 2 with a scalar A per head):
//   state_t = exp(dt_t A_h) state_{t-1} + dt_t x_t B_t^T        [P, N]
//   y_t     = state_t C_t + D_h x_t                              [P]
// ssd_scan computes it step by step (the plain reference, and the decode of one token, as
// mamba2_selective_state_update); ssd_chunk_scan by chunks of chunk_size (the SSD algorithm,
// section 6, as mamba2_chunk_scan: the prefill), equal to it up to float rounding (a test
// bounds the difference).
#pragma once
#include <ATen/ATen.h>

#include <functional>

#include "model/mamba2_config.h"

namespace ac {

/// One mixer's tensors, fp32 (model.layers.i.mixer.* in the checkpoint).
struct Mamba2Weights {
  at::Tensor in_proj;        // [d_inner + conv_dim + nh, D]
  at::Tensor in_proj_bias;   // [d_inner + conv_dim + nh] (use_bias only)
  at::Tensor conv1d;         // [conv_dim, 1, Kc] depthwise
  at::Tensor conv1d_bias;    // [conv_dim] (use_conv_bias only)
  at::Tensor dt_bias;        // [nh]
  at::Tensor A_log;          // [nh]
  at::Tensor D;              // [nh]
  at::Tensor norm;           // [d_inner] the gated RMSNorm's weight
  at::Tensor out_proj;       // [D, d_inner]
  at::Tensor out_proj_bias;  // [D] (use_bias only)
};

/// The recurrent state of one mixer over a batch, instead of a KV cache: it does not grow with
/// the context. Both fp32.
struct Mamba2State {
  at::Tensor conv;  // [B, conv_dim, Kc - 1] the last Kc - 1 conv inputs (zeros before the first)
  at::Tensor ssm;   // [B, nh, P, N]
  /// Zeros for batch B: the state before the first token.
  static Mamba2State zeros(const Mamba2Config& m, int64_t batch,
                           const c10::Device& device = c10::kCPU);
};

/// The SSD recurrence (see the header), sequentially over T, in fp32.
/// x [B, T, nh, P], dt [B, T, nh] (after dt_bias and softplus), A [nh] (negative),
/// Bm and Cm [B, T, Gm, N], D [nh]; `state` [B, nh, P, N], read as the state before the first
/// token and replaced by the state after the last. Returns y [B, T, nh, P] fp32.
/// Throws ConfigError("[ssd_scan] ...") on inconsistent shapes (nh not a multiple of Gm).
at::Tensor ssd_scan(const at::Tensor& x, const at::Tensor& dt, const at::Tensor& A,
                    const at::Tensor& Bm, const at::Tensor& Cm, const at::Tensor& D,
                    at::Tensor& state);

/// The same recurrence by chunks of `chunk_size` tokens (mamba2_chunk_scan): within a chunk as
/// a masked product (C B^T times the decays between positions), across chunks through the states
/// at their ends. Same arguments, result and errors as ssd_scan (also ConfigError on
/// chunk_size < 1). Memory grows with T * chunk_size * nh (the decays of a chunk's positions).
at::Tensor ssd_chunk_scan(const at::Tensor& x, const at::Tensor& dt, const at::Tensor& A,
                          const at::Tensor& Bm, const at::Tensor& Cm, const at::Tensor& D,
                          at::Tensor& state, int64_t chunk_size);

/// What pruning and importance attach to one mixer's forward (prune/nemotron_h_prune.h,
/// importance/nemotron_h_importance.h); both optional.
struct Mamba2Hooks {
  /// [nh, P] fp32 0/1: multiplies the gated norm's input y * silu(z) channel by channel, and the
  /// norm's mean square of each group is taken over the group's kept channels only (their sum
  /// of squares over their count), so that the output equals that of the mixer sliced to the
  /// kept heads and head_dim channels, whose groups are that much narrower. Every group must
  /// keep at least one channel.
  at::Tensor channels;
  /// Called with the input of out_proj, [B, T, d_inner] fp32 (the gated norm's output, after
  /// the mask); valid during the call only.
  std::function<void(const at::Tensor&)> on_out_proj_input;
};

/// The mixer on the normed hidden states h [B, T, D] fp32: returns [B, T, D] fp32. With `state`
/// the tokens continue it (conv inputs and SSM state) and it is updated to the state after the
/// last token; without, they start from zeros. `eps`: the gated norm's layer_norm_epsilon.
/// A single token runs ssd_scan, more ssd_chunk_scan with the config's chunk_size, as
/// transformers' mamba2_scan_forward chooses. `hooks`: masks and observer (Mamba2Hooks), none
/// by default.
at::Tensor mamba2_mixer(const at::Tensor& h, const Mamba2Config& m, const Mamba2Weights& w,
                        double eps, Mamba2State* state = nullptr,
                        const Mamba2Hooks* hooks = nullptr);

}  // namespace ac
