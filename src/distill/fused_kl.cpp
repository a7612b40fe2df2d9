#include "distill/fused_kl.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <immintrin.h>
#include <torch/autograd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "common/error.h"
#include "common/gemm.h"
#include "common/simd.h"

namespace ac {
namespace {

constexpr float kLowest = std::numeric_limits<float>::lowest();
constexpr float kExpFloor = -87.0f;  // kl_row_avx512, kl_row_avx2

// Flushes denormals to zero (MXCSR FTZ | DAZ) for a row: probabilities below 1e-38 would
// otherwise take a microcode assist on every multiply (~100 cycles each); restored on return.
struct FlushDenormals {
  unsigned saved = _mm_getcsr();
  FlushDenormals() { _mm_setcsr(saved | 0x8040); }
  ~FlushDenormals() { _mm_setcsr(saved); }
};

// One row in three sweeps over L2-resident data, two exponentials per element (the ATen path,
// kl_block, takes four and some ten sweeps). With u = z / tau and the row maxima m_t, m_s:
//   e_t = exp(u_t - m_t), e_s = exp(u_s - m_s), S_t = sum e_t, S_s = sum e_s
//   p = e_t / S_t, q = e_s / S_s, log p - log q = (u_t - u_s) + c,
//   c = (m_s - m_t) - log S_t + log S_s,   KL = sum p (log p - log q),   g = q - p.
// zt, zs: [V] floats (contiguous); g: [V] out, (q - p) * scale; scratch: [2 V]. Returns KL, NaN /
// Inf when an input is not finite (the caller then takes the ATen path for the row).
// GCC 12 warns of an uninitialized variable inside its own _mm512_reduce_* intrinsics (GCC bug
// 105593), not in this code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) float kl_row_avx512(const float* zt, const float* zs,
                                                        int64_t V, float inv_tau, float scale,
                                                        float* g, float* scratch) {
  FlushDenormals flush;
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512 it = _mm512_set1_ps(inv_tau);
  auto tail = [](int64_t left) { return __mmask16(left >= 16 ? 0xFFFF : (1u << left) - 1); };
  __m512 mt = neg_inf, ms = neg_inf;
  for (int64_t i = 0; i < V; i += 16) {
    const __mmask16 k = tail(V - i);
    mt = _mm512_max_ps(mt, _mm512_mask_loadu_ps(neg_inf, k, zt + i));
    ms = _mm512_max_ps(ms, _mm512_mask_loadu_ps(neg_inf, k, zs + i));
  }
  const float max_t = _mm512_reduce_max_ps(mt) * inv_tau, max_s = _mm512_reduce_max_ps(ms) * inv_tau;
  const __m512 vmt = _mm512_set1_ps(max_t), vms = _mm512_set1_ps(max_s);
  const __m512 floor = _mm512_set1_ps(kExpFloor);
  // Sums in double (16 floats -> 2 x 8 doubles): a float sum over 32000 terms loses ~1e-5.
  auto add_pd = [](__m512d& lo, __m512d& hi, __m512 v) __attribute__((target("avx512f"))) {
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  };
  __m512d st0 = _mm512_setzero_pd(), st1 = st0, ss0 = st0, ss1 = st0;
  for (int64_t i = 0; i < V; i += 16) {
    const __mmask16 k = tail(V - i);
    // Arguments below kExpFloor are raised to it: libmvec's expf sends every vector with a lane
    // outside its fast range through scalar expf (5x slower), and a wide logit range has such
    // lanes everywhere. exp(kExpFloor) = 1.6e-38 is below what a sum >= 1 (the max term is
    // exp(0)) can resolve. Lanes past V: -inf, raised to the floor (at most 15 x 1.6e-38 added
    // to the sum), never stored. max(floor, x) keeps a NaN x (the second operand), so such a
    // row still goes to the ATen path.
    __m512 et = _ZGVeN16v_expf(_mm512_max_ps(
        floor, _mm512_fmsub_ps(_mm512_mask_loadu_ps(neg_inf, k, zt + i), it, vmt)));
    __m512 es = _ZGVeN16v_expf(_mm512_max_ps(
        floor, _mm512_fmsub_ps(_mm512_mask_loadu_ps(neg_inf, k, zs + i), it, vms)));
    add_pd(st0, st1, et);
    add_pd(ss0, ss1, es);
    _mm512_mask_storeu_ps(scratch + i, k, et);
    _mm512_mask_storeu_ps(scratch + V + i, k, es);
  }
  const double sum_t = _mm512_reduce_add_pd(_mm512_add_pd(st0, st1));
  const double sum_s = _mm512_reduce_add_pd(_mm512_add_pd(ss0, ss1));
  const __m512 rt = _mm512_set1_ps(float(1.0 / sum_t)), rs = _mm512_set1_ps(float(1.0 / sum_s));
  const __m512 vscale = _mm512_set1_ps(scale);
  const __m512 c = _mm512_set1_ps(float((double(max_s) - double(max_t)) - std::log(sum_t) + std::log(sum_s)));
  __m512d kl0 = _mm512_setzero_pd(), kl1 = kl0;
  // g is written once and read only by the head's GEMMs after the whole block: with a 64-byte
  // aligned row, non-temporal stores skip reading its cache lines from memory first (a
  // [B T, V] gradient is far larger than the caches; this saves a third of the row's traffic).
  const bool stream = reinterpret_cast<uintptr_t>(g) % 64 == 0;
  for (int64_t i = 0; i < V; i += 16) {
    const __mmask16 k = tail(V - i);
    __m512 p = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, scratch + i), rt);
    __m512 q = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, scratch + V + i), rs);
    __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, zt + i), _mm512_maskz_loadu_ps(k, zs + i));
    add_pd(kl0, kl1, _mm512_mul_ps(p, _mm512_fmadd_ps(d, it, c)));
    const __m512 gi = _mm512_mul_ps(_mm512_sub_ps(q, p), vscale);
    if (stream && k == 0xFFFF)
      _mm512_stream_ps(g + i, gi);
    else
      _mm512_mask_storeu_ps(g + i, k, gi);
  }
  _mm_sfence();  // the non-temporal stores are visible before the row is reported done
  return float(_mm512_reduce_add_pd(_mm512_add_pd(kl0, kl1)));
}
#pragma GCC diagnostic pop

