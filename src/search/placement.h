// Attention-placement variants of a searched architecture: the same per-layer shapes with one
// layer's attention moved to the next kept layer. Where the attention-free layers go decides
// the result after distillation as much as how many there are (docs/benchmarks.md, "The ranking
// of candidates"), and a differentiable search run from one Gumbel seed settles on one
// placement: its restarts may all return the same one, while a neighbouring placement recovers
// better (the serving setting's third seed in the study against Minitron, whose picks kept
// attention in layers 0 and 3 or 0 and 5 and never 0 and 4, the best of the other seeds).
// run_search_method gives the places of restarts that repeated an earlier pick to these
// variants (outcome.h, SearchSettings::autocompress_restarts).
#pragma once
#include <vector>

#include "model/config.h"
#include "search/search_space.h"

namespace ac {

/// The attention-placement variants of `target` (the parent's layer count, removed blocks
/// marked no-op, as Candidate::target): for each two consecutive kept layers (removed blocks
/// skipped) of which exactly one has attention, `target` with their attention fields
/// (num_attention_heads, num_key_value_heads, attention_no_op) exchanged; FFN widths, hidden
/// size and removed blocks unchanged, so the count of attention-free layers is the same (a
/// variant that would leave a layer with neither attention nor FFN is not one). Only
/// variants whose moved attention is an option of its new layer in `space` (SearchSpace::
/// attention: a capped space offers "removed" in few layers) are returned, in layer order
/// (the pair's first layer), all distinct. Costs nothing; the caller checks the limits. Throws
/// ConfigError when `target`'s layer count is not the space's.
std::vector<ModelConfig> attention_placement_variants(const ModelConfig& target,
                                                      const SearchSpace& space);

}  // namespace ac
