// Fused, chunked KL(teacher || student) on logits: the fast path of distill_loss (loss.h).
//
// The unfused loss takes two log-softmaxes of [B, T, V] tensors (262 MB each for stories15M at
// B = 8, T = 256, V = 32000), their exponentials, two row dot products and, in backward, the
// log-softmax gradient over the same size: a memory-bound second or more. This computes the loss
// and its gradient with respect to the student logits in one sweep over blocks of a few rows
// that stay in the L2 cache, split over the intra-op threads (at::parallel_for), and never
// materialises a full-size log-softmax. The gradient is computed in forward and kept (one
// [B, T, V] tensor, the size of the logits) for backward; the same trade as Liger-Kernel's fused
// linear cross-entropy (Hsu et al., 2024, "Liger Kernel: Efficient Triton Kernels for LLM
// Training", section 3.2).
//
// Math (Hinton, Vinyals, Dean 2015, eq. 2 and section 2), per position t with mask m_t:
//   p = softmax(z_teacher / tau), q = softmax(z_student / tau)
//   KL_t = sum_v p_v (log p_v - log q_v)             (0 log 0 = 0)
//   loss = tau^2 * sum_t m_t KL_t / N,  N = max(1, sum_t m_t)
//   d loss / d z_student[t, v] = m_t * tau * (q_v - p_v) / N
// Masked positions contribute nothing and get a zero (finite) gradient whatever their logits.
// Rows with infinite logits follow the reference's clamping rule (loss.h): -inf log-probabilities
// are clamped to the lowest float before the products, so p = 0 gives 0, never NaN.
//
// Two row kernels: one written here (three sweeps per row, two exponentials per element through
// glibc's libmvec), in an AVX-512 and an AVX2 + FMA variant picked by kernel_isa()
// (common/simd.h, AC_CPU_ISA); without AVX2, with AC_FUSED_KL=aten, or for a row with a
// non-finite logit, ATen's log_softmax / exp ops on blocks of rows (the reference path).
#pragma once
#include <ATen/ATen.h>

#include <string>

namespace ac {

/// The row kernel of fused_kl_loss. `automatic`: the AVX-512 or AVX2 row kernel, as
/// kernel_isa() says (and the rows are contiguous), else ATen's ops; `aten`: ATen's ops always
/// (the reference path, tests).
enum class FusedKlKernel : int64_t { automatic = 0, aten = 1 };

/// "avx512", "avx2" or "aten": what `automatic` runs now, read per call (kernel_isa(),
/// common/simd.h; AC_FUSED_KL=aten forces "aten", and so does kernel ISA scalar).
std::string fused_kl_kernel_name();

/// tau^2-scaled mean KL(teacher || student) over the kept positions: [] fp32, differentiable
/// with respect to `student_logits` only (one backward; no double backward).
/// teacher_logits, student_logits: [B, T, V] fp32 (any strides; the teacher is never saved, so it
/// may be an inference-mode tensor). keep: [B, T] bool, or undefined = every position.
/// rows_per_block: rows of V per cache block (0 = chosen from V so a block is ~128 K floats).
/// Throws ConfigError on mismatched shapes, a non-fp32 input or tau <= 0.
at::Tensor fused_kl_loss(const at::Tensor& teacher_logits, const at::Tensor& student_logits,
                         const at::Tensor& keep, double temperature, int64_t rows_per_block = 0,
                         FusedKlKernel kernel = FusedKlKernel::automatic);

/// Rows (positions) per chunk of fused_linear_kl_loss by default: 512 rows of V = 32000 are
/// three 66 MB buffers (teacher logits, student logits, gradient). Chosen by the step's
/// tokens/s (docs/benchmarks.md): 128 rows was slower (the dW GEMM's K is the chunk), 512 to
/// 2048 the same within the measurement's noise. AC_LINEAR_KL_ROWS overrides it (tuning).
constexpr int64_t kLinearKlRows = 512;

/// Whether the trainer takes fused_linear_kl_loss for a step of `positions` rows over `vocab`
/// ids: AC_FUSED_HEAD=on / off decides; otherwise ("auto") when the logits path would hold at
/// least kFusedHeadBytes in its three [positions, vocab] fp32 tensors (teacher and student
/// logits, their gradient). Below that the logits path was as fast or faster on the CPUs measured
/// (docs/benchmarks.md: stories15M's 786 MB step, A/B in interleaved runs), and the fused path
/// only saves memory.
constexpr int64_t kFusedHeadBytes = int64_t(1) << 30;
bool use_fused_head(int64_t positions, int64_t vocab);

/// The same loss as fused_kl_loss(teacher_hidden teacher_head^T, student_hidden student_head^T,
/// keep, temperature), with the heads inside: the [B, T, V] logits are never held. Positions are
/// taken `rows_per_chunk` at a time (0 = kLinearKlRows): both chunks of logits are computed
/// (two GEMMs), the KL and its gradient g = d loss / d logits taken there by the row kernel,
/// and g pushed through the student head at once (d hidden = g head, d head += g^T hidden),
/// while the chunk is still in cache. The memory of the [B, T, V] logits, their gradient and
/// the streaming of each through DRAM are saved; the FLOPs are those of the unfused path.
/// Liger-Kernel's fused linear cross-entropy (Hsu et al., 2024, section 3.2) does the same for
/// the CE; this is its KL counterpart on the CPU.
/// teacher_hidden [B, T, Dt], teacher_head [V, Dt]: fp32, no gradient (inference tensors
/// allowed). student_hidden [B, T, Ds], student_head [V, Ds]: fp32, differentiable (a tied
/// head is the embedding tensor itself: autograd adds both of its gradients). keep: [B, T] bool
/// or undefined. Returns [] fp32. Throws ConfigError on mismatched shapes (one V for both heads,
/// D of each head = its hidden size), a non-fp32 input or tau <= 0.
at::Tensor fused_linear_kl_loss(const at::Tensor& teacher_hidden, const at::Tensor& teacher_head,
                                const at::Tensor& student_hidden, const at::Tensor& student_head,
                                const at::Tensor& keep, double temperature,
                                int64_t rows_per_chunk = 0,
                                FusedKlKernel kernel = FusedKlKernel::automatic);

}  // namespace ac