// kl_row_avx512 with 8 lanes (AVX2 + FMA, libmvec's _ZGVdN8v_expf): the same three sweeps, clamping,
// double sums, NaN rule and non-temporal stores. Whole vectors in the loops; the last V % 8
// elements go through 8-float buffers padded as the AVX-512 kernel's masked lanes are (-inf
// before the exponentials, 0 after), so that the numbers are those of the masked form.
__attribute__((target("avx2,fma"))) float kl_row_avx2(const float* zt, const float* zs,
                                                      int64_t V, float inv_tau, float scale,
                                                      float* g, float* scratch) {
  FlushDenormals flush;
  constexpr float inf = std::numeric_limits<float>::infinity();
  const __m256 it = _mm256_set1_ps(inv_tau);
  const int64_t full = V - V % 8, left = V - full;
  alignas(32) float tt[8], ts[8];  // the tail of zt, zs, padded
  for (int j = 0; j < 8; ++j) {
    tt[j] = j < left ? zt[full + j] : -inf;
    ts[j] = j < left ? zs[full + j] : -inf;
  }
  __m256 mt = _mm256_load_ps(tt), ms = _mm256_load_ps(ts);
  for (int64_t i = 0; i < full; i += 8) {
    mt = _mm256_max_ps(mt, _mm256_loadu_ps(zt + i));
    ms = _mm256_max_ps(ms, _mm256_loadu_ps(zs + i));
  }
  const float max_t = avx2::reduce_max(mt) * inv_tau, max_s = avx2::reduce_max(ms) * inv_tau;
  const __m256 vmt = _mm256_set1_ps(max_t), vms = _mm256_set1_ps(max_s);
  const __m256 floor = _mm256_set1_ps(kExpFloor);
  __m256d st0 = _mm256_setzero_pd(), st1 = st0, ss0 = st0, ss1 = st0;
  // As kl_row_avx512: max(floor, x) raises arguments to the floor and keeps a NaN x.
  auto exps = [&](const float* a, const float* b, float* ea, float* eb)
      __attribute__((target("avx2,fma"))) {
    const __m256 et = _ZGVdN8v_expf(_mm256_max_ps(floor, _mm256_fmsub_ps(_mm256_loadu_ps(a), it, vmt)));
    const __m256 es = _ZGVdN8v_expf(_mm256_max_ps(floor, _mm256_fmsub_ps(_mm256_loadu_ps(b), it, vms)));
    avx2::add_pd(st0, st1, et);
    avx2::add_pd(ss0, ss1, es);
    _mm256_storeu_ps(ea, et);
    _mm256_storeu_ps(eb, es);
  };
  for (int64_t i = 0; i < full; i += 8) exps(zt + i, zs + i, scratch + i, scratch + V + i);
  alignas(32) float et_tail[8], es_tail[8];
  if (left > 0) {  // padding lanes: -inf raised to the floor, added (<= 7 x 1.6e-38), not kept
    exps(tt, ts, et_tail, es_tail);
    std::memcpy(scratch + full, et_tail, size_t(left) * sizeof(float));
    std::memcpy(scratch + V + full, es_tail, size_t(left) * sizeof(float));
  }
  const double sum_t = avx2::reduce_add(_mm256_add_pd(st0, st1));
  const double sum_s = avx2::reduce_add(_mm256_add_pd(ss0, ss1));
  const __m256 rt = _mm256_set1_ps(float(1.0 / sum_t)), rs = _mm256_set1_ps(float(1.0 / sum_s));
  const __m256 vscale = _mm256_set1_ps(scale);
  const __m256 c = _mm256_set1_ps(float((double(max_s) - double(max_t)) - std::log(sum_t) + std::log(sum_s)));
  __m256d kl0 = _mm256_setzero_pd(), kl1 = kl0;
  // p, q, d -> KL terms and the gradient (q - p) * scale.
  auto terms = [&](const float* ea, const float* eb, const float* a, const float* b)
      __attribute__((target("avx2,fma"))) {
    const __m256 p = _mm256_mul_ps(_mm256_loadu_ps(ea), rt);
    const __m256 q = _mm256_mul_ps(_mm256_loadu_ps(eb), rs);
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b));
    avx2::add_pd(kl0, kl1, _mm256_mul_ps(p, _mm256_fmadd_ps(d, it, c)));
    return _mm256_mul_ps(_mm256_sub_ps(q, p), vscale);
  };
  // As kl_row_avx512: non-temporal stores for a 64-byte aligned row.
  const bool stream = reinterpret_cast<uintptr_t>(g) % 64 == 0;
  for (int64_t i = 0; i < full; i += 8) {
    const __m256 gi = terms(scratch + i, scratch + V + i, zt + i, zs + i);
    if (stream)
      _mm256_stream_ps(g + i, gi);
    else
      _mm256_storeu_ps(g + i, gi);
  }
  if (left > 0) {  // padding lanes as the masked loads' zeros: p = q = d = 0, a 0 term
    alignas(32) float gt[8];
    for (int j = 0; j < 8; ++j) {
      if (j >= left) et_tail[j] = es_tail[j] = tt[j] = ts[j] = 0.0f;
    }
    _mm256_store_ps(gt, terms(et_tail, es_tail, tt, ts));
    std::memcpy(g + full, gt, size_t(left) * sizeof(float));
  }
  _mm_sfence();  // the non-temporal stores are visible before the row is reported done
  return float(avx2::reduce_add(_mm256_add_pd(kl0, kl1)));
}

