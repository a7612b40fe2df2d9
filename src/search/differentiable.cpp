#include "search/differentiable.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "common/error.h"
#include "common/progress.h"
#include "common/runtime.h"
#include "prune/depth.h"
#include "prune/prune.h"

namespace ac {

namespace {

// The key of a KL after pruning in SharedSearchState::kl_after_prune: the batches it was
// measured on (the first `batches` of the search's) and the target.
std::string kl_key(size_t batches, const ModelConfig& target) {
  return fmt::format("{}|{}", batches, describe(target));
}

// KL(teacher || `target` pruned, removed blocks dropped) per token on `batches`, the teacher's
// log-probabilities of them in `reference`.
double pruned_kl(const LlamaModel& teacher, const Importance& imp, const ModelConfig& target,
                 const std::vector<at::Tensor>& reference, const std::vector<at::Tensor>& batches) {
  const LlamaModel student = drop_removed_blocks(prune_model(teacher, imp, target));
  return mean_kl(reference, student, batches);
}

// Every decision of ArchLogits in one list: hidden, then attention / FFN of each layer.
std::vector<at::Tensor*> decisions(ArchLogits& a) {
  std::vector<at::Tensor*> out{&a.hidden};
  for (size_t l = 0; l < a.attention.size(); ++l) {
    out.push_back(&a.attention[l]);
    out.push_back(&a.ffn[l]);
  }
  return out;
}

// A new ArchLogits with f(tensor, index in decisions()) for every decision.
template <typename F>
ArchLogits map_decisions(const ArchLogits& a, F f) {
  ArchLogits out;
  out.hidden = f(a.hidden, 0);
  for (size_t l = 0; l < a.attention.size(); ++l) {
    out.attention.push_back(f(a.attention[l], 1 + 2 * l));
    out.ffn.push_back(f(a.ffn[l], 2 + 2 * l));
  }
  return out;
}

at::Tensor one_hot_of(const at::Tensor& logits) {
  return at::one_hot(logits.detach().argmax(), logits.size(0)).to(at::kFloat);
}

// Gumbel-softmax sample (Jang et al. 2017); straight-through: one-hot forward, soft gradient.
at::Tensor gumbel_sample(const at::Tensor& logits, double tau, bool straight_through,
                         at::Generator& gen) {
  at::Tensor u = at::rand({logits.size(0)}, gen, at::kFloat).clamp(1e-10, 1.0 - 1e-7);
  at::Tensor soft = at::softmax((logits - at::log(-at::log(u))) / tau, 0);
  if (!straight_through) return soft;
  at::Tensor hard = at::one_hot(soft.detach().argmax(), logits.size(0)).to(soft.scalar_type());
  return hard - soft.detach() + soft;
}

// H(softmax(a)) / log(n), in [0, 1]; 0 for a single option.
double normalized_entropy(const at::Tensor& logits) {
  const int64_t n = logits.size(0);
  if (n < 2) return 0;
  at::Tensor lp = at::log_softmax(logits.detach().to(at::kDouble), 0);
  return -(lp.exp() * lp).sum().item<double>() / std::log(double(n));
}

// full_logit on the parent's option; minus importance_init x lost_i / max(lost) when set.
ArchLogits initial_logits(const SearchSpace& s, double full_logit, double importance_init = 0) {
  auto init = [&](const std::vector<double>& lost) {
    const size_t n = lost.size();
    at::Tensor t = at::zeros({int64_t(n)}, at::kFloat);
    if (n > 1) t[0] = full_logit;
    const double top = *std::max_element(lost.begin(), lost.end());
    if (importance_init > 0 && top > 0)
      for (size_t i = 0; i < n; ++i) t[int64_t(i)] -= importance_init * lost[i] / top;
    return t;
  };
  ArchLogits a;
  a.hidden = init(s.hidden_loss);
  for (int64_t l = 0; l < s.num_layers(); ++l) {
    a.attention.push_back(init(s.attention_loss[size_t(l)]));
    a.ffn.push_back(init(s.ffn_loss[size_t(l)]));
  }
  return a;
}

// log p(c) = sum over decisions of log softmax(logits)[option]: the learned prior of a choice.
double log_probability(const ArchLogits& a, const ArchChoice& c) {
  auto lp = [](const at::Tensor& t, int64_t o) {
    return at::log_softmax(t.detach().to(at::kDouble), 0)[o].item<double>();
  };
  double v = lp(a.hidden, c.hidden);
  for (size_t l = 0; l < a.attention.size(); ++l)
    v += lp(a.attention[l], c.attention[l]) + lp(a.ffn[l], c.ffn[l]);
  return v;
}

ArchChoice argmax_choice(const ArchLogits& a) {
  ArchChoice c;
  c.hidden = a.hidden.argmax().item<int64_t>();
  for (size_t l = 0; l < a.attention.size(); ++l) {
    c.attention.push_back(a.attention[l].argmax().item<int64_t>());
    c.ffn.push_back(a.ffn[l].argmax().item<int64_t>());
  }
  return c;
}

// The argmax as a candidate: it may break the structural rules (every block removed, say),
// and is then not costed.
Candidate argmax_candidate(const SearchSpace& s, const ArchChoice& c, const CostFn& cost,
                           const Limits& strict) {
  const std::string why = structural_violation(s, c);
  if (why.empty()) return costed_candidate(target_of(s, c), cost, strict);
  Candidate k;
  k.target = target_of(s, c);
  k.config = k.target;
  k.violation = "structure: " + why;
  return k;
}

// The architecture, its deployed config and predicted cost.
Candidate costed(const SearchSpace& s, const ArchChoice& c, const CostFn& cost, const Limits& strict) {
  return costed_candidate(target_of(s, c), cost, strict);
}

// The candidates of the learned distribution (differentiable.h, "Rank, refine"): the argmax and
// the argmax with each other hidden size locked, each repaired in two orders and filled.
std::vector<ArchChoice> proposals(const SearchSpace& s, const ArchChoice& argmax,
                                  const ArchLogits& logits, const CostFn& cost,
                                  const Limits& strict) {
  std::vector<ArchChoice> out;
  auto neg_logp = [&](const ArchChoice& c) { return -log_probability(logits, c); };
  for (int64_t d = -1; d < int64_t(s.hidden_sizes.size()); ++d) {
    if (d == argmax.hidden) continue;
    ArchChoice start = argmax;
    if (d >= 0) start.hidden = d;
    for (bool by_logp : {false, true}) {
      RepairOptions ro;
      ro.lock_hidden = d >= 0;
      if (by_logp) ro.lost = neg_logp;
      try {
        ArchChoice c = fill_slack(s, repair_architecture(s, start, cost, strict, ro).choice, cost,
                                  strict, ro);
        if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
      } catch (const InfeasibleError&) {  // this hidden size cannot meet the limits
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [&](const ArchChoice& a, const ArchChoice& b) {
    return log_probability(logits, a) > log_probability(logits, b);
  });
  return out;
}

void rank_and_refine(DifferentiableResult& r, const SearchSpace& s, const LlamaModel& teacher,
                     const Importance& imp, const CostFn& cost, const Limits& strict,
                     const ArchLogits& logits, const std::vector<at::Tensor>& calibration,
                     const std::vector<at::Tensor>& teacher_reference,
                     const DifferentiableOptions& opt, SharedSearchState* shared) {
  const size_t nb = std::min(size_t(opt.rank_batches), calibration.size());
  const std::vector<at::Tensor> batches(calibration.begin(), calibration.begin() + long(nb));
  const std::vector<at::Tensor> reference(teacher_reference.begin(),
                                          teacher_reference.begin() + long(nb));
  for (const auto& b : batches) r.evaluation_tokens += b.numel();
  auto kl_of = [&](const ArchChoice& c) {  // in-sample KL after pruning (teacher cached)
    const ModelConfig target = target_of(s, c);
    if (shared) {  // looked up when an earlier search measured it on the same batches
      int64_t tokens = 0;
      const double kl = ranking_kl(teacher, imp, target, calibration, opt, *shared, &tokens);
      if (tokens > 0) ++r.evaluations, r.search.search_tokens += tokens;
      return kl;
    }
    ++r.evaluations;
    r.search.search_tokens += r.evaluation_tokens;
    return pruned_kl(teacher, imp, target, reference, batches);
  };
  std::vector<ArchChoice> cands = proposals(s, r.argmax, logits, cost, strict);
  if (cands.empty()) return;  // nothing met the limits but the repaired argmax already kept
  if (int64_t(cands.size()) > opt.max_ranked) cands.resize(size_t(std::max<int64_t>(opt.max_ranked, 1)));
  size_t best = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    Candidate k = costed(s, cands[i], cost, strict);
    k.loss_after_prune = kl_of(cands[i]);
    r.ranked.push_back(k);
    if (k.loss_after_prune < r.ranked[best].loss_after_prune) best = i;
    log_info(fmt::format("[search] autocompress candidate {}: KL {:.4f}", describe(k.config),
                         k.loss_after_prune));
  }
  RefineOptions ro;
  ro.max_evaluations = opt.refine_evaluations;
  r.refine = refine_choice(s, cands[best], r.ranked[best].loss_after_prune, cost, strict, kl_of,
                           [&](const ArchChoice& c) { return log_probability(logits, c); }, ro);
  // The refinement's swaps (and a proposal filled by log-probability) can end with slack that a
  // larger option of some decision fits in: a strict subset of an architecture that meets the
  // limits is never the pick, since the superset starts from the same weights and has more to
  // recover with (stories15M, game seed 3: one layer at 4 of 6 heads where 6 fitted, 1.1 points
  // of task accuracy behind the same model with 6). So the slack goes back by importance.
  ArchChoice pick = r.refine.choice;
  double pick_kl = r.refine.loss;
  const ArchChoice filled = fill_slack(s, pick, cost, strict);
  if (!(filled == pick)) {
    pick_kl = kl_of(filled);
    r.fill = {filled, describe(target_of(s, pick))};
    log_info(fmt::format("[search] autocompress: {} filled to {} (KL {:.4f})", r.fill->from,
                         describe(target_of(s, filled)), pick_kl));
    pick = filled;
  }
  Candidate chosen = costed(s, pick, cost, strict);
  chosen.loss_after_prune = pick_kl;
  chosen.chosen = true;
  r.search.candidates.pop_back();  // the repaired argmax stays as a ranked candidate if proposed
  for (const Candidate& k : r.ranked) r.search.candidates.push_back(k);
  r.search.candidates.push_back(chosen);
  r.search.best = chosen;
  log_info(fmt::format("[search] autocompress: {} after ranking {} candidates and {} refinement "
                       "evaluations (KL {:.4f})", describe(chosen.config), r.ranked.size(),
                       r.refine.evaluations, chosen.loss_after_prune));
}

// The parent meets every limit: it is the answer, with certain probabilities on its options.
void keep_parent(DifferentiableResult& r, const SearchSpace& space) {
  r.parent_meets_limits = true;
  r.argmax = space.full();
  r.argmax_target = target_of(space, r.argmax);
  ArchLogits p = choice_probabilities(initial_logits(space, 1e4));
  r.probabilities = probabilities_json(space, p.hidden, p.attention, p.ffn);
  log_info("[search] autocompress: the parent meets every limit; no search needed");
}

// Discretize: repairs r.argmax against `strict` (repair.h) and makes the repaired architecture
// the result, the argmax before repair beside it.
void settle(DifferentiableResult& r, const SearchSpace& space, const CostFn& cost,
            const Limits& strict, double t0) {
  r.repair = repair_architecture(space, r.argmax, cost, strict);
  Candidate before = argmax_candidate(space, r.argmax, cost, strict);
  Candidate best;
  best.target = r.repair.target;
  best.config = r.repair.config;
  best.cost = r.repair.cost;
  best.chosen = true;
  r.search.candidates = {before, best};
  r.search.best = best;
  r.slack = limit_slack(best.cost, strict);
  r.search.seconds = now_s() - t0;
  // The argmax may break the structure rules (every block removed, say); its target, with the
  // removed parts as zeros, is shown then.
  log_info(fmt::format("[search] autocompress: argmax {} -> {} after {} repair steps",
                       describe(before.config), describe(best.config), r.repair.steps.size()));
}

// The relaxation's state: the logits, which decisions are frozen, the multipliers, the
// optimiser and the Gumbel noise.
struct Relaxation {
  ArchLogits logits;
  std::vector<bool> frozen;    // [decisions]: a single option, or made up its mind
  std::vector<double> lambda;  // [budgets]: the Lagrange multipliers
  std::unique_ptr<torch::optim::Adam> adam;
  at::Generator gen;
};

Relaxation start_relaxation(const SearchSpace& space, size_t num_budgets,
                            const DifferentiableOptions& opt) {
  Relaxation st;
  st.logits = initial_logits(space, opt.init_full_logit, opt.importance_init);
  std::vector<at::Tensor> params;
  for (at::Tensor* a : decisions(st.logits)) {
    st.frozen.push_back(a->size(0) < 2);  // nothing to decide
    if (st.frozen.back()) continue;
    a->requires_grad_(true);
    params.push_back(*a);
  }
  st.adam = std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(opt.logit_lr));
  st.lambda.assign(num_budgets, 0.0);
  st.gen = at::detail::createCPUGenerator(opt.seed);
  return st;
}

// tau_start -> tau_end geometrically over the steps.
double temperature(const DifferentiableOptions& opt, int64_t step) {
  return opt.tau_start * std::pow(opt.tau_end / opt.tau_start,
                                  double(step) / double(std::max<int64_t>(1, opt.steps - 1)));
}

// One Adam step on L = KL(teacher || masked supernet) + cost_weight x the Lagrangian term, on
// one calibration batch ([B, T]) with the teacher's log-probabilities `reference` [B, T, V].
// Fills the loss terms of `tp` and the expected costs `e`.
void descend(Relaxation& st, const SearchSpace& space, const LlamaModel& teacher,
             const ChoiceTables& tables, const std::vector<CostBudget>& budgets,
             const at::Tensor& batch, const at::Tensor& reference, double tau,
             const DifferentiableOptions& opt, TrajectoryPoint& tp, ExpectedCost& e) {
  // Samples for the masks and tempered probabilities for the cost; frozen decisions are their
  // argmax.
  ArchLogits y = map_decisions(st.logits, [&](const at::Tensor& a, size_t i) {
    return st.frozen[i] ? one_hot_of(a) : gumbel_sample(a, tau, opt.straight_through, st.gen);
  });
  ArchLogits p = map_decisions(st.logits, [&](const at::Tensor& a, size_t i) {
    return st.frozen[i] ? one_hot_of(a) : at::softmax(a / tau, 0);
  });
  Masks masks = supernet_masks(space, y);
  ForwardOptions fo;
  fo.masks = &masks;
  at::Tensor logits;  // [B, T, V]
  {
    AutocastScope autocast(batch.device(), opt.precision);
    logits = teacher.forward(batch, fo);
  }
  at::Tensor student = at::log_softmax(logits.to(at::kFloat), -1);
  // The KL back on the CPU, beside the cost term (the gradient flows to the masks through it).
  at::Tensor kl = ((reference.exp() * (reference - student)).sum() / double(batch.numel()))
                      .to(at::kCPU);
  at::Tensor penalty = lagrangian_cost_term(tables, p, budgets, st.lambda, &e);
  at::Tensor loss = kl.to(at::kDouble) + opt.cost_weight * penalty;
  st.adam->zero_grad();
  loss.backward();
  std::vector<at::Tensor*> all = decisions(st.logits);
  for (size_t i = 0; i < all.size(); ++i)
    if (st.frozen[i] && all[i]->requires_grad()) all[i]->mutable_grad().reset();
  st.adam->step();
  tp.kl = kl.item<double>();
  tp.penalty = penalty.item<double>();
  tp.loss = loss.item<double>();
}

// Dual ascent on the multipliers, then freezing of the decisions that have made up their mind;
// fills the multipliers and the frozen count of `tp`.
void ascend_and_freeze(Relaxation& st, const std::vector<CostBudget>& budgets,
                       const ExpectedCost& e, double tau, const DifferentiableOptions& opt,
                       TrajectoryPoint& tp) {
  for (size_t k = 0; k < budgets.size(); ++k) {
    const double g = normalized_violation(e, budgets[k]).item<double>();
    st.lambda[k] = std::max(0.0, st.lambda[k] + opt.dual_lr * g);
    tp.multipliers[budgets[k].name] = st.lambda[k];
  }
  // Decisions freeze only once the expected cost meets every budget: a decision that made
  // up its mind while the cost is still over budget may have to change it.
  bool within = true;
  for (const auto& b : budgets) within &= normalized_violation(e, b).item<double>() <= 0;
  std::vector<at::Tensor*> all = decisions(st.logits);
  tp.frozen = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (!st.frozen[i] && within && normalized_entropy(*all[i] / tau) < opt.freeze_entropy) {
      st.frozen[i] = true;
      all[i]->mutable_grad().reset();
    }
    tp.frozen += st.frozen[i] && all[i]->size(0) > 1;
  }
}

// The relaxation (differentiable.h header): at most opt.steps steps over the calibration
// batches, cycled, each recorded in r.trajectory; stops early when every decision is frozen.
// Returns the learned logits (no longer requiring gradients).
ArchLogits learn_logits(DifferentiableResult& r, const SearchSpace& space,
                        const LlamaModel& teacher, const ChoiceTables& tables,
                        const std::vector<at::Tensor>& calibration,
                        const std::vector<at::Tensor>& reference,
                        const DifferentiableOptions& opt) {
  Relaxation st = start_relaxation(space, r.budgets.size(), opt);
  const int64_t multi = space.num_decisions();
  Progress progress("search", opt.steps, "steps");  // prints nothing until update()
  for (int64_t step = 0; step < (multi > 0 ? opt.steps : 0); ++step) {
    const double tau = temperature(opt, step);
    const size_t bi = size_t(step) % calibration.size();
    TrajectoryPoint tp;
    ExpectedCost e;
    descend(st, space, teacher, tables, r.budgets, calibration[bi], reference[bi], tau, opt, tp, e);
    r.search.search_tokens += calibration[bi].numel();
    ascend_and_freeze(st, r.budgets, e, tau, opt, tp);
    tp.step = step;
    tp.tokens = r.search.search_tokens;
    tp.temperature = tau;
    tp.ttft_ms = e.ttft_ms.item<double>();
    tp.tpot_ms = e.tpot_ms.item<double>();
    tp.peak_memory_bytes = e.peak_memory_bytes.item<double>();
    tp.throughput_tokens_per_s = e.throughput_tokens_per_s.item<double>();
    r.trajectory.push_back(tp);
    r.steps_run = step + 1;
    if (opt.show_progress)
      progress.update(step + 1, fmt::format("KL {:.4f} E[TPOT] {:.3f} ms frozen {}/{}", tp.kl,
                                            tp.tpot_ms, tp.frozen, multi));
    if (tp.frozen == multi) break;
  }
  if (opt.show_progress) progress.finish();
  for (at::Tensor* a : decisions(st.logits)) a->requires_grad_(false);
  return st.logits;
}

void check_options(const DifferentiableOptions& o) {
  if (o.steps < 1 || !(o.logit_lr > 0) || !(o.tau_start > 0) || !(o.tau_end > 0) ||
      !(o.dual_lr >= 0) || !(o.cost_weight >= 0) ||
      o.rank_batches < 0 || o.max_ranked < 1 || o.refine_evaluations < 0 || !(o.importance_init >= 0))
    throw ConfigError(msg("search", "options: expected steps >= 1, logit_lr > 0, tau_start > 0, "
                                    "tau_end > 0, dual_lr >= 0, cost_weight >= 0, "
                                    "rank_batches >= 0, max_ranked >= 1, "
                                    "refine_evaluations >= 0, importance_init >= 0; found {}, {}, "
                                    "{}, {}, {}, {}, {}, {}, {}, {}",
                          o.steps, o.logit_lr, o.tau_start, o.tau_end, o.dual_lr, o.cost_weight,
                          o.rank_batches, o.max_ranked, o.refine_evaluations,
                          o.importance_init));
}

}  // namespace

