// causal_attention (model/kernels.h): the causal attention of a prefill or a training step, one
// (batch, KV group) at a time, with its own backward. Per query head of the group:
//   S = Q K^T / sqrt(Hd)  [T, T]   (oneDNN sgemm)
//   P = softmax over the keys s <= t of each row t, 0 for s > t
//   O = P V               [T, Hd]  (oneDNN sgemm)
// and for the backward, with dO given (Vaswani et al. 2017 eq. 1, differentiated; the row term
// as in FlashAttention, Dao et al. 2022, Algorithm 2 / eq. of dS):
//   dV += P^T dO,  dP = dO V^T,  D_t = sum_s P_ts dP_ts,  dS = P * (dP - D),
//   dQ = dS K / sqrt(Hd),  dK += dS^T Q / sqrt(Hd).
// This replaces about ten ATen kernels per layer (matmul's per-entry bmm, the scale, the masked
// fill, softmax, their backwards, and the copies of broadcast and transposed operands).
#include "model/kernels.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <immintrin.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/accelerator.h"
#include "common/error.h"
#include "common/gemm.h"
#include "common/simd.h"
#include "model/llama.h"

namespace ac {
namespace {

// Exponentials below exp(-87) are flushed to 0 by the floor's complement: a weight that small
// (< 1.7e-38 of the row's largest) cannot change a float sum, and a denormal would cost a
// microcode assist per multiply.
constexpr float kExpFloor = -87.0f;

// p[0, n): softmax in place; p[n, T): 0. n >= 1.
void softmax_row_scalar(float* p, int64_t n, int64_t T) {
  float m = p[0];
  for (int64_t s = 1; s < n; ++s) m = std::max(m, p[s]);
  double sum = 0;
  for (int64_t s = 0; s < n; ++s) {
    const float d = p[s] - m;
    p[s] = d < kExpFloor ? 0.0f : std::exp(d);
    sum += p[s];
  }
  const float inv = float(1.0 / sum);
  for (int64_t s = 0; s < n; ++s) p[s] *= inv;
  std::fill(p + n, p + T, 0.0f);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"), noinline)) void softmax_row_avx512(float* p, int64_t n,
                                                                   int64_t T) {
  auto mask = [](int64_t left) { return __mmask16(left >= 16 ? 0xFFFF : (1u << left) - 1); };
  const __m512 lowest = _mm512_set1_ps(std::numeric_limits<float>::lowest());
  __m512 vm = lowest;
  for (int64_t s = 0; s < n; s += 16)
    vm = _mm512_max_ps(vm, _mm512_mask_loadu_ps(lowest, mask(n - s), p + s));
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(vm)), floor = _mm512_set1_ps(kExpFloor);
  __m512 vs = _mm512_setzero_ps();
  for (int64_t s = 0; s < n; s += 16) {
    const __mmask16 k = mask(n - s);
    const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, p + s), m);
    // max(floor, d) is d when d is NaN (the second operand), so a NaN score stays NaN.
    const __mmask16 tiny = _mm512_cmp_ps_mask(d, floor, _CMP_LT_OQ);
    const __m512 e = _mm512_maskz_mov_ps(k & __mmask16(~tiny), _ZGVeN16v_expf(_mm512_max_ps(floor, d)));
    vs = _mm512_add_ps(vs, e);
    _mm512_mask_storeu_ps(p + s, k, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vs));
  for (int64_t s = 0; s < n; s += 16) {
    const __mmask16 k = mask(n - s);
    _mm512_mask_storeu_ps(p + s, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p + s), inv));
  }
  std::fill(p + n, p + T, 0.0f);
}
#pragma GCC diagnostic pop

