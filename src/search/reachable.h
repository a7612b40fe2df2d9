// The least cost a search reaches on each limited metric, and the error that names it
// (docs/design.md, "The searches": when not even the smallest architecture of the space meets a
// limit, the search stops with the smallest reachable value of each limit). Every method goes
// through here: Minitron over its costed grid, `plan` over the shapes it costed, the
// differentiable search (and its repair) over its space by dynamic programming.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hardware/cost_model.h"
#include "search/candidates.h"
#include "search/search_space.h"

namespace ac {

/// The least cost reached on each metric, and the architectures reaching it.
struct ReachableCost {
  double ttft_ms = 0, tpot_ms = 0;      // smallest
  int64_t peak_memory_bytes = 0;        // smallest
  double throughput_tokens_per_s = 0;   // largest
  std::vector<ArchChoice> witnesses;    // [4]: least TTFT, TPOT, weight + KV bytes, 1/throughput
                                        // (smallest_reachable only; empty otherwise)
};

/// The best value of each metric over `estimates` (smallest TTFT, TPOT and peak memory, largest
/// throughput); +inf / INT64_MAX / 0 when `estimates` is empty.
ReachableCost best_of(const std::vector<CostEstimate>& estimates);

/// The value of `r` for a limit named as LimitSlack names it ("ttft_ms", "tpot_ms",
/// "peak_memory_bytes", "min_throughput_tokens_per_s"). Throws ConfigError on another name.
double reachable_value(const ReachableCost& r, const std::string& limit_name);

/// Per limit that is set: its value, and the smallest value (largest throughput) reachable,
/// e.g. "TPOT limit 8 ms, smallest reachable 9.125 ms; memory limit ...".
std::string smallest_reachable_message(const ReachableCost& r, const Limits& limits);

/// One of the smallest states of a layer of the space: block removed, smallest attention alone,
/// smallest FFN alone, or both at their smallest.
struct LayerState {
  int64_t attention = 0, ffn = 0;  // option indices
  bool attention_kept = false;     // the attention option keeps heads
  bool removed = false;            // the whole block is removed (and the parent had one)
};

/// The smallest states of layer `l` that the space has, without duplicates, in the order
/// removed, attention alone, FFN alone, both.
std::vector<LayerState> smallest_states(const SearchSpace& s, int64_t l);

/// Per metric, the architecture of least cost under the structural rules, by dynamic
/// programming over the layers: hidden size at its smallest; per layer one of its
/// smallest_states; at most max_blocks_removed removed, at least one attention. TTFT, TPOT,
/// weight + KV bytes and 1 / throughput are sums over the layers (per-layer terms measured as
/// differences of `cost` from smallest_choice), so the minimum is exact for them; peak memory is
/// that of the architecture of least weight + KV bytes (activations are a max over layers).
/// Every value is the true `cost` of a witness (the best over the witnesses and smallest_choice).
ReachableCost smallest_reachable(const SearchSpace& s, const CostFn& cost);

/// What the space offers, for messages: "hidden sizes 288, 256 (224 left out: ...); query heads
/// down to 40% and FFN widths down to 40% of the parent's; at most 2 of 6 layers removed whole
/// (--max-removed-layers)".
std::string search_space_summary(const SearchSpace& s);

/// Throws InfeasibleError naming the smallest reachable cost of every limit when one of them
/// lies beyond its limit (no architecture of the space can meet it). `limits`: what the search
/// holds predictions to (the safety margin included, pipeline/limits.h).
void check_reachable(const SearchSpace& s, const ReachableCost& r, const Limits& limits);

}  // namespace ac
