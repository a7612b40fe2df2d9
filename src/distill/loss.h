// Distillation losses: KL(teacher || student) on temperature-softened logits, mixed with the
// next-token cross-entropy.
//
// Source: Hinton, Vinyals, Dean, "Distilling the Knowledge in a Neural Network" (2015), eq. 2
// and the T^2 gradient scaling of section 2; Minitron (Muralidharan et al., 2024, "Compact
// Language Models via Pruning and Knowledge Distillation", section 3.3) distills with the
// logit KL alone (ce_weight = 0).
//
//   p = softmax(z_teacher / tau), q = softmax(z_student / tau)
//   KL_t = sum_v p_v (log p_v - log q_v)          per position t; 0 * log 0 = 0
//   KL   = tau^2 * sum_t m_t KL_t / max(1, sum_t m_t)
//   CE   = -sum_t m'_t log softmax(z_student)_{t, x_{t+1}} / max(1, sum_t m'_t),
//          m'_t = m_t m_{t+1} over t < T-1 (the last position has no next token)
//   loss = (1 - ce_weight) KL + ce_weight CE
//
// Masked positions contribute nothing, not even NaN: an all-zero mask gives loss 0 with zero,
// finite gradients. Teacher logits of -inf (a forbidden token) give p = 0 and no NaN; a student
// logit of -inf where the teacher has mass gives an infinite KL, which is the true value
// (the trainer skips such steps).
#pragma once
#include <ATen/ATen.h>

namespace ac {

/// Scalars of one batch: `loss` carries the gradient; `kl`, `ce` are detached. [] fp32 each.
struct DistillLoss {
  at::Tensor loss;  // [] = (1 - ce_weight) kl + ce_weight ce
  at::Tensor kl;    // [] tau^2-scaled mean KL per masked position (0 if none)
  at::Tensor ce;    // [] mean next-token NLL (undefined when ce_weight == 0)
};

/// teacher_logits, student_logits: [B, T, V] fp32 (teacher without grad). tokens: [B, T] int64
/// (only read when ce_weight > 0). mask: [B, T] bool or float 0/1, or undefined = every
/// position. temperature tau > 0; ce_weight in [0, 1]. Throws ConfigError on bad shapes or
/// arguments. The KL goes through the fused, chunked path (distill/fused_kl.h: no full-size
/// log-softmax, gradient computed in forward); the CE, when asked, takes one full log-softmax of
/// the student.
DistillLoss distill_loss(const at::Tensor& teacher_logits, const at::Tensor& student_logits,
                         const at::Tensor& tokens, const at::Tensor& mask, double temperature,
                         double ce_weight);

/// The same loss, unfused: full log-softmaxes and autograd through them (the implementation
/// before fused_kl.h). Plain reference for the tests; same arguments, same results within float
/// rounding.
DistillLoss distill_loss_reference(const at::Tensor& teacher_logits,
                                   const at::Tensor& student_logits, const at::Tensor& tokens,
                                   const at::Tensor& mask, double temperature, double ce_weight);

/// Per-position KL(p || q) of log-probabilities: [B, T] from [B, T, V] each. Plain reference
/// (one formula, no masking tricks) beside the fast path of distill_loss; tests compare them.
at::Tensor kl_per_position_reference(const at::Tensor& teacher_logprobs,
                                     const at::Tensor& student_logprobs);

}  // namespace ac
