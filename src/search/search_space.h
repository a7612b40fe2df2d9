// The search space of the differentiable search (docs/design.md, "The architecture space"): one
// decision per structure, each a short list of options, every option a nested mask over the
// importance-ordered channels of the parent, so that the parent is a supernet of every
// candidate (Minitron's importance order, arXiv 2407.14679 §2; the supernet view of
// once-for-all / DNAS weight sharing, Cai et al. 2020, Wu et al. 2019 "FBNet").
//
// Decisions (L layers of the parent):
//   hidden            D' in {D, then multiples of the width granularity down to
//                     min_width_fraction x D}                                   [nD options]
//   attention[l]      (G', H'/G') pairs: KV groups kept x query heads per kept group, each
//                     from the parent's count down to min_width_fraction of it; then "removed"
//                                                                               [A_l options]
//   ffn[l]            F' in {F, multiples of the granularity down to min_width_fraction x F};
//                     then "removed"                                            [F_l options]
// Option 0 of every decision is the parent's own shape; options are ordered by size, largest
// first. A parent layer without attention (or FFN) has the single option "removed" there.
// A whole block is removed when both its attention and its FFN are.
//
// Structural rules every architecture of the space obeys (structurally_valid): at most
// max_blocks_removed whole blocks removed, and at least one layer keeps its attention.
//
// The serving engine's loader rules (SearchSpaceOptions::structure, engines/*.json) shape the
// options: an engine with one query-head count for every layer (vLLM, TensorRT-LLM: DeciLM)
// gets attention options that keep the parent's query heads (and "removed"); FFN widths are
// multiples of the engine's ffn_width_multiple as well as of the width granularity (the
// parent's own width stays option 0); removal is offered only where the engine builds it. A
// loader that derives head_dim from hidden_size / num_attention_heads (TensorRT-LLM's DeciLM)
// gets only the hidden sizes that give the parent's head_dim back. With tensor parallelism, head
// counts and FFN widths the loader shards are offered only where tensor_parallel divides them.
// So every architecture of the space is one the engine loads (hardware/engine.h
// structure_violations), provided the parent itself does.
#pragma once
#include <ATen/ATen.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hardware/engine.h"
#include "hardware/profile.h"
#include "importance/importance.h"
#include "model/config.h"
#include "search/candidates.h"

namespace ac {

/// How the space is drawn. Widths are multiples of `width_granularity` (the device's preferred
/// GEMM width step; Model-Optimizer's `hidden_size_divisor`), never literals in code: the
/// caller passes width_granularity_for(profile, device_spec) (hardware/granularity.h).
struct SearchSpaceOptions {
  int64_t width_granularity = 0;    // D' and F' are multiples of this (besides the parent's own);
                                    // 0 = unset, refused by build_search_space
  double min_width_fraction = 0.4;  // narrowest width / count offered, as a fraction of the parent's
  int64_t max_hidden_options = 6;   // options of the hidden-size decision (parent's included)
  int64_t max_ffn_widths = 6;       // FFN widths per layer (parent's included; removal extra)
  bool allow_removal = true;        // offer "attention removed" / "FFN removed"
  int64_t max_blocks_removed = -1;  // whole blocks removable at most; < 0 = L / 3 (Minitron's
                                    // depth pruning drops up to a third of the layers)
  /// Attention-free layers at most: < 0 = any layer may lose its attention; N >= 0 = only the N
  /// layers of lowest block influence are offered "attention removed" (0: none). Attention-free
  /// layers look cheap right after pruning and recover less under distillation (docs/
  /// benchmarks.md, "The ranking of candidates"); a whole block removed counts here too.
  int64_t max_attention_removed = -1;
  EngineStructure structure;        // what the serving engine's loader builds (default: anything)
  int64_t row_multiple = 1;         // every weight row (D', F', H' x head_dim) a multiple of
                                    // this: the weight type's block (weight_row_multiple)
  int64_t tensor_parallel = 1;      // GPUs the workload splits the model over (Workload); the
                                    // counts and widths structure.tensor_parallel_divides names
                                    // are offered only where it divides them
  /// The profile's repeatability per hidden size (Profile::width_repeatability) and the most
  /// pass-to-pass spread of its TTFT or TPOT prediction a hidden size may have to be offered
  /// (0: every width). A reduced width whose tables moved more than this between the profile's
  /// passes is one where the cost model cannot be trusted: it is left out (the parent's never).
  std::vector<WidthRepeatability> width_repeatability;
  double max_width_spread = 0;
};

/// One option index per decision.
struct ArchChoice {
  int64_t hidden = 0;
  std::vector<int64_t> attention, ffn;  // [L] each
  bool operator==(const ArchChoice& o) const {
    return hidden == o.hidden && attention == o.attention && ffn == o.ffn;
  }
};

/// The decisions, their options, the masks of every option and the importance each gives up.
struct SearchSpace {
  ModelConfig parent;
  std::vector<int64_t> hidden_sizes;               // [nD], descending, [0] = parent's D
  std::vector<std::vector<LayerConfig>> attention;  // [L][A_l]: the attention fields of each option
  std::vector<std::vector<LayerConfig>> ffn;        // [L][F_l]: the FFN fields of each option
  // 0/1 masks on the parent (model/llama.h Masks), fp32:
  at::Tensor hidden_masks;                // [nD, D]
  std::vector<at::Tensor> head_masks;     // [L] -> [A_l, H_l]; undefined where the parent has no attention
  std::vector<at::Tensor> attn_gates;     // [L] -> [A_l]: 0 for "removed", else 1
  std::vector<at::Tensor> ffn_masks;      // [L] -> [F_l, F_l]; undefined where the parent has no FFN
  std::vector<at::Tensor> ffn_gates;      // [L] -> [F_l]
  // Importance given up by each option (repair's "importance lost"), dimensionless: the
  // fraction of the structure's total importance score that the option drops, times the
  // layer's weight w_l = L x block_influence_l / sum(block_influence) (1 each when the
  // influences are not positive); hidden channels weigh sum_l w_l = L (they feed every layer).
  std::vector<double> hidden_loss;                      // [nD]
  std::vector<std::vector<double>> attention_loss;      // [L][A_l]
  std::vector<std::vector<double>> ffn_loss;            // [L][F_l]
  std::vector<double> block_influence;                  // [L] (ShortGPT), for the structural fix-up
  int64_t max_blocks_removed = 0;
  std::vector<int64_t> widths_left_out;  // hidden sizes left out for their profile's spread

