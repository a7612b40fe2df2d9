#include "plan/plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <tuple>

#include "common/error.h"
#include "hardware/granularity.h"
#include "pipeline/limits.h"
#include "plan/cost_report.h"
#include "plan/hybrid_plan.h"
#include "search/candidates.h"
#include "search/ladders.h"
#include "search/reachable.h"

namespace ac {

std::string cost_provenance(const std::string& source) {
  if (source == "measured") return "measured";
  if (source == "profile") return "predicted from profile";
  if (source == "roofline") return "predicted from specs";
  return source;
}

namespace {
using json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Costing: predict() split into its parts, each part memoized. Within one parent, a layer's
// attention and FFN parts depend only on the hidden size and the layer's own shape, and the
// fixed part on the hidden size and head_dim, so the many architectures a plan visits share few
// distinct parts. estimate(c) equals predict(c, ...) exactly: the same parts, the same combine().

class MemoCost {
 public:
  MemoCost(const Scenario& s, const Profile* p) : s_(s), p_(p) {}

  CostEstimate estimate(const ModelConfig& c) {
    std::vector<PartCost> attn, ffn;
    attn.reserve(c.layers.size());
    ffn.reserve(c.layers.size());
    const LayerConfig* prev = nullptr;  // consecutive equal layers share one lookup
    const std::pair<PartCost, PartCost>* parts = nullptr;
    for (const auto& l : c.layers) {
      if (!prev || *prev != l) parts = &layer_parts(c, l);
      prev = &l;
      attn.push_back(parts->first);
      ffn.push_back(parts->second);
    }
    return combine(attn, ffn, fixed(c), s_, source(), p_);
  }
  std::string source() const { return p_ && s_.engine == "native" ? "profile" : "roofline"; }

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool>;

  const std::pair<PartCost, PartCost>& layer_parts(const ModelConfig& c, const LayerConfig& l) {
    Key k{c.hidden_size, l.num_attention_heads, l.num_key_value_heads, l.head_dim,
          l.intermediate_size, l.attention_no_op, l.ffn_no_op};
    auto it = parts_.find(k);
    if (it == parts_.end())
      it = parts_.emplace(k, std::make_pair(attention_part_cost(c, l, s_, p_),
                                            ffn_part_cost(c, l, s_, p_))).first;
    return it->second;
  }
  const PartCost& fixed(const ModelConfig& c) {
    int64_t Hd = 0;
    for (const auto& l : c.layers)
      if (l.has_attention() && Hd == 0) Hd = l.head_dim;
    auto key = std::make_pair(c.hidden_size, Hd);
    auto it = fixed_.find(key);
    if (it == fixed_.end()) it = fixed_.emplace(key, fixed_cost(c, s_, p_)).first;
    return it->second;
  }

