// Structured pruning of the sparse MoE layers of a Qwen3-MoE / Mixtral model
// (model/moe_model.h), guided by importance/moe_importance.h: the MoE counterpart of
// prune/prune.h.
//
// What a target can shrink, per sparse layer (heterogeneous: each layer its own values):
//   num_experts            E' <= E: the E' experts with the highest importance `experts`; the
//                          router keeps their rows, so the softmax spreads over them alone
//                          (Model-Optimizer's _DynamicTopKRouter slices its weight by
//                          num_moe_experts and _DynamicSequentialMLP its local experts).
//   moe_intermediate_size  Fe' <= Fe, the same for every expert of the layer: in each kept
//                          expert its own Fe' channels with the highest expert_ffn row.
//   num_experts_per_tok    the target's k, clamped to E' (k' = min(k, E')).
// Everything else (attention, hidden size, vocab, the dense layers) is kept.
// Ties go to the lower index and survivors keep their original order (ranking() and
// top_k_indices() of importance/importance.h, as the dense pruning), so the kept sets of all
// widths are nested and the 0/1 masks of moe_masks_for_plan give the pruned model's function.
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "importance/moe_importance.h"
#include "model/moe_model.h"
#include "prune/routed_experts.h"

namespace ac {

// MoeLayerPlan (prune/routed_experts.h): indices into the parent, ascending, of what survives
// in one sparse layer; undefined in a dense layer.

/// The selection plus the config of the pruned model (the parent's, with the targets' E', Fe'
/// and the clamped k in each sparse layer).
struct MoePrunePlan {
  std::vector<MoeLayerPlan> layers;  // L entries
  ModelConfig config;
};

/// Throws ConfigError listing every problem a caller can fix: another layer count, vocab or
/// hidden size, a sparse layer made dense or a dense one sparse, attention or a dense FFN that
/// differs from the parent's (this pruning shrinks experts only), num_experts outside 1..E,
/// moe_intermediate_size outside 1..Fe, num_experts_per_tok outside 1..k (the parent's; a k
/// above the experts kept is clamped, not refused). Names `target_name` and
/// `parent_name`.
void validate_moe_target(const ModelConfig& parent, const ModelConfig& target,
                         const std::string& target_name = "target",
                         const std::string& parent_name = "the parent");

/// Chooses the surviving experts and channels (file header). Validates the target and that
/// `imp` fits the parent (ConfigError otherwise).
MoePrunePlan plan_moe_pruning(const ModelConfig& parent, const MoeImportance& imp,
                              const ModelConfig& target);

/// The physically smaller model: routers' rows and experts sliced by the plan (new storage for
/// the experts; the parent is untouched, the unpruned tensors are shared).
MoeModel apply_moe_plan(const MoeModel& m, const MoePrunePlan& plan);

/// plan_moe_pruning + apply_moe_plan: a valid MoE model whose config equals plan.config.
MoeModel prune_moe_model(const MoeModel& m, const MoeImportance& imp, const ModelConfig& target);

/// The same pruning as 0/1 masks on the full model (MoeMasks), fp32: per sparse layer experts
/// [E] and expert_ffn [E, Fe] (a removed expert's row all 0). forward(tokens, masks) equals the
/// pruned model's forward (tests/test_moe_prune.cpp).
MoeMasks moe_masks_for_plan(const ModelConfig& parent, const MoePrunePlan& plan);

}  // namespace ac
