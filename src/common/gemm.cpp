#include "common/gemm.h"

#include <ATen/Version.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/custom_function.h>
#ifdef AC_WITH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <limits>
#include <cstdlib>
#include <string>

#include "common/accelerator.h"
#include "common/error.h"
#include "common/runtime.h"

namespace ac {

namespace {

// AC_GEMM's backend, or nullopt when unset. Read once.
const std::optional<GemmBackend>& env_backend() {
  static const std::optional<GemmBackend> backend = []() -> std::optional<GemmBackend> {
    const char* v = std::getenv("AC_GEMM");
    const std::string s = v ? v : "";
    if (s.empty()) return std::nullopt;
#ifndef AC_WITH_DNNL
    if (s == "onednn")
      throw ConfigError("AC_GEMM=onednn, but this build has no oneDNN (libdnnl-dev): unset AC_GEMM");
#endif
    if (s == "onednn") return GemmBackend::OneDnn;
    if (s == "openblas") return GemmBackend::OpenBlas;
    throw ConfigError(fmt::format("AC_GEMM: expected onednn or openblas, found '{}'", s));
  }();
  return backend;
}

#ifdef AC_WITH_DNNL
constexpr GemmBackend kDefaultBackend = GemmBackend::OneDnn;
#else
// A build without oneDNN (CMake did not find it: scripts/build_cuda.sh's GPU image).
constexpr GemmBackend kDefaultBackend = GemmBackend::OpenBlas;
#endif
std::atomic<int> g_backend{int(kDefaultBackend)};

}  // namespace

GemmBackend gemm_backend() {
  if (const auto& e = env_backend()) return *e;
  return GemmBackend(g_backend.load(std::memory_order_relaxed));
}

void set_gemm_backend(GemmBackend b) {
#ifndef AC_WITH_DNNL
  if (b == GemmBackend::OneDnn) return;  // nothing to switch to
#endif
  g_backend.store(int(b), std::memory_order_relaxed);
}

const char* gemm_backend_name(GemmBackend b) {
  return b == GemmBackend::OneDnn ? "onednn" : "openblas";
}

namespace {
// "oneDNN 2.50x faster" for one class of shapes; "no shapes" where none was timed.
std::string faster_text(double onednn_ms, double openblas_ms) {
  if (onednn_ms <= 0 || openblas_ms <= 0) return "no shapes";
  return onednn_ms <= openblas_ms ? fmt::format("oneDNN {:.2f}x faster", openblas_ms / onednn_ms)
                                  : fmt::format("OpenBLAS {:.2f}x faster", onednn_ms / openblas_ms);
}
}  // namespace

GemmBackend pick_gemm_backend(const GemmChoice& c) {
  auto ratio = [](double onednn_ms, double openblas_ms) {  // OpenBLAS's speed-up; 1 = a tie
    return onednn_ms > 0 && openblas_ms > 0 ? onednn_ms / openblas_ms : 1.0;
  };
  return ratio(c.onednn_small_ms, c.openblas_small_ms) * ratio(c.onednn_large_ms, c.openblas_large_ms) > 1.0
             ? GemmBackend::OpenBlas
             : GemmBackend::OneDnn;
}

std::string GemmChoice::to_string() const {
  if (forced) return fmt::format("{} (AC_GEMM, or the only one in this build)", gemm_backend_name(backend));
  return fmt::format("{} (measured; decode shapes: oneDNN {:.2f} ms, OpenBLAS {:.2f} ms, {}; larger "
                     "shapes: oneDNN {:.1f} ms, OpenBLAS {:.1f} ms, {}; the product of the two "
                     "speed-ups decides)",
                     gemm_backend_name(backend), onednn_small_ms, openblas_small_ms,
                     faster_text(onednn_small_ms, openblas_small_ms), onednn_large_ms,
                     openblas_large_ms, faster_text(onednn_large_ms, openblas_large_ms));
}

GemmChoice choose_gemm_backend(const std::vector<GemmShape>& shapes, int rounds) {
  if (shapes.empty() || rounds < 1)
    throw ConfigError(msg("gemm", "choose_gemm_backend: expected shapes and rounds >= 1, found "
                                  "{} shapes and rounds {}", shapes.size(), rounds));
  GemmChoice c;
#ifndef AC_WITH_DNNL
  c.backend = GemmBackend::OpenBlas;
  c.forced = true;
  return c;
#endif
  if (const auto& e = env_backend()) {
    c.backend = *e;
    c.forced = true;
    return c;
  }
  at::NoGradGuard no_grad;
  struct Op {
    at::Tensor c, a, b;
    int repeats;
  };
  std::vector<Op> small, large;
  for (const GemmShape& s : shapes)
    (s.M <= kGemmSmallM ? small : large)
        .push_back({at::empty({s.M, s.N}), at::randn({s.M, s.K}), at::randn({s.K, s.N}),
                    s.M <= kGemmSmallM ? 32 : 1});
  auto time_ms = [](std::vector<Op>& ops, GemmBackend b) {
    const double t0 = now_s();
    for (Op& o : ops)
      for (int i = 0; i < o.repeats; ++i) gemm_out(o.c, o.a, o.b, 0.0f, b);
    return (now_s() - t0) * 1e3;
  };
  const double inf = std::numeric_limits<double>::infinity();
  double* best[2][2] = {{&c.onednn_small_ms, &c.openblas_small_ms},
                        {&c.onednn_large_ms, &c.openblas_large_ms}};
  std::vector<Op>* classes[2] = {&small, &large};
  for (int k = 0; k < 2; ++k) {
    if (classes[k]->empty()) continue;
    time_ms(*classes[k], GemmBackend::OneDnn);  // warm-up: first-touch pages, library set-up
    time_ms(*classes[k], GemmBackend::OpenBlas);
    *best[k][0] = *best[k][1] = inf;
    for (int r = 0; r < rounds; ++r) {  // alternating: a drift of the machine hits both
      *best[k][0] = std::min(*best[k][0], time_ms(*classes[k], GemmBackend::OneDnn));
      *best[k][1] = std::min(*best[k][1], time_ms(*classes[k], GemmBackend::OpenBlas));
    }
  }
  c.backend = pick_gemm_backend(c);
  set_gemm_backend(c.backend);
  return c;
}

std::vector<GemmShape> model_gemm_shapes(int64_t D, int64_t F, int64_t V, int64_t M) {
  M = std::min<int64_t>(M, 256);
  return {{M, D, D}, {D, D, M},    // attention projections: forward, weight gradient
          {M, F, D}, {F, D, M},    // FFN up / gate
          {M, D, F}, {D, F, M},    // FFN down
          {M, V, D}, {V, D, M},    // head
          {1, D, D}, {1, F, D}, {1, D, F}, {1, V, D}};  // a decode step
}

std::optional<GemmBackend> gemm_backend_of_description(const std::string& d) {
  if (d.rfind("oneDNN", 0) == 0) return GemmBackend::OneDnn;
  if (d.rfind("OpenBLAS through", 0) == 0 || d.rfind("at::mm", 0) == 0) return GemmBackend::OpenBlas;
  return std::nullopt;
}

std::string gemm_description() {
  std::string blas = blas_description();
  if (gemm_backend() == GemmBackend::OpenBlas) {
    if (!blas.empty()) return "OpenBLAS through at::mm; " + blas;
    // Not Debian's libtorch over OpenBLAS: a PyPI wheel's at::mm runs MKL. Its build settings
    // name the library ("BLAS_INFO=mkl").
    const std::string config = at::show_config();
    const size_t pos = config.find("BLAS_INFO=");
    const std::string info = pos == std::string::npos
        ? "" : config.substr(pos + 10, config.find_first_of(", \n", pos) - pos - 10);
    return "at::mm" + (info.empty() ? "" : " over " + info);
  }
#ifdef AC_WITH_DNNL
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("oneDNN v{}.{}.{} sgemm", v->major, v->minor, v->patch) +
         (blas.empty() ? "" : "; " + blas);
#else
  return "at::mm";  // unreachable: without oneDNN the backend is OpenBlas
#endif
}

namespace {

// One sgemm operand: the row-major matrix op(X) = X or X^T that dnnl_sgemm reads.
struct Operand {
  const float* data;
  char trans;      // 'N': t is row-major with leading dimension ld; 'T': t is its transpose
  int64_t ld;
  at::Tensor keep;  // a contiguous copy when t's strides fit neither layout
};

// t [R, C]: a unit stride along C is row-major ('N', ld = stride(0)); a unit stride along R is
// the transpose of a row-major [C, R] ('T', ld = stride(1)). A dimension of size 1 has no
// meaningful stride, so its leading dimension is the other size.
Operand operand(const at::Tensor& t) {
  const int64_t R = t.size(0), C = t.size(1);
  if (t.stride(1) == 1 && (R == 1 || t.stride(0) >= C))
    return {t.data_ptr<float>(), 'N', R == 1 ? std::max<int64_t>(C, 1) : t.stride(0), {}};
  if (t.stride(0) == 1 && (C == 1 || t.stride(1) >= R))
    return {t.data_ptr<float>(), 'T', C == 1 ? std::max<int64_t>(R, 1) : t.stride(1), {}};
  at::Tensor c = t.contiguous();
  return {c.data_ptr<float>(), 'N', std::max<int64_t>(C, 1), c};
}

bool onednn_can_run(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b) {
  if (!cpu_fast_path({&c, &a, &b})) return false;
  for (const at::Tensor* t : {&c, &a, &b})
    if (t->is_sparse() || t->is_mkldnn() || t->is_conj() || t->is_neg()) return false;
  return a.size(0) > 0 && a.size(1) > 0 && b.size(1) > 0;
}

}  // namespace

void gemm_out(at::Tensor& c, const at::Tensor& a, const at::Tensor& b, float beta,
              GemmBackend backend) {
  if (a.dim() != 2 || b.dim() != 2 || c.dim() != 2 || a.size(1) != b.size(0) ||
      c.size(0) != a.size(0) || c.size(1) != b.size(1))
    throw ConfigError(fmt::format("[gemm] c {} = a {} @ b {}: expected a [M, K], b [K, N], c [M, N]",
                                  c.sizes().vec(), a.sizes().vec(), b.sizes().vec()));
  if (backend == GemmBackend::OpenBlas || !onednn_can_run(c, a, b)) {
    if (beta == 0.0f)
      at::mm_out(c, a, b);
    else
      c.mul_(beta).addmm_(a, b);
    return;
  }
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const bool direct = c.stride(1) == 1 && (M == 1 || c.stride(0) >= N);
  at::Tensor out = direct ? c : (beta == 0.0f ? at::empty({M, N}, c.options()) : c.contiguous());
  const Operand A = operand(a), B = operand(b);
  const int64_t ldc = M == 1 ? N : out.stride(0);
  sgemm(A.trans, B.trans, M, N, K, 1.0f, A.data, A.ld, B.data, B.ld, beta, out.data_ptr<float>(),
        ldc);
  if (!direct) c.copy_(out);
}

void sgemm(char trans_a, char trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
#ifdef AC_WITH_DNNL
  const dnnl_status_t s = dnnl_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (s != dnnl_success)
    throw ConfigError(fmt::format("[gemm] dnnl_sgemm failed with status {} on M={} N={} K={}",
                                  int(s), M, N, K));
#else
  sgemm_aten(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

void sgemm_aten(char trans_a, char trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  auto view = [](const float* p, char trans, int64_t rows, int64_t cols, int64_t ld) {
    float* q = const_cast<float*>(p);  // read only: addmm_ writes c alone
    return trans == 'N' ? at::from_blob(q, {rows, cols}, {ld, 1}, at::kFloat)
                        : at::from_blob(q, {cols, rows}, {ld, 1}, at::kFloat).t();
  };
  at::Tensor c = at::from_blob(C, {M, N}, {ldc, 1}, at::kFloat);
  if (K <= 0) {  // an empty product: C = beta C (beta = 0 never reads C)
    if (beta == 0.0f) c.zero_(); else c.mul_(beta);
    return;
  }
  at::Tensor a = view(A, trans_a, M, K, lda), b = view(B, trans_b, K, N, ldb);
  c.addmm_(a, b, beta, alpha);  // beta = 0 ignores C's values (NaN included), as BLAS
}

void gemm_out(at::Tensor& c, const at::Tensor& a, const at::Tensor& b, float beta) {
  gemm_out(c, a, b, beta, gemm_backend());
}

at::Tensor mm(const at::Tensor& a, const at::Tensor& b) {
  if (a.dim() != 2 || b.dim() != 2)
    throw ConfigError(fmt::format("[gemm] mm of {} and {}: expected 2-D tensors",
                                  a.sizes().vec(), b.sizes().vec()));
  at::Tensor c = at::empty({a.size(0), b.size(1)}, a.options());
  gemm_out(c, a, b, 0.0f);
  return c;
}

namespace {

// y = x w^T with dx = dy w, dw = dy^T x (x [M, K], w [N, K], dy [M, N]). As at::linear, x is
// kept only when w needs a gradient and w only when x does (the search trains masks on frozen
// weights: its activations are not kept for a weight gradient nobody asks for).
struct LinearFunction : torch::autograd::Function<LinearFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& w) {
    ctx->save_for_backward({w.requires_grad() ? x : at::Tensor(),
                            x.requires_grad() ? w : at::Tensor()});
    return ac::mm(x, w.t());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &dy = grads[0];
    at::Tensor dx, dw;
    if (ctx->needs_input_grad(0) && w.defined()) dx = ac::mm(dy, w);
    if (ctx->needs_input_grad(1) && x.defined()) dw = ac::mm(dy.t(), x);
    return {dx, dw};
  }
};

}  // namespace

at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  if (gemm_backend() == GemmBackend::OpenBlas || x.dim() < 1 || w.dim() != 2 ||
      !cpu_fast_path({&x, &w}) || x.numel() == 0 || w.numel() == 0 || x.size(-1) != w.size(1))
    return at::linear(x, w, bias);
  const int64_t K = x.size(-1), N = w.size(0);
  std::vector<int64_t> out_shape = x.sizes().vec();
  out_shape.back() = N;
  const at::Tensor x2 = x.reshape({-1, K});
  const bool record = at::GradMode::is_enabled() && (x.requires_grad() || w.requires_grad());
  at::Tensor y = record ? LinearFunction::apply(x2, w) : ac::mm(x2, w.t());
  y = y.view(out_shape);
  return bias.defined() ? y + bias : y;
}

}  // namespace ac
