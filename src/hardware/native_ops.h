// The operators of the native forward pass (src/model/llama.cpp, LlamaModel::hidden_states),
// written out op for op so that the profiler can time each at any shape. Keep them in step
// with the forward; the profile's calibration (profile.h) measures whatever the forward does
// beyond them (token checks and RoPE tables built once per step; the causal mask,
// ac::causal_allowed, only where a block does not start at position 0).
#pragma once
#include <ATen/ATen.h>

namespace ac::native_ops {

/// RMSNorm of x [..., D] with weight w [D] (fp32): x * rsqrt(mean(x^2) + eps) * w.
at::Tensor rmsnorm(const at::Tensor& x, const at::Tensor& w, double eps);

/// SwiGLU activation: silu(gate) * up, both [..., F].
at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up);

/// Attention between the q/k/v projections and o_proj, for T new tokens at positions
/// [pos0, pos0 + T): RoPE (rotate-half) on q [B, T, H*Hd] and k [B, T, G*Hd], writes k and v
/// into the cache [B, G, T_max, Hd] at pos0, attends q to the cached [B, G, S = pos0+T, Hd]
/// with GQA broadcasting ([B, G, H/G, T, S] scores), masked by `allowed` [T, S] when defined
/// (the prefill), softmax, weighted sum; returns [B, T, H*Hd]. cos, sin: [T, Hd]. A block from
/// position 0 (pos0 = 0, T > 1) runs causal_attention (model/llama.h), as the forward does.
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     at::Tensor& cache_k, at::Tensor& cache_v, int64_t pos0, int64_t H, int64_t G,
                     int64_t Hd, const at::Tensor& cos, const at::Tensor& sin,
                     const at::Tensor& allowed);

}  // namespace ac::native_ops
