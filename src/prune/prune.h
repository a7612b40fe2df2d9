// Structured pruning of a Llama-family decoder to a (possibly heterogeneous) target architecture,
// guided by activation importance (Minitron, arXiv 2407.14679, Sec. 2; docs/design.md, "The
// architecture space").
//
// What a target can shrink, per layer: KV groups (G), query heads per group (H/G, the same for
// every kept group), FFN width (F), attention removed, FFN removed (both = block removed); and
// globally the hidden size (D). head_dim, vocab and the layer count are kept.
//
// Selection (one rule for pruning and for masks, so that they agree):
//   hidden      the D' channels with the highest importance.hidden
//   KV groups   the G' groups with the highest importance kv_groups (sum of their heads' scores)
//   heads       in every kept group, the H'/G' query heads with the highest head score
//   FFN         the F' neurons with the highest importance.ffn
// Ties go to the lower index (ranking() in importance.h), so for each structure the kept set of
// width k is a prefix of one fixed order: masks of all widths are nested (one supernet).
// Survivors keep their original relative order (no physical reordering): the nested property
// lives in the importance order, which the search and the masks use; reordering weights would
// only change the file, not the function, and keeping the order keeps KV groups contiguous.
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "importance/importance.h"
#include "model/llama.h"

namespace ac {

/// Indices (into the parent, ascending, int64) of what survives in one layer.
struct LayerPlan {
  at::Tensor heads;      // [H'] query heads kept; undefined when the target removes attention
  at::Tensor kv_groups;  // [G'] KV heads kept;    undefined when the target removes attention
  at::Tensor ffn;        // [F'] neurons kept;     undefined when the target removes the FFN
};

/// The full selection, plus the config of the pruned model (the parent's global values --
/// rope, eps, tying, bias, special tokens, extra fields -- with the target's shapes).
struct PrunePlan {
  at::Tensor hidden;  // [D'] hidden channels kept
  std::vector<LayerPlan> layers;
  ModelConfig config;
};

/// Throws ConfigError with every problem a caller can fix: a different layer count or vocab,
/// hidden_size > the parent's, attention or FFN where the parent has none, another head_dim,
/// more KV groups or query heads (per group) than the parent, H not a multiple of G (the message
/// lists the valid num_attention_heads for that G), FFN wider than the parent's. The message
/// names `target_name` (e.g. "--arch arch.json") and `parent_name` (e.g. "parent/config.json").
void validate_target(const ModelConfig& parent, const ModelConfig& target,
                     const std::string& target_name = "target",
                     const std::string& parent_name = "the parent");

/// Chooses the surviving channels (see the file header). Validates the target and that `imp`
/// fits the parent (ConfigError otherwise).
PrunePlan plan_pruning(const ModelConfig& parent, const Importance& imp,
                       const ModelConfig& target);

/// The physically smaller model: every weight sliced by the plan (new storage; the parent is
/// untouched). Tied embeddings are sliced once and stay tied; qkv biases follow their rows.
LlamaModel apply_plan(const LlamaModel& m, const PrunePlan& plan);

/// plan_pruning + apply_plan. The result's config equals plan.config and agrees with every
/// tensor shape. Throws ConfigError (see validate_target, check_importance_matches).
LlamaModel prune_model(const LlamaModel& m, const Importance& imp, const ModelConfig& target);

/// The same pruning as 0/1 masks on the full model (model/llama.h Masks), fp32:
///   hidden [D]; per layer heads [H], ffn [F], attn_gate [], ffn_gate [] (defined wherever the
///   parent has the part). A removed KV group zeroes all its query heads (its K/V are then
///   never read). A removed attention / FFN has gate 0 and its head / neuron mask all 0.
/// forward(tokens, masks) equals the pruned model's forward (tests/test_prune.cpp).
Masks masks_for_plan(const ModelConfig& parent, const PrunePlan& plan);
Masks masks_for(const LlamaModel& m, const Importance& imp, const ModelConfig& target);

}  // namespace ac
