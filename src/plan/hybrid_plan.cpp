#include "plan/hybrid_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "common/error.h"
#include "model/moe_family_config.h"
#include "search/ladders.h"
#include "search/reachable.h"

namespace ac {

namespace {

enum class Lever { experts, width, top_k, layer, mamba_heads, mamba_head_dim };

struct Move {
  Lever lever;
  int64_t layer;  // -1: every layer of the kind (a lever the engine fixes for the model)
};

// A layer's cost parts, memoized by the layer's whole shape (the hidden size never changes).
class PartMemo {
 public:
  PartMemo(const Scenario& s, const Profile* p) : s_(s), p_(p) {}
  const std::pair<PartCost, PartCost>& parts(const ModelConfig& c, const LayerConfig& l) {
    const std::string key = describe_layer(l);
    auto it = memo_.find(key);
    if (it == memo_.end())
      it = memo_.emplace(key, std::make_pair(attention_part_cost(c, l, s_, p_),
                                             ffn_part_cost(c, l, s_, p_))).first;
    return it->second;
  }
  CostEstimate estimate(const ModelConfig& c) {
    std::vector<PartCost> a, f;
    for (const auto& l : c.layers) {
      const auto& pr = parts(c, l);
      a.push_back(pr.first);
      f.push_back(pr.second);
    }
    if (!fixed_) fixed_ = fixed_cost(c, s_, p_);
    return combine(a, f, *fixed_, s_, "roofline", p_);
  }

 private:
  static std::string describe_layer(const LayerConfig& l) {
    std::string k = fmt::format("{} {} {} {} {} {}", l.num_attention_heads, l.num_key_value_heads,
                                l.head_dim, l.intermediate_size, l.attention_no_op, l.ffn_no_op);
    if (l.mamba)
      k += fmt::format(" M{} {} {} {} {} {}", l.mamba->mamba_num_heads, l.mamba->mamba_head_dim,
                       l.mamba->ssm_state_size, l.mamba->n_groups, l.mamba->conv_kernel,
                       l.mamba->chunk_size);
    if (l.moe)
      k += fmt::format(" E{} {} {} {} {}", l.moe->num_experts, l.moe->num_experts_per_tok,
                       l.moe->moe_intermediate_size, l.moe->shared_expert_intermediate_size,
                       l.moe->moe_latent_size);
    return k;
  }
  const Scenario& s_;
  const Profile* p_;
  std::map<std::string, std::pair<PartCost, PartCost>> memo_;
  std::optional<PartCost> fixed_;
};

class HybridGreedy {
 public:
  HybridGreedy(const Plan& plan, PartMemo& memo, std::set<Lever> levers, const QualityLoss& quality)
      : plan_(plan), parent_(plan.config), memo_(memo), levers_(std::move(levers)),
        quality_(quality) {
    parent_.extra = nlohmann::json::object();  // copied at every move
    const EngineStructure& r = plan.scenario.engine_spec.structure;
    const bool global_moe = is_moe_family_model_type(parent_.model_type);
    per_layer_[Lever::experts] = r.per_layer_num_experts && !global_moe;
    per_layer_[Lever::width] = r.per_layer_expert_width && !global_moe;
    per_layer_[Lever::top_k] = r.per_layer_experts_per_token && !global_moe;
    per_layer_[Lever::layer] = true;
    per_layer_[Lever::mamba_heads] = false;
    per_layer_[Lever::mamba_head_dim] = false;
    params_ = double(parent_.num_parameters());
    active_ = double(parent_.num_active_parameters());
  }

  // Moves from `start` (the parent when unset) until every limit holds or no move lowers the
  // excess; returns the last architecture.
  ModelConfig run(int64_t* steps, const ModelConfig* start = nullptr) {
    ModelConfig c = parent_;
    if (start) c.layers = start->layers;
    double ex = excess(c);
    while (ex > 0) {
      double best_score = 0, best_kept = 2;
      std::optional<ModelConfig> best;
      for (const Move& m : moves(c)) {
        ModelConfig n = apply(c, m);
        const double gain = ex - excess(n);
        // A measured loss may be 0 (a structure the calibration text never uses): such a move
        // is taken first, by its gain.
        const double lost =
            quality_ ? std::max(quality_(c, n), 1e-12)
                     : (double(c.num_parameters() - n.num_parameters())) / params_ +
                           (double(c.num_active_parameters() - n.num_active_parameters())) / active_;
        if (gain <= 0 || lost <= 0) continue;
        const double score = gain / lost, kept = kept_fraction(c, m);
        if (score > best_score * (1 + 1e-9) ||
            (score >= best_score * (1 - 1e-9) && kept > best_kept)) {
          best_score = score, best_kept = kept;
          best = std::move(n);
        }
      }
      if (!best) break;
      c = std::move(*best);
      ex = excess(c);
      ++*steps;
    }
    return c;
  }

