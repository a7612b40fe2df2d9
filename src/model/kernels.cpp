#include "model/kernels.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <immintrin.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <vector>

#include "common/error.h"
#include "common/accelerator.h"
#include "common/simd.h"

namespace ac {
namespace {

// fp32 on the CPU, the generic path not forced (common/accelerator.h).
bool is_cpu_float(std::initializer_list<const at::Tensor*> ts) { return cpu_fast_path(ts); }

// ------------------------------------------------------------------------------------------
// RMSNorm

// The row loops of RMSNorm, written once for W lanes: W = 1 is the plain scalar reference, and
// the AVX2 (W = 8) and AVX-512 (W = 16) variants are the same body inlined into functions
// compiled for those targets (rms_rows_avx2, rms_rows_avx512). The blocks of W with W separate
// partial sums let GCC (-O2: vectorization only where no scalar epilogue is needed) vectorize
// the inner loops without reordering a sum; each partial sum is a double, as the reference's.
template <int W>
__attribute__((always_inline)) inline double sum_of_squares(const float* __restrict x, int64_t D) {
  double part[W] = {};
  int64_t d = 0;
  for (; d + W <= D; d += W)
    for (int j = 0; j < W; ++j) part[j] += double(x[d + j]) * double(x[d + j]);
  double ss = 0;
  for (int j = 0; j < W; ++j) ss += part[j];
  for (; d < D; ++d) ss += double(x[d]) * double(x[d]);
  return ss;
}

// Rows [begin, end) of x [N, D] -> y [N, D], r [N] (the row's rsqrt(mean(x^2) + eps)).
template <int W>
__attribute__((always_inline)) inline void rms_rows(const float* __restrict x,
                                                    const float* __restrict w, int64_t begin,
                                                    int64_t end, int64_t D, double eps,
                                                    float* __restrict y, float* __restrict r) {
  for (int64_t n = begin; n < end; ++n) {
    const float* __restrict xr = x + n * D;
    float* __restrict yr = y + n * D;
    const float rs = float(1.0 / std::sqrt(sum_of_squares<W>(xr, D) / double(D) + eps));
    int64_t d = 0;
    for (; d + W <= D; d += W)
      for (int j = 0; j < W; ++j) yr[d + j] = xr[d + j] * rs * w[d + j];
    for (; d < D; ++d) yr[d] = xr[d] * rs * w[d];
    r[n] = rs;
  }
}

// Row n of the backward: dx [D] (when dxr) and the row's terms of dw added to part [D] (when
// part), from x, dy rows and r = rs.
template <int W>
__attribute__((always_inline)) inline void rms_backward_row(const float* __restrict xr,
                                                            const float* __restrict gr,
                                                            const float* __restrict w, float rs,
                                                            int64_t D, float* __restrict dxr,
                                                            double* __restrict part) {
  if (dxr) {
    double acc[W] = {};  // sum(dy w x), W partial sums
    int64_t d = 0;
    for (; d + W <= D; d += W)
      for (int j = 0; j < W; ++j)
        acc[j] += double(gr[d + j]) * double(w[d + j]) * double(xr[d + j]);
    double s = 0;
    for (int j = 0; j < W; ++j) s += acc[j];
    for (; d < D; ++d) s += double(gr[d]) * double(w[d]) * double(xr[d]);
    const float c = float(double(rs) * rs * rs * s / double(D));
    d = 0;
    for (; d + W <= D; d += W)
      for (int j = 0; j < W; ++j) dxr[d + j] = rs * (gr[d + j] * w[d + j]) - xr[d + j] * c;
    for (; d < D; ++d) dxr[d] = rs * (gr[d] * w[d]) - xr[d] * c;
  }
  if (part) {
    int64_t d = 0;
    for (; d + W <= D; d += W)
      for (int j = 0; j < W; ++j) part[d + j] += double(gr[d + j]) * double(xr[d + j]) * rs;
    for (; d < D; ++d) part[d] += double(gr[d]) * double(xr[d]) * rs;
  }
}

void rms_rows_scalar(const float* x, const float* w, int64_t begin, int64_t end, int64_t D,
                     double eps, float* y, float* r) {
  rms_rows<1>(x, w, begin, end, D, eps, y, r);
}
__attribute__((target("avx2,fma"))) void rms_rows_avx2(const float* x, const float* w,
                                                       int64_t begin, int64_t end, int64_t D,
                                                       double eps, float* y, float* r) {
  rms_rows<8>(x, w, begin, end, D, eps, y, r);
}
__attribute__((target("avx512f"))) void rms_rows_avx512(const float* x, const float* w,
                                                        int64_t begin, int64_t end, int64_t D,
                                                        double eps, float* y, float* r) {
  rms_rows<16>(x, w, begin, end, D, eps, y, r);
}

void rms_backward_row_scalar(const float* xr, const float* gr, const float* w, float rs,
                             int64_t D, float* dxr, double* part) {
  rms_backward_row<1>(xr, gr, w, rs, D, dxr, part);
}
__attribute__((target("avx2,fma"))) void rms_backward_row_avx2(const float* xr, const float* gr,
                                                               const float* w, float rs,
                                                               int64_t D, float* dxr,
                                                               double* part) {
  rms_backward_row<8>(xr, gr, w, rs, D, dxr, part);
}
__attribute__((target("avx512f"))) void rms_backward_row_avx512(const float* xr,
                                                                const float* gr,
                                                                const float* w, float rs,
                                                                int64_t D, float* dxr,
                                                                double* part) {
  rms_backward_row<16>(xr, gr, w, rs, D, dxr, part);
}

// x [N, D] contiguous -> y [N, D], r [N] (the row's rsqrt(mean(x^2) + eps)).
void rms_norm_forward(const float* x, const float* w, int64_t N, int64_t D, double eps, float* y,
                      float* r) {
  const CpuIsa isa = kernel_isa();
  const auto rows = isa == CpuIsa::avx512 ? rms_rows_avx512
                    : isa == CpuIsa::avx2 ? rms_rows_avx2
                                          : rms_rows_scalar;
  at::parallel_for(0, N, 16, [&](int64_t begin, int64_t end) {
    rows(x, w, begin, end, D, eps, y, r);
  });
}

struct RmsNormFunction : torch::autograd::Function<RmsNormFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x2,
                            const at::Tensor& w, double eps) {
    const int64_t N = x2.size(0), D = x2.size(1);
    at::Tensor y = at::empty({N, D}, x2.options()), r = at::empty({N}, x2.options());
    rms_norm_forward(x2.data_ptr<float>(), w.data_ptr<float>(), N, D, eps, y.data_ptr<float>(),
                     r.data_ptr<float>());
    ctx->save_for_backward({x2, w, r});
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x2 = saved[0], &w = saved[1], &r = saved[2];
    const at::Tensor dy = grads[0].contiguous();
    const int64_t N = x2.size(0), D = x2.size(1);
    const bool want_dx = ctx->needs_input_grad(0), want_dw = ctx->needs_input_grad(1);
    at::Tensor dx = want_dx ? at::empty({N, D}, x2.options()) : at::Tensor();
    // dw: one partial sum per thread, added at the end (no shared writes).
    const int64_t threads = at::get_num_threads();
    at::Tensor dw_parts = want_dw ? at::zeros({threads, D}, at::kDouble) : at::Tensor();
    const float *xp = x2.data_ptr<float>(), *wp = w.data_ptr<float>(), *rp = r.data_ptr<float>(),
                *gp = dy.data_ptr<float>();
    float* dxp = want_dx ? dx.data_ptr<float>() : nullptr;
    double* parts = want_dw ? dw_parts.data_ptr<double>() : nullptr;
    const CpuIsa isa = kernel_isa();
    const auto row = isa == CpuIsa::avx512 ? rms_backward_row_avx512
                     : isa == CpuIsa::avx2 ? rms_backward_row_avx2
                                           : rms_backward_row_scalar;
    at::parallel_for(0, N, 16, [&](int64_t begin, int64_t end) {
      double* part = parts ? parts + int64_t(at::get_thread_num()) * D : nullptr;
      for (int64_t n = begin; n < end; ++n)
        row(xp + n * D, gp + n * D, wp, rp[n], D, dxp ? dxp + n * D : nullptr, part);
    });
    at::Tensor dw = want_dw ? dw_parts.sum(0).to(at::kFloat) : at::Tensor();
    return {dx, dw, at::Tensor()};
  }
};