// softmax_row_avx512 with 8 lanes (AVX2 + FMA): the same floor, float sum and NaN rule; the
// row's last n % 8 scores through masked loads and stores.
__attribute__((target("avx2,fma"), noinline)) void softmax_row_avx2(float* p, int64_t n,
                                                                   int64_t T) {
  const int64_t full = n - n % 8;
  const __m256i tail = avx2::lanes_below(n - full);
  const __m256 lowest = _mm256_set1_ps(std::numeric_limits<float>::lowest());
  __m256 vm = avx2::load_or(p + full, tail, lowest);
  for (int64_t s = 0; s < full; s += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(p + s));
  const __m256 m = _mm256_set1_ps(avx2::reduce_max(vm)), floor = _mm256_set1_ps(kExpFloor);
  // e = exp(max(floor, d)), 0 where d < floor; max keeps a NaN d (its second operand) and the
  // ordered compare is false for it, so a NaN score stays NaN.
  auto exp_floored = [&](__m256 x) __attribute__((target("avx2,fma"))) {
    const __m256 d = _mm256_sub_ps(x, m);
    const __m256 tiny = _mm256_cmp_ps(d, floor, _CMP_LT_OQ);
    return _mm256_andnot_ps(tiny, _ZGVdN8v_expf(_mm256_max_ps(floor, d)));
  };
  __m256 vs = _mm256_setzero_ps();
  for (int64_t s = 0; s < full; s += 8) {
    const __m256 e = exp_floored(_mm256_loadu_ps(p + s));
    vs = _mm256_add_ps(vs, e);
    _mm256_storeu_ps(p + s, e);
  }
  if (full < n) {
    const __m256 e = _mm256_and_ps(_mm256_castsi256_ps(tail), exp_floored(_mm256_maskload_ps(p + full, tail)));
    vs = _mm256_add_ps(vs, e);
    _mm256_maskstore_ps(p + full, tail, e);
  }
  const __m256 inv = _mm256_set1_ps(1.0f / avx2::reduce_add(vs));
  for (int64_t s = 0; s < full; s += 8)
    _mm256_storeu_ps(p + s, _mm256_mul_ps(_mm256_loadu_ps(p + s), inv));
  if (full < n)
    _mm256_maskstore_ps(p + full, tail, _mm256_mul_ps(_mm256_maskload_ps(p + full, tail), inv));
  std::fill(p + n, p + T, 0.0f);
}

using SoftmaxRow = void (*)(float* p, int64_t n, int64_t T);

// The variant kernel_isa() names (common/simd.h).
SoftmaxRow softmax_row_for(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::avx512: return softmax_row_avx512;
    case CpuIsa::avx2: return softmax_row_avx2;
    case CpuIsa::scalar: return softmax_row_scalar;
  }
  return softmax_row_scalar;
}

// dp[0, n) := p * (dp - sum_s p_s dp_s) over s < n; dp[n, T) := 0 (p is 0 there).
void softmax_backward_row(const float* p, float* dp, int64_t n, int64_t T) {
  double d = 0;
  for (int64_t s = 0; s < n; ++s) d += double(p[s]) * double(dp[s]);
  const float df = float(d);
  for (int64_t s = 0; s < n; ++s) dp[s] = p[s] * (dp[s] - df);
  std::fill(dp + n, dp + T, 0.0f);
}

// Shapes of one call: B batch, G KV groups, R = H / G query heads per group, T positions.
struct Dims {
  int64_t B, G, R, T, Hd;
};

// q [B, G, R, T, Hd], k, v [B, G, T, Hd] contiguous fp32 -> o [B, G, R, T, Hd]; p: the
// probabilities [B, G, R, T, T] (kept for the backward), or undefined (a per-thread scratch).
void forward_kernel(const Dims& d, const float* q, const float* k, const float* v, float* o,
                    float* p_all) {
  const float scale = float(1.0 / std::sqrt(double(d.Hd)));
  const SoftmaxRow softmax_row = softmax_row_for(kernel_isa());
  const int64_t TT = d.T * d.T, THd = d.T * d.Hd;
  at::parallel_for(0, d.B * d.G, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(p_all ? 0 : size_t(TT));
    for (int64_t bg = begin; bg < end; ++bg) {
      const float* kb = k + bg * THd;
      const float* vb = v + bg * THd;
      for (int64_t r = 0; r < d.R; ++r) {
        const int64_t head = bg * d.R + r;
        float* p = p_all ? p_all + head * TT : scratch.data();
        sgemm('N', 'T', d.T, d.T, d.Hd, scale, q + head * THd, d.Hd, kb, d.Hd, 0.0f, p, d.T);
        for (int64_t t = 0; t < d.T; ++t)
          softmax_row(p + t * d.T, t + 1, d.T);
        sgemm('N', 'N', d.T, d.Hd, d.T, 1.0f, p, d.T, vb, d.Hd, 0.0f, o + head * THd, d.Hd);
      }
    }
  });
}

