// What every search method shares (docs/design.md, "The searches"): the cost function a search
// calls, one candidate architecture with its predicted cost and losses, a search's result, and
// the distillation loss KL(teacher || candidate) that every method ranks candidates by (Minitron's
// "loss right after pruning", Muralidharan et al. 2024, arXiv 2407.14679 §4).
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hardware/cost_model.h"
#include "model/config.h"
#include "model/llama.h"

namespace ac {

/// Predicts the cost of a deployed architecture (removed blocks dropped): the cost model with
/// the scenario and the profile bound (hardware/cost_model.h predict). Throws what predict throws.
using CostFn = std::function<CostEstimate(const ModelConfig&)>;

/// One candidate architecture and what is known of it.
struct Candidate {
  ModelConfig config;           // the pruned architecture (removed blocks dropped)
  ModelConfig target;           // the same with the parent's layer count (what prune_model takes)
  CostEstimate cost;            // predicted by the cost model
  std::string violation;        // empty when every limit holds
  double loss_after_prune = -1; // KL(teacher || candidate) per token; -1 = not ranked
  double loss_after_bld = -1;     // the same after the blockwise start alone; -1 = not judged so
  double loss_after_retrain = -1; // the same after the lightweight retraining; -1 = not retrained
  bool chosen = false;
  nlohmann::json to_json() const;
};

/// The outcome of a search.
struct SearchResult {
  std::string method;                  // "minitron" or "autocompress"
  Candidate best;
  std::vector<Candidate> candidates;   // every candidate with its cost; ranked ones have a loss
  int64_t search_tokens = 0;           // forward tokens through any model (teacher included)
  double seconds = 0;
  nlohmann::json to_json() const;
};

/// What tells two candidates apart: describe() of the target, which names the removed layers
/// (one deployed shape with other layers removed is another candidate, and recovers differently).
std::string candidate_key(const Candidate& c);

/// The candidate of `target` (the parent's layer count, removed parts marked no-op): its
/// deployed config (drop_removed_blocks), cost(config) and check_limits against `limits`
/// (absolute). Throws what drop_removed_blocks, `cost` and check_limits throw.
Candidate costed_candidate(const ModelConfig& target, const CostFn& cost, const Limits& limits);

/// Total violation of the limits: sum_k max(0, -slack_k), slack as in limit_slack (the fraction
/// of the limit left), so 0 when every limit holds. Dimensionless.
double total_violation(const std::vector<LimitSlack>& slack);

/// The teacher's log-probabilities of each batch ([B, T] int64 in, [B, T, V] float out; no
/// autograd). Adds the tokens of every batch to *tokens (search tokens) when `tokens` is set.
std::vector<at::Tensor> teacher_logprobs(const LlamaModel& teacher,
                                         const std::vector<at::Tensor>& batches,
                                         int64_t* tokens = nullptr);

/// Mean KL(teacher || student) per token over batches ([B, T] int64 each), with the teacher's
/// log-probabilities `reference` precomputed (teacher_logprobs: one [B, T, V] per batch). Nats
/// per token.
double mean_kl(const std::vector<at::Tensor>& reference, const LlamaModel& student,
               const std::vector<at::Tensor>& batches);

}  // namespace ac