// ------------------------------------------------------------------------------------------
// RoPE

// One head vector of RoPE, written once for W lanes as the RMSNorm rows are (W = 1: the plain
// reference; 8 and 16 inlined into the AVX2 and AVX-512 wrappers). in, out [2 h2]; c, s [2 h2]
// (h2 = Hd / 2). Forward: y = x c + rotate_half(x) s. Backward (the transposed rotation):
// dx from dy.
template <int W>
__attribute__((always_inline)) inline void rope_vector(const float* __restrict in,
                                                       const float* __restrict c,
                                                       const float* __restrict s, int64_t h2,
                                                       bool backward, float* __restrict out) {
  // Both directions in one form: forward  out = (a c - b s_lo, b c + a s_hi),
  //                              backward out = (a c + b s_hi, b c - a s_lo),
  // with a, b the low and high halves; the sign (+-1, exact) and which half of sin pairs with
  // which are chosen once. The halves are copied into W-float blocks first: the form GCC
  // vectorizes (a loop that reads in[i + j] and in[h2 + i + j] directly, it did not).
  const float sign = backward ? -1.0f : 1.0f;
  const float* __restrict sl = backward ? s + h2 : s;
  const float* __restrict sh = backward ? s : s + h2;
  int64_t i = 0;
  for (; i + W <= h2; i += W) {
    float a[W], b[W];
    for (int j = 0; j < W; ++j) {
      a[j] = in[i + j];
      b[j] = in[h2 + i + j];
    }
    for (int j = 0; j < W; ++j) out[i + j] = a[j] * c[i + j] - sign * (b[j] * sl[i + j]);
    for (int j = 0; j < W; ++j) out[h2 + i + j] = b[j] * c[h2 + i + j] + sign * (a[j] * sh[i + j]);
  }
  for (; i < h2; ++i) {
    const float a = in[i], b = in[h2 + i];
    out[i] = a * c[i] - sign * (b * sl[i]);
    out[h2 + i] = b * c[h2 + i] + sign * (a * sh[i]);
  }
}

