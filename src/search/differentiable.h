// AutoCompress's differentiable architecture search under deployment limits (docs/design.md,
// "AutoCompress: the differentiable search"). The parent model, with nested masks over its
// importance-ordered channels, is a supernet of every architecture of the space (search_space.h);
// the search learns one logit vector per decision:
//
//   Relaxation   Gumbel-softmax with straight-through hard samples (Jang, Gu, Poole 2017,
//                "Categorical Reparameterization with Gumbel-Softmax", eq. 1 and §2.2; the
//                FBNet / DNAS use, Wu et al. 2019): per decision with logits a [n],
//                  y_soft = softmax((a + g) / tau),  g_i = -log(-log u_i), u_i ~ U(0, 1)
//                  y = onehot(argmax y_soft) - stopgrad(y_soft) + y_soft      (forward: one-hot)
//                the masks are y-weighted sums of the options' 0/1 masks (gradients reach
//                every logit). tau anneals geometrically from tau_start to tau_end.
//                DEFAULT: soft samples y = y_soft in the forward pass (the pathwise gradient of
//                the relaxed objective, Jang et al. eq. 1; FBNetV2-style channel masking), which
//                tends to one-hot as tau falls. The straight-through variant (hard one-hot
//                forward, option straight_through) is implemented but measured biased: with the
//                cost term off it drifted to the smallest hidden size in 5 of 9 runs on small
//                random models (soft: 0 of 9), and on stories15M / cpu-local its argmax fell far
//                below the budget (KL after pruning 5.66 vs 4.10 soft).
//   Cost         the expected cost of each limit from the differentiable cost model
//                (hardware/expected_cost.h, a sum of table entries x probabilities) under the
//                tempered distribution p_tau = softmax(a / tau). As tau anneals, p_tau tends to
//                the argmax, so the constraint ends up binding the architecture that is
//                discretized: under softmax(a) alone, a spread-out distribution could meet a
//                budget on average (the expected cost is linear) while its argmax does not.
//   Objective    L(a, lambda) = KL(teacher || masked supernet)
//                               + cost_weight * sum_k lambda_k g_k(E[cost_k]),
//                g_k = (E[c_k] - b_k) / s_k for a maximum b_k (TTFT, TPOT, memory),
//                g_k = (b_k - E[c_k]) / s_k for the throughput minimum,
//                s_k = |c_k(parent) - c_k(smallest reachable)|: the range the search controls
//                (a fixed share of the cost that no choice changes -- the LM head, an engine's
//                reserved memory -- would otherwise shrink g_k and stall the dual ascent),
//                minimised over a by Adam; the multipliers follow dual ascent
//                lambda_k <- max(0, lambda_k + dual_lr * g_k)   (Lagrangian relaxation with
//                projected dual gradient ascent; Boyd & Vandenberghe 2004, §5 and §11, and its
//                use for resource-constrained NAS, e.g. "Constrained DNAS", Nayman et al. 2021,
//                HardCoRe-NAS). The teacher's log-probabilities are computed once per batch
//                without autograd.
//   Weights      FROZEN: only the architecture logits train (the parent's weights are the
//                supernet's; distillation after pruning retrains the chosen architecture).
//   Freezing     the normalised entropy H(p_tau) / log(n) of each decision is tracked; a decision
//                below freeze_entropy is frozen to its argmax (no more sampling, no gradient);
//                when every decision is frozen the search stops early.
//   Discretize   argmax per decision, then repair (repair.h) against the limits with the same
//                safety margin as Minitron's search: the result never breaks a limit by the
//                tool's own cost model.
//   Rank, refine (refine.h; rank_batches > 0, the default) the relaxation's soft hidden-size
//                masks disturb every layer at once, so its argmax tends to keep the parent's D
//                and cut layers, leaving the repair to shrink D blindly (measured on stories15M /
//                cpu-local: argmax D=288, repaired to D=192, KL 4.10 vs Minitron's 3.31). So the
//                learned distribution proposes a few architectures instead of one: the argmax and
//                the argmax with each other hidden size locked, each repaired in two orders
//                (importance lost per cost saved, and -log p under the learned logits per cost
//                saved) and then given its slack back (fill_slack); the distinct ones are ranked
//                by KL(teacher || pruned) on the first rank_batches calibration batches (the
//                teacher's log-probabilities are already cached), and the best is refined by
//                refine_choice (swap moves tried in order of learned log-probability), then
//                given the slack the refinement left back (fill_slack by importance: a strict
//                subset of an architecture that fits is never the pick). Every evaluation's
//                tokens count as search tokens.
// If the parent already meets every limit (with the margin), it is returned without search.
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/accelerator.h"
#include "hardware/expected_cost.h"
#include "search/candidates.h"
#include "search/refine.h"
#include "search/repair.h"
#include "search/search_space.h"

