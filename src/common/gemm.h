// fp32 matrix products on the CPU through oneDNN's sgemm, with autograd for linear layers.
//
// Why: on the AVX-512 CPUs measured, oneDNN's sgemm runs the shapes of a training step 13-45%
// faster than OpenBLAS 0.3.21 through at::mm (docs/benchmarks.md, "GEMMs: oneDNN against
// OpenBLAS"); libtorch 1.13 sends fp32 at::mm to OpenBLAS and uses oneDNN only for bf16. oneDNN
// (libdnnl, Debian's libdnnl-dev) is the library libtorch itself links.
//
// Everything that computes a transformer's linear layers goes through here: the model's forward
// (model/llama.cpp), the heads inside the KL (distill/fused_kl.cpp), importance, evaluation and
// the profile's GEMM tables (hardware/profile.cpp), so that the cost model times what runs.
#pragma once
#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

namespace ac {

/// The library that runs fp32 GEMMs: oneDNN's sgemm (the default) or OpenBLAS through at::mm.
enum class GemmBackend { OneDnn, OpenBlas };

/// The backend in use: AC_GEMM=onednn or openblas when set (read once per process), else the
/// last set_gemm_backend (by choose_gemm_backend or a profile's), else oneDNN.
/// Throws ConfigError naming AC_GEMM on any other value.
GemmBackend gemm_backend();

/// Makes `b` the process's backend from now on, unless AC_GEMM names one (which wins).
void set_gemm_backend(GemmBackend b);

/// "onednn" or "openblas".
const char* gemm_backend_name(GemmBackend b);

/// One GEMM shape: c [M, N] = a [M, K] @ b [K, N].
struct GemmShape {
  int64_t M, N, K;
};

/// The measured choice of a GEMM library for this CPU (which of oneDNN and OpenBLAS is faster
/// depends on the CPU and its vector width: measured, not assumed).
struct GemmChoice {
  GemmBackend backend = GemmBackend::OneDnn;
  // The summed time of the shapes of each class, the best of the rounds: products with
  // M <= kGemmSmallM rows (a decode step's) and with more (prefill, training).
  double onednn_small_ms = 0, openblas_small_ms = 0, onednn_large_ms = 0, openblas_large_ms = 0;
  bool forced = false;  // AC_GEMM named the backend: nothing was timed
  /// e.g. "onednn (measured; decode shapes: oneDNN 1.2 ms, OpenBLAS 3.0 ms, oneDNN 2.50x faster;
  /// larger shapes: oneDNN 41.2 ms, OpenBLAS 40.1 ms, OpenBLAS 1.03x faster; the product of the
  /// two speed-ups decides)"
  std::string to_string() const;
};

/// Rows at or below which a product counts as a decode step's (M = batch) in choose_gemm_backend.
constexpr int64_t kGemmSmallM = 16;

/// The backend a timing favours: OpenBLAS when the product of its speed-ups over oneDNN on the two
/// classes of shapes exceeds 1 (onednn_small / openblas_small × onednn_large / openblas_large),
/// else oneDNN; a class with no shapes (times 0) counts as a tie. One library serves the whole
/// process, decode and prefill alike, so neither class may be ignored; the product weighs a
/// large advantage on one class above a small disadvantage on the other (a backend 5× faster on
/// decode and 1.5× slower on prefill wins), and is symmetric in the two libraries. Reads only the
/// four times of `c`.
GemmBackend pick_gemm_backend(const GemmChoice& c);

/// Times both backends on `shapes` (fp32, random operands, `rounds` alternating rounds after
/// one warm-up, the best round of each; a shape with M <= kGemmSmallM is run 32 times per round
/// to be measurable), picks one with pick_gemm_backend and makes it the process's backend
/// (set_gemm_backend). With AC_GEMM set, times nothing and returns that backend with
/// forced = true. In a build without oneDNN, returns OpenBLAS (forced). Throws ConfigError
/// when `shapes` is empty or rounds < 1.
GemmChoice choose_gemm_backend(const std::vector<GemmShape>& shapes, int rounds = 3);

/// The GEMM shapes of a Llama model with hidden size D, FFN width F and vocabulary V: a training
/// step's on M tokens (M capped at 256: the choice, not the step, is timed) — the forward
/// x w^T and the weight gradient dy^T x of the attention, FFN and head projections — and a
/// decode step's (M = 1) forward products.
std::vector<GemmShape> model_gemm_shapes(int64_t D, int64_t F, int64_t V, int64_t M);

/// The backend a profile's GEMM tables were measured with, from its gemm_description() text
/// ("oneDNN ..." or "OpenBLAS through at::mm ..."), or nullopt for another text.
std::optional<GemmBackend> gemm_backend_of_description(const std::string& description);

/// "oneDNN v2.6.3 sgemm" or "OpenBLAS through at::mm", followed by "; " and
/// blas_description() (common/runtime.h). Recorded in profiles: GEMM tables measured with
/// another library do not describe this process.
std::string gemm_description();

/// c = a @ b + beta * c (BLAS sgemm semantics: with beta = 0, c is overwritten and never read).
/// a [M, K], b [K, N], c [M, N]: fp32 CPU 2-D tensors of any strides; a and b may be transposed
/// views (a unit stride in either dimension is passed to sgemm as its transpose flag and leading
/// dimension, no copy), other layouts are copied first. c needs a unit stride in its last
/// dimension, or the product goes through a temporary. `backend` defaults to gemm_backend().
/// Other dtypes or devices run at::addmm_ / at::mm_out. Throws ConfigError on mismatched shapes
/// and on a oneDNN failure (with its status).
void gemm_out(at::Tensor& c, const at::Tensor& a, const at::Tensor& b, float beta = 0.0f);
void gemm_out(at::Tensor& c, const at::Tensor& a, const at::Tensor& b, float beta,
              GemmBackend backend);

/// C = alpha op(A) op(B) + beta C on raw row-major fp32 buffers, through oneDNN's dnnl_sgemm
/// whatever AC_GEMM says (for kernels that own their buffers, e.g. model/causal_attention.cpp);
/// sgemm_aten in a build without oneDNN.
/// trans_a / trans_b: 'N' or 'T'; op(A) [M, K], op(B) [K, N], C [M, N]; lda, ldb, ldc: row
/// strides in floats. With beta = 0, C is overwritten and never read. Throws ConfigError with
/// oneDNN's status and the sizes when dnnl_sgemm fails.
void sgemm(char trans_a, char trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

/// The same product through at::addmm_ on views of the buffers: what sgemm runs in a build
/// without oneDNN (CMake's AC_WITH_DNNL off, scripts/build_cuda.sh), compiled in every build
/// so that the tests check it against oneDNN. Same arguments and semantics as sgemm.
void sgemm_aten(char trans_a, char trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                int64_t ldc);

/// a @ b for 2-D a [M, K], b [K, N] (any strides): a new contiguous [M, N] tensor; no autograd.
at::Tensor mm(const at::Tensor& a, const at::Tensor& b);

/// y = x w^T + bias, as at::linear (PyTorch nn.Linear): x [..., K], w [N, K], bias [N] or
/// undefined; returns [..., N]. fp32 CPU tensors run gemm_out; with grad mode on and x or w
/// requiring grad, an autograd function whose backward is dx = dy w and dw = dy^T x (each only
/// where its input needs it; the bias's gradient through at::add's own backward). Anything else
/// (other dtypes, devices, empty tensors) runs at::linear.
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias = {});

}  // namespace ac
