// One entry point for every search method (`--method autocompress|minitron|both`) and what a
// search writes: arch.json with the per-layer structure, the predicted cost and slack of every
// limit, the search tokens, the trajectory and the final choice probabilities, plus the two
// plots next to it (plots.h).
//
// arch.json (besides "config", prune/arch.h), every method:
//   "method", "scenario", "limits" (absolute, before the margin), "safety_margin",
//   "hidden_size", "parent_hidden_size",
//   "layers": [{"layer", "num_attention_heads", "num_key_value_heads", "head_dim",
//               "intermediate_size", "attention_removed", "ffn_removed",
//               "parent": {"num_attention_heads", "num_key_value_heads", "intermediate_size"}}],
//   "predicted": CostEstimate::to_json of the deployed (removed blocks dropped) architecture,
//   "slack": [{"name", "limit", "value", "slack"}] against the limits as given,
//   "slack_with_margin": the same against the limits x (1 - margin),
//   "search_tokens", "search_seconds",
//   "trajectory": [{"step", "tokens", "loss", "kl", "penalty", "temperature", "ttft_ms",
//                   "tpot_ms", "peak_memory_bytes", "throughput_tokens_per_s",
//                   "multipliers": {limit: lambda}, "frozen"}]  (empty for minitron),
//   "probabilities": search_space.h probabilities_json (null for minitron),
//   "plots": {"widths": FILE, "trajectory": FILE or null},
//   "search": the method's full result (candidates, repair steps, ...).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "search/differentiable.h"
#include "pipeline/limits.h"
#include "search/minitron.h"

namespace ac {

/// Settings of both methods. The limits, the safety margin included, are given to
/// run_search_method (pipeline/limits.h): the same for both.
struct SearchSettings {
  MinitronOptions minitron;
  DifferentiableOptions autocompress;
  int64_t minitron_batch_size = 8;       // windows of seq_len per ranking batch
  int64_t minitron_batches = 1;          // ranking batches (KL of each candidate after pruning)
  /// Minitron's lightweight retraining (retrain_top_candidates): the best retrain.top_k
  /// candidates by KL after pruning are each distilled for retrain.distill.token_budget tokens
  /// and ranked again. Off when minitron_retrain is false (the ranking after pruning decides alone).
  bool minitron_retrain = false;
  RetrainOptions retrain;
  /// The same retraining of the differentiable search's best distinct proposals (ranked and
  /// refined by KL after pruning), its tokens counted as search tokens; off when
  /// autocompress_retrain is false.
  bool autocompress_retrain = false;
  RetrainOptions autocompress_retrain_options;
  /// The differentiable search once per value, each with
  /// autocompress.space.max_attention_removed = value (< 0: uncapped); empty = once with the
  /// options' own. The first search must fit (its InfeasibleError is thrown), a later one that
  /// cannot is left out. All candidates are pooled; each search's pick is retrained first
  /// (retrain_top_candidates `first`), so that the finalists differ in how much attention they
  /// remove, the structure KL right after pruning ranks wrongly (docs/benchmarks.md, "The
  /// ranking of candidates"). Without retraining the first search's pick is the result.
  std::vector<int64_t> autocompress_attention_caps;
  /// The first cap's search (the widest space) runs this many times, restart k with the Gumbel
  /// seed restart_seed(autocompress.seed, k); every restart's pick is a finalist too (the
  /// retraining's top_k grows to hold them all). Where the attention-free layers go decides
  /// the result after distillation as much as how many there are, and one seed's search finds
  /// one placement (docs/benchmarks.md, "The ranking of candidates": in two settings of three
  /// the best of three seeds' picks was the pool's best). Must be >= 1 (ConfigError). Without
  /// autocompress_retrain one search runs: the first pick is the result.
  /// A search (restart or capped) whose pick an earlier search already returned gives its
  /// finalist's place to an attention-placement variant of the picks (search/placement.h): of
  /// those that meet the limits, the one with the lowest KL after pruning on the ranking's
  /// batches (ranking_kl; at most autocompress.max_ranked measured, their tokens counted),
  /// recorded in the search JSON's "placement_variants".
  int64_t autocompress_restarts = 1;
  int64_t autocompress_batch_size = 4;   // windows per search step
  int64_t autocompress_seq_len = 64;     // tokens per window of the search
  int64_t autocompress_batches = 8;      // distinct batches cycled over (teacher cached)
  /// Where the teacher, the supernet's forwards, the pruned candidates, the calibration
  /// batches and the retraining live (common/accelerator.h, --device); the architecture logits
  /// and the cost tables stay on the CPU (a few hundred scalars). Sets the retrainings' device.
  c10::Device device = c10::kCPU;
  /// The differentiable search's supernet forwards and the retrainings (common/accelerator.h).
  Precision precision = Precision::fp32;
};

/// What one method chose, whatever the method.
struct SearchOutcome {
  std::string method;              // "autocompress" or "minitron"
  ModelConfig parent;
  Candidate best;                  // target (parent's layer count), config (deployed), cost
  int64_t search_tokens = 0;       // forward tokens through any model, teacher included
  double seconds = 0;
  Limits limits;                   // absolute limits given (before the margin)
  double safety_margin = 0;
  std::vector<TrajectoryPoint> trajectory;  // empty for minitron
  nlohmann::json probabilities;    // null for minitron
  nlohmann::json search;           // the method's own result JSON

