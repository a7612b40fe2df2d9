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
// Two row kernels: on a CPU with AVX-512, one written here (three sweeps per row, two
// exponentials per element through glibc's libmvec); elsewhere, or with AC_FUSED_KL=aten, or for
// a row with a non-finite logit, ATen's log_softmax / exp ops on blocks of rows.
#pragma once
#include <ATen/ATen.h>

#include <string>

namespace ac {

/// The row kernel of fused_kl_loss. `automatic`: AVX-512 where the CPU has it (and the rows
/// are contiguous), else ATen's ops; `aten`: ATen's ops always (the reference path, tests).
enum class FusedKlKernel : int64_t { automatic = 0, aten = 1 };

/// "avx512" or "aten": what `automatic` runs on this CPU (AC_FUSED_KL=aten forces "aten").
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

}  // namespace ac