  int64_t num_layers() const { return int64_t(attention.size()); }
  /// Decisions with more than one option.
  int64_t num_decisions() const;
  /// The choice of the parent itself (option 0 everywhere).
  ArchChoice full() const;
  /// Labels of the options, e.g. "H6/G6", "H4/G2", "removed", "768".
  std::string attention_label(int64_t layer, int64_t option) const;
  std::string ffn_label(int64_t layer, int64_t option) const;
};

/// Builds the space of `parent` with `imp` (must match the parent: check_importance_matches).
/// The ladders are those of search/ladders.h (spread_width_ladder, count_ladder and the engine
/// rules). Throws ConfigError on a bad option (width_granularity unset or < 1, fraction outside
/// (0, 1]) or an importance of another model.
SearchSpace build_search_space(const ModelConfig& parent, const Importance& imp,
                               const SearchSpaceOptions& opt = {});

/// The target config of a choice: the parent's layer count, removed parts marked no-op (what
/// prune_model takes). Throws ConfigError if an index is out of range.
ModelConfig target_of(const SearchSpace& s, const ArchChoice& c);

/// The cost of a choice as deployed: cost(drop_removed_blocks(target_of(s, c))).
CostEstimate choice_cost(const SearchSpace& s, const ArchChoice& c, const CostFn& cost);

/// The index of the last (smallest) option of `options` that keeps its attention (or FFN, when
/// `attention` is false); -1 when none does.
int64_t smallest_kept_option(const std::vector<LayerConfig>& options, bool attention);

/// The index of the first option of `options` with the attention (or FFN) removed; -1 if none.
int64_t removed_option(const std::vector<LayerConfig>& options, bool attention);

/// Empty when the choice obeys the structural rules, else why not.
std::string structural_violation(const SearchSpace& s, const ArchChoice& c);

/// Importance given up by a choice: the sum of its options' losses (see SearchSpace).
double importance_lost(const SearchSpace& s, const ArchChoice& c);

/// The smallest architecture of the space: every width at its minimum, attention removed in
/// every layer but the one of highest block influence (kept at its smallest option), and the
/// FFN also removed in the max_blocks_removed attention-free layers of lowest block influence.
/// Cost is monotone in every width, so no architecture of the space costs less on any metric.
ArchChoice smallest_choice(const SearchSpace& s);

/// {"hidden": {"options": [...], "p": [...]}, "layers": [{"attention": {...}, "ffn": {...}}]}
/// from per-decision probabilities ([nD], [L][A_l], [L][F_l]; any float dtype).
nlohmann::json probabilities_json(const SearchSpace& s, const at::Tensor& p_hidden,
                                  const std::vector<at::Tensor>& p_attention,
                                  const std::vector<at::Tensor>& p_ffn);

}  // namespace ac