  /// A row for comparisons: method, describe, parameters, predicted ttft/tpot/memory/
  /// throughput, slack, search_tokens, search_seconds.
  nlohmann::json summary() const;
};

/// The Gumbel seed of the differentiable search's restart `restart` (0, 1, ...) of a run seeded
/// `seed`: `seed` itself for restart 0, then seed + 1000 k, so that runs of nearby seeds
/// (a study's 1, 2, 3) share no restart.
uint64_t restart_seed(uint64_t seed, int64_t restart);

/// The attention caps `compress` and `search` run by default (SearchSettings::
/// autocompress_attention_caps): {-1, L / 3}, the uncapped space and one whose attention-free
/// layers are at most the blocks depth pruning may remove (Minitron's L / 3).
std::vector<int64_t> default_attention_caps(const ModelConfig& parent);

/// "both" -> {"autocompress", "minitron"}; "autocompress" or "minitron" -> itself. Throws
/// ConfigError naming the valid values otherwise.
std::vector<std::string> search_methods(const std::string& method);

/// Runs one method on `calibration` (minitron: its first minitron_batches batches of
/// minitron_batch_size x seq_len; autocompress: autocompress_batches batches of
/// autocompress_batch_size x autocompress_seq_len from the same stream; its retrained finalists
/// are judged on every window of seq_len of `calibration`). The algorithm holds
/// predictions to limits.search_with_margin(); the outcome records limits.for_search and the
/// margin. `retrain_data`: the training text of the lightweight retraining (required when
/// settings.minitron_retrain or autocompress_retrain; its tokens count as search tokens).
/// The differentiable search's space holds only what the scenario's engine loads
/// (engines/*.json "structure", hardware/engine.h); every result is checked with
/// check_engine_loads. Throws what the method throws (InfeasibleError with the smallest
/// reachable cost); ConfigError when the retraining is asked for without data, or when a parent
/// layer's FFN width is not one the engine expresses per layer (autocompress).
SearchOutcome run_search_method(const std::string& method, const LlamaModel& teacher,
                                const Importance& imp, const Scenario& scenario,
                                const Profile* profile, const RunLimits& limits,
                                const TokenDataset& calibration, int64_t seq_len,
                                const SearchSettings& settings,
                                const TokenDataset* retrain_data = nullptr);

/// KL(teacher || pruned model) per token, mean over `batches` ([B, T] int64), of `target`
/// pruned from `teacher` with `imp` (removed blocks dropped). No autograd.
double kl_after_prune(const LlamaModel& teacher, const Importance& imp, const ModelConfig& target,
                      const std::vector<at::Tensor>& batches);

/// Where method `method` writes beside the primary arch.json when several run:
/// "arch.json" -> "arch.minitron.json".
fs::path method_arch_path(const fs::path& primary, const std::string& method);

/// The arch.json object of an outcome (file header), without "config" and "plots".
nlohmann::json arch_json(const SearchOutcome& o, const std::string& scenario);

/// Writes arch.json (atomically; `extra` keys merged at the top, e.g. "comparison") and beside
/// it <stem>_widths.svg and, for a search with a trajectory, <stem>_trajectory.svg.
void write_search_outputs(const fs::path& arch_path, const SearchOutcome& o,
                          const std::string& scenario,
                          const nlohmann::json& extra = nlohmann::json::object());

}  // namespace ac