  const Scenario& s_;
  const Profile* p_;
  std::map<Key, std::pair<PartCost, PartCost>> parts_;
  std::map<std::pair<int64_t, int64_t>, PartCost> fixed_;
};

// Total relative excess over the limits: sum of -slack over the broken ones (0 = all hold).
double excess(const CostEstimate& e, const Limits& limits) {
  return total_violation(limit_slack(e, limits));
}

void check_options(const PlanOptions& o) {
  auto fraction = [](const char* name, double v) {
    if (!(v > 0 && v <= 1))
      throw ConfigError(msg("plan", "{}: expected a fraction in (0, 1], found {}", name, v));
  };
  require_width_granularity(o.width_granularity, "plan");
  if (o.width_steps < 1)
    throw ConfigError(msg("plan", "width_steps: expected >= 1, found {}", o.width_steps));
  fraction("min_width_fraction", o.min_width_fraction);
  fraction("min_depth_fraction", o.min_depth_fraction);
  if (o.max_attention_removed_fraction < 0 || o.max_attention_removed_fraction > 1 ||
      o.max_ffn_removed_fraction < 0 || o.max_ffn_removed_fraction > 1)
    throw ConfigError(msg("plan", "max_attention_removed_fraction {} and max_ffn_removed_fraction "
                                  "{}: expected fractions in [0, 1]",
                          o.max_attention_removed_fraction, o.max_ffn_removed_fraction));
}

// The parent's globals without the verbatim extra fields (copied many times below).
ModelConfig light_copy(const ModelConfig& c) {
  ModelConfig l = c;
  l.extra = json::object();
  return l;
}

// ---------------------------------------------------------------------------------------------
// Uniform shapes.

ModelConfig shape_config(const ModelConfig& parent, const UniformShape& s) {
  const LayerConfig& ref = reference_layer(parent, "plan");
  ModelConfig c = parent;
  c.hidden_size = s.hidden_size;
  LayerConfig l;
  l.num_attention_heads = s.num_attention_heads();
  l.num_key_value_heads = s.num_key_value_heads;
  l.head_dim = ref.head_dim;
  l.intermediate_size = s.intermediate_size;
  c.layers.assign(size_t(s.num_layers), l);
  return c;
}

std::vector<std::string> shape_changes(const UniformShape& p, const UniformShape& s) {
  std::vector<std::string> out;
  if (s.hidden_size != p.hidden_size)
    out.push_back(fmt::format("hidden {} -> {}", p.hidden_size, s.hidden_size));
  if (s.num_key_value_heads != p.num_key_value_heads || s.heads_per_group != p.heads_per_group)
    out.push_back(fmt::format("heads {}/{} -> {}/{} (query/KV)", p.num_attention_heads(),
                              p.num_key_value_heads, s.num_attention_heads(),
                              s.num_key_value_heads));
  if (s.intermediate_size != p.intermediate_size)
    out.push_back(fmt::format("FFN {} -> {}", p.intermediate_size, s.intermediate_size));
  if (s.num_layers != p.num_layers)
    out.push_back(fmt::format("layers {} -> {}", p.num_layers, s.num_layers));
  return out;
}

// `full`, then multiples of the granularity from one step below it, a step being about
// full / width_steps.
std::vector<int64_t> plan_widths(int64_t full, int64_t g, const PlanOptions& o) {
  return stepped_width_ladder(full, g, o.min_width_fraction,
                              full / std::max<int64_t>(1, o.width_steps), FirstRung::one_step_down);
}

UniformSpace uniform_grid(const ModelConfig& parent, const PlanOptions& o) {
  const UniformShape p = uniform_shape_of(parent, "plan");
  UniformSpace g;
  g.hidden_sizes = plan_widths(p.hidden_size, o.width_granularity, o);
  g.ffn_widths = plan_widths(p.intermediate_size, o.width_granularity, o);
  g.kv_groups = count_ladder(p.num_key_value_heads, o.min_width_fraction);
  g.heads_per_group = count_ladder(p.heads_per_group, o.min_width_fraction);
  g.num_layers = count_ladder(p.num_layers, o.min_depth_fraction);
  return g;
}

// For every (D, G, per, F) of the grid, the deepest L that meets the limits (cost grows with
// L, so deeper ones fail and shallower ones are dominated by it). Costs also grow with F, so
// along descending F the deepest feasible L never shrinks: the search for one F starts from the
// top and stops at the previous F's answer, and a shape that fails at the smallest L is skipped
// after one estimate.
std::vector<UniformShape> feasible_shapes(const ModelConfig& light, const UniformSpace& g,
                                          const Limits& limits, MemoCost& memo, int64_t* checked) {
  auto fits = [&](const UniformShape& s) {
    ++*checked;
    return check_limits(memo.estimate(shape_config(light, s)), limits).empty();
  };
  const std::vector<int64_t>& Ls = g.num_layers;
  std::vector<UniformShape> out;
  for (int64_t D : g.hidden_sizes)
    for (int64_t G : g.kv_groups)
      for (int64_t per : g.heads_per_group) {
        size_t stop = Ls.size() - 1;  // index of the deepest L known to fit a wider F
        for (int64_t F : g.ffn_widths) {
          if (!fits({D, G, per, F, Ls.back()})) continue;
          for (size_t i = 0; i <= stop; ++i) {
            const UniformShape s{D, G, per, F, Ls[i]};
            if (i == Ls.size() - 1 || fits(s)) {
              out.push_back(s);
              stop = i;
              break;
            }
          }
        }
      }
  return out;
}

// The feasible shapes no larger feasible shape covers, most parameters first (at most `n`),
// then the most balanced shape and the best shape along each single lever, where not listed.
std::vector<std::pair<UniformShape, std::string>> pick_shapes(
    const ModelConfig& light, const std::vector<UniformShape>& feasible, int64_t n) {
  std::vector<std::pair<int64_t, UniformShape>> ranked;
  for (const UniformShape& s : feasible)
    ranked.emplace_back(shape_config(light, s).num_parameters(), s);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::pair<UniformShape, std::string>> out;
  for (const auto& [params, s] : ranked) {
    if (int64_t(out.size()) >= n) break;
    bool dominated = false;
    for (const auto& o : out) dominated = dominated || covers(o.first, s);
    if (!dominated) out.emplace_back(s, out.empty() ? "most parameters kept" : "alternative");
  }
  const UniformShape p = uniform_shape_of(light, "plan");
  // The most balanced: the largest smallest kept fraction over the five levers (parameters
  // alone favour cutting attention, whose weights are a small share of a layer).
  auto balance = [&](const UniformShape& s) {
    return std::min({double(s.hidden_size) / p.hidden_size,
                     double(s.num_key_value_heads) / p.num_key_value_heads,
                     double(s.heads_per_group) / p.heads_per_group,
                     double(s.intermediate_size) / p.intermediate_size,
                     double(s.num_layers) / p.num_layers});
  };
  const UniformShape* balanced = nullptr;
  for (const auto& [params, s] : ranked)  // most parameters first: ties keep the larger
    if (!balanced || balance(s) > balance(*balanced) + 1e-12) balanced = &s;
  auto listed = [&](const UniformShape& s) {
    for (const auto& o : out)
      if (o.first == s) return true;
    return false;
  };
  if (balanced && !listed(*balanced)) out.emplace_back(*balanced, "most balanced");
  auto only = [&](const UniformShape& s, int lever) {  // differs from the parent in one lever only
    const bool d[5] = {s.hidden_size != p.hidden_size,
                       s.num_key_value_heads != p.num_key_value_heads,
                       s.heads_per_group != p.heads_per_group,
                       s.intermediate_size != p.intermediate_size, s.num_layers != p.num_layers};
    for (int i = 0; i < 5; ++i)
      if (d[i] != (i == lever)) return false;
    return true;
  };
  const char* names[5] = {"hidden size only", "KV heads only", "query heads only",
                          "FFN width only", "depth only"};
  for (int lever = 0; lever < 5; ++lever)
    for (const auto& [params, s] : ranked) {  // most parameters first
      if (!only(s, lever)) continue;
      if (!listed(s)) out.emplace_back(s, names[lever]);
      break;
    }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Per-layer greedy.

enum class MoveKind { ffn_narrow, ffn_remove, kv_drop, q_drop, attention_remove, hidden_narrow };

struct Move {
  MoveKind kind;
  int64_t layer;  // -1 for hidden_narrow
};

class Greedy {
 public:
  // `engine`: the per-layer moves are those its loader builds (engines/*.json "structure"):
  // without per-layer query heads no head is dropped in one layer alone, FFN widths step by its
  // ffn_width_multiple too, removal only where it builds it, the hidden size narrows only where
  // a derived head_dim stays the parent's, and no move leaves a count or width that
  // `tensor_parallel` GPUs cannot shard (admissible()).
  Greedy(const ModelConfig& parent, const Limits& limits, const PlanOptions& o, MemoCost& memo,
         const EngineStructure& engine, int64_t tensor_parallel)
      : parent_(light_copy(parent)), limits_(limits), o_(o), memo_(memo), engine_(engine),
        tp_(tensor_parallel) {
    const LayerConfig& ref = reference_layer(parent, "plan");
    hidden_ladder_ = hidden_sizes_the_engine_loads(
        plan_widths(parent.hidden_size, o.width_granularity, o), parent, engine_);
    ffn_ladder_ = plan_widths(ref.intermediate_size,
                              ffn_width_step(o.width_granularity, engine_, tp_), o);
  }

  /// The smallest architecture the moves can reach: every width and count at its minimum, the
  /// most attentions and FFNs removed that the options allow. Costs only fall along every move,
  /// so when this breaks a limit no sequence of moves can meet it.
  ModelConfig floor() const {
    ModelConfig c = parent_;
    c.hidden_size = hidden_ladder_.back();
    const int64_t L = c.num_layers();
    int64_t attn_left = engine_.attention_removed ? int64_t(o_.max_attention_removed_fraction * L) : 0;
    int64_t ffn_left = engine_.ffn_removed ? int64_t(o_.max_ffn_removed_fraction * L) : 0;
    for (int64_t i = L - 2; i >= 1; --i) {  // the end layers stay
      LayerConfig& l = c.layers[size_t(i)];
      if (l.has_attention() && attn_left-- > 0) l.attention_no_op = true, l.num_attention_heads = l.num_key_value_heads = 0;
      if (l.has_ffn() && ffn_left-- > 0) l.ffn_no_op = true, l.intermediate_size = 0;
    }
    for (LayerConfig& l : c.layers) {
      if (l.has_ffn()) l.intermediate_size = ffn_ladder_.back();
      if (!l.has_attention() || !engine_.per_layer_query_heads) continue;
      const int64_t per = l.num_attention_heads / l.num_key_value_heads;
      l.num_key_value_heads = min_count(l.num_key_value_heads);
      l.num_attention_heads = min_count(per) * l.num_key_value_heads;
    }
    return c;
  }

  /// Runs until every limit holds or no move helps; returns the last architecture.
  ModelConfig run(int64_t* steps) {
    ModelConfig cur = parent_;
    double v = excess(memo_.estimate(cur), limits_);
    while (v > 0) {
      std::optional<ModelConfig> next;
      double best_ratio = 0, best_keep = 0, next_v = v;
      int64_t best_layer = -1;
      for (const Move& m : moves(cur)) {
        ModelConfig cand = apply(cur, m);
        if (!admissible(cand, m)) continue;
        double cv = excess(memo_.estimate(cand), limits_);
        double dp = double(cur.num_parameters() - cand.num_parameters());
        if (dp <= 0 || cv >= v) continue;
        double ratio = (v - cv) / dp, keep = kept_fraction(cur, m);
        bool better = !next || ratio > best_ratio * (1 + 1e-9) ||
                      (ratio >= best_ratio * (1 - 1e-9) &&
                       (keep > best_keep + 1e-12 || (keep >= best_keep - 1e-12 && m.layer > best_layer)));
        if (!better) continue;
        next = std::move(cand);
        best_ratio = ratio, best_keep = keep, best_layer = m.layer, next_v = cv;
      }
      if (!next) break;
      cur = std::move(*next);
      v = next_v;
      ++*steps;
    }
    return cur;
  }

 private:
  // The moved layer keeps counts the engine shards over tp_ GPUs (the ladders already keep the
  // widths on its steps).
  bool admissible(const ModelConfig& c, const Move& m) const {
    if (m.layer < 0) return true;
    const LayerConfig& l = c.layers[size_t(m.layer)];
    return !l.has_attention() ||
           (engine_.shards("num_attention_heads", l.num_attention_heads, tp_) &&
            engine_.shards("num_key_value_heads", l.num_key_value_heads, tp_));
  }

  std::vector<Move> moves(const ModelConfig& c) const {
    std::vector<Move> out;
    const int64_t L = c.num_layers();
    int64_t attn_removed = 0, ffn_removed = 0;
    for (const auto& l : c.layers) {
      attn_removed += !l.has_attention();
      ffn_removed += !l.has_ffn();
    }
    for (int64_t i = 0; i < L; ++i) {
      const LayerConfig& l = c.layers[size_t(i)];
      const LayerConfig& p = parent_.layers[size_t(i)];
      const bool ends = i == 0 || i == L - 1;
      if (l.has_ffn() && next_width(ffn_ladder_, l.intermediate_size) > 0)
        out.push_back({MoveKind::ffn_narrow, i});
      if (l.has_ffn() && !ends && engine_.ffn_removed &&
          ffn_removed + 1 <= int64_t(o_.max_ffn_removed_fraction * L))
        out.push_back({MoveKind::ffn_remove, i});
      if (l.has_attention()) {
        const int64_t per = l.num_attention_heads / l.num_key_value_heads;
        const int64_t per_parent = p.num_attention_heads / p.num_key_value_heads;
        if (engine_.per_layer_query_heads) {  // both drop query heads in this layer alone
          if (l.num_key_value_heads - 1 >= min_count(p.num_key_value_heads))
            out.push_back({MoveKind::kv_drop, i});
          if (per - 1 >= min_count(per_parent)) out.push_back({MoveKind::q_drop, i});
        }
        if (!ends && engine_.attention_removed &&
            attn_removed + 1 <= int64_t(o_.max_attention_removed_fraction * L))
          out.push_back({MoveKind::attention_remove, i});
      }
    }
    if (next_width(hidden_ladder_, c.hidden_size) > 0) out.push_back({MoveKind::hidden_narrow, -1});
    return out;
  }

  ModelConfig apply(const ModelConfig& c, const Move& m) const {
    ModelConfig n = c;
    if (m.kind == MoveKind::hidden_narrow) {
      n.hidden_size = next_width(hidden_ladder_, c.hidden_size);
      return n;
    }
    LayerConfig& l = n.layers[size_t(m.layer)];
    const int64_t per = l.has_attention() ? l.num_attention_heads / l.num_key_value_heads : 0;
    switch (m.kind) {
      case MoveKind::ffn_narrow: l.intermediate_size = next_width(ffn_ladder_, l.intermediate_size); break;
      case MoveKind::ffn_remove: l.ffn_no_op = true, l.intermediate_size = 0; break;
      case MoveKind::kv_drop:
        l.num_key_value_heads -= 1, l.num_attention_heads = per * l.num_key_value_heads;
        break;
      case MoveKind::q_drop: l.num_attention_heads = (per - 1) * l.num_key_value_heads; break;
      case MoveKind::attention_remove:
        l.attention_no_op = true, l.num_attention_heads = l.num_key_value_heads = 0;
        break;
      case MoveKind::hidden_narrow: break;
    }
    return n;
  }

  // How much of the parent the moved structure still keeps (ties go to the least cut one).
  double kept_fraction(const ModelConfig& c, const Move& m) const {
    if (m.kind == MoveKind::hidden_narrow) return double(c.hidden_size) / double(parent_.hidden_size);
    const LayerConfig& l = c.layers[size_t(m.layer)];
    const LayerConfig& p = parent_.layers[size_t(m.layer)];
    auto frac = [](int64_t a, int64_t b) { return b > 0 ? double(a) / double(b) : 0.0; };
    return frac(l.num_attention_heads, p.num_attention_heads) + frac(l.intermediate_size, p.intermediate_size);
  }

  // The next entry below `w` in a descending ladder; 0 when none.
  static int64_t next_width(const std::vector<int64_t>& ladder, int64_t w) {
    for (int64_t x : ladder)
      if (x < w) return x;
    return 0;
  }
  int64_t min_count(int64_t full) const { return smallest_count(full, o_.min_width_fraction); }

  ModelConfig parent_;
  Limits limits_;
  PlanOptions o_;
  MemoCost& memo_;
  EngineStructure engine_;
  int64_t tp_ = 1;
  std::vector<int64_t> hidden_ladder_, ffn_ladder_;
};

std::string layers_text(size_t n) { return fmt::format("{} layer{}", n, n == 1 ? "" : "s"); }

// What a per-layer architecture changed against its parent (same layer count).
std::vector<std::string> layer_changes(const ModelConfig& p, const ModelConfig& c) {
  std::vector<std::string> out;
  if (c.hidden_size != p.hidden_size)
    out.push_back(fmt::format("hidden {} -> {}", p.hidden_size, c.hidden_size));
  std::vector<int64_t> attn_removed, ffn_removed, heads_cut, ffn_cut;
  int64_t min_h = INT64_MAX, min_g = INT64_MAX, min_f = INT64_MAX;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const LayerConfig& l = c.layers[size_t(i)];
    const LayerConfig& q = p.layers[size_t(i)];
    if (q.has_attention() && !l.has_attention()) attn_removed.push_back(i);
    if (q.has_ffn() && !l.has_ffn()) ffn_removed.push_back(i);
    if (l.has_attention() && (l.num_attention_heads != q.num_attention_heads ||
                              l.num_key_value_heads != q.num_key_value_heads)) {
      heads_cut.push_back(i);
      min_h = std::min(min_h, l.num_attention_heads), min_g = std::min(min_g, l.num_key_value_heads);
    }
    if (l.has_ffn() && l.intermediate_size != q.intermediate_size) {
      ffn_cut.push_back(i);
      min_f = std::min(min_f, l.intermediate_size);
    }
  }
  if (!attn_removed.empty())
    out.push_back(fmt::format("attention removed in {} ({})", layers_text(attn_removed.size()),
                              fmt::join(attn_removed, ", ")));
  if (!ffn_removed.empty())
    out.push_back(fmt::format("FFN removed in {} ({})", layers_text(ffn_removed.size()),
                              fmt::join(ffn_removed, ", ")));
  const LayerConfig& ref = reference_layer(p, "plan");
  if (!heads_cut.empty())
    out.push_back(fmt::format("heads cut in {} (down to {}/{} query/KV from {}/{})",
                              layers_text(heads_cut.size()), min_h, min_g, ref.num_attention_heads,
                              ref.num_key_value_heads));
  if (!ffn_cut.empty())
    out.push_back(fmt::format("FFN narrowed in {} (down to {} from {})", layers_text(ffn_cut.size()),
                              min_f, ref.intermediate_size));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Assembling the plan.

}  // namespace

PlanSuggestion verified_suggestion(const std::string& kind, const std::string& label,
                                   const ModelConfig& c, const Plan& plan, const Profile* profile,
                                   std::vector<std::string> changes) {
  PlanSuggestion s;
  s.kind = kind;
  s.label = label;
  s.config = c;
  s.cost = predict(c, plan.scenario, profile);
  s.slack = limit_slack(s.cost, plan.limits);
  s.changes = std::move(changes);
  const std::string broken = check_limits(s.cost, plan.limits);
  AC_CHECK(broken.empty(), "plan suggestion {} ({}) breaks a limit by predict(): {}", describe(c),
           label, broken);
  return s;
}

namespace {

std::vector<std::string> context_warnings(const ModelConfig& c, const Workload& w) {
  std::vector<std::string> out;
  if (w.context_tokens() > c.max_position_embeddings)
    out.push_back(fmt::format("the scenario's context ({} tokens) exceeds the model's "
                              "max_position_embeddings ({}): it was not trained for it",
                              w.context_tokens(), c.max_position_embeddings));
  if (c.sliding_window && *c.sliding_window < w.context_tokens())
    out.push_back(fmt::format("the model attends over a {}-token sliding window; engines that "
                              "honour it keep only that window in the KV cache, the cost model "
                              "counts the whole context (an upper bound); autocompress's own "
                              "forward refuses sequences longer than the window",
                              *c.sliding_window));
  return out;
}

// Per limit: the full model's value and the best any architecture reached (the full model
// included).
std::vector<Reachable> reachable(const Plan& plan, std::vector<CostEstimate> tried) {
  tried.push_back(plan.full);
  const ReachableCost best = best_of(tried);
  std::vector<Reachable> out;
  for (const auto& s : plan.full_slack)
    out.push_back({s.name, s.limit, s.value, reachable_value(best, s.name)});
  return out;
}

// The uniform suggestions (plan.h, 2.): returns the cost of the smallest uniform shape.
CostEstimate add_uniform_suggestions(Plan& plan, const Profile* profile, MemoCost& memo) {
  const ModelConfig& config = plan.config;
  const Scenario& scenario = plan.scenario;
  const ModelConfig light = light_copy(config);
  const UniformSpace grid = uniform_grid(config, plan.options);
  const CostEstimate smallest_cost = memo.estimate(shape_config(light, grid.smallest()));
  std::vector<UniformShape> feasible;  // costs fall along every lever: if the smallest fails, all do
  if (check_limits(smallest_cost, plan.limits).empty())
    feasible = feasible_shapes(light, grid, plan.limits, memo, &plan.uniform_checked);
  // A uniform shape loads as the parent's class, within the engine's tensor-parallel rules.
  feasible.erase(std::remove_if(feasible.begin(), feasible.end(),
                                [&](const UniformShape& sh) {
                                  return !structure_violations(shape_config(light, sh),
                                                               scenario.engine_spec,
                                                               scenario.workload.tensor_parallel)
                                              .empty();
                                }),
                 feasible.end());
  const UniformShape parent = uniform_shape_of(config, "plan");
  for (const auto& [shape, label] : pick_shapes(light, feasible, plan.options.max_uniform))
    plan.uniform.push_back(verified_suggestion("uniform", label, shape_config(config, shape), plan, profile,
                                    shape_changes(parent, shape)));
  return smallest_cost;
}

// The per-layer suggestion (plan.h, 2.): returns the cost of the greedy's last architecture.
CostEstimate add_per_layer_suggestion(Plan& plan, const Profile* profile, MemoCost& memo) {
  const ModelConfig& config = plan.config;
  Greedy search(config, plan.limits, plan.options, memo, plan.scenario.engine_spec.structure,
                plan.scenario.workload.tensor_parallel);
  const ModelConfig floor = search.floor();
  const bool reachable_per_layer = check_limits(memo.estimate(floor), plan.limits).empty();
  const ModelConfig greedy = reachable_per_layer ? search.run(&plan.greedy_steps) : floor;
  const CostEstimate greedy_cost = memo.estimate(greedy);
  if (check_limits(greedy_cost, plan.limits).empty()) {
    ModelConfig out = config;  // the parent's extra fields carried over
    out.hidden_size = greedy.hidden_size;
    out.layers = greedy.layers;
    // The greedy starts at the parent: when only the engine's rules broke, it may stay there.
    if (!structure_violations(out, plan.scenario.engine_spec,
                              plan.scenario.workload.tensor_parallel).empty())
      return greedy_cost;
    plan.per_layer = verified_suggestion("per_layer", "greedy per layer", out, plan, profile,
                              layer_changes(config, out));
  }
  return greedy_cost;
}

}  // namespace

Plan make_plan(const ModelConfig& config, const Scenario& scenario, const Profile* profile,
               const PlanOptions& options, const QualityLoss& quality) {
  check_options(options);
  config.validate("plan");
  Plan plan;
  plan.config = config;
  plan.scenario = scenario;
  plan.options = options;
  plan.full = predict(config, scenario, profile);
  plan.limits = resolve_limits(scenario.limits, plan.full);  // the full model is the teacher
  plan.full_slack = limit_slack(plan.full, plan.limits);
  plan.broken = check_limits(plan.full, plan.limits);
  // The parent passes the engine's loader rules as every suggestion and search result does: a
  // model that meets the limits but that the engine refuses with this workload does not fit.
  plan.engine_violations = structure_violations(config, scenario.engine_spec,
                                                scenario.workload.tensor_parallel);
  if (!plan.engine_violations.empty()) {
    const std::string why = fmt::format(
        "{} cannot load it with tensor_parallel {}: {}", scenario.engine_spec.name,
        scenario.workload.tensor_parallel, fmt::join(plan.engine_violations, "; "));
    plan.broken = plan.broken.empty() ? why : plan.broken + "; " + why;
  }
  plan.warnings = context_warnings(config, scenario.workload);
  for (std::string& w : extrapolation_warnings(profile, config, scenario.name))
    plan.warnings.push_back(std::move(w));
  if (plan.broken.empty()) {
    plan.verdict = "fits";
    return plan;
  }
  if (config.is_hybrid()) {
    add_hybrid_suggestions(plan, profile, quality);
    plan.verdict = plan.levers.empty() && !plan.per_layer ? "no_fit" : "fits_after_changes";
    if (plan.verdict == "no_fit") plan.reachable = reachable(plan, {});
    return plan;
  }
  MemoCost memo(scenario, profile);
  const CostEstimate smallest_uniform = add_uniform_suggestions(plan, profile, memo);
  const CostEstimate last_per_layer = add_per_layer_suggestion(plan, profile, memo);
  plan.verdict = plan.uniform.empty() && !plan.per_layer ? "no_fit" : "fits_after_changes";
  if (plan.verdict == "no_fit") plan.reachable = reachable(plan, {smallest_uniform, last_per_layer});
  return plan;
}

// ---------------------------------------------------------------------------------------------
// Output.

static json slack_json(const std::vector<LimitSlack>& slack) {
  json out = json::array();
  for (const auto& s : slack)
    out.push_back({{"name", s.name}, {"limit", s.limit}, {"value", s.value}, {"slack", s.slack},
                   {"holds", s.holds()}});
  return out;
}

json PlanSuggestion::to_json(const ModelConfig& parent) const {
  return {{"kind", kind},
          {"label", label},
          {"describe", describe(config)},
          {"config", config_to_hf_json(config)},
          {"parameters", config.num_parameters()},
          {"active_parameters", config.num_active_parameters()},
          {"parameter_fraction", double(config.num_parameters()) / double(parent.num_parameters())},
          {"changes", changes},
          {"cost", cost.to_json()},
          {"provenance", cost_provenance(cost.source)},
          {"limits", slack_json(slack)}};
}

json Plan::to_json() const {
  json uni = json::array();
  for (const auto& s : uniform) uni.push_back(s.to_json(config));
  json lev = json::array();
  for (const auto& s : levers) lev.push_back(s.to_json(config));
  json reach = json::array();
  for (const auto& r : reachable)
    reach.push_back({{"name", r.name}, {"limit", r.limit}, {"full", r.full}, {"best", r.best}});
  const Workload& w = scenario.workload;
  json j = {
      {"config", {{"describe", describe(config)}, {"parameters", config.num_parameters()},
                  {"max_position_embeddings", config.max_position_embeddings}}},
      {"scenario", {{"name", scenario.name}, {"device", scenario.device}, {"engine", scenario.engine},
                    {"workload", {{"prompt_tokens", w.prompt_tokens}, {"output_tokens", w.output_tokens},
                                  {"batch_size", w.batch_size}, {"weight_dtype", w.weight_dtype},
                                  {"kv_cache_dtype", w.kv_cache_dtype},
                                  {"tensor_parallel", w.tensor_parallel}}},
                    {"limits_as_written", scenario.limits.to_json()},
                    {"limits", limits.to_json()}}},
      {"full", {{"cost", full.to_json()}, {"provenance", cost_provenance(full.source)},
                {"limits", slack_json(full_slack)}, {"fits", broken.empty()}, {"broken", broken},
                {"engine_loads", engine_violations.empty()},
                {"engine_violations", engine_violations},
                {"engine_rules_source", scenario.engine_spec.structure.source}}},
      {"verdict", verdict},
      {"uniform", uni},
      {"per_layer", per_layer ? per_layer->to_json(config) : json(nullptr)},
      {"levers", lev},
      {"reachable", reach},
      {"warnings", warnings},
      {"search", {{"uniform_shapes_costed", uniform_checked}, {"greedy_steps", greedy_steps},
                  {"width_granularity", options.width_granularity},
                  {"width_steps", options.width_steps},
                  {"min_width_fraction", options.min_width_fraction},
                  {"min_depth_fraction", options.min_depth_fraction}}},
  };
  if (!config_path.empty()) j["config"]["path"] = config_path;
  return j;
}

Plan plan_deployment(const ModelConfig& config, const std::string& config_path,
                     const Scenario& scenario, const Profile* profile, PlanOptions options,
                     const QualityLoss& quality) {
  if (options.width_granularity == 0)  // not given: the device's width step
    options.width_granularity = width_granularity_for(profile, scenario.device_spec);
  Plan plan = make_plan(config, scenario, profile, options, quality);
  plan.config_path = config_path;
  return plan;
}

namespace {

const char* unit_of(const std::string& name) {
  if (name == "ttft_ms" || name == "tpot_ms") return "ms";
  if (name == "peak_memory_bytes") return "GiB";
  return "tokens/s";
}

std::string value_text(const std::string& name, double v) {
  if (name == "peak_memory_bytes") return fmt::format("{:.2f}", v / double(1ll << 30));
  return fmt::format("{:.{}f}", v, v >= 100 ? 0 : v >= 10 ? 1 : 2);
}

std::string metric_label(const std::string& name) {
  if (name == "ttft_ms") return "TTFT";
  if (name == "tpot_ms") return "TPOT";
  if (name == "peak_memory_bytes") return "peak memory";
  return "throughput";
}

// Parameter counts as model cards write them: 8.03 B, 15.2 M, 87.5 K.
std::string params_text(int64_t n) {
  const double v = double(n);
  if (v >= 1e9) return fmt::format("{:.2f} B", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.1f} M", v / 1e6);
  return fmt::format("{:.1f} K", v / 1e3);
}

}  // namespace

std::string Plan::to_text() const {
  const Workload& w = scenario.workload;
  std::string t = fmt::format(
      "{} ({} parameters) on scenario {}: {} / {}, batch {}, prompt {} + output {} tokens, {} "
      "weights, {} KV cache\ncosts {} ({})\n\n",
      describe(config), params_text(config.num_parameters()), scenario.name, scenario.device,
      scenario.engine, w.batch_size, w.prompt_tokens, w.output_tokens, w.weight_dtype,
      w.kv_cache_dtype, cost_provenance(full.source),
      full.source == "roofline" ? "roofline of devices/" + scenario.device + ".json, no profile"
                                : "profile of the device");
  t += fmt::format("  {:<13} {:>10} {:>12} {:>9}\n", "full model", "value", "limit", "slack");
  for (const auto& s : full_slack)
    t += fmt::format("  {:<13} {:>10} {:>3} {:>8} {:>+8.1f}%  {} ({})\n", metric_label(s.name),
                     value_text(s.name, s.value), s.name == "min_throughput_tokens_per_s" ? ">=" : "<=",
                     value_text(s.name, s.limit), 100 * s.slack, s.holds() ? "ok" : "BROKEN",
                     unit_of(s.name));
  for (const char* name : {"ttft_ms", "tpot_ms", "peak_memory_bytes", "min_throughput_tokens_per_s"}) {
    bool limited = false;
    for (const auto& s : full_slack) limited = limited || s.name == name;
    if (limited) continue;
    double v = std::string(name) == "ttft_ms" ? full.ttft_ms : std::string(name) == "tpot_ms" ? full.tpot_ms
               : std::string(name) == "peak_memory_bytes" ? double(full.peak_memory_bytes)
                                                          : full.throughput_tokens_per_s;
    t += fmt::format("  {:<13} {:>10} {:>12} {:>9}  ({})\n", metric_label(name), value_text(name, v),
                     "no limit", "", unit_of(name));
  }
  if (config.is_hybrid()) {  // where the memory goes, and what a token uses
    auto gib = [](int64_t b) { return double(b) / double(1ll << 30); };
    t += fmt::format("  memory {:.2f} GiB = weights {:.2f} + KV cache {:.2f} (attention layers) + "
                     "Mamba-2 state {:.2f} + activations {:.2f} + engine reserve {:.2f}\n",
                     gib(full.peak_memory_bytes), gib(full.weight_bytes), gib(full.kv_cache_bytes),
                     gib(full.state_bytes), gib(full.activation_bytes), gib(full.reserve_bytes));
    t += fmt::format("  active parameters {} a token (of {})\n",
                     params_text(config.num_active_parameters()), params_text(config.num_parameters()));
  }
  if (scenario.limits.has_relative())
    t += fmt::format("  limits as the scenario writes them: {}; a fraction of the teacher is "
                     "resolved against this model's own predicted cost (the model is the "
                     "teacher)\n", scenario.limits.to_json().dump());
  for (const auto& wrn : warnings) t += "  warning: " + wrn + "\n";
  if (!engine_violations.empty())
    t += fmt::format("  {} cannot load it with tensor_parallel {} (engines/{}.json \"structure\", "
                     "from {}):\n    {}\n", scenario.engine_spec.name, w.tensor_parallel,
                     scenario.engine_spec.name, scenario.engine_spec.structure.source,
                     fmt::join(engine_violations, "\n    "));
  if (verdict == "fits") return t + "\nverdict: FITS as it is; no change needed.\n";
  t += fmt::format("\nverdict: DOES NOT FIT as it is ({})\n", broken);
  if (verdict == "no_fit") {
    t += "no structural change in the plan's space meets the limits; best reached per limit:\n";
    for (const auto& r : reachable)
      t += fmt::format("  {:<13} limit {} {}, full model {}, best reached {}\n", metric_label(r.name),
                       value_text(r.name, r.limit), unit_of(r.name), value_text(r.name, r.full),
                       value_text(r.name, r.best));
    return t;
  }
  t += "\ncheapest structural changes that fit (every limit verified by the cost model):\n";
  t += fmt::format("  {:<9} {:<22} {:>8} {:>6} {:>9} {:>8} {:>8} {:>10}  {}\n", "kind", "label",
                   "params", "kept", "TTFT ms", "TPOT ms", "mem GiB", "tokens/s", "changes");
  std::vector<const PlanSuggestion*> all;
  for (const auto& s : uniform) all.push_back(&s);
  if (per_layer) all.push_back(&*per_layer);
  for (const auto& s : levers) all.push_back(&s);
  for (const PlanSuggestion* s : all) {
    std::vector<std::string> changes = s->changes;
    if (config.is_hybrid())  // a token's share of the weights, beside the total
      changes.insert(changes.begin(),
                     fmt::format("active {}", params_text(s->config.num_active_parameters())));
    t += fmt::format("  {:<9} {:<22} {:>8} {:>5.1f}% {:>9.1f} {:>8.2f} {:>8.2f} {:>10.0f}  {}\n",
                     s->kind, s->label, params_text(s->config.num_parameters()),
                     100.0 * double(s->config.num_parameters()) / double(config.num_parameters()),
                     s->cost.ttft_ms, s->cost.tpot_ms,
                     double(s->cost.peak_memory_bytes) / double(1ll << 30),
                     s->cost.throughput_tokens_per_s, fmt::join(changes, "; "));
  }
  if (!per_layer) t += "  (the per-layer greedy found no architecture that fits)\n";
  return t;
}

}  // namespace ac