namespace ac {

/// Options of the differentiable search; defaults are sized for stories15M (batches of 4 x 64
/// tokens, at most 48 steps, at most 12 + 8 KL evaluations of 2 batches: about 23 000 search
/// tokens; its time: docs/benchmarks.md).
struct DifferentiableOptions {
  SearchSpaceOptions space;
  int64_t steps = 48;             // optimisation steps at most (fewer if every decision freezes)
  double logit_lr = 0.3;          // Adam step on the architecture logits (0.1 with dual_lr 0.5
                                  // barely moved E[TPOT] in 48 steps on stories15M / cpu-local:
                                  // KL after pruning 3.59 there vs 3.38 with 0.3 / 2)
  double tau_start = 1.0;         // Gumbel-softmax temperature at step 0
  double tau_end = 0.1;           // ... at the last step (geometric schedule)
  double dual_lr = 2.0;           // dual ascent step of every multiplier
  double cost_weight = 1.0;       // weight of the Lagrangian term (0 = distillation loss only)
  double init_full_logit = 2.0;   // initial logit of the parent's option (others 0): the search
                                  // starts near the teacher and the limits pull it down
  double importance_init = 0;     // initial logits also get -importance_init x (importance the
                                  // option gives up / the decision's largest); 0 = off
  double freeze_entropy = 0.05;   // freeze a decision when H(p_tau) / log(n) falls below this
                                  // and the expected cost meets every budget
  uint64_t seed = 0;              // Gumbel noise
  bool straight_through = false;  // hard one-hot samples in the forward pass (straight-through
                                  // gradient) instead of soft ones: measured biased (see header)
  int64_t rank_batches = 2;       // calibration batches of each ranking / refinement KL
                                  // evaluation (the first ones); 0 = argmax + repair only
  int64_t max_ranked = 12;        // candidates ranked at most (highest learned log-probability)
  int64_t refine_evaluations = 8; // local-search evaluations after the ranking (0 = none)
  bool show_progress = true;
  /// The device of the teacher and the batches (set by run_search_method from SearchSettings);
  /// the architecture logits, their Adam state and the cost tables stay on the CPU.
  c10::Device device = c10::kCPU;
  /// The supernet's forwards (bf16: under autocast; the KL on fp32 log-probabilities).
  Precision precision = Precision::fp32;
};

/// One limit as the search sees it (absolute).
struct CostBudget {
  std::string name;     // "ttft_ms", "tpot_ms", "peak_memory_bytes", "min_throughput_tokens_per_s"
  double budget = 0;    // in the limit's unit
  bool minimum = false; // true for the throughput floor
  double scale = 0;     // s_k of the violation, in the limit's unit (> 0)
};

/// The absolute limits that are set, in a fixed order (TTFT, TPOT, memory, throughput), with
/// scale = the budget itself. Throws ConfigError on relative limits (resolve them first) or a
/// non-positive limit.
std::vector<CostBudget> cost_budgets(const Limits& limits);

/// The same with scale s_k = |parent_k - smallest_k| (at least 1e-6 x the budget).
std::vector<CostBudget> cost_budgets(const Limits& limits, const CostEstimate& parent,
                                     const ReachableCost& smallest);

/// Architecture logits, one vector per decision: hidden [nD], attention[l] [A_l], ffn[l] [F_l].
struct ArchLogits {
  at::Tensor hidden;
  std::vector<at::Tensor> attention, ffn;
};

/// Per-decision probabilities p = softmax(logits / tau), any float dtype (same shapes as
/// ArchLogits). tau = 1: the distribution the Gumbel samples are drawn from.
ArchLogits choice_probabilities(const ArchLogits& logits, double tau = 1.0);

/// The expected value of budget k's metric under `e` ([] float64, differentiable).
at::Tensor expected_metric(const ExpectedCost& e, const CostBudget& b);

/// g_k = (E - b) / s for a maximum, (b - E) / s for a minimum: [] float64, > 0 when violated.
at::Tensor normalized_violation(const ExpectedCost& e, const CostBudget& b);

/// The Lagrangian cost term sum_k lambda_k g_k(E[cost](probabilities)): [] float64 with
/// gradients to the probabilities (and through them to the logits). `multipliers` [K] in the
/// order of `budgets`; `expected` (optional) receives the expected costs.
/// Throws ConfigError when the sizes disagree (expected_cost's errors otherwise).
at::Tensor lagrangian_cost_term(const ChoiceTables& tables, const ArchLogits& probabilities,
                                const std::vector<CostBudget>& budgets,
                                const std::vector<double>& multipliers,
                                ExpectedCost* expected = nullptr);

/// The masks of the supernet for per-decision weights y (one-hot samples, or probabilities):
/// hidden = y_hidden . hidden_masks [D]; heads = y_attention[l] . head_masks[l] [H]; gates the
/// same with the gate vectors; fp32, differentiable in y.
Masks supernet_masks(const SearchSpace& space, const ArchLogits& y);

/// One step of the search, as recorded in arch.json's "trajectory".
struct TrajectoryPoint {
  int64_t step = 0;
  int64_t tokens = 0;            // search tokens consumed after this step (teacher included)
  double loss = 0, kl = 0, penalty = 0;  // loss = kl + cost_weight * penalty (nats/token)
  double temperature = 0;
  // Expected costs under p_tau (ms, ms, bytes, tokens/s):
  double ttft_ms = 0, tpot_ms = 0, peak_memory_bytes = 0, throughput_tokens_per_s = 0;
  std::map<std::string, double> multipliers;  // lambda_k after this step's dual update
  int64_t frozen = 0;            // decisions frozen so far
  nlohmann::json to_json() const;
};

/// The outcome of the differentiable search.
struct DifferentiableResult {
  SearchResult search;     // method "autocompress"; best = the repaired architecture;
                           // candidates = {argmax before repair, repaired}
  ArchChoice argmax;       // most probable option per decision, before any fix-up
  ModelConfig argmax_target;
  RepairResult repair;     // fix-ups and greedy steps that made it meet the limits
  std::vector<TrajectoryPoint> trajectory;
  nlohmann::json probabilities;  // final choice probabilities (probabilities_json)
  std::vector<LimitSlack> slack; // of the result against the limits with the margin
  std::vector<CostBudget> budgets;  // the limits with the margin, and the violation scales
  int64_t steps_run = 0;
  bool parent_meets_limits = false;  // then no search ran and best = the parent
  int64_t evaluations = 0;         // KL evaluations of the ranking and the refinement
  int64_t evaluation_tokens = 0;   // tokens of one evaluation (rank_batches batches)
  std::vector<Candidate> ranked;   // ranked candidates with loss_after_prune (in-sample KL)
  RefineResult refine;             // the local search from the best ranked candidate
  /// The refined architecture grown by fill_slack (importance regained per slack) into the
  /// slack the refinement left; the grown one is the result, its KL after pruning measured
  /// (one more evaluation). Absent when no larger option fitted.
  struct Fill {
    ArchChoice choice;  // the grown architecture (search.best's target and KL after pruning)
    std::string from;   // describe() of the refined target
  };
  std::optional<Fill> fill;
  /// SearchResult's JSON plus "trajectory", "probabilities", "argmax_before_repair", "repair",
  /// "slack", "budgets", "steps_run", "parent_meets_limits", "evaluations", "ranked",
  /// "refine", "fill" ({"from", "to", "kl"}: the refined target, search.best's and its KL; or null).
  nlohmann::json to_json() const;
};

/// What several differentiable searches of one teacher on the same calibration batches share
/// (run_search_method's restarts and capped searches): the teacher's log-probabilities of the
/// batches, computed by the first search, and the KL after pruning of every target a search
/// ranked or refined (by describe(target) and the batches it was measured on), so that a
/// proposal two searches rank is pruned and measured once. The search tokens count what is
/// computed, once.
struct SharedSearchState {
  std::vector<at::Tensor> teacher_reference;        // [B, T, V] float log-probabilities each
  std::map<std::string, double> kl_after_prune;     // "<batches>|<describe(target)>" -> KL
};

/// Runs the search. `scenario` + `profile` build the choice tables (expected cost) and the cost
/// model of the repair; `limits` must be absolute (resolve relative ones first). `calibration`:
/// [B, T] int64 batches, cycled over the steps; the teacher's log-probabilities of each are
/// computed once and kept (B x T x V floats each). `shared` (optional): what earlier searches on
/// the same teacher and `calibration` computed, reused and added to; the result is the same as
/// without it.
/// Throws InfeasibleError (smallest reachable cost per limit) when the smallest architecture of
/// the space breaks a limit; ConfigError on bad options, an empty calibration set, relative
/// limits, or an importance of another model; what predict throws.
DifferentiableResult differentiable_search(const LlamaModel& teacher, const Importance& imp,
                                           const Scenario& scenario, const Profile* profile,
                                           const Limits& limits,
                                           const std::vector<at::Tensor>& calibration,
                                           const DifferentiableOptions& opt,
                                           SharedSearchState* shared = nullptr);

/// KL(teacher || `target` pruned, removed blocks dropped) per token on the first
/// opt.rank_batches batches of `calibration` (the ranking's batches), against the teacher's
/// log-probabilities shared->teacher_reference (which a differentiable_search with `shared` on
/// the same `calibration` computed); looked up in shared->kl_after_prune first and stored there,
/// so that a target is pruned and measured once. *tokens grows by the batches' tokens when the
/// KL is computed (not when it is looked up). Nats per token. Throws InternalError when
/// `shared` holds no teacher log-probabilities for those batches.
double ranking_kl(const LlamaModel& teacher, const Importance& imp, const ModelConfig& target,
                  const std::vector<at::Tensor>& calibration, const DifferentiableOptions& opt,
                  SharedSearchState& shared, int64_t* tokens);

}  // namespace ac
