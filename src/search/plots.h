// The two plots written beside arch.json: the per-layer widths of the chosen architecture against
// the parent's, and the trajectory of the differentiable search (loss, expected cost over each
// budget, multipliers, temperature). Plain SVG (common/svg.h).
#pragma once
#include <string>
#include <vector>

#include "model/config.h"
#include "search/differentiable.h"

namespace ac {

/// Grouped bars per layer: query heads, KV heads and FFN width kept, as a fraction of the
/// parent's (grey = the parent, colour = kept; "removed" written where a part is gone), and
/// one group for the hidden size. `target` has the parent's layer count (removed parts marked).
/// Throws ConfigError when the layer counts differ.
std::string widths_svg(const ModelConfig& parent, const ModelConfig& target, const std::string& title);

/// Four stacked line charts over the steps: loss and KL (nats/token); expected cost / budget of
/// each limit (dashed line at 1 = the budget); the Lagrange multipliers; the Gumbel-softmax
/// temperature. An empty trajectory gives a chart that says so.
std::string trajectory_svg(const std::vector<TrajectoryPoint>& trajectory,
                           const std::vector<CostBudget>& budgets, const std::string& title);

}  // namespace ac