 private:
  double excess(const ModelConfig& c) {
    return total_violation(limit_slack(memo_.estimate(c), plan_.limits));
  }

  std::vector<int64_t> moe_layers(const ModelConfig& c) const {
    std::vector<int64_t> out;
    for (int64_t i = 0; i < c.num_layers(); ++i)
      if (c.layers[size_t(i)].has_moe()) out.push_back(i);
    return out;
  }

  // The value a lever moves to from layer l's current one (0: at its floor).
  int64_t next_value(Lever lv, const LayerConfig& l, const LayerConfig& p) const {
    const double f = plan_.options.min_width_fraction;
    if (lv == Lever::experts) {
      const int64_t step = std::max<int64_t>(1, p.moe->num_experts / 16);
      const int64_t floor = std::max(l.moe->num_experts_per_tok, smallest_count(p.moe->num_experts, f));
      const int64_t v = l.moe->num_experts - step;
      return v >= floor ? v : 0;
    }
    if (lv == Lever::width) {
      const int64_t full = p.moe->moe_intermediate_size;
      for (int64_t w : stepped_width_ladder(full, plan_.options.width_granularity, f,
                                            full / std::max<int64_t>(1, plan_.options.width_steps),
                                            FirstRung::one_step_down))
        if (w < l.moe->moe_intermediate_size) return w;
      return 0;
    }
    if (lv == Lever::top_k) {
      const int64_t v = l.moe->num_experts_per_tok - 1;
      return v >= smallest_count(p.moe->num_experts_per_tok, f) ? v : 0;
    }
    if (lv == Lever::mamba_heads) {
      const int64_t v = l.mamba->mamba_num_heads - l.mamba->n_groups;
      return v >= smallest_count(p.mamba->mamba_num_heads, f) ? v : 0;
    }
    if (lv == Lever::mamba_head_dim) {  // Minitron's head_dim ladder (search/nemotron_h_minitron.h)
      const int64_t full = p.mamba->mamba_head_dim;
      const int64_t v = l.mamba->mamba_head_dim - mamba_head_dim_step(full);
      return v >= std::max<int64_t>(1, smallest_count(full, f)) ? v : 0;
    }
    return 0;
  }

  bool removable(const ModelConfig& c, int64_t i) const {
    const int64_t L = c.num_layers();
    if (i == 0 || i == L - 1 || !c.layers[size_t(i)].is_present()) return false;
    int64_t removed = 0, attention = 0, parent_attention = 0;
    for (const auto& l : c.layers) {
      removed += !l.is_present();
      attention += l.has_attention();
    }
    for (const auto& l : parent_.layers) parent_attention += l.has_attention();
    // A hybrid's few attention layers are its exact recall over the context: at most
    // max_attention_removed_fraction of the parent's go, and one always stays.
    const int64_t attention_floor = std::max<int64_t>(
        1, parent_attention - int64_t(plan_.options.max_attention_removed_fraction *
                                      double(parent_attention)));
    if (c.layers[size_t(i)].has_attention() && attention - 1 < attention_floor) return false;
    return removed + 1 <= int64_t(plan_.options.max_ffn_removed_fraction * double(L));
  }

