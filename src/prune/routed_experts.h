// The routed experts of one sparse MoE layer, kept or masked by importance: what the MoE family
// (prune/moe_prune.h: Qwen3-MoE, Mixtral) and Nemotron-H's MoE layers (prune/nemotron_h_prune.h)
// share. The experts with the highest scores are kept, and within each kept expert its own FFN
// channels with the highest scores (top_k_indices of importance/importance.h: ties to the lower
// index, survivors in their original order), so that the masked model equals the pruned one.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

namespace ac {

/// The selection in one sparse layer: indices into the parent, ascending.
struct MoeLayerPlan {
  at::Tensor experts;     // [E'] int64, the experts kept
  at::Tensor expert_ffn;  // [E', Fe'] int64, row j: the channels kept in expert experts[j]
};

/// The num_experts experts of highest `expert_scores` ([E] float), and in each the
/// moe_intermediate_size channels of highest `expert_ffn_scores` (its row of [E, Fe] float).
/// Expects 1 <= num_experts <= E and 1 <= moe_intermediate_size <= Fe (checked by the callers'
/// target validation).
MoeLayerPlan keep_routed_experts(const at::Tensor& expert_scores,
                                 const at::Tensor& expert_ffn_scores, int64_t num_experts,
                                 int64_t moe_intermediate_size);

/// The kept experts of a stacked [E, ...] weight, each with its own kept channels along `dim`
/// (1: gate/up [E, Fe, D] -> [E', Fe', D]; 2: down [E, D, Fe] -> [E', D, Fe']); contiguous, on
/// t's device.
at::Tensor take_experts(const at::Tensor& t, const MoeLayerPlan& lp, int64_t dim);

/// The 0/1 float masks of `lp` in a parent of E experts of Fe channels: experts [E] and
/// expert_ffn [E, Fe] (1 at each kept expert's kept channels).
void routed_expert_masks(const MoeLayerPlan& lp, int64_t E, int64_t Fe, at::Tensor& experts,
                         at::Tensor& expert_ffn);

}  // namespace ac
