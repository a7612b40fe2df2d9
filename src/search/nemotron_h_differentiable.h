// AutoCompress's differentiable search on hybrid Mamba-2 / attention / MoE models (Nemotron-H,
// model/nemotron_h_model.h): the relaxation of search/differentiable.h over the levers of the
// hybrid plan (plan/hybrid_plan.h), under the same deployment limits.
//
//   Decisions   categorical, one logit vector each, the parent's option first:
//                 mamba_num_heads (down by n_groups) and mamba_head_dim (down by
//                 mamba_head_dim_step), one decision each for every Mamba-2 layer at once
//                 (vLLM, TensorRT-LLM and llama.cpp size the Mamba state globally);
//                 n_routed_experts (down by max(1, E / 16) to max(k, ceil(f E)); only E under
//                 the router's n_group > 1) and moe_intermediate_size (the plan's width
//                 ladder) per MoE layer, or one decision for every MoE layer where the engine
//                 fixes the lever for the model (hardware/hybrid_structure.h);
//                 keep or remove, in as many layers as the plan's caps let go (never the first or
//                 the last; attention layers down to its floor), those of lowest block influence.
//               num_experts_per_tok is not relaxed (a top-k with another k is not a mask on
//               the parent's forward); the repair may still lower it.
//   Supernet    the teacher under soft masks (NemotronHMasks): a Mamba-2 layer's channels
//               (sum_h y_h heads_h) x (sum_d y_d head_dim_d) [nh, P], an MoE layer's expert
//               channels (sum_i y_i experts_i) x (sum_j y_j width_j) [E, Fe], the block's output
//               times y_keep. Each option's 0/1 mask is the pruning's own selection
//               (prune/nemotron_h_prune.h nemotron_h_masks_for_plan), so a one-hot sample is the
//               pruned model, except for removed experts: the soft supernet zeroes their output
//               where the pruned router sends those tokens to the next-best experts.
//   Cost        per layer, a table over the joint options of the decisions that touch it: the
//               TTFT, TPOT, peak memory and throughput of a center architecture with that layer
//               alone changed, minus the center's (predict(), the scenario's roofline). The
//               expected cost is the center's plus every table contracted with its decisions'
//               probabilities: exact at the center, and for costs that add over layers under
//               independent decisions (a roofline's time and weight bytes); a first-order
//               estimate of the throughput and of the activation peak (the largest layer's). The
//               center is the parent, then every relinearize_every steps the current argmax.
//   Objective   KL(teacher || supernet) / KL_0
//                 + cost_weight sum_k lambda_k max(0, g_k(E[cost_k])),
//               KL_0 the supernet's KL at every width decision's smallest option on the first
//               batch (no layer removed): like each g_k, the KL term then spans about [0, 1] over
//               what the search controls (a teacher's KL to its light prunes can be a few
//               hundredths of a nat, and the multipliers would outweigh it); the hinge, where
//               the dense search has lambda_k g_k, because a multiplier grown while a limit was
//               broken would otherwise keep pushing every decision to its floor after the limit
//               holds (measured: docs/benchmarks.md). The temperature schedule, Gumbel-softmax
//               soft samples, dual ascent on g_k and freezing are search/differentiable.h's; the
//               violation scale s_k is the range the parent's tables span.
//   Discretize  the argmax of every decision; removals beyond the plan's caps
//               (max_ffn_removed_fraction of the layers, max_attention_removed_fraction of the
//               attention layers) undone, the least probable first; then, if a limit is still
//               broken, the plan's greedy descent from there (plan/hybrid_plan.h repair_hybrid);
//               then the slack given back (search/repair.h fill_slack's counterpart): while a
//               decision can move one option toward the parent's with every limit held, the move
//               that regains the most quality (the QualityLoss, else parameters).
#pragma once
#include <ATen/ATen.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "importance/nemotron_h_importance.h"
#include "model/nemotron_h_model.h"
#include "plan/plan.h"

namespace ac {

/// Options of the hybrid relaxation (the meaning of each as in DifferentiableOptions,
/// search/differentiable.h).
struct HybridSearchOptions {
  int64_t steps = 48;             // optimisation steps at most (fewer if every decision freezes)
  double logit_lr = 0.3;          // Adam step on the logits
  double tau_start = 1.0;         // temperature at step 0, geometric to ...
  double tau_end = 0.1;           // ... this at the last step
  double dual_lr = 2.0;           // dual ascent step of every multiplier
  double cost_weight = 1.0;       // weight of the Lagrangian term
  double init_full_logit = 2.0;   // initial logit of the parent's option (others 0)
  double freeze_entropy = 0.05;   // freeze a decision below this normalised entropy, in budget
  uint64_t seed = 0;              // Gumbel noise
  int64_t relinearize_every = 4;  // steps between the cost tables' centers (file header)
};

/// The outcome of the hybrid search.
struct HybridSearchResult {
  ModelConfig argmax;             // the most probable option of every decision (parent's layers
                                  // count, removed layers marked), before the caps and repair
  std::optional<PlanSuggestion> suggestion;  // the repaired argmax; nullopt: no descent from it
                                             // meets the limits
  int64_t repair_steps = 0;       // the greedy's moves after the argmax
  int64_t slack_moves = 0;        // moves back toward the parent after that
  int64_t steps_run = 0;
  int64_t search_tokens = 0;      // the teacher's log-probabilities once, KL_0's batch, then
                                  // each step's batch
  double kl_scale = 1;            // KL_0 (file header), nats per token
  nlohmann::json trajectory = nlohmann::json::array();  // per step: tokens, temperature, kl,
                                  // penalty, loss, expected costs, multipliers, frozen decisions
  nlohmann::json decisions = nlohmann::json::array();   // per decision: name, values, final
                                  // probabilities softmax(logits)
  /// {"argmax", "suggestion", "repair_steps", "slack_moves", "steps_run", "search_tokens",
  /// "kl_scale", "trajectory", "decisions"}.
  nlohmann::json to_json() const;
};

/// Runs the relaxation on `teacher` with its importance `imp` (the option masks) against
/// plan.limits (absolute; plan.scenario's roofline costs every table, plan.options gives the
/// ladders and removal caps); `calibration`: [B, T] int64 batches, cycled over the steps (the
/// teacher's log-probabilities of each computed once). `quality` prices the repair's moves
/// (plan/hybrid_plan.h). Throws ConfigError on an empty calibration set, a non-hybrid teacher or
/// relative limits; what predict and the pruning throw.
HybridSearchResult nemotron_h_differentiable_search(const NemotronHModel& teacher,
                                                   const NemotronHImportance& imp,
                                                   const Plan& plan,
                                                   const std::vector<at::Tensor>& calibration,
                                                   const HybridSearchOptions& opt,
                                                   const QualityLoss& quality = {});

}  // namespace ac
