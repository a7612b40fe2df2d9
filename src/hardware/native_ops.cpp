#include "hardware/native_ops.h"

#include <cmath>
#include <limits>

#include "model/kernels.h"
#include "model/llama.h"

namespace ac::native_ops {

at::Tensor rmsnorm(const at::Tensor& x, const at::Tensor& w, double eps) {
  return rms_norm(x, w, eps);  // the forward's kernel (model/kernels.h)
}

at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up) { return swiglu(gate, up); }

at::Tensor attention(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                     at::Tensor& cache_k, at::Tensor& cache_v, int64_t pos0, int64_t H, int64_t G,
                     int64_t Hd, const at::Tensor& cos, const at::Tensor& sin,
                     const at::Tensor& allowed) {
  const int64_t B = q_in.size(0), T = q_in.size(1), S = pos0 + T;
  // As the forward (model/llama.cpp): RoPE into the heads' layout.
  at::Tensor q = rope_to_heads(q_in.view({B, T, H, Hd}), cos, sin);  // [B, H, T, Hd]
  at::Tensor k = rope_to_heads(k_in.view({B, T, G, Hd}), cos, sin);  // [B, G, T, Hd]
  at::Tensor v = v_in.view({B, T, G, Hd}).transpose(1, 2);
  cache_k.narrow(2, pos0, T).copy_(k);
  cache_v.narrow(2, pos0, T).copy_(v);
  k = cache_k.narrow(2, 0, S);
  v = cache_v.narrow(2, 0, S);
  // As the forward (model/llama.cpp): a block from position 0 runs the fused causal kernel.
  at::Tensor qg = q.reshape({B, G, H / G, T, Hd});
  at::Tensor attn = pos0 == 0 && T > 1 ? causal_attention(qg, k, v)
                                       : grouped_attention(qg, k, v, allowed);
  attn = attn.reshape({B, H, T, Hd}).transpose(1, 2);  // [B, T, H, Hd]
  return attn.reshape({B, T, H * Hd});
}

}  // namespace ac::native_ops