// The row kernel the fused loss runs, read per call (kernel_isa() may be switched by tests):
// AVX-512 or AVX2 by kernel_isa(), or nullptr for the ATen path (kl_block), which
// AC_FUSED_KL=aten forces and a CPU without AVX2 + FMA takes.
using KlRow = float (*)(const float*, const float*, int64_t, float, float, float*, float*);
KlRow vector_row_kernel() {
  static const bool aten = [] {
    const char* e = std::getenv("AC_FUSED_KL");
    return e && std::strcmp(e, "aten") == 0;
  }();
  if (aten) return nullptr;
  switch (kernel_isa()) {
    case CpuIsa::avx512: return kl_row_avx512;
    case CpuIsa::avx2: return kl_row_avx2;
    case CpuIsa::scalar: return nullptr;
  }
  return nullptr;
}

// One block of n rows: kl [n] <- KL per row, g [n, V] <- q - p (unscaled). Runs inside
// at::parallel_for, so every op here is single-threaded on data that fits in L2.
void kl_block(const at::Tensor& zt, const at::Tensor& zs, double tau, at::Tensor kl,
              at::Tensor g) {
  at::Tensor lt = at::log_softmax(tau == 1.0 ? zt : zt / tau, 1);  // [n, V] log p
  at::Tensor ls = at::log_softmax(tau == 1.0 ? zs : zs / tau, 1);  // [n, V] log q
  at::Tensor p = lt.exp();
  at::exp_out(g, ls);
  g.sub_(p);
  at::Tensor d = lt.sub(ls);  // [n, V]
  at::sum_out(kl, d.mul_(p), at::IntArrayRef{1});
  if (kl.isfinite().all().item<bool>()) return;
  // Infinite logits somewhere (rare): the reference's rule, clamped log-probabilities.
  lt.clamp_min_(kLowest);
  ls.clamp_min_(kLowest);
  kl.copy_((p * lt).sum(1) - (p * ls).sum(1));
}

