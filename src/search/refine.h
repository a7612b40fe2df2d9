// After the relaxation: turn the learned choice distribution into a few architectures that meet
// every limit, rank them by the in-sample distillation loss, and refine the best by a short local
// search (docs/design.md, "AutoCompress: the differentiable search"; the ranking is Minitron's
// "loss right after pruning" criterion, arXiv 2407.14679 §4, applied to a handful of candidates
// instead of a grid).
//
//   fill_slack     the greedy repair's mirror: while a single decision can move to a larger
//                  nested option without breaking a limit, take the move that regains the most
//                  quality per unit of slack used (Dantzig's ratio greedy, as repair.h). A
//                  repair that overshot a limit gives the slack back this way.
//   refine_choice  first-improvement hill climbing over "swap" neighbours: one decision one
//                  option larger, another made just small enough that every limit holds again.
//                  Neighbours are tried in the order of a prior (higher first: the learned
//                  log-probability in the differentiable search), each costs one loss
//                  evaluation, and a neighbour is taken only when its loss is strictly lower.
//                  The result never breaks a limit and never has a higher loss than the start.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "search/repair.h"

namespace ac {

/// Quality of a choice for the refinement: e.g. KL(teacher || pruned) per token on cached
/// calibration batches (lower is better). Each call is one "evaluation" (search tokens).
using ChoiceLossFn = std::function<double(const ArchChoice&)>;
/// Higher = try first (e.g. sum over decisions of log p(option) under the learned logits).
using ChoicePriorFn = std::function<double(const ArchChoice&)>;

/// Spends the slack of `start` (which must meet `limits`): repeatedly takes the single-decision
/// move to a larger nested option (hidden size one option up unless opt.lock_hidden, FFN one
/// width up, attention to a superset of heads / KV groups, a removed part restored at its
/// smallest kept option) that keeps every limit and the structural rules and regains the most
/// quality per slack used: (lost(before) - lost(after)) / max(sum_k slack_k(before) -
/// slack_k(after), 1e-9), with lost = opt.lost or importance_lost; moves that regain nothing are
/// never taken. Returns `start` unchanged when nothing fits. Throws ConfigError when `start`
/// does not fit the space or breaks a limit.
ArchChoice fill_slack(const SearchSpace& s, const ArchChoice& start, const CostFn& cost,
                      const Limits& limits, const RepairOptions& opt = {});

struct RefineOptions {
  int64_t max_evaluations = 8;  // loss evaluations at most (each costs its calibration tokens)
  bool lock_hidden = false;     // keep the start's hidden size
};

/// One evaluated neighbour.
struct RefineStep {
  std::string move;     // e.g. "layer 2 ffn 512 -> 640; layer 4 attention H6/G6 -> H4/G4"
  double loss = 0;      // its loss
  bool accepted = false;
  nlohmann::json to_json() const;
};

struct RefineResult {
  ArchChoice choice;        // meets every limit; loss <= start_loss
  double loss = 0;          // loss(choice) (start_loss when nothing improved)
  int64_t evaluations = 0;  // calls of the loss function
  std::vector<RefineStep> steps;
};

/// The neighbours of `c` that meet `limits` and the structural rules: for each decision, each
/// next larger option (one hidden size up, one FFN width up, every attention option that
/// nests `c`'s with one KV group or one head per group more, a removed part restored at its
/// smallest option) alone if it fits, else combined with the largest nested-smaller option of
/// one other decision that makes it fit. Distinct, sorted by `prior` (highest first).
std::vector<std::pair<ArchChoice, std::string>> swap_neighbours(const SearchSpace& s,
                                                                const ArchChoice& c,
                                                                const CostFn& cost,
                                                                const Limits& limits,
                                                                const ChoicePriorFn& prior,
                                                                bool lock_hidden);

/// First-improvement local search from `start` (meets `limits`, loss `start_loss`): evaluate
/// swap_neighbours in prior order, move to the first with a strictly lower loss, repeat from
/// there; stop after opt.max_evaluations evaluations or when no neighbour improves. Throws
/// ConfigError when `start` breaks a limit.
RefineResult refine_choice(const SearchSpace& s, const ArchChoice& start, double start_loss,
                           const CostFn& cost, const Limits& limits, const ChoiceLossFn& loss,
                           const ChoicePriorFn& prior, const RefineOptions& opt);

}  // namespace ac