std::vector<CostBudget> cost_budgets(const Limits& l) {
  if (l.has_relative())
    throw ConfigError(msg("search", "the limits hold fractions of the teacher's cost: resolve "
                                    "them first (Limits::resolve)"));
  std::vector<CostBudget> out;
  if (l.ttft_ms) out.push_back({"ttft_ms", *l.ttft_ms, false});
  if (l.tpot_ms) out.push_back({"tpot_ms", *l.tpot_ms, false});
  if (l.peak_memory_bytes) out.push_back({"peak_memory_bytes", double(*l.peak_memory_bytes), false});
  if (l.min_throughput_tokens_per_s)
    out.push_back({"min_throughput_tokens_per_s", *l.min_throughput_tokens_per_s, true});
  for (auto& b : out) {
    if (!(b.budget > 0))
      throw ConfigError(msg("search", "limit {}: expected a positive value, found {}", b.name, b.budget));
    b.scale = b.budget;
  }
  return out;
}

std::vector<CostBudget> cost_budgets(const Limits& limits, const CostEstimate& parent,
                                     const ReachableCost& smallest) {
  std::vector<CostBudget> out = cost_budgets(limits);
  for (auto& b : out) {
    double range = b.name == "ttft_ms"             ? parent.ttft_ms - smallest.ttft_ms
                   : b.name == "tpot_ms"           ? parent.tpot_ms - smallest.tpot_ms
                   : b.name == "peak_memory_bytes" ? double(parent.peak_memory_bytes - smallest.peak_memory_bytes)
                                                   : smallest.throughput_tokens_per_s - parent.throughput_tokens_per_s;
    b.scale = std::max(std::fabs(range), 1e-6 * b.budget);
  }
  return out;
}