// Positions bt in [begin, end) of B * T: every head. Forward: x [B, T, Hh, Hd] ->
// y [B, Hh, T, Hd]; backward: dy [B, Hh, T, Hd] -> dx [B, T, Hh, Hd]. cos, sin [T, Hd].
template <int W>
__attribute__((always_inline)) inline void rope_rows(const float* in, const float* cos,
                                                     const float* sin, int64_t begin,
                                                     int64_t end, int64_t T, int64_t Hh,
                                                     int64_t Hd, bool backward, float* out) {
  for (int64_t bt = begin; bt < end; ++bt) {
    const int64_t b = bt / T, t = bt % T;
    for (int64_t h = 0; h < Hh; ++h) {
      const int64_t x_off = ((b * T + t) * Hh + h) * Hd;  // [B, T, Hh, Hd]
      const int64_t y_off = ((b * Hh + h) * T + t) * Hd;  // [B, Hh, T, Hd]
      rope_vector<W>(in + (backward ? y_off : x_off), cos + t * Hd, sin + t * Hd, Hd / 2,
                     backward, out + (backward ? x_off : y_off));
    }
  }
}

void rope_rows_scalar(const float* in, const float* cos, const float* sin, int64_t begin,
                      int64_t end, int64_t T, int64_t Hh, int64_t Hd, bool backward, float* out) {
  rope_rows<1>(in, cos, sin, begin, end, T, Hh, Hd, backward, out);
}
__attribute__((target("avx2,fma"))) void rope_rows_avx2(const float* in, const float* cos,
                                                        const float* sin, int64_t begin,
                                                        int64_t end, int64_t T, int64_t Hh,
                                                        int64_t Hd, bool backward, float* out) {
  rope_rows<8>(in, cos, sin, begin, end, T, Hh, Hd, backward, out);
}
__attribute__((target("avx512f"))) void rope_rows_avx512(const float* in, const float* cos,
                                                         const float* sin, int64_t begin,
                                                         int64_t end, int64_t T, int64_t Hh,
                                                         int64_t Hd, bool backward, float* out) {
  rope_rows<16>(in, cos, sin, begin, end, T, Hh, Hd, backward, out);
}

