#include "hardware/native_ops.h"

#include <cmath>
#include <limits>

#include "model/llama.h"

namespace ac::native_ops {

at::Tensor rmsnorm(const at::Tensor& x, const at::Tensor& w, double eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * w;
}

at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up) { return at::silu(gate) * up; }

at::Tensor causal_allowed(int64_t pos0, int64_t T) {
  at::Tensor q_pos = at::arange(pos0, pos0 + T, at::kLong).unsqueeze(1);
  return at::arange(0, pos0 + T, at::kLong).unsqueeze(0) <= q_pos;  // [T, S]
}

static at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  int64_t h = x.size(-1) / 2;
  return x * cos + at::cat({-x.narrow(-1, h, h), x.narrow(-1, 0, h)}, -1) * sin;
}

at::Tensor attention(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                     at::Tensor& cache_k, at::Tensor& cache_v, int64_t pos0, int64_t H, int64_t G,
                     int64_t Hd, const at::Tensor& cos, const at::Tensor& sin,
                     const at::Tensor& allowed) {
  const int64_t B = q_in.size(0), T = q_in.size(1), S = pos0 + T;
  at::Tensor q = q_in.view({B, T, H, Hd}).transpose(1, 2);  // [B, H, T, Hd]
  at::Tensor k = k_in.view({B, T, G, Hd}).transpose(1, 2);  // [B, G, T, Hd]
  at::Tensor v = v_in.view({B, T, G, Hd}).transpose(1, 2);
  q = rope(q, cos, sin);
  k = rope(k, cos, sin);
  cache_k.narrow(2, pos0, T).copy_(k);
  cache_v.narrow(2, pos0, T).copy_(v);
  k = cache_k.narrow(2, 0, S);
  v = cache_v.narrow(2, 0, S);
  at::Tensor attn = grouped_attention(q.reshape({B, G, H / G, T, Hd}), k, v, allowed);
  attn = attn.reshape({B, H, T, Hd}).transpose(1, 2);  // [B, T, H, Hd]
  return attn.reshape({B, T, H * Hd});
}

}  // namespace ac::native_ops