  std::vector<Move> moves(const ModelConfig& c) const {
    std::vector<Move> out;
    const std::vector<int64_t> moe = moe_layers(c);
    for (Lever lv : {Lever::experts, Lever::width, Lever::top_k}) {
      if (!levers_.count(lv) || moe.empty()) continue;
      if (!per_layer_.at(lv)) {  // every MoE layer alike: moved together
        const auto& l = c.layers[size_t(moe.front())];
        if (next_value(lv, l, parent_.layers[size_t(moe.front())]) > 0) out.push_back({lv, -1});
        continue;
      }
      for (int64_t i : moe)
        if (next_value(lv, c.layers[size_t(i)], parent_.layers[size_t(i)]) > 0) out.push_back({lv, i});
    }
    if (levers_.count(Lever::layer))
      for (int64_t i = 0; i < c.num_layers(); ++i)
        if (removable(c, i)) out.push_back({Lever::layer, i});
    for (Lever lv : {Lever::mamba_heads, Lever::mamba_head_dim}) {
      if (!levers_.count(lv)) continue;
      for (int64_t i = 0; i < c.num_layers(); ++i)
        if (c.layers[size_t(i)].has_mamba()) {  // every Mamba-2 layer alike: the first decides
          if (next_value(lv, c.layers[size_t(i)], parent_.layers[size_t(i)]) > 0)
            out.push_back({lv, -1});
          break;
        }
    }
    return out;
  }

  void move_layer(LayerConfig& l, const LayerConfig& p, Lever lv) const {
    const int64_t v = next_value(lv, l, p);
    if (lv == Lever::experts) l.moe->num_experts = v;
    if (lv == Lever::width) l.moe->moe_intermediate_size = v;
    if (lv == Lever::top_k) l.moe->num_experts_per_tok = v;
    if (lv == Lever::mamba_heads) l.mamba->mamba_num_heads = v;
    if (lv == Lever::mamba_head_dim) l.mamba->mamba_head_dim = v;
  }

  ModelConfig apply(const ModelConfig& c, const Move& m) const {
    ModelConfig n = c;
    if (m.lever == Lever::layer) {
      LayerConfig& l = n.layers[size_t(m.layer)];
      l = LayerConfig{};
      l.attention_no_op = l.ffn_no_op = true;
      return n;
    }
    for (int64_t i = 0; i < n.num_layers(); ++i) {
      LayerConfig& l = n.layers[size_t(i)];
      const bool mamba = m.lever == Lever::mamba_heads || m.lever == Lever::mamba_head_dim;
      const bool kind = mamba ? l.has_mamba() : l.has_moe();
      if (kind && (m.layer < 0 || m.layer == i)) move_layer(l, parent_.layers[size_t(i)], m.lever);
    }
    return n;
  }

  // How much of the parent the moved layer keeps along the lever (ties to the least cut).
  double kept_fraction(const ModelConfig& c, const Move& m) const {
    if (m.layer < 0) return 1;
    const LayerConfig& l = c.layers[size_t(m.layer)];
    const LayerConfig& p = parent_.layers[size_t(m.layer)];
    if (m.lever == Lever::experts) return double(l.moe->num_experts) / double(p.moe->num_experts);
    if (m.lever == Lever::width)
      return double(l.moe->moe_intermediate_size) / double(p.moe->moe_intermediate_size);
    if (m.lever == Lever::top_k)
      return double(l.moe->num_experts_per_tok) / double(p.moe->num_experts_per_tok);
    return 0;  // a removed layer: the least preferred on ties
  }