// x [B, T, Hh, Hd] -> y [B, Hh, T, Hd] (forward), or dy [B, Hh, T, Hd] -> dx [B, T, Hh, Hd]
// (backward, the transposed rotation). cos, sin [T, Hd].
void rope_kernel(const float* in, const float* cos, const float* sin, int64_t B, int64_t T,
                 int64_t Hh, int64_t Hd, bool backward, float* out) {
  const CpuIsa isa = kernel_isa();
  const auto rows = isa == CpuIsa::avx512 ? rope_rows_avx512
                    : isa == CpuIsa::avx2 ? rope_rows_avx2
                                          : rope_rows_scalar;
  at::parallel_for(0, B * T, 16, [&](int64_t begin, int64_t end) {
    rows(in, cos, sin, begin, end, T, Hh, Hd, backward, out);
  });
}

struct RopeFunction : torch::autograd::Function<RopeFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& cos, const at::Tensor& sin) {
    const int64_t B = x.size(0), T = x.size(1), Hh = x.size(2), Hd = x.size(3);
    const at::Tensor xc = x.contiguous(), c = cos.contiguous(), s = sin.contiguous();
    at::Tensor y = at::empty({B, Hh, T, Hd}, x.options());
    rope_kernel(xc.data_ptr<float>(), c.data_ptr<float>(), s.data_ptr<float>(), B, T, Hh, Hd,
                false, y.data_ptr<float>());
    ctx->save_for_backward({c, s});
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &c = saved[0], &s = saved[1];
    const at::Tensor g = grads[0].contiguous();
    const int64_t B = g.size(0), Hh = g.size(1), T = g.size(2), Hd = g.size(3);
    at::Tensor dx = at::empty({B, T, Hh, Hd}, g.options());
    rope_kernel(g.data_ptr<float>(), c.data_ptr<float>(), s.data_ptr<float>(), B, T, Hh, Hd, true,
                dx.data_ptr<float>());
    return {dx, at::Tensor(), at::Tensor()};
  }
};

// ------------------------------------------------------------------------------------------
// SwiGLU

// Forward (dy == nullptr): y = silu(g) u. Backward: dg, du from dy. n elements.
void swiglu_scalar(const float* g, const float* u, const float* dy, int64_t n, float* y_or_dg,
                   float* du) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = 1.0f / (1.0f + std::exp(std::min(88.0f, std::max(-87.0f, -g[i]))));
    if (!dy) {
      y_or_dg[i] = g[i] * s * u[i];
    } else {
      y_or_dg[i] = dy[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
      du[i] = dy[i] * g[i] * s;
    }
  }
}