// KL and gradient of n rows: kl [n] <- KL per row (0 where masked), g [n, V] <- (q - p) * scale
// (0 where masked). zt, zs: [n, V] fp32 (any row stride); keep_rows: [n] bool or undefined
// (every row); kl and g contiguous. Rows are split over the intra-op threads in blocks of
// `rows`.
void kl_rows(const at::Tensor& zt, const at::Tensor& zs, const at::Tensor& keep_rows, double tau,
             float scale, FusedKlKernel kernel, int64_t rows, at::Tensor kl, at::Tensor g) {
  const int64_t N = zs.size(0), V = zs.size(1);
  const int64_t blocks = (N + rows - 1) / rows;
  const KlRow row_kernel = kernel == FusedKlKernel::aten ? nullptr : vector_row_kernel();
  if (!row_kernel || zt.stride(1) != 1 ||
      zs.stride(1) != 1) {
    at::parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t r0 = b * rows, n = std::min(rows, N - r0);
        kl_block(zt.narrow(0, r0, n), zs.narrow(0, r0, n), tau, kl.narrow(0, r0, n),
                 g.narrow(0, r0, n));
      }
    });
    if (keep_rows.defined()) {
      at::Tensor drop = keep_rows.logical_not();
      kl.masked_fill_(drop, 0.0);
      g.masked_fill_(drop.unsqueeze(1), 0.0);
    }
    g.mul_(scale);
    return;
  }
  // One row at a time, masked rows skipped (zero gradient), the scale folded in.
  const bool* kept = keep_rows.defined() ? keep_rows.data_ptr<bool>() : nullptr;
  float* kl_out = kl.data_ptr<float>();
  at::parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> scratch(static_cast<size_t>(2 * V));  // the row kernel's e_t, e_s
    for (int64_t r = b0 * rows; r < std::min(N, b1 * rows); ++r) {
      float* gr = g.data_ptr<float>() + r * V;
      if (kept && !kept[r]) {
        std::fill(gr, gr + V, 0.0f);
        kl_out[r] = 0.0f;
        continue;
      }
      const float v = row_kernel(zt.data_ptr<float>() + r * zt.stride(0),
                                    zs.data_ptr<float>() + r * zs.stride(0), V,
                                    float(1.0 / tau), scale, gr, scratch.data());
      if (std::isfinite(v)) {
        kl_out[r] = v;
      } else {  // a non-finite logit in the row: the ATen path and its clamping rule
        kl_block(zt.narrow(0, r, 1), zs.narrow(0, r, 1), tau, kl.narrow(0, r, 1),
                 g.narrow(0, r, 1));
        g.narrow(0, r, 1).mul_(scale);
      }
    }
  });
}

