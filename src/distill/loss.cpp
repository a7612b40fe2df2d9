#include "distill/loss.h"

#include <limits>

#include "common/error.h"
#include "common/accelerator.h"
#include "distill/fused_kl.h"

namespace ac {

static void check_inputs(const at::Tensor& t, const at::Tensor& s, const at::Tensor& mask,
                         double temperature, double ce_weight) {
  const char* where = "distill_loss";
  if (t.dim() != 3 || t.sizes() != s.sizes())
    throw ConfigError(msg(where, "teacher logits [{}] and student logits [{}] must both be "
                          "[B, T, V]", fmt::join(t.sizes(), ", "), fmt::join(s.sizes(), ", ")));
  if (mask.defined() && (mask.dim() != 2 || mask.size(0) != t.size(0) ||
                         mask.size(1) != t.size(1)))
    throw ConfigError(msg(where, "mask [{}] must be [B, T] = [{}, {}]",
                          fmt::join(mask.sizes(), ", "), t.size(0), t.size(1)));
  if (!(temperature > 0) || !(ce_weight >= 0 && ce_weight <= 1))
    throw ConfigError(msg(where, "temperature must be > 0 and ce_weight in [0, 1], found {} and "
                          "{}", temperature, ce_weight));
}

// sum_v a[..., v] * b[..., v] for [B, T, V] inputs -> [B, T], as a batched dot product (no
// [B, T, V] temporary: the loss is memory-bound).
static at::Tensor rowdot(const at::Tensor& a, const at::Tensor& b) {
  const int64_t B = a.size(0), T = a.size(1), V = a.size(2);
  return at::bmm(a.reshape({B * T, 1, V}), b.reshape({B * T, V, 1})).view({B, T});
}

// Teacher probabilities (masked rows zeroed) and sum_v p log p per position [B, T]. No grad.
static std::pair<at::Tensor, at::Tensor> teacher_side(const at::Tensor& logits, double tau,
                                                      const at::Tensor& mask) {
  at::NoGradGuard no_grad;
  at::Tensor logp = at::log_softmax(tau == 1.0 ? logits : logits / tau, -1);  // [B, T, V]
  at::Tensor p = logp.exp();
  if (mask.defined()) p.masked_fill_(mask.logical_not().unsqueeze(-1), 0.0);  // no NaN rows
  logp.clamp_min_(std::numeric_limits<float>::lowest());  // p = 0 there: 0 * lowest = 0
  return {p, rowdot(p, logp)};
}

// Next-token CE term, mixed into out.loss = (1 - w) kl + w ce (loss.h). logq1: [B, T, V]
// log-softmax of the student logits at temperature 1.
static void add_ce(DistillLoss& out, const at::Tensor& kl, const at::Tensor& logq1,
                   const at::Tensor& tokens, const at::Tensor& keep, double ce_weight) {
  const int64_t B = keep.size(0), T = keep.size(1);
  if (!tokens.defined() || tokens.sizes() != keep.sizes())
    throw ConfigError(msg("distill_loss", "ce_weight > 0 needs tokens [B, T] = [{}, {}]", B, T));
  at::Tensor nll = -logq1.slice(1, 0, T - 1).gather(-1, tokens.slice(1, 1, T).to(at::kLong).unsqueeze(-1))
                        .squeeze(-1);  // [B, T-1]
  at::Tensor keep_ce = keep.slice(1, 0, T - 1).logical_and(keep.slice(1, 1, T));
  nll = at::where(keep_ce, nll, at::zeros({}, nll.options()));
  at::Tensor ce = nll.sum() / keep_ce.sum().clamp_min(1).to(at::kFloat);
  out.loss = kl * (1.0 - ce_weight) + ce * ce_weight;
  out.ce = ce.detach();
}

DistillLoss distill_loss(const at::Tensor& teacher_logits, const at::Tensor& student_logits,
                         const at::Tensor& tokens, const at::Tensor& mask, double temperature,
                         double ce_weight) {
  // The fused kernel is CPU code; other devices (and AC_KERNELS=generic) take the reference
  // chain of ATen ops, which autograd differentiates (common/accelerator.h, cpu_fast_path).
  if (!cpu_fast_path({&teacher_logits, &student_logits}))
    return distill_loss_reference(teacher_logits, student_logits, tokens, mask, temperature,
                                  ce_weight);
  check_inputs(teacher_logits, student_logits, mask, temperature, ce_weight);
  const int64_t B = student_logits.size(0), T = student_logits.size(1);
  at::Tensor keep = mask.defined() ? mask.to(at::kBool) : at::Tensor();
  at::Tensor kl = fused_kl_loss(teacher_logits, student_logits, keep, temperature);
  DistillLoss out;
  out.loss = kl;
  if (ce_weight > 0 && T > 1) {
    if (!keep.defined()) keep = at::ones({B, T}, student_logits.options().dtype(at::kBool));
    add_ce(out, kl, at::log_softmax(student_logits, -1), tokens, keep, ce_weight);
  }
  out.kl = kl.detach();
  return out;
}

DistillLoss distill_loss_reference(const at::Tensor& teacher_logits, const at::Tensor& student_logits,
                         const at::Tensor& tokens, const at::Tensor& mask, double temperature,
                         double ce_weight) {
  check_inputs(teacher_logits, student_logits, mask, temperature, ce_weight);
  const int64_t B = student_logits.size(0), T = student_logits.size(1);
  at::Tensor keep = mask.defined() ? mask.to(at::kBool)
                                   : at::ones({B, T}, student_logits.options().dtype(at::kBool));
  auto [p, neg_entropy] = teacher_side(teacher_logits, temperature,
                                       mask.defined() ? keep : at::Tensor());

  at::Tensor logq = at::log_softmax(temperature == 1.0 ? student_logits
                                                       : student_logits / temperature, -1);
  // Clamp -inf to the lowest float so that p = 0 there gives 0, not 0 * -inf = NaN.
  at::Tensor cross = rowdot(p, logq.clamp_min(std::numeric_limits<float>::lowest()));  // [B, T]
  at::Tensor kl_pos = at::where(keep, neg_entropy - cross, at::zeros({}, cross.options()));
  at::Tensor count = keep.sum().clamp_min(1).to(at::kFloat);
  at::Tensor kl = kl_pos.sum() / count * (temperature * temperature);

  DistillLoss out;
  out.loss = kl;
  if (ce_weight > 0 && T > 1)
    add_ce(out, kl, temperature == 1.0 ? logq : at::log_softmax(student_logits, -1), tokens, keep,
           ce_weight);
  out.kl = kl.detach();
  return out;
}

at::Tensor kl_per_position_reference(const at::Tensor& teacher_logprobs,
                                     const at::Tensor& student_logprobs) {
  at::Tensor p = teacher_logprobs.exp();
  return at::where(p > 0, p * (teacher_logprobs - student_logprobs), at::zeros({}, p.options()))
      .sum(-1);
}

}  // namespace ac
