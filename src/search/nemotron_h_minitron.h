// Minitron's baseline for a Nemotron-H teacher (hybrid Mamba-2 / attention / MLP / MoE layers):
// a homogeneous grid over the hybrid's levers, costed by the scenario's model, its largest
// feasible shapes ranked by KL right after pruning, the best few retrained briefly and the best
// after that kept. The hybrid counterpart of search/minitron.h.
//
// The levers are the ones Model-Optimizer's Minitron prunes in a hybrid (its
// mcore_minitron search space for Nemotron-H: mamba_num_heads, mamba_head_dim, the MLP's
// ffn_hidden_size, num_moe_experts, moe_ffn_hidden_size, and depth), each the same in every
// layer of its kind (Minitron-SSM, Taghibakhshi et al. 2025, arXiv 2504.11409; Minitron,
// Muralidharan et al. 2024, arXiv 2407.14679):
//   mamba_num_heads   nh' = k * n_groups for k from nh / n_groups down to
//                     ceil(min_width_fraction * nh / n_groups) (heads kept within their groups);
//   mamba_head_dim    P, then multiples of 8 in steps of about P / 4 down to min_width_fraction P;
//   intermediate_size F (the relu² MLP layers), moe_intermediate_size Fe: the width ladder of
//                     search/ladders.h (multiples of the device's width granularity, steps of
//                     about a width / 8, search/minitron.h's FFN ladder);
//   n_routed_experts  E, then steps of about E / 8 down to max(2, k, min_width_fraction E) (only
//                     with the router's n_group 1: grouped routing fixes the count);
//   depth             0..max_layers_dropped whole layers removed, those of lowest block influence
//                     first (never the first or the last layer, and at least one attention layer
//                     kept, as the plan does, plan/hybrid_plan.h).
// Attention heads, the shared expert and experts per token are kept (Minitron's hybrid grid does
// not move them). Each shape must pass validate_nemotron_h_target, load in the scenario's engine
// (structure_violations) and meet the limits by predict(); of those, the ones no larger feasible
// shape covers lever by lever (search/minitron.cpp maximal_feasible's rule), most parameters
// first, at most max_ranked, are pruned and ranked by mean KL(teacher || pruned) on the
// calibration windows.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hardware/cost_model.h"
#include "hardware/scenario.h"
#include "importance/nemotron_h_importance.h"
#include "model/nemotron_h_model.h"

namespace ac {

/// The grid's options; the width ladders' granularity is the device's (hardware/granularity.h).
struct NemotronHGridOptions {
  int64_t width_granularity = 0;     // widths F' and Fe' are multiples of this; 0 = unset, refused
  double min_width_fraction = 0.25;  // the narrowest of every lever, as a fraction of the
                                     // parent's (PlanOptions' default: both methods reach as far)
  int64_t max_layers_dropped = 2;    // depth choices: 0..this many layers removed
  int64_t max_ranked = 24;           // at most this many feasible shapes are ranked by KL
};

/// One shape of the grid: its config (a target of the parent: same layer count, removed layers
/// marked), its predicted cost, and once ranked its KL after pruning (-1 before).
struct NemotronHGridCandidate {
  ModelConfig config;
  CostEstimate cost;
  std::string shape;             // "nh 6, P 32, F 192, E 8, Fe 96, -1 layer(s)"
  double kl_after_pruning = -1;  // nats/token on the calibration windows
};

/// What the grid held and which shapes were ranked.
struct NemotronHGrid {
  int64_t shapes = 0;     // every combination of the levers
  int64_t buildable = 0;  // passing validate_nemotron_h_target and the engine's rules
  int64_t feasible = 0;   // of those, meeting the limits by predict()
  std::vector<NemotronHGridCandidate> ranked;  // maximal feasible, ranked by KL (lowest first)
  int64_t search_tokens = 0;  // forward tokens spent ranking (teacher once, each candidate once)
};

/// Builds the grid above for `teacher` under `scenario`'s engine and `limits` (absolute, as
/// Plan::limits), prunes each maximal feasible shape with `imp` and ranks them by mean KL on
/// `calibration` (each [B, T] integer token ids). Throws ConfigError when width_granularity is
/// unset or < 1, InfeasibleError when no shape meets the limits (naming the smallest cost the
/// grid reached), and what predict and the pruning throw.
NemotronHGrid nemotron_h_minitron_grid(const NemotronHModel& teacher,
                                       const NemotronHImportance& imp, const Scenario& scenario,
                                       const Limits& limits,
                                       const std::vector<at::Tensor>& calibration,
                                       const NemotronHGridOptions& opt);

/// Mean KL(teacher || student) over `calibration` in nats per token, the teacher's
/// log-probabilities given (one [B, T, V] per batch, as log_softmax of its logits). No autograd.
double nemotron_h_calibration_kl(const std::vector<at::Tensor>& teacher_logprobs,
                                 const NemotronHModel& student,
                                 const std::vector<at::Tensor>& calibration);

/// The tokens of `batches` (the sum of their numel): a forward over them costs this many
/// search tokens.
int64_t tokens_in(const std::vector<at::Tensor>& batches);

/// log_softmax of the model's logits on each batch, for nemotron_h_calibration_kl.
std::vector<at::Tensor> nemotron_h_logprobs(const NemotronHModel& m,
                                            const std::vector<at::Tensor>& calibration);

}  // namespace ac
