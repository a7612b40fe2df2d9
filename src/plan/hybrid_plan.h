// `plan` for hybrid and MoE models (ModelConfig::is_hybrid: Nemotron-H, nemotron_h_puzzle,
// Qwen3-MoE, Mixtral): per-layer descents over the structures these models add, each result
// verified by predict() + check_limits() as the dense plan's (plan/plan.h).
//
// The moves, each allowed only where the scenario's engine loads it (engines/*.json
// "structure", hardware/hybrid_structure.h); a lever the engine fixes for the whole model is
// moved in every layer of its kind at once:
//   experts      one MoE layer's num_experts down by a step of E/16 (the parent's E), to
//                max(k, ceil(min_width_fraction E))
//   width        one MoE layer's moe_intermediate_size down one rung of the plan's width ladder
//                (multiples of the device's width granularity, a rung about Fe / width_steps)
//   top_k        one MoE layer's num_experts_per_tok down by one, to ceil(min_width_fraction k)
//   layer        one whole layer removed (never the first or the last; at most
//                max_attention_removed_fraction of the parent's attention layers and at least
//                one kept, as a hybrid's few attention layers are its exact recall over the
//                context; at most max_ffn_removed_fraction of L removed in all)
//   mamba_heads  mamba_num_heads of every Mamba-2 layer down by n_groups (Mamba sizes are global
//                in vLLM, TensorRT-LLM and llama.cpp), to ceil(min_width_fraction nh)
//   mamba_head_dim  mamba_head_dim of every Mamba-2 layer down by max(8, about P / 4 in
//                multiples of 8) (P the parent's), to ceil(min_width_fraction P): the step of
//                Minitron's head_dim grid (search/nemotron_h_minitron.h). Narrower heads keep
//                every head's own state and decay; fewer heads drop them whole
// Without weights the quality a move costs is estimated by what it removes: the share of the
// parent's parameters plus the share of its active (per-token) parameters. `compress` passes a
// QualityLoss from measured importance instead (importance/nemotron_h_importance.h
// nemotron_h_importance_loss): a move that removes little of what the calibration text uses
// costs little, whatever its size. Each step takes the
// move with the largest drop of the total relative excess over the limits per unit of that
// estimate, ties to the layer least cut along the lever, until every limit holds.
// The descents: all moves together ("greedy per layer"), then each lever alone ("experts
// only", "expert width only", "experts per token only", "layers only", "Mamba-2 only": heads
// and head_dim); those that fit, and
// differ from the first, are suggested.
#pragma once
#include <optional>
#include <string>

#include "plan/plan.h"

namespace ac {

/// Fills plan.per_layer (all levers) and plan.levers (one lever each) for a hybrid
/// plan.config, and adds the moves taken to plan.greedy_steps. plan.limits must be resolved.
/// `quality` (optional) prices each move; unset, the parameter shares above.
/// Throws ConfigError from predict (a scenario costed from a profile's tables: hybrid layers are
/// costed on a GPU's roofline only).
void add_hybrid_suggestions(Plan& plan, const Profile* profile, const QualityLoss& quality = {});

/// The greedy descent over every lever from `start` (plan.config's layer count, its layers each
/// the parent's kind with sizes at most the parent's, or removed) instead of the parent: the
/// repair of a searched architecture that breaks a limit (search/nemotron_h_differentiable.h).
/// A `start` that already meets plan.limits is returned unchanged. Returns the verified
/// suggestion labelled `label`, or nullopt when no move sequence meets the limits; `steps`
/// (optional) receives the moves taken. Throws what predict throws.
std::optional<PlanSuggestion> repair_hybrid(const Plan& plan, const ModelConfig& start,
                                            const std::string& label, const Profile* profile,
                                            const QualityLoss& quality = {},
                                            int64_t* steps = nullptr);

}  // namespace ac
