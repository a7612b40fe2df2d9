#include "distill/fused_kl.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/autograd.h>

#include <limits>

#include "common/error.h"

namespace ac {
namespace {

constexpr float kLowest = std::numeric_limits<float>::lowest();

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

class FusedKl : public torch::autograd::Function<FusedKl> {
 public:
  // student [B, T, V] (grad), teacher [B, T, V], keep [B, T] bool or [0] (= every position; a
  // custom Function's tensor arguments must be defined) -> loss [].
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& student,
                            const at::Tensor& teacher, const at::Tensor& keep, double tau,
                            int64_t rows_per_block) {
    const int64_t V = student.size(2), N = student.size(0) * student.size(1);
    at::Tensor zs = student.flatten(0, 1), zt = teacher.flatten(0, 1);  // [N, V] (views)
    at::Tensor keep_rows = keep.numel() > 0 ? keep.reshape({N}).contiguous() : at::Tensor();
    at::Tensor g = at::empty({N, V}, student.options());                // [N, V]
    at::Tensor kl = at::zeros({N}, student.options());                  // [N]
    const int64_t rows = rows_per_block > 0 ? rows_per_block
                                            : std::max<int64_t>(1, (128 * 1024) / std::max<int64_t>(V, 1));
    const int64_t blocks = (N + rows - 1) / rows;
    at::parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t r0 = b * rows, n = std::min(rows, N - r0);
        kl_block(zt.narrow(0, r0, n), zs.narrow(0, r0, n), tau, kl.narrow(0, r0, n),
                 g.narrow(0, r0, n));
      }
    });
    at::Tensor count;
    if (keep_rows.defined()) {
      at::Tensor drop = keep_rows.logical_not();
      kl.masked_fill_(drop, 0.0);
      g.masked_fill_(drop.unsqueeze(1), 0.0);
      count = keep_rows.sum().clamp_min(1).to(at::kFloat);
    } else {
      count = at::full({}, double(std::max<int64_t>(N, 1)), student.options());
    }
    g.mul_(tau / count.item<double>());
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
            at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor fused_kl_loss(const at::Tensor& teacher_logits, const at::Tensor& student_logits,
                         const at::Tensor& keep, double temperature, int64_t rows_per_block) {
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
                        temperature,
                        rows_per_block);
}

}  // namespace ac