// Rows of V per cache block of the row kernel: ~128 K floats.
int64_t default_rows_per_block(int64_t V) {
  return std::max<int64_t>(1, (128 * 1024) / std::max<int64_t>(V, 1));
}

// The positions a loss averages over: keep [B, T] bool flattened to rows [N] (undefined when
// keep is [0]: every position), their count (at least 1, so that an all-masked batch gives 0,
// not NaN) and the gradient's scale tau / count (d loss / d z_s = m_t tau (q - p) / count).
struct KeptRows {
  at::Tensor rows;
  double count;
  float scale;
};
KeptRows kept_rows(const at::Tensor& keep, int64_t N, double tau) {
  at::Tensor rows = keep.numel() > 0 ? keep.reshape({N}).contiguous() : at::Tensor();
  const double count = rows.defined() ? std::max<double>(1, rows.sum().item<double>())
                                      : double(std::max<int64_t>(N, 1));
  return {rows, count, float(tau / count)};
}

class FusedKl : public torch::autograd::Function<FusedKl> {
 public:
  // student [B, T, V] (grad), teacher [B, T, V], keep [B, T] bool or [0] (= every position; a
  // custom Function's tensor arguments must be defined) -> loss [].
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& student,
                            const at::Tensor& teacher, const at::Tensor& keep, double tau,
                            int64_t rows_per_block, int64_t kernel_id) {
    const int64_t V = student.size(2), N = student.size(0) * student.size(1);
    at::Tensor zs = student.flatten(0, 1), zt = teacher.flatten(0, 1);  // [N, V] (views)
    const KeptRows kept = kept_rows(keep, N, tau);
    const at::Tensor& keep_rows = kept.rows;
    const double count = kept.count;
    const float scale = kept.scale;
    at::Tensor g = at::empty({N, V}, student.options());                // [N, V]
    at::Tensor kl = at::zeros({N}, student.options());                  // [N]
    kl_rows(zt, zs, keep_rows, tau, scale, FusedKlKernel(kernel_id),
            rows_per_block > 0 ? rows_per_block : default_rows_per_block(V), kl, g);
    ctx->save_for_backward({g});
    ctx->saved_data["sizes"] = student.sizes().vec();
    return kl.sum() / count * (tau * tau);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    at::Tensor g = ctx->get_saved_variables()[0];
    const at::Tensor& go = grad_out[0];
    at::Tensor grad = go.item<double>() == 1.0 ? g : g * go;
    return {grad.view(ctx->saved_data["sizes"].toIntVector()), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// The head and the KL together (fused_linear_kl_loss): `rows` positions at a time, their
// logits computed into [rows, V] buffers, the KL and its gradient taken there, and the
// gradient pushed through the student's head at once. Gradients are computed in forward and
// kept for backward (the loss is the graph's end: grad_out is a scalar).
class FusedLinearKl : public torch::autograd::Function<FusedLinearKl> {
 public:
  // hs [B, T, Ds] (grad), ws [V, Ds] (grad), ht [B, T, Dt], wt [V, Dt], keep [B, T] bool or
  // [0] -> loss [].
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hs,
                            const at::Tensor& ws, const at::Tensor& ht, const at::Tensor& wt,
                            const at::Tensor& keep, double tau, int64_t rows_per_chunk,
                            int64_t kernel_id) {
    const int64_t N = hs.size(0) * hs.size(1), V = ws.size(0);
    const at::Tensor hs2 = hs.reshape({N, hs.size(2)}).contiguous();  // [N, Ds]
    const at::Tensor ht2 = ht.reshape({N, ht.size(2)}).contiguous();  // [N, Dt]
    const KeptRows kept = kept_rows(keep, N, tau);
    const at::Tensor& keep_rows = kept.rows;
    const double count = kept.count;
    const float scale = kept.scale;
    static const int64_t env_rows = [] {  // AC_LINEAR_KL_ROWS: chunk size, for tuning
      const char* e = std::getenv("AC_LINEAR_KL_ROWS");
      return e ? std::max<int64_t>(1, std::atoll(e)) : int64_t(0);
    }();
    const int64_t R = std::min(N, rows_per_chunk > 0 ? rows_per_chunk
                                  : env_rows > 0     ? env_rows
                                                     : kLinearKlRows);
    at::Tensor zt = at::empty({R, V}, hs.options()), zs = at::empty({R, V}, hs.options());
    at::Tensor g = at::empty({R, V}, hs.options());                       // [R, V]
    at::Tensor kl = at::zeros({N}, hs.options());                         // [N]
    at::Tensor dhs = at::empty({N, hs.size(2)}, hs.options());            // [N, Ds]
    at::Tensor dws = at::zeros_like(ws, at::MemoryFormat::Contiguous);    // [V, Ds]
    const at::Tensor wst = ws.t(), wtt = wt.t();
    const int64_t rows = default_rows_per_block(V);
    for (int64_t r0 = 0; r0 < N; r0 += R) {
      const int64_t n = std::min(R, N - r0);
      at::Tensor zt_c = zt.narrow(0, 0, n), zs_c = zs.narrow(0, 0, n), g_c = g.narrow(0, 0, n);
      const at::Tensor hs_c = hs2.narrow(0, r0, n);
      gemm_out(zt_c, ht2.narrow(0, r0, n), wtt);  // teacher logits [n, V]
      gemm_out(zs_c, hs_c, wst);                   // student logits [n, V]
      kl_rows(zt_c, zs_c, keep_rows.defined() ? keep_rows.narrow(0, r0, n) : at::Tensor(), tau,
              scale, FusedKlKernel(kernel_id), rows, kl.narrow(0, r0, n), g_c);
      at::Tensor dhs_c = dhs.narrow(0, r0, n);
      gemm_out(dhs_c, g_c, ws);              // d loss / d hs = g ws      [n, Ds]
      gemm_out(dws, g_c.t(), hs_c, 1.0f);    // d loss / d ws += g^T hs   [V, Ds]
    }
    ctx->save_for_backward({dhs, dws});
    ctx->saved_data["hs_sizes"] = hs.sizes().vec();
    return kl.sum() / count * (tau * tau);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor& go = grad_out[0];
    const bool one = go.item<double>() == 1.0;
    at::Tensor dhs = one ? saved[0] : saved[0] * go, dws = one ? saved[1] : saved[1] * go;
    return {dhs.view(ctx->saved_data["hs_sizes"].toIntVector()), dws, at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor fused_linear_kl_loss(const at::Tensor& teacher_hidden, const at::Tensor& teacher_head,
                                const at::Tensor& student_hidden, const at::Tensor& student_head,
                                const at::Tensor& keep, double temperature, int64_t rows_per_chunk,
                                FusedKlKernel kernel) {
  const char* where = "fused_linear_kl_loss";
  auto dims = [](const at::Tensor& t) { return fmt::format("[{}]", fmt::join(t.sizes(), ", ")); };
  if (teacher_hidden.dim() != 3 || student_hidden.dim() != 3 ||
      teacher_hidden.size(0) != student_hidden.size(0) ||
      teacher_hidden.size(1) != student_hidden.size(1))
    throw ConfigError(msg(where, "hidden states must be [B, T, D] with the same B and T, found "
                          "teacher {} and student {}", dims(teacher_hidden), dims(student_hidden)));
  if (teacher_head.dim() != 2 || student_head.dim() != 2 ||
      teacher_head.size(0) != student_head.size(0) ||
      teacher_head.size(1) != teacher_hidden.size(2) ||
      student_head.size(1) != student_hidden.size(2))
    throw ConfigError(msg(where, "heads must be [V, D] with one V and the D of their hidden "
                          "states, found teacher head {} (hidden {}) and student head {} "
                          "(hidden {})", dims(teacher_head), dims(teacher_hidden),
                          dims(student_head), dims(student_hidden)));
  for (const at::Tensor* t : {&teacher_hidden, &teacher_head, &student_hidden, &student_head})
    if (t->scalar_type() != at::kFloat)
      throw ConfigError(msg(where, "hidden states and heads must be fp32, found {}",
                            c10::toString(t->scalar_type())));
  if (keep.defined() && (keep.dim() != 2 || keep.size(0) != student_hidden.size(0) ||
                         keep.size(1) != student_hidden.size(1)))
    throw ConfigError(msg(where, "mask {} must be [B, T] = [{}, {}]", dims(keep),
                          student_hidden.size(0), student_hidden.size(1)));
  if (!(temperature > 0))
    throw ConfigError(msg(where, "temperature must be > 0, found {}", temperature));
  return FusedLinearKl::apply(student_hidden, student_head, teacher_hidden, teacher_head,
                              keep.defined() ? keep.to(at::kBool) : at::empty({0}, at::kBool),
                              temperature, rows_per_chunk, int64_t(kernel));
}

bool use_fused_head(int64_t positions, int64_t vocab) {
  const char* e = std::getenv("AC_FUSED_HEAD");  // read per step: tests switch it
  const std::string mode = e ? e : "auto";
  if (mode == "on") return true;
  if (mode == "off") return false;
  return 3 * positions * vocab * int64_t(sizeof(float)) >= kFusedHeadBytes;
}

std::string fused_kl_kernel_name() {
  const KlRow k = vector_row_kernel();
  return k == kl_row_avx512 ? "avx512" : k == kl_row_avx2 ? "avx2" : "aten";
}

at::Tensor fused_kl_loss(const at::Tensor& teacher_logits, const at::Tensor& student_logits,
                         const at::Tensor& keep, double temperature, int64_t rows_per_block,
                         FusedKlKernel kernel) {
  const char* where = "fused_kl_loss";
  if (teacher_logits.dim() != 3 || teacher_logits.sizes() != student_logits.sizes())
    throw ConfigError(msg(where, "teacher logits [{}] and student logits [{}] must both be "
                          "[B, T, V]", fmt::join(teacher_logits.sizes(), ", "),
                          fmt::join(student_logits.sizes(), ", ")));
  if (teacher_logits.scalar_type() != at::kFloat || student_logits.scalar_type() != at::kFloat)
    throw ConfigError(msg(where, "logits must be fp32, found teacher {} and student {}",
                          c10::toString(teacher_logits.scalar_type()),
                          c10::toString(student_logits.scalar_type())));
  if (keep.defined() && (keep.dim() != 2 || keep.size(0) != student_logits.size(0) ||
                         keep.size(1) != student_logits.size(1)))
    throw ConfigError(msg(where, "mask [{}] must be [B, T] = [{}, {}]",
                          fmt::join(keep.sizes(), ", "), student_logits.size(0),
                          student_logits.size(1)));
  if (!(temperature > 0))
    throw ConfigError(msg(where, "temperature must be > 0, found {}", temperature));
  return FusedKl::apply(student_logits, teacher_logits,
                        keep.defined() ? keep.to(at::kBool) : at::empty({0}, at::kBool),
                        temperature, rows_per_block, int64_t(kernel));
}

}  // namespace ac