ArchLogits choice_probabilities(const ArchLogits& a, double tau) {
  return map_decisions(a, [&](const at::Tensor& t, size_t) { return at::softmax(t / tau, 0); });
}

at::Tensor expected_metric(const ExpectedCost& e, const CostBudget& b) {
  if (b.name == "ttft_ms") return e.ttft_ms;
  if (b.name == "tpot_ms") return e.tpot_ms;
  if (b.name == "peak_memory_bytes") return e.peak_memory_bytes;
  if (b.name == "min_throughput_tokens_per_s") return e.throughput_tokens_per_s;
  throw ConfigError(msg("search", "unknown limit '{}'", b.name));
}

at::Tensor normalized_violation(const ExpectedCost& e, const CostBudget& b) {
  at::Tensor v = expected_metric(e, b);
  return b.minimum ? (b.budget - v) / b.scale : (v - b.budget) / b.scale;
}

at::Tensor lagrangian_cost_term(const ChoiceTables& tables, const ArchLogits& p,
                                const std::vector<CostBudget>& budgets,
                                const std::vector<double>& multipliers, ExpectedCost* expected) {
  if (budgets.size() != multipliers.size())
    throw ConfigError(msg("search", "{} limits but {} multipliers", budgets.size(), multipliers.size()));
  ExpectedCost e = expected_cost(tables, p.hidden, p.attention, p.ffn);
  at::Tensor term = at::zeros({}, at::kDouble);
  for (size_t k = 0; k < budgets.size(); ++k)
    term = term + multipliers[k] * normalized_violation(e, budgets[k]);
  if (expected) *expected = e;
  return term;
}