// GCC 12 warns of an uninitialized variable inside its own min/max intrinsics (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"), noinline)) void swiglu_avx512(const float* g, const float* u,
                                                                const float* dy, int64_t n,
                                                                float* y_or_dg, float* du) {
  const __m512 lo = _mm512_set1_ps(-87.0f), hi = _mm512_set1_ps(88.0f), one = _mm512_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 gv = _mm512_loadu_ps(g + i), uv = _mm512_loadu_ps(u + i);
    // min(hi, max(lo, -g)): each keeps a NaN (the second operand), so NaN stays NaN.
    const __m512 e = _ZGVeN16v_expf(_mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_sub_ps(_mm512_setzero_ps(), gv))));
    const __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, e));
    if (!dy) {
      _mm512_storeu_ps(y_or_dg + i, _mm512_mul_ps(_mm512_mul_ps(gv, s), uv));
    } else {
      const __m512 d = _mm512_loadu_ps(dy + i);
      const __m512 dsilu = _mm512_mul_ps(s, _mm512_fmadd_ps(gv, _mm512_sub_ps(one, s), one));
      _mm512_storeu_ps(y_or_dg + i, _mm512_mul_ps(_mm512_mul_ps(d, uv), dsilu));
      _mm512_storeu_ps(du + i, _mm512_mul_ps(d, _mm512_mul_ps(gv, s)));
    }
  }
  swiglu_scalar(g + i, u + i, dy ? dy + i : nullptr, n - i, y_or_dg + i, du ? du + i : nullptr);
}
#pragma GCC diagnostic pop

// swiglu_avx512 with 8 lanes (AVX2 + FMA): the same clamp and NaN rule; the last n % 8 elements
// through swiglu_scalar.
__attribute__((target("avx2,fma"), noinline)) void swiglu_avx2(const float* g, const float* u,
                                                              const float* dy, int64_t n,
                                                              float* y_or_dg, float* du) {
  const __m256 lo = _mm256_set1_ps(-87.0f), hi = _mm256_set1_ps(88.0f), one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i), uv = _mm256_loadu_ps(u + i);
    // min(hi, max(lo, -g)): each keeps a NaN (the second operand), so NaN stays NaN.
    const __m256 e = _ZGVdN8v_expf(_mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_sub_ps(_mm256_setzero_ps(), gv))));
    const __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, e));
    if (!dy) {
      _mm256_storeu_ps(y_or_dg + i, _mm256_mul_ps(_mm256_mul_ps(gv, s), uv));
    } else {
      const __m256 d = _mm256_loadu_ps(dy + i);
      const __m256 dsilu = _mm256_mul_ps(s, _mm256_fmadd_ps(gv, _mm256_sub_ps(one, s), one));
      _mm256_storeu_ps(y_or_dg + i, _mm256_mul_ps(_mm256_mul_ps(d, uv), dsilu));
      _mm256_storeu_ps(du + i, _mm256_mul_ps(d, _mm256_mul_ps(gv, s)));
    }
  }
  swiglu_scalar(g + i, u + i, dy ? dy + i : nullptr, n - i, y_or_dg + i, du ? du + i : nullptr);
}

void swiglu_kernel(const float* g, const float* u, const float* dy, int64_t n, float* y_or_dg,
                   float* du) {
  const CpuIsa isa = kernel_isa();
  const auto run = isa == CpuIsa::avx512 ? swiglu_avx512
                   : isa == CpuIsa::avx2 ? swiglu_avx2
                                         : swiglu_scalar;
  at::parallel_for(0, n, 16384, [&](int64_t b, int64_t e) {
    run(g + b, u + b, dy ? dy + b : nullptr, e - b, y_or_dg + b, du ? du + b : nullptr);
  });
}

struct SwigluFunction : torch::autograd::Function<SwigluFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& g,
                            const at::Tensor& u) {
    at::Tensor y = at::empty(g.sizes(), g.options());
    swiglu_kernel(g.data_ptr<float>(), u.data_ptr<float>(), nullptr, g.numel(),
                  y.data_ptr<float>(), nullptr);
    ctx->save_for_backward({g, u});
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &g = saved[0], &u = saved[1];
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dg = at::empty(g.sizes(), g.options()), du = at::empty(u.sizes(), u.options());
    swiglu_kernel(g.data_ptr<float>(), u.data_ptr<float>(), dy.data_ptr<float>(), g.numel(),
                  dg.data_ptr<float>(), du.data_ptr<float>());
    return {dg, du};
  }
};

}  // namespace

