// Hidden-state distillation loss between mapped layers of a teacher and its pruned student.
//
// Source: the intermediate-state loss of TinyBERT (Jiao et al., 2020, "TinyBERT: Distilling BERT
// for Natural Language Understanding", eq. 8: MSE(H^S W_h, H^T)) and of Minitron (Muralidharan
// et al., 2024, "Compact Language Models via Pruning and Knowledge Distillation", section 3.3:
// L_is = sum over mapped layers k of Loss_k(H_s^k, H_t^k), teacher and student layers mapped by
// index). Here the student is a slice of the teacher (prune/pruning_map.h), so the projection
// is not learned: the teacher's residual stream is restricted to the hidden channels the student
// kept (index_select), and student layer i is compared with the teacher layer it came from.
//
// With H_s^k, H_t^k the residual streams after student layer k and after teacher layer
// layers[k] (ForwardObserver::on_block's `out`), both [B, T, D'], and m_bt the mask:
//   MSE_k  = sum_{b,t} m_bt sum_c (H_s - H_t)^2_{btc} / (D' * max(1, sum m))
//   VAR_k  = the teacher's variance over kept positions, per channel, averaged over channels:
//            mean_c [ sum_bt m_bt (H_t - mu_c)^2 / max(1, sum m) ],  mu_c = masked mean of H_t
//   L_hid  = mean_k MSE_k / VAR_k     (normalize = true: the fraction of the teacher's
//                                      variance the student misses, so that deep layers, whose
//                                      residual stream is larger, do not dominate)
//          = mean_k MSE_k             (normalize = false: TinyBERT's plain MSE)
// Masked positions contribute nothing and get zero, finite gradients whatever their values.
// The teacher side carries no autograd (its states come from a forward under InferenceMode).
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "model/llama.h"
#include "prune/pruning_map.h"

namespace ac {

/// Observer that keeps the residual stream after the chosen layers (ForwardObserver::on_block),
/// optionally restricted to some hidden channels. The kept tensors stay in the autograd graph
/// of the forward (student) or are plain values (teacher under InferenceMode).
class ResidualCapture : public ForwardObserver {
 public:
  /// layers: indices to keep, in the order wanted; channels: [D'] int64 or undefined = all.
  ResidualCapture(std::vector<int64_t> layers, at::Tensor channels);
  void on_block(int64_t layer, const at::Tensor& in, const at::Tensor& out) override;
  /// [B, T, D'] per entry of `layers`, in that order; undefined until the layer ran.
  std::vector<at::Tensor> states;

 private:
  std::vector<int64_t> layers_;
  at::Tensor channels_;
};

/// L_hid above: [] fp32, differentiable with respect to `student` only.
/// student, teacher: one [B, T, D'] fp32 tensor per mapped layer each (same sizes pairwise);
/// keep: [B, T] bool or undefined = every position. VAR_k below 1e-12 is clamped to 1e-12.
/// Throws ConfigError on empty or mismatched lists / shapes.
at::Tensor hidden_state_loss(const std::vector<at::Tensor>& student,
                             const std::vector<at::Tensor>& teacher, const at::Tensor& keep,
                             bool normalize);

/// Runs both models on `tokens` [B, T] int64 (the teacher under InferenceMode) and returns
/// L_hid with the map (check_pruning_map is the caller's job) and the logits of both:
/// {loss [], teacher logits [B, T, V], student logits [B, T, V]}.
struct HiddenForward {
  at::Tensor loss, teacher_logits, student_logits;
};
HiddenForward forward_with_hidden_loss(const LlamaModel& teacher, const LlamaModel& student,
                                       const at::Tensor& tokens, const PruningMap& map,
                                       const at::Tensor& keep, bool normalize);

}  // namespace ac