Masks supernet_masks(const SearchSpace& s, const ArchLogits& y) {
  Masks m;
  m.hidden = at::matmul(y.hidden.to(at::kFloat), s.hidden_masks);  // [D]
  for (int64_t l = 0; l < s.num_layers(); ++l) {
    LayerMasks lm;
    const at::Tensor ya = y.attention[size_t(l)].to(at::kFloat);
    const at::Tensor yf = y.ffn[size_t(l)].to(at::kFloat);
    if (s.head_masks[size_t(l)].defined()) {
      lm.heads = at::matmul(ya, s.head_masks[size_t(l)]);      // [H]
      lm.attn_gate = at::dot(ya, s.attn_gates[size_t(l)]);     // []
    }
    if (s.ffn_masks[size_t(l)].defined()) {
      lm.ffn = at::matmul(yf, s.ffn_masks[size_t(l)]);         // [F]
      lm.ffn_gate = at::dot(yf, s.ffn_gates[size_t(l)]);       // []
    }
    m.layers.push_back(lm);
  }
  return m;
}

nlohmann::json TrajectoryPoint::to_json() const {
  return {{"step", step},
          {"tokens", tokens},
          {"loss", loss},
          {"kl", kl},
          {"penalty", penalty},
          {"temperature", temperature},
          {"ttft_ms", ttft_ms},
          {"tpot_ms", tpot_ms},
          {"peak_memory_bytes", peak_memory_bytes},
          {"throughput_tokens_per_s", throughput_tokens_per_s},
          {"multipliers", multipliers},
          {"frozen", frozen}};
}