  const Plan& plan_;
  ModelConfig parent_;
  PartMemo& memo_;
  std::set<Lever> levers_;
  std::map<Lever, bool> per_layer_;
  const QualityLoss& quality_;
  double params_ = 1, active_ = 1;
};

// "min..max" of a lever's values over the layers that changed, e.g. "384..448".
std::string span(const std::vector<int64_t>& v) {
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return *lo == *hi ? fmt::format("{}", *lo) : fmt::format("{}..{}", *lo, *hi);
}

// What a hybrid architecture changed against its parent (same layer count).
std::vector<std::string> hybrid_changes(const ModelConfig& p, const ModelConfig& c) {
  std::vector<std::string> out;
  std::vector<int64_t> experts, widths, topk;
  std::vector<std::string> removed;
  int64_t experts_from = 0, width_from = 0, topk_from = 0, mamba_from = 0, mamba_to = 0;
  int64_t head_dim_from = 0, head_dim_to = 0;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerConfig& l = c.layers[i];
    const LayerConfig& q = p.layers[i];
    if (q.is_present() && !l.is_present()) {
      const char* kind = q.has_mamba() ? "M" : q.has_moe() ? "E" : q.has_attention() ? "*" : "-";
      removed.push_back(fmt::format("{}{}", kind, i));
      continue;
    }
    if (l.has_moe()) {
      if (l.moe->num_experts != q.moe->num_experts) experts.push_back(l.moe->num_experts);
      if (l.moe->moe_intermediate_size != q.moe->moe_intermediate_size)
        widths.push_back(l.moe->moe_intermediate_size);
      if (l.moe->num_experts_per_tok != q.moe->num_experts_per_tok)
        topk.push_back(l.moe->num_experts_per_tok);
      experts_from = q.moe->num_experts, width_from = q.moe->moe_intermediate_size;
      topk_from = q.moe->num_experts_per_tok;
    }
    if (l.has_mamba() && l.mamba->mamba_num_heads != q.mamba->mamba_num_heads)
      mamba_from = q.mamba->mamba_num_heads, mamba_to = l.mamba->mamba_num_heads;
    if (l.has_mamba() && l.mamba->mamba_head_dim != q.mamba->mamba_head_dim)
      head_dim_from = q.mamba->mamba_head_dim, head_dim_to = l.mamba->mamba_head_dim;
  }
  if (!experts.empty())
    out.push_back(fmt::format("experts {} -> {} in {} MoE layers", experts_from, span(experts),
                              experts.size()));
  if (!widths.empty())
    out.push_back(fmt::format("expert FFN {} -> {} in {} MoE layers", width_from, span(widths),
                              widths.size()));
  if (!topk.empty())
    out.push_back(fmt::format("experts per token {} -> {} in {} MoE layers", topk_from, span(topk),
                              topk.size()));
  if (mamba_from)
    out.push_back(fmt::format("Mamba-2 heads {} -> {} in every Mamba-2 layer", mamba_from, mamba_to));
  if (head_dim_from)
    out.push_back(fmt::format("Mamba-2 head_dim {} -> {} in every Mamba-2 layer", head_dim_from,
                              head_dim_to));
  if (!removed.empty())
    out.push_back(fmt::format("{} layers removed ({})", removed.size(), fmt::join(removed, ", ")));
  return out;
}

const std::set<Lever> kAllLevers = {Lever::experts,     Lever::width,       Lever::top_k,
                                    Lever::layer,       Lever::mamba_heads, Lever::mamba_head_dim};

}  // namespace

std::optional<PlanSuggestion> repair_hybrid(const Plan& plan, const ModelConfig& start,
                                            const std::string& label, const Profile* profile,
                                            const QualityLoss& quality, int64_t* steps) {
  PartMemo memo(plan.scenario, profile);
  HybridGreedy greedy(plan, memo, kAllLevers, quality);
  int64_t taken = 0;
  ModelConfig c = greedy.run(&taken, &start);
  if (steps) *steps = taken;
  if (!check_limits(memo.estimate(c), plan.limits).empty()) return std::nullopt;
  ModelConfig out = plan.config;
  out.layers = c.layers;
  return verified_suggestion("per_layer", label, out, plan, profile,
                             hybrid_changes(plan.config, out));
}

void add_hybrid_suggestions(Plan& plan, const Profile* profile, const QualityLoss& quality) {
  PartMemo memo(plan.scenario, profile);
  const std::vector<std::pair<std::string, std::set<Lever>>> descents = {
      {"greedy per layer", kAllLevers},
      {"experts only", {Lever::experts}},
      {"expert width only", {Lever::width}},
      {"experts per token only", {Lever::top_k}},
      {"layers only", {Lever::layer}},
      {"Mamba-2 only", {Lever::mamba_heads, Lever::mamba_head_dim}}};
  for (const auto& [label, levers] : descents) {
    HybridGreedy greedy(plan, memo, levers, quality);
    ModelConfig c = greedy.run(&plan.greedy_steps);
    if (!check_limits(memo.estimate(c), plan.limits).empty()) continue;
    ModelConfig out = plan.config;  // the parent's extra fields carried over
    out.layers = c.layers;
    PlanSuggestion s =
        verified_suggestion("per_layer", label, out, plan, profile, hybrid_changes(plan.config, out));
    if (label == "greedy per layer")
      plan.per_layer = std::move(s);
    else if (!plan.per_layer || plan.per_layer->config.layers != s.config.layers)
      plan.levers.push_back(std::move(s));  // a lever alone that the greedy did not already give
  }
}

}  // namespace ac
