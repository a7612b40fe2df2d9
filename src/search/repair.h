// Discretize-and-repair: the step that turns the search's most probable architecture into one
// that meets every limit by the tool's own cost model (docs/design.md, "AutoCompress: the
// differentiable search": the discretized architecture is checked by the cost model and repaired
// greedily, giving up the least importance per unit of violation mended, until every limit
// holds).
//
// Greedy rule. While check_limits(cost, limits) reports a broken limit, every move that sets
// one decision to a smaller, nested option (hidden size, KV groups / heads per group, FFN
// width, or removal) and keeps the structural rules (search_space.h) is priced:
//   saved = V(before) - V(after), V = sum_k max(0, -slack_k) the total violation
//           (slack as in limit_slack: the fraction of the limit left, so a saving is in units
//            of "fraction of the limit"; a move gets no credit for going past a limit, so
//            small moves that just mend it win over big ones that overshoot)
//   lost  = importance_lost(after) - importance_lost(before)    (search_space.h)
// and the move with the largest saved / lost (among saved > 0) is taken. This is the classic
// greedy for a knapsack with a cost-per-value ratio (Dantzig 1957), one unit at a time.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hardware/cost_model.h"
#include "search/candidates.h"
#include "search/reachable.h"
#include "search/search_space.h"

namespace ac {

/// One greedy step.
struct RepairStep {
  std::string decision;     // "hidden", "layer 3 attention", "layer 2 ffn", "layer 1" (both parts)
  std::string from, to;     // option labels
  double saved = 0;         // sum of slack gained on the broken limits (fractions of the limit)
  double lost = 0;          // importance given up
  std::string violation;    // check_limits after the step ("" = every limit holds)
  nlohmann::json to_json() const;
};

struct RepairResult {
  ArchChoice choice;
  ModelConfig target;    // the parent's layer count, removed parts marked (prune_model's input)
  ModelConfig config;    // removed blocks dropped (what is deployed and costed)
  CostEstimate cost;     // cost(config); meets every limit
  std::vector<RepairStep> steps;  // structural fix-ups are not steps: see `fixed_structure`
  std::string fixed_structure;    // what the structural fix-up changed ("" = nothing)
};

/// What the greedy repair may change and how it prices quality.
struct RepairOptions {
  bool lock_hidden = false;  // never change the hidden size (repairs one hidden-size candidate)
  // Quality given up by a choice (lower is better; the price of a move is its increase).
  // Empty = importance_lost (search_space.h). The differentiable search also repairs with
  // -log p(choice) under its learned choice probabilities ("give up what the search found
  // least likely per unit of cost").
  std::function<double(const ArchChoice&)> lost;
};

/// True if attention option `b` keeps a subset of what option `a` keeps (nested masks): `b` is
/// removal while `a` is not, or keeps no more KV groups and no more heads per group (and fewer
/// of one).
bool attention_nested_smaller(const LayerConfig& a, const LayerConfig& b);

/// Makes `start` structurally valid (restores, at its smallest width, the FFN of the removed
/// blocks of highest block influence beyond max_blocks_removed, and the smallest attention of
/// the layer of highest influence when no attention is left), then repairs greedily (file
/// header) until every limit holds. When no nested move mends a broken limit (the rules forbid
/// the next removal, or attention and FFN trade places as the cheaper part), one layer is set
/// to one of its smallest states (removed / smallest attention alone / smallest FFN alone /
/// both) if that lowers the total violation sum_k max(0, -slack_k); the violation strictly
/// falls at every such step, so the repair ends. Never returns an architecture that breaks a
/// limit by `cost`. Throws InfeasibleError (with the smallest reachable costs) when nothing
/// mends the limits; ConfigError when `start` does not fit the space or `limits` still holds
/// relative limits.
RepairResult repair_architecture(const SearchSpace& s, const ArchChoice& start, const CostFn& cost,
                                 const Limits& limits);

/// The same with `opt`: hidden size locked (then InfeasibleError also when only the hidden size
/// could mend a limit) and/or another price of quality. With opt.lock_hidden the structural
/// fix-up and the lateral moves are unchanged (they never touch the hidden size).
RepairResult repair_architecture(const SearchSpace& s, const ArchChoice& start, const CostFn& cost,
                                 const Limits& limits, const RepairOptions& opt);

}  // namespace ac
