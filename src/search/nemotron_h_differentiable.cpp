#include "search/nemotron_h_differentiable.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <functional>
#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "common/error.h"
#include "common/progress.h"
#include "common/runtime.h"
#include "hardware/cost_model.h"
#include "model/moe_family_config.h"
#include "plan/hybrid_plan.h"
#include "prune/nemotron_h_prune.h"
#include "search/differentiable.h"
#include "search/ladders.h"
#include "search/nemotron_h_minitron.h"

namespace ac {

using json = nlohmann::json;

namespace {

const char* const kWhere = "nemotron_h_differentiable_search";

enum class Lever { keep, mamba_heads, mamba_head_dim, experts, width };

// One categorical decision: its option values (the parent's first) and logits [n].
struct Decision {
  std::string name;
  Lever lever;
  std::vector<int64_t> values;  // keep: {1, 0}
  std::vector<int64_t> layers;  // the layers it sets
  at::Tensor logits;
  bool frozen = false;
};

// One layer's share of the relaxation: the decisions that touch it (keep first when removable,
// then Mamba heads and head_dim, or experts and width), each option's 0/1 mask on the parent's
// layer, and the cost table over the joint options.
struct LayerUnit {
  int64_t layer = 0;
  int keep = -1, a = -1, b = -1;       // indices into the decisions (-1: none)
  std::vector<at::Tensor> a_masks;     // Mamba [nh] / MoE [E] per option of a
  std::vector<at::Tensor> b_masks;     // Mamba [P] / MoE [E, Fe] per option of b
  at::Tensor table;                    // [4, n_keep?, n_a?, n_b?] float64: cost minus the parent's
};

constexpr int kMetrics = 4;  // ttft_ms, tpot_ms, peak_memory_bytes, throughput_tokens_per_s

std::array<double, kMetrics> metrics(const CostEstimate& c) {
  return {c.ttft_ms, c.tpot_ms, double(c.peak_memory_bytes), c.throughput_tokens_per_s};
}

at::Tensor index_mask(int64_t n, const at::Tensor& kept) {
  return at::zeros({n}, at::kFloat).index_fill_(0, kept.to(at::kLong), 1.0);
}

// Sets layer i of `c` (a copy of the parent's) to `value` along `lever`.
void set_lever(LayerConfig& l, Lever lever, int64_t value) {
  switch (lever) {
    case Lever::keep:
      if (value == 0) {
        l = LayerConfig{};
        l.attention_no_op = l.ffn_no_op = true;
      }
      break;
    case Lever::mamba_heads: l.mamba->mamba_num_heads = value; break;
    case Lever::mamba_head_dim: l.mamba->mamba_head_dim = value; break;
    case Lever::experts: l.moe->num_experts = value; break;
    case Lever::width: l.moe->moe_intermediate_size = value; break;
  }
}

std::vector<int64_t> step_down(int64_t full, int64_t step, int64_t floor) {
  std::vector<int64_t> v;
  for (int64_t x = full; x >= std::max<int64_t>(1, floor); x -= std::max<int64_t>(1, step))
    v.push_back(x);
  return v;
}

// The decisions of the file header, for `parent` under the plan's options and engine rules.
std::vector<Decision> make_decisions(const ModelConfig& parent, const Plan& plan,
                                     int64_t router_n_group, const at::Tensor& block_influence) {
  const PlanOptions& po = plan.options;
  const double f = po.min_width_fraction;
  const int64_t L = parent.num_layers();
  const EngineStructure& rules = plan.scenario.engine_spec.structure;
  const bool moe_family = is_moe_family_model_type(parent.model_type);
  std::vector<Decision> out;
  std::vector<int64_t> mamba, moe;
  int64_t attention = 0;
  for (int64_t i = 0; i < L; ++i) {
    const LayerConfig& l = parent.layers[size_t(i)];
    if (l.has_mamba()) mamba.push_back(i);
    if (l.has_moe()) moe.push_back(i);
    attention += l.has_attention();
  }
  if (!mamba.empty()) {
    const Mamba2Config& m = *parent.layers[size_t(mamba.front())].mamba;
    out.push_back({"mamba_num_heads", Lever::mamba_heads,
                   step_down(m.mamba_num_heads, m.n_groups, smallest_count(m.mamba_num_heads, f)),
                   mamba});
    out.push_back({"mamba_head_dim", Lever::mamba_head_dim,
                   step_down(m.mamba_head_dim, mamba_head_dim_step(m.mamba_head_dim),
                             smallest_count(m.mamba_head_dim, f)),
                   mamba});
  }
  auto moe_decisions = [&](Lever lever, bool per_layer) {
    std::vector<std::vector<int64_t>> groups;
    if (per_layer && !moe_family)
      for (int64_t i : moe) groups.push_back({i});
    else if (!moe.empty())
      groups.push_back(moe);
    for (const auto& g : groups) {
      const MoeConfig& m = *parent.layers[size_t(g.front())].moe;
      std::vector<int64_t> v;
      if (lever == Lever::experts)
        v = router_n_group > 1 ? std::vector<int64_t>{m.num_experts}
                               : step_down(m.num_experts, std::max<int64_t>(1, m.num_experts / 16),
                                           std::max({int64_t(2), m.num_experts_per_tok,
                                                     smallest_count(m.num_experts, f)}));
      else
        v = stepped_width_ladder(m.moe_intermediate_size, po.width_granularity, f,
                                 m.moe_intermediate_size / std::max<int64_t>(1, po.width_steps),
                                 FirstRung::one_step_down);
      const std::string where = g.size() == 1 ? fmt::format("layer {} ", g.front()) : "";
      const char* field = lever == Lever::experts ? "n_routed_experts" : "moe_intermediate_size";
      out.push_back({where + field, lever, v, g});
    }
  };
  moe_decisions(Lever::experts, rules.per_layer_num_experts);
  moe_decisions(Lever::width, rules.per_layer_expert_width);
  // Removal, as the plan allows it (plan/hybrid_plan.cpp removable): never the first or the last
  // layer, at most max_ffn_removed_fraction of them, attention layers down to the plan's floor.
  // Offered only in as many layers as may go, those of lowest block influence (ShortGPT), as the
  // dense search caps its attention-free layers: a relaxation that may remove any layer spreads
  // its savings over more removals than the caps keep, and its argmax then falls short.
  const int64_t attention_floor = std::max<int64_t>(
      1, attention - int64_t(po.max_attention_removed_fraction * double(attention)));
  std::vector<std::pair<float, int64_t>> by_influence;
  for (int64_t i = 1; i + 1 < L; ++i)
    if (parent.layers[size_t(i)].is_present())
      by_influence.push_back({block_influence[i].item<float>(), i});
  std::sort(by_influence.begin(), by_influence.end());
  int64_t offered = 0, attention_offered = 0;
  std::vector<int64_t> removable;
  for (const auto& [influence, i] : by_influence) {
    const bool attn = parent.layers[size_t(i)].has_attention();
    if (offered >= int64_t(po.max_ffn_removed_fraction * double(L))) break;
    if (attn && attention - attention_offered - 1 < attention_floor) continue;
    removable.push_back(i);
    ++offered, attention_offered += attn;
  }
  std::sort(removable.begin(), removable.end());
  for (int64_t i : removable)
    out.push_back({fmt::format("layer {} kept", i), Lever::keep, {1, 0}, {i}});
  for (Decision& d : out) {
    d.logits = at::zeros({int64_t(d.values.size())}, at::kFloat);
    d.frozen = d.values.size() < 2;
  }
  return out;
}

// The 0/1 masks of decision d's options on layer `layer` (the pruning's own selection).
std::vector<at::Tensor> option_masks(const NemotronHModel& teacher, const NemotronHImportance& imp,
                                     const Decision& d, int64_t layer) {
  const LayerConfig& p = teacher.config.layers[size_t(layer)];
  std::vector<at::Tensor> out;
  for (int64_t v : d.values) {
    ModelConfig t = teacher.config;
    for (int64_t i : d.layers) set_lever(t.layers[size_t(i)], d.lever, v);
    const NemotronHLayerPlan lp = plan_nemotron_h_pruning(teacher, imp, t).layers[size_t(layer)];
    if (d.lever == Lever::mamba_heads)
      out.push_back(index_mask(p.mamba->mamba_num_heads, lp.mamba_heads));
    if (d.lever == Lever::mamba_head_dim)
      out.push_back(index_mask(p.mamba->mamba_head_dim, lp.mamba_head_dim));
    if (d.lever == Lever::experts) out.push_back(index_mask(p.moe->num_experts, lp.moe.experts));
    if (d.lever == Lever::width) {
      at::Tensor m = at::zeros({p.moe->num_experts, p.moe->moe_intermediate_size}, at::kFloat);
      for (int64_t j = 0; j < lp.moe.experts.size(0); ++j)
        m[lp.moe.experts[j].item<int64_t>()].index_fill_(0, lp.moe.expert_ffn[j], 1.0);
      out.push_back(m);
    }
  }
  return out;
}

// The cost table of unit u: every joint option of its decisions, `center` with layer u.layer
// alone changed (from the parent's layer), minus center's cost `base`.
at::Tensor cost_table(const ModelConfig& parent, const ModelConfig& center, const Plan& plan,
                      const std::array<double, 4>& base, const std::vector<Decision>& ds,
                      const LayerUnit& u) {
  std::vector<int> dims;
  for (int d : {u.keep, u.a, u.b})
    if (d >= 0) dims.push_back(d);
  std::vector<int64_t> shape = {kMetrics};
  int64_t n = 1;
  for (int d : dims) shape.push_back(int64_t(ds[size_t(d)].values.size())), n *= shape.back();
  at::Tensor t = at::zeros({kMetrics, n}, at::kDouble);
  auto acc = t.accessor<double, 2>();
  for (int64_t flat = 0; flat < n; ++flat) {
    ModelConfig c = center;
    LayerConfig& l = c.layers[size_t(u.layer)];
    l = parent.layers[size_t(u.layer)];
    int64_t rest = flat;
    std::vector<int64_t> idx(dims.size());
    for (size_t k = dims.size(); k-- > 0;) {
      const int64_t nk = int64_t(ds[size_t(dims[k])].values.size());
      idx[k] = rest % nk, rest /= nk;
    }
    bool removed = false;
    for (size_t k = 0; k < dims.size(); ++k) {
      const Decision& d = ds[size_t(dims[k])];
      if (d.lever == Lever::keep) removed = d.values[size_t(idx[k])] == 0;
      else if (!removed) set_lever(l, d.lever, d.values[size_t(idx[k])]);
    }
    if (removed) set_lever(l, Lever::keep, 0);
    const std::array<double, kMetrics> m = metrics(predict(c, plan.scenario, nullptr));
    for (int k = 0; k < kMetrics; ++k) acc[k][flat] = m[size_t(k)] - base[size_t(k)];
  }
  return t.view(shape);
}

// Table [4, n_1, ..., n_m] contracted with each dimension's probabilities: [4].
at::Tensor contract(const at::Tensor& table, const std::vector<at::Tensor>& probabilities) {
  at::Tensor t = table;
  for (size_t k = probabilities.size(); k-- > 0;)
    t = at::matmul(t, probabilities[k].to(at::kDouble));
  return t;
}

std::vector<at::Tensor> unit_probabilities(const LayerUnit& u, const std::vector<at::Tensor>& p) {
  std::vector<at::Tensor> out;
  for (int d : {u.keep, u.a, u.b})
    if (d >= 0) out.push_back(p[size_t(d)]);
  return out;
}

ExpectedCost as_expected(const at::Tensor& v) {
  return {v[0], v[1], v[2], v[3]};
}

double normalized_entropy(const at::Tensor& logits) {
  const int64_t n = logits.size(0);
  if (n < 2) return 0;
  at::Tensor lp = at::log_softmax(logits.detach().to(at::kDouble), 0);
  return -(lp.exp() * lp).sum().item<double>() / std::log(double(n));
}

at::Tensor one_hot_of(const at::Tensor& logits) {
  return at::one_hot(logits.detach().argmax(), logits.size(0)).to(at::kFloat);
}

// The soft masks of the supernet for per-decision weights y (file header).
NemotronHMasks soft_masks(const ModelConfig& parent, const std::vector<LayerUnit>& units,
                          const std::vector<at::Tensor>& y) {
  NemotronHMasks m;
  m.layers.resize(parent.layers.size());
  auto mix = [&](const std::vector<at::Tensor>& masks, int d) {
    at::Tensor s = masks[0] * y[size_t(d)][0];
    for (size_t o = 1; o < masks.size(); ++o) s = s + masks[o] * y[size_t(d)][int64_t(o)];
    return s;
  };
  for (const LayerUnit& u : units) {
    NemotronHLayerMasks& lm = m.layers[size_t(u.layer)];
    if (u.keep >= 0) lm.gate = y[size_t(u.keep)][0];
    if (u.a < 0) continue;
    const at::Tensor a = mix(u.a_masks, u.a), b = mix(u.b_masks, u.b);
    if (parent.layers[size_t(u.layer)].has_mamba())
      lm.mamba_channels = a.unsqueeze(1) * b.unsqueeze(0);
    else
      lm.expert_ffn = a.unsqueeze(1) * b;
  }
  return m;
}

// The argmax architecture, with removals over the plan's caps undone (least probable first).
ModelConfig discretize(const ModelConfig& parent, const Plan& plan,
                       const std::vector<Decision>& ds) {
  ModelConfig c = parent;
  const int64_t L = parent.num_layers();
  std::vector<std::pair<double, int64_t>> removed;  // (p(remove), layer)
  for (const Decision& d : ds) {
    const int64_t o = d.logits.argmax().item<int64_t>();
    if (d.lever == Lever::keep) {
      if (d.values[size_t(o)] == 0)
        removed.push_back({at::softmax(d.logits.detach(), 0)[1].item<double>(), d.layers.front()});
      continue;
    }
    for (int64_t i : d.layers) set_lever(c.layers[size_t(i)], d.lever, d.values[size_t(o)]);
  }
  std::sort(removed.begin(), removed.end(), std::greater<>());
  int64_t attention = 0;
  for (const auto& l : parent.layers) attention += l.has_attention();
  const int64_t attention_floor = std::max<int64_t>(
      1, attention - int64_t(plan.options.max_attention_removed_fraction * double(attention)));
  const int64_t max_removed = int64_t(plan.options.max_ffn_removed_fraction * double(L));
  int64_t taken = 0, attention_taken = 0;
  for (const auto& [p, i] : removed) {
    const bool attn = parent.layers[size_t(i)].has_attention();
    if (taken + 1 > max_removed || (attn && attention - attention_taken - 1 < attention_floor))
      continue;
    set_lever(c.layers[size_t(i)], Lever::keep, 0);
    ++taken, attention_taken += attn;
  }
  return c;
}

int64_t value_of(const LayerConfig& l, Lever lever) {
  switch (lever) {
    case Lever::keep: return l.is_present() ? 1 : 0;
    case Lever::mamba_heads: return l.mamba->mamba_num_heads;
    case Lever::mamba_head_dim: return l.mamba->mamba_head_dim;
    case Lever::experts: return l.moe->num_experts;
    case Lever::width: return l.moe->moe_intermediate_size;
  }
  return 0;
}

// Layer i of `c` given back: the parent's layer with the current value of every decision that
// spans several layers (the global Mamba-2 sizes, MoE sizes the engine keeps alike).
void restore_layer(ModelConfig& c, const ModelConfig& parent, const std::vector<Decision>& ds,
                   int64_t i) {
  c.layers[size_t(i)] = parent.layers[size_t(i)];
  for (const Decision& d : ds) {
    if (d.lever == Lever::keep || d.layers.size() < 2 ||
        std::find(d.layers.begin(), d.layers.end(), i) == d.layers.end())
      continue;
    for (int64_t j : d.layers)
      if (j != i && c.layers[size_t(j)].is_present()) {
        set_lever(c.layers[size_t(i)], d.lever, value_of(c.layers[size_t(j)], d.lever));
        break;
      }
  }
}

// Gives back slack (search/repair.h fill_slack's counterpart): while a decision can move one
// option toward the parent's with every limit still held, takes the move that regains the most
// quality (`quality` from the larger architecture to `c`; unset: the parameters it gives back).
// Returns the moves taken.
int64_t fill_slack(ModelConfig& c, const ModelConfig& parent, const Plan& plan,
                   const std::vector<Decision>& ds, const QualityLoss& quality) {
  int64_t moves = 0;
  for (;;) {
    double best_gain = 0;
    std::optional<ModelConfig> best;
    for (const Decision& d : ds) {
      // The decision's value, read from a layer it still sets (a removed layer's widths are moot).
      const LayerConfig* present = nullptr;
      for (int64_t i : d.layers)
        if (d.lever == Lever::keep || c.layers[size_t(i)].is_present()) {
          present = &c.layers[size_t(i)];
          break;
        }
      if (!present) continue;
      const LayerConfig& l = *present;
      const auto it = std::find(d.values.begin(), d.values.end(), value_of(l, d.lever));
      if (it == d.values.begin() || it == d.values.end()) continue;  // at the parent's, or off
      ModelConfig n = c;
      for (int64_t i : d.layers) {
        if (d.lever == Lever::keep) restore_layer(n, parent, ds, i);
        else if (n.layers[size_t(i)].is_present())
          set_lever(n.layers[size_t(i)], d.lever, *(it - 1));
      }
      if (!check_limits(predict(n, plan.scenario, nullptr), plan.limits).empty()) continue;
      const double gain =
          quality ? quality(n, c) : double(n.num_parameters() - c.num_parameters());
      if (gain > best_gain) best_gain = gain, best = std::move(n);
    }
    if (!best) return moves;
    c = std::move(*best);
    ++moves;
  }
}

}  // namespace

json HybridSearchResult::to_json() const {
  return {{"argmax", describe(argmax)},
          {"suggestion", suggestion ? json(describe(suggestion->config)) : json(nullptr)},
          {"repair_steps", repair_steps}, {"slack_moves", slack_moves}, {"steps_run", steps_run},
          {"search_tokens", search_tokens}, {"kl_scale", kl_scale},
          {"trajectory", trajectory}, {"decisions", decisions}};
}

HybridSearchResult nemotron_h_differentiable_search(const NemotronHModel& teacher,
                                                   const NemotronHImportance& imp,
                                                   const Plan& plan,
                                                   const std::vector<at::Tensor>& calibration,
                                                   const HybridSearchOptions& opt,
                                                   const QualityLoss& quality) {
  const ModelConfig& parent = teacher.config;
  if (calibration.empty()) throw ConfigError(msg(kWhere, "no calibration batches"));
  if (!parent.is_hybrid())
    throw ConfigError(msg(kWhere, "{} is not a hybrid model", describe(parent)));
  HybridSearchResult r;

  // The relaxation: decisions, per-layer units with their option masks and cost tables.
  std::vector<Decision> ds =
      make_decisions(parent, plan, teacher.router.n_group, imp.block_influence.to(at::kCPU));
  const CostEstimate full = predict(parent, plan.scenario, nullptr);
  std::vector<LayerUnit> units;
  for (int64_t i = 0; i < parent.num_layers(); ++i) {
    LayerUnit u;
    u.layer = i;
    for (size_t k = 0; k < ds.size(); ++k) {
      const auto& ls = ds[k].layers;
      if (std::find(ls.begin(), ls.end(), i) == ls.end()) continue;
      const Lever lv = ds[k].lever;
      if (lv == Lever::keep) u.keep = int(k);
      if (lv == Lever::mamba_heads || lv == Lever::experts) u.a = int(k);
      if (lv == Lever::mamba_head_dim || lv == Lever::width) u.b = int(k);
    }
    if (u.keep < 0 && u.a < 0) continue;
    if (u.a >= 0) {
      u.a_masks = option_masks(teacher, imp, ds[size_t(u.a)], i);
      u.b_masks = option_masks(teacher, imp, ds[size_t(u.b)], i);
    }
    units.push_back(std::move(u));
  }
  // The expected cost is linear around a center architecture: the parent first, then every
  // relinearize_every steps the current argmax. A peak memory is not a sum over layers (the
  // activation peak is the largest layer's), so tables taken at the parent alone miss what
  // shrinking every layer together saves; around the argmax they are exact at the argmax.
  at::Tensor center_cost;
  auto linearize = [&](const ModelConfig& center) {
    const std::array<double, kMetrics> base = metrics(predict(center, plan.scenario, nullptr));
    center_cost = at::tensor(std::vector<double>(base.begin(), base.end()), at::kDouble);
    for (LayerUnit& u : units) u.table = cost_table(parent, center, plan, base, ds, u);
  };
  linearize(parent);

  // The limits, scaled by the range the parent's tables span (search/differentiable.h
  // cost_budgets).
  std::vector<CostBudget> budgets = cost_budgets(plan.limits);
  const std::array<double, kMetrics> base = metrics(full);
  const at::Tensor parent_cost = center_cost.clone();
  {
    at::Tensor lo = parent_cost.clone(), hi = parent_cost.clone();
    for (const LayerUnit& u : units) {
      const at::Tensor flat = u.table.reshape({kMetrics, -1});
      lo = lo + std::get<0>(flat.min(1));
      hi = hi + std::get<0>(flat.max(1));
    }
    const std::array<double, kMetrics>& f = base;
    for (CostBudget& b : budgets) {
      const int k = b.name == "ttft_ms" ? 0 : b.name == "tpot_ms" ? 1
                  : b.name == "peak_memory_bytes" ? 2 : 3;
      const double reach = k == 3 ? hi[k].item<double>() : lo[k].item<double>();
      b.scale = std::max(std::abs(f[size_t(k)] - reach), 1e-6 * std::abs(b.budget));
    }
  }

  std::vector<at::Tensor> params;
  for (Decision& d : ds) {
    if (d.values.size() > 1) d.logits[0] = opt.init_full_logit;
    if (d.frozen) continue;
    d.logits.requires_grad_(true);
    params.push_back(d.logits);
  }
  const std::vector<at::Tensor> reference = nemotron_h_logprobs(teacher, calibration);
  r.search_tokens += tokens_in(calibration);
  std::vector<double> lambda(budgets.size(), 0.0);
  at::Generator gen = at::detail::createCPUGenerator(opt.seed);
  // The KL's scale: the supernet at every width decision's smallest option (no layer removed),
  // so that the KL term, like each g_k, spans about [0, 1] over what the search controls; the
  // raw KL of a model close to its teacher can be a few hundredths of a nat, and the
  // multipliers would then outweigh it long after the limits hold.
  double kl_scale = 1;
  if (!params.empty()) {
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> smallest;
    for (const Decision& d : ds) {
      const int64_t n = int64_t(d.values.size());
      at::Tensor y = at::zeros({n}, at::kFloat);
      y[d.lever == Lever::keep ? 0 : n - 1] = 1.0;
      smallest.push_back(y);
    }
    const NemotronHMasks masks = soft_masks(parent, units, smallest);
    NemotronHForwardOptions fo;
    fo.masks = &masks;
    const at::Tensor lp = at::log_softmax(teacher.forward(calibration[0], fo), -1);
    kl_scale = std::max(1e-6, ((reference[0].exp() * (reference[0] - lp)).sum() /
                               double(calibration[0].numel())).item<double>());
    r.search_tokens += calibration[0].numel();
  }
  r.kl_scale = kl_scale;
  if (!params.empty()) {
    torch::optim::Adam adam(params, torch::optim::AdamOptions(opt.logit_lr));
    Progress progress("search", opt.steps, "steps");
    for (int64_t step = 0; step < opt.steps; ++step) {
      const double progress_share = double(step) / double(std::max<int64_t>(1, opt.steps - 1));
      const double tau = opt.tau_start * std::pow(opt.tau_end / opt.tau_start, progress_share);
      std::vector<at::Tensor> y, p;
      for (Decision& d : ds) {
        if (d.frozen) {
          y.push_back(one_hot_of(d.logits));
          p.push_back(y.back());
          continue;
        }
        at::Tensor u = at::rand({d.logits.size(0)}, gen, at::kFloat).clamp(1e-10, 1.0 - 1e-7);
        y.push_back(at::softmax((d.logits - at::log(-at::log(u))) / tau, 0));
        p.push_back(at::softmax(d.logits / tau, 0));
      }
      const NemotronHMasks masks = soft_masks(parent, units, y);
      NemotronHForwardOptions fo;
      fo.masks = &masks;
      const size_t bi = size_t(step) % calibration.size();
      const at::Tensor& batch = calibration[bi];
      const at::Tensor student = at::log_softmax(teacher.forward(batch, fo), -1);
      const at::Tensor& ref = reference[bi];
      const at::Tensor kl = (ref.exp() * (ref - student)).sum() / double(batch.numel());
      if (step > 0 && step % opt.relinearize_every == 0) linearize(discretize(parent, plan, ds));
      at::Tensor cost = center_cost;
      for (const LayerUnit& u : units) cost = cost + contract(u.table, unit_probabilities(u, p));
      const ExpectedCost e = as_expected(cost);
      at::Tensor penalty = at::zeros({}, at::kDouble);
      for (size_t k = 0; k < budgets.size(); ++k)
        penalty = penalty + lambda[k] * at::relu(normalized_violation(e, budgets[k]));
      const at::Tensor loss = kl.to(at::kDouble) / kl_scale + opt.cost_weight * penalty;
      adam.zero_grad();
      loss.backward();
      for (Decision& d : ds)
        if (d.frozen && d.logits.requires_grad()) d.logits.mutable_grad().reset();
      adam.step();
      r.search_tokens += batch.numel();
      // Dual ascent, then freezing once the expected cost meets every budget.
      bool within = true;
      json mult = json::object();
      for (size_t k = 0; k < budgets.size(); ++k) {
        const double g = normalized_violation(e, budgets[k]).item<double>();
        lambda[k] = std::max(0.0, lambda[k] + opt.dual_lr * g);
        mult[budgets[k].name] = lambda[k];
        within &= g <= 0;
      }
      int64_t frozen = 0, open = 0;
      for (Decision& d : ds) {
        if (!d.frozen && within && normalized_entropy(d.logits / tau) < opt.freeze_entropy)
          d.frozen = true;
        frozen += d.frozen;
        open += !d.frozen;
      }
      r.trajectory.push_back({{"step", step}, {"tokens", r.search_tokens}, {"temperature", tau},
                              {"kl", kl.item<double>()}, {"penalty", penalty.item<double>()},
                              {"loss", loss.item<double>()}, {"ttft_ms", cost[0].item<double>()},
                              {"tpot_ms", cost[1].item<double>()},
                              {"peak_memory_bytes", cost[2].item<double>()},
                              {"throughput_tokens_per_s", cost[3].item<double>()},
                              {"multipliers", mult}, {"frozen", frozen}});
      r.steps_run = step + 1;
      progress.update(step + 1, fmt::format("KL {:.4f}", kl.item<double>()));
      if (open == 0) break;
    }
    progress.finish(fmt::format("{} steps", r.steps_run));
  }
  for (const Decision& d : ds) {
    const at::Tensor pr = at::softmax(d.logits.detach().to(at::kDouble), 0).contiguous();
    d.logits.requires_grad_(false);
    const double* q = pr.data_ptr<double>();
    r.decisions.push_back({{"name", d.name}, {"values", d.values},
                           {"probabilities", std::vector<double>(q, q + pr.numel())}});
  }
  ModelConfig argmax = discretize(parent, plan, ds);
  r.argmax = argmax;
  r.suggestion = repair_hybrid(plan, argmax, "differentiable search", nullptr, quality,
                               &r.repair_steps);
  if (r.suggestion) {
    ModelConfig filled = r.suggestion->config;
    r.slack_moves = fill_slack(filled, parent, plan, ds, quality);
    if (r.slack_moves > 0)  // meets the limits: returned as it is, verified and described
      r.suggestion = repair_hybrid(plan, filled, "differentiable search", nullptr, quality);
  }
  log_info(fmt::format("[search] autocompress (differentiable, {} steps): argmax {} -> {} after {} "
                       "repair and {} slack moves", r.steps_run, describe(argmax),
                       r.suggestion ? describe(r.suggestion->config) : "nothing that fits",
                       r.repair_steps, r.slack_moves));
  return r;
}

}  // namespace ac