at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up) {
  if (gate.sizes() != up.sizes())
    throw ConfigError(fmt::format("[swiglu] gate {} and up {}: expected the same shape",
                                  gate.sizes().vec(), up.sizes().vec()));
  if (!is_cpu_float({&gate, &up}) || gate.numel() == 0)  // the ATen chain it replaces
    return at::silu(gate) * up;
  const at::Tensor g = gate.contiguous(), u = up.contiguous();
  if (at::GradMode::is_enabled() && (g.requires_grad() || u.requires_grad()))
    return SwigluFunction::apply(g, u);
  at::Tensor y = at::empty(g.sizes(), g.options());
  swiglu_kernel(g.data_ptr<float>(), u.data_ptr<float>(), nullptr, g.numel(), y.data_ptr<float>(),
                nullptr);
  return y;
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  if (x.dim() < 1 || w.dim() != 1 || x.size(-1) != w.size(0))
    throw ConfigError(fmt::format("[rms_norm] expected x [..., D] and w [D], found x {} and w {}",
                                  x.sizes().vec(), w.sizes().vec()));
  if (!is_cpu_float({&x, &w}) || x.numel() == 0)  // the ATen chain it replaces
    return x * at::rsqrt(x.pow(2).mean(-1, true) + eps) * w;
  const int64_t D = x.size(-1);
  const at::Tensor x2 = x.reshape({-1, D}).contiguous(), wc = w.contiguous();
  at::Tensor y;
  if (at::GradMode::is_enabled() && (x.requires_grad() || w.requires_grad())) {
    y = RmsNormFunction::apply(x2, wc, eps);
  } else {
    y = at::empty(x2.sizes(), x2.options());
    at::Tensor r = at::empty({x2.size(0)}, x2.options());
    rms_norm_forward(x2.data_ptr<float>(), wc.data_ptr<float>(), x2.size(0), D, eps,
                     y.data_ptr<float>(), r.data_ptr<float>());
  }
  return y.view(x.sizes());
}

at::Tensor rope_to_heads(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  if (x.dim() != 4 || x.size(3) % 2 != 0 || cos.dim() != 2 || cos.sizes() != sin.sizes() ||
      cos.size(0) != x.size(1) || cos.size(1) != x.size(3))
    throw ConfigError(fmt::format("[rope] expected x [B, T, heads, Hd] with an even Hd and cos, "
                                  "sin [T, Hd], found x {}, cos {}, sin {}", x.sizes().vec(),
                                  cos.sizes().vec(), sin.sizes().vec()));
  if (!is_cpu_float({&x, &cos, &sin}) || x.numel() == 0) {  // the ATen chain it replaces
    const at::Tensor xt = x.transpose(1, 2);  // [B, heads, T, Hd]
    const int64_t h = x.size(3) / 2;
    at::Tensor rot = at::cat({-xt.narrow(-1, h, h), xt.narrow(-1, 0, h)}, -1);
    return (xt * cos + rot * sin).contiguous();
  }
  if (at::GradMode::is_enabled() && x.requires_grad()) return RopeFunction::apply(x, cos, sin);
  const int64_t B = x.size(0), T = x.size(1), Hh = x.size(2), Hd = x.size(3);
  const at::Tensor xc = x.contiguous(), c = cos.contiguous(), s = sin.contiguous();
  at::Tensor y = at::empty({B, Hh, T, Hd}, x.options());
  rope_kernel(xc.data_ptr<float>(), c.data_ptr<float>(), s.data_ptr<float>(), B, T, Hh, Hd, false,
              y.data_ptr<float>());
  return y;
}

}  // namespace ac