nlohmann::json DifferentiableResult::to_json() const {
  nlohmann::json j = search.to_json();
  nlohmann::json traj = nlohmann::json::array(), rep = nlohmann::json::array(),
                 sl = nlohmann::json::array();
  for (const auto& t : trajectory) traj.push_back(t.to_json());
  for (const auto& r : repair.steps) rep.push_back(r.to_json());
  for (const auto& s : slack)
    sl.push_back({{"name", s.name}, {"limit", s.limit}, {"value", s.value}, {"slack", s.slack}});
  j["trajectory"] = traj;
  j["probabilities"] = probabilities;
  j["argmax_before_repair"] = {{"config", config_to_hf_json(argmax_target)},
                               {"describe", describe(argmax_target)}};
  j["repair"] = {{"structural_fixup", repair.fixed_structure}, {"steps", rep}};
  j["slack"] = sl;
  nlohmann::json bu = nlohmann::json::array();
  for (const auto& b : budgets)
    bu.push_back({{"name", b.name}, {"budget", b.budget}, {"minimum", b.minimum}, {"scale", b.scale}});
  j["budgets"] = bu;
  j["steps_run"] = steps_run;
  j["parent_meets_limits"] = parent_meets_limits;
  j["evaluations"] = evaluations;
  j["evaluation_tokens"] = evaluation_tokens;
  nlohmann::json ranked_json = nlohmann::json::array(), refine_json = nlohmann::json::array();
  for (const auto& k : ranked)
    ranked_json.push_back({{"describe", describe(k.config)}, {"kl", k.loss_after_prune}});
  for (const auto& st : refine.steps) refine_json.push_back(st.to_json());
  j["ranked"] = ranked_json;
  j["refine"] = {{"evaluations", refine.evaluations}, {"loss", refine.loss}, {"steps", refine_json}};
  j["fill"] = fill ? nlohmann::json{{"from", fill->from},
                                    {"to", describe(search.best.target)},
                                    {"kl", search.best.loss_after_prune}}
                   : nlohmann::json();
  return j;
}