// Gradients of forward_kernel: do [B, G, R, T, Hd] -> dq (same), dk, dv [B, G, T, Hd].
void backward_kernel(const Dims& d, const float* q, const float* k, const float* v,
                     const float* p_all, const float* dout, float* dq, float* dk, float* dv) {
  const float scale = float(1.0 / std::sqrt(double(d.Hd)));
  const int64_t TT = d.T * d.T, THd = d.T * d.Hd;
  at::parallel_for(0, d.B * d.G, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> ds(static_cast<size_t>(TT));
    for (int64_t bg = begin; bg < end; ++bg) {
      const float* kb = k + bg * THd;
      const float* vb = v + bg * THd;
      for (int64_t r = 0; r < d.R; ++r) {
        const int64_t head = bg * d.R + r;
        const float* p = p_all + head * TT;
        const float* g = dout + head * THd;
        const float beta = r == 0 ? 0.0f : 1.0f;  // the group's dK, dV sum over its query heads
        sgemm('T', 'N', d.T, d.Hd, d.T, 1.0f, p, d.T, g, d.Hd, beta, dv + bg * THd, d.Hd);
        sgemm('N', 'T', d.T, d.T, d.Hd, 1.0f, g, d.Hd, vb, d.Hd, 0.0f, ds.data(), d.T);
        for (int64_t t = 0; t < d.T; ++t)
          softmax_backward_row(p + t * d.T, ds.data() + t * d.T, t + 1, d.T);
        sgemm('N', 'N', d.T, d.Hd, d.T, scale, ds.data(), d.T, kb, d.Hd, 0.0f, dq + head * THd,
              d.Hd);
        sgemm('T', 'N', d.T, d.Hd, d.T, scale, ds.data(), d.T, q + head * THd, d.Hd, beta,
              dk + bg * THd, d.Hd);
      }
    }
  });
}

Dims dims_of(const at::Tensor& qg) {
  return {qg.size(0), qg.size(1), qg.size(2), qg.size(3), qg.size(4)};
}

struct CausalAttentionFunction : torch::autograd::Function<CausalAttentionFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& qg_in,
                            const at::Tensor& k_in, const at::Tensor& v_in) {
    const at::Tensor qg = qg_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
    const Dims d = dims_of(qg);
    at::Tensor o = at::empty(qg.sizes(), qg.options());
    at::Tensor p = at::empty({d.B, d.G, d.R, d.T, d.T}, qg.options());
    forward_kernel(d, qg.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
                   o.data_ptr<float>(), p.data_ptr<float>());
    ctx->save_for_backward({qg, k, v, p});
    return o;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &qg = saved[0], &k = saved[1], &v = saved[2], &p = saved[3];
    const at::Tensor dout = grads[0].contiguous();
    const Dims d = dims_of(qg);
    at::Tensor dq = at::empty_like(qg), dk = at::empty_like(k), dv = at::empty_like(v);
    backward_kernel(d, qg.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
                    p.data_ptr<float>(), dout.data_ptr<float>(), dq.data_ptr<float>(),
                    dk.data_ptr<float>(), dv.data_ptr<float>());
    return {dq, dk, dv};
  }
};

}  // namespace

at::Tensor causal_attention(const at::Tensor& qg, const at::Tensor& k, const at::Tensor& v) {
  const bool shapes_ok = qg.dim() == 5 && k.dim() == 4 && v.sizes() == k.sizes() &&
                         k.size(0) == qg.size(0) && k.size(1) == qg.size(1) &&
                         k.size(2) == qg.size(3) && k.size(3) == qg.size(4);
  if (!shapes_ok)
    throw ConfigError(fmt::format("[causal_attention] expected qg [B, G, H/G, T, Hd] and k, v "
                                  "[B, G, T, Hd], found qg {}, k {}, v {}", qg.sizes().vec(),
                                  k.sizes().vec(), v.sizes().vec()));
  const bool fast = qg.numel() > 0 && k.numel() > 0 && cpu_fast_path({&qg, &k, &v});
  if (!fast) {  // the ATen path with the causal mask
    return grouped_attention(qg, k, v, causal_allowed(/*pos0=*/0, qg.size(3), qg.device()));
  }
  const bool record = at::GradMode::is_enabled() &&
                      (qg.requires_grad() || k.requires_grad() || v.requires_grad());
  if (record) return CausalAttentionFunction::apply(qg, k, v);
  const at::Tensor qc = qg.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  at::Tensor o = at::empty(qc.sizes(), qc.options());
  forward_kernel(dims_of(qc), qc.data_ptr<float>(), kc.data_ptr<float>(), vc.data_ptr<float>(),
                 o.data_ptr<float>(), nullptr);
  return o;
}

}  // namespace ac
