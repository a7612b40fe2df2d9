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
// Widths are multiples of the device's width granularity (from the profile, else the device's
// file), so the search only offers shapes the hardware runs efficiently; the ladders are those of
// search/ladders.h.
#pragma once
#include <ATen/ATen.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "distill/distill.h"
#include "hardware/cost_model.h"
#include "hardware/scenario.h"
#include "importance/importance.h"
#include "model/llama.h"
#include "search/candidates.h"
#include "search/ladders.h"

namespace ac {

/// Options of the grid and the ranking.
struct MinitronOptions {
  int64_t width_granularity = 0;   // widths are multiples of this: the device's,
                                   // width_granularity_for(profile, device_spec)
                                   // (hardware/granularity.h); 0 = unset, refused
  int64_t row_multiple = 1;        // every weight row (D, F, H x head_dim) a multiple of this:
                                   // the weight type's block (weight_row_multiple)
  double min_width_fraction = 0.4; // smallest width considered, as a fraction of the parent's
  int64_t max_layers_dropped = 2;  // depth choices: L, L-1, ..., L-max
  int64_t max_ranked = 24;         // at most this many feasible candidates are ranked by loss
};

/// Builds the grid for `parent` (homogeneous in its attention layers): hidden sizes every
/// multiple of g = lcm(width_granularity, row_multiple) below D, FFN widths in steps of about
/// F / 8 (search/ladders.h stepped_width_ladder, first rung the nearest multiple), KV heads and
/// query heads per KV head by count_ladder, depth L down to L - max_layers_dropped. Throws
/// ConfigError when width_granularity is unset or < 1, or the parent has no layer with both
/// attention and FFN.
UniformSpace uniform_space(const ModelConfig& parent, const MinitronOptions& opt);

/// Runs Minitron's search. `calibration`: [B, T] int64 batches used to rank candidates by KL.
/// Throws InfeasibleError when no candidate meets the limits; the message gives, per limited
/// metric, the smallest value any candidate reaches.
SearchResult minitron_search(const LlamaModel& teacher, const Importance& imp, const CostFn& cost,
                             const Limits& limits, const std::vector<at::Tensor>& calibration,
                             const MinitronOptions& opt);

/// What judges the finalists of retrain_top_candidates.
///   retraining: each is distilled for distill.token_budget tokens (after its blockwise start,
///     when there is one) and judged by its KL after that (Minitron's protocol, arXiv 2407.14679).
///   blockwise: each is judged by its KL right after its blockwise start, with no distillation
///     step; the final run then starts at the schedule's first step.
///   halving: each is judged after its blockwise start, and the better half of them (at least 2)
///     go on to the retraining and are judged again by the KL after it (successive halving,
///     Jamieson and Talwalkar, arXiv 1502.07943). On the ranking pool (docs/benchmarks.md,
///     "The ranking of candidates") the KL after the blockwise start alone found the best
///     candidate in two settings of three and had it in its best two in all three; the KL
///     after the retraining found it in all three.
enum class FinalistJudge { retraining, blockwise, halving };

/// Options of the lightweight retraining (Minitron's; the differentiable search's proposals too).
struct RetrainOptions {
  int64_t top_k = 3;       // candidates retrained: the best top_k by loss_after_prune
  DistillOptions distill;  // each candidate's short distillation (token_budget = its tokens);
                           // its log_path / state_dir are ignored (nothing is written)
  /// > 0: each retraining is the first distill.token_budget tokens of a distillation of
  /// schedule_tokens (its warm-up and cosine decay, distill.warmup_steps of them), i.e. the
  /// start of the final run itself, which is deterministic given the seed; 0: a run of its own
  /// (Minitron's protocol). docs/benchmarks.md, "The ranking of candidates".
  int64_t schedule_tokens = 0;
  /// > 0: each candidate is first distilled block by block (distill/bld.h) on this many tokens
  /// of `train`, as the final run then starts (counted as search tokens: the blocks' forward of
  /// every candidate, and the teacher's forward of each batch once, its states shared by the
  /// candidates through a BldTeacherCache); 0 = off.
  int64_t bld_tokens = 0;
  /// What judges the candidates (FinalistJudge); the blockwise start judges only with
  /// bld_tokens > 0 and schedule_tokens > 0, otherwise the retraining judges every candidate.
  FinalistJudge judge = FinalistJudge::retraining;
  /// Not empty, with schedule_tokens > 0: each retraining's distillation state (student, AdamW
  /// moments, step; distill/distill.h) is written under this folder, and the chosen candidate's
  /// is kept as state_root/chosen with state_root/chosen.json, so that the final run continues
  /// it (adopt_retraining_state) instead of running its first steps and its blockwise start
  /// again: the same steps on the same data, so the same model. Emptied when retraining starts.
  fs::path state_root;
};

/// What the chosen candidate's kept retraining (RetrainOptions::state_root) holds.
struct RetrainedState {
  int64_t distill_tokens = 0;  // the final schedule's first tokens, already trained
  int64_t bld_tokens = 0;      // the blockwise start it began with (0: none)
};

/// Moves the chosen candidate's retraining state from `state_root` (RetrainOptions::state_root)
/// to `state_dir` (a final run's DistillOptions::state_dir, to resume) when it was retrained as
/// `config` (removed blocks dropped) with `final_token_budget` as its schedule's length; returns
/// what it holds. nullopt, moving nothing, when there is no such state, it belongs to another
/// architecture or schedule, or `state_dir` already holds a state. Throws FormatError on an
/// unreadable state_root/chosen.json.
std::optional<RetrainedState> adopt_retraining_state(const fs::path& state_root,
                                                     const ModelConfig& config,
                                                     int64_t final_token_budget,
                                                     const fs::path& state_dir);

/// Lightweight retraining (Minitron's last search step; also applied to the differentiable
/// search's ranked proposals): the top_k ranked candidates of `r` (loss_after_prune >= 0, best
/// first, one per distinct architecture) are pruned from `teacher`, distilled for opt.distill.token_budget tokens of
/// `train`, and their KL(teacher || candidate) per token on `calibration` ([B, T] int64 batches)
/// is stored in loss_after_retrain; the lowest becomes r.best (chosen). r.search_tokens grows by
/// the forward tokens this spends: per candidate, the distillation's tokens twice (teacher and
/// student forward), its blockwise start's tokens, and one pass over `calibration`; the
/// teacher's pass over `calibration` and over the blockwise start's batches once. With
/// opt.judge blockwise or halving (and a blockwise start) every candidate's KL right after its
/// blockwise start is stored in loss_after_bld, and only the candidates that go on are
/// distilled (a kept state continued from its step 0; without state_root the blockwise start
/// runs again); with blockwise loss_after_retrain is loss_after_bld. Throws ConfigError when no candidate of `r` was ranked, or when top_k < 1; what
/// distill() throws.
/// `first`: candidates (indices into r.candidates) to retrain before the ranking by KL after
/// pruning fills the rest of top_k, e.g. the picks of differently constrained searches (KL right
/// after pruning favours attention-free layers, which recover least: docs/benchmarks.md, "The
/// ranking of candidates").
void retrain_top_candidates(const LlamaModel& teacher, const Importance& imp, SearchResult& r,
                            const TokenDataset& train, const std::vector<at::Tensor>& calibration,
                            const RetrainOptions& opt, const std::vector<size_t>& first = {});

}  // namespace ac