DifferentiableResult differentiable_search(const LlamaModel& teacher, const Importance& imp,
                                           const Scenario& scenario, const Profile* profile,
                                           const Limits& limits,
                                           const std::vector<at::Tensor>& calibration,
                                           const DifferentiableOptions& opt,
                                           SharedSearchState* shared) {
  const double t0 = now_s();
  check_options(opt);
  if (calibration.empty()) throw ConfigError(msg("search", "no calibration batches"));
  const Limits& strict = limits;  // the caller's, margin included (pipeline/limits.h)
  cost_budgets(strict);  // ConfigError on relative or non-positive limits
  const SearchSpace space = build_search_space(teacher.config, imp, opt.space);
  CostFn cost = [&](const ModelConfig& c) { return predict(c, scenario, profile); };
  DifferentiableResult r;
  r.search.method = "autocompress";

  if (check_limits(cost(teacher.config), strict).empty()) {  // nothing to search
    keep_parent(r, space);
    settle(r, space, cost, strict, t0);
    return r;
  }
  const ReachableCost reachable = smallest_reachable(space, cost);
  check_reachable(space, reachable, strict);
  r.budgets = cost_budgets(strict, cost(teacher.config), reachable);
  const ChoiceTables tables = build_choice_tables(teacher.config, space.attention, space.ffn,
                                                  space.hidden_sizes, scenario, profile);
  if (shared && shared->teacher_reference.size() != calibration.size())
    shared->teacher_reference = teacher_logprobs(teacher, calibration, &r.search.search_tokens);
  const std::vector<at::Tensor> reference =
      shared ? shared->teacher_reference
             : teacher_logprobs(teacher, calibration, &r.search.search_tokens);

  const ArchLogits logits = learn_logits(r, space, teacher, tables, calibration, reference, opt);
  r.argmax = argmax_choice(logits);
  r.argmax_target = target_of(space, r.argmax);
  const ArchLogits p = choice_probabilities(logits);
  r.probabilities = probabilities_json(space, p.hidden, p.attention, p.ffn);
  settle(r, space, cost, strict, t0);
  if (opt.rank_batches > 0) {
    rank_and_refine(r, space, teacher, imp, cost, strict, logits, calibration, reference, opt,
                    shared);
    r.slack = limit_slack(r.search.best.cost, strict);
    r.search.seconds = now_s() - t0;
  }
  return r;
}

double ranking_kl(const LlamaModel& teacher, const Importance& imp, const ModelConfig& target,
                  const std::vector<at::Tensor>& calibration, const DifferentiableOptions& opt,
                  SharedSearchState& shared, int64_t* tokens) {
  const size_t nb = std::min(size_t(std::max<int64_t>(opt.rank_batches, 1)), calibration.size());
  const std::string key = kl_key(nb, target);
  auto it = shared.kl_after_prune.find(key);
  if (it != shared.kl_after_prune.end()) return it->second;
  if (shared.teacher_reference.size() < nb)
    throw InternalError(msg("search", "ranking_kl: the teacher's log-probabilities of {} batches "
                            "are needed, {} are shared", nb, shared.teacher_reference.size()));
  const std::vector<at::Tensor> batches(calibration.begin(), calibration.begin() + long(nb));
  const std::vector<at::Tensor> reference(shared.teacher_reference.begin(),
                                          shared.teacher_reference.begin() + long(nb));
  const double kl = pruned_kl(teacher, imp, target, reference, batches);
  if (tokens)
    for (const auto& b : batches) *tokens += b.numel();
  shared.kl_after_prune.emplace(key, kl);
  return kl;
}

}  // namespace ac
