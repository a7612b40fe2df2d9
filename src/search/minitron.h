// Minitron's architecture search (Sreenivas et al. 2024, "LLM Pruning and Distillation in
// Practice: The Minitron Approach", arXiv 2408.11796; Muralidharan et al. 2024, arXiv
// 2407.14679 §4): uniform candidates — one shape for every layer — enumerated over hidden size,
// attention heads, FFN width and depth; those that meet every deployment limit by the cost model
// are pruned with the importance order and ranked by their distillation loss (KL to the teacher)
// right after pruning; the best is kept.
//
// Lightweight retraining (retrain_top_candidates, the last step of Minitron's search: Muralidharan et
// al. 2024 §4 "Search" / Fig. 5, "the top candidates are retrained for a short budget and the best
// after retraining is kept", because the ranking right after pruning does not always predict the
// ranking after distillation): the top_k candidates by KL after pruning are each distilled for
// a short token budget and ranked again by their KL to the teacher on the calibration batches.
//
// Widths are multiples of the device's width granularity (from the profile), so the search only
// offers shapes the hardware runs efficiently.
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "distill/distill.h"
#include "hardware/cost_model.h"
#include "hardware/scenario.h"
#include "importance/importance.h"
#include "model/llama.h"

namespace ac {

/// The uniform candidate grid.
struct UniformSpace {
  std::vector<int64_t> hidden_sizes;       // D' choices
  std::vector<int64_t> heads_per_group;    // query heads kept per KV group (H'/G')
  std::vector<int64_t> kv_groups;          // G' choices
  std::vector<int64_t> ffn_widths;         // F' choices
  std::vector<int64_t> num_layers;         // L' choices (blocks kept, lowest influence dropped)
  int64_t size() const;
};

/// Options of the grid and the ranking.
struct MinitronOptions {
  int64_t width_granularity = 32;  // widths are multiples of this (from the profile)
  int64_t row_multiple = 1;        // every weight row (D, F, H x head_dim) a multiple of this:
                                   // the weight type's block (weight_row_multiple)
  double min_width_fraction = 0.4; // smallest width considered, as a fraction of the parent's
  int64_t max_layers_dropped = 2;  // depth choices: L, L-1, ..., L-max
  int64_t max_ranked = 24;         // at most this many feasible candidates are ranked by loss
};

/// Builds the grid for `parent` (homogeneous in its attention layers).
UniformSpace uniform_space(const ModelConfig& parent, const MinitronOptions& opt);

/// One candidate architecture and what is known of it.
struct Candidate {
  ModelConfig config;           // the pruned architecture (removed blocks dropped)
  ModelConfig target;           // the same with the parent's layer count (what prune_model takes)
  CostEstimate cost;            // predicted by the cost model
  std::string violation;        // empty when every limit holds
  double loss_after_prune = -1; // KL(teacher || candidate) per token; -1 = not ranked
  double loss_after_retrain = -1; // the same after the lightweight retraining; -1 = not retrained
  bool chosen = false;
  nlohmann::json to_json() const;
};

/// The outcome of a search.
struct SearchResult {
  std::string method;                  // "minitron"
  Candidate best;
  std::vector<Candidate> candidates;   // every candidate with its cost; ranked ones have a loss
  int64_t search_tokens = 0;           // forward tokens through any model (teacher included)
  double seconds = 0;
  nlohmann::json to_json() const;
};

/// Predicts the cost of an architecture (wraps the cost model with scenario + profile).
using CostFn = std::function<CostEstimate(const ModelConfig&)>;

/// Runs Minitron's search. `calibration`: [B, T] int64 batches used to rank candidates by KL.
/// Throws InfeasibleError when no candidate meets the limits; the message gives, per limited
/// metric, the smallest value any candidate reaches.
SearchResult minitron_search(const LlamaModel& teacher, const Importance& imp, const CostFn& cost,
                             const Limits& limits, const std::vector<at::Tensor>& calibration,
                             const MinitronOptions& opt);

/// Options of the lightweight retraining (Minitron's; the differentiable search's proposals too).
struct RetrainOptions {
  int64_t top_k = 3;       // candidates retrained: the best top_k by loss_after_prune
  DistillOptions distill;  // each candidate's short distillation (token_budget = its tokens);
                           // its log_path / state_dir are ignored (nothing is written)
};

/// Lightweight retraining (Minitron's last search step; also applied to the differentiable
/// search's ranked proposals): the top_k ranked candidates of `r` (loss_after_prune >= 0, best
/// first, one per distinct architecture) are pruned from `teacher`, distilled for opt.distill.token_budget tokens of
/// `train`, and their KL(teacher || candidate) per token on `calibration` ([B, T] int64 batches)
/// is stored in loss_after_retrain; the lowest becomes r.best (chosen). r.search_tokens grows by
/// the forward tokens this spends: per candidate, the distillation's tokens twice (teacher and
/// student forward) plus one pass over `calibration`; the teacher's pass over `calibration`
/// once. Throws ConfigError when no candidate of `r` was ranked, or when top_k < 1; what
/// distill() throws.
void retrain_top_candidates(const LlamaModel& teacher, const Importance& imp, SearchResult& r,
                            const TokenDataset& train, const std::vector<at::Tensor>& calibration,
                            const RetrainOptions& opt);

/// Mean KL(teacher || student) per token over batches, with the teacher's logits precomputed.
double mean_kl(const std::vector<at::Tensor>& teacher_logits, const LlamaModel& student,
               const std::vector<at::Tensor>& batches);

}  // namespace ac
