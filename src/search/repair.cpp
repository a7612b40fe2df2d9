#include "search/repair.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>

#include "common/error.h"
#include "prune/depth.h"

namespace ac {

bool attention_nested_smaller(const LayerConfig& a, const LayerConfig& b) {
  if (!b.has_attention()) return a.has_attention();
  if (!a.has_attention()) return false;
  const int64_t per_a = a.num_attention_heads / a.num_key_value_heads;
  const int64_t per_b = b.num_attention_heads / b.num_key_value_heads;
  return b.num_key_value_heads <= a.num_key_value_heads && per_b <= per_a &&
         (b.num_key_value_heads < a.num_key_value_heads || per_b < per_a);
}

namespace {

// Layer indices by block influence, highest first (ties: lower index first).
std::vector<int64_t> by_influence(const SearchSpace& s) {
  std::vector<int64_t> order(size_t(s.num_layers()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return s.block_influence[size_t(a)] > s.block_influence[size_t(b)];
  });
  return order;
}

int64_t smallest_kept(const std::vector<LayerConfig>& options, bool attention) {
  for (int64_t i = int64_t(options.size()) - 1; i >= 0; --i)
    if (attention ? options[size_t(i)].has_attention() : options[size_t(i)].has_ffn()) return i;
  return -1;
}

int64_t removed_option(const std::vector<LayerConfig>& options, bool attention) {
  for (int64_t i = 0; i < int64_t(options.size()); ++i)
    if (!(attention ? options[size_t(i)].has_attention() : options[size_t(i)].has_ffn())) return i;
  return -1;
}

// The smallest states of one layer: block removed, smallest attention alone, smallest FFN
// alone, both at their smallest (those the space has; duplicates removed).
struct LayerState {
  int64_t attention = 0, ffn = 0;
  bool attention_kept = false, removed = false;
};
std::vector<LayerState> smallest_states(const SearchSpace& s, int64_t l) {
  const auto& att = s.attention[size_t(l)];
  const auto& ffn = s.ffn[size_t(l)];
  const int64_t a_min = smallest_kept(att, true), a_rem = removed_option(att, true);
  const int64_t f_min = smallest_kept(ffn, false), f_rem = removed_option(ffn, false);
  const LayerConfig& p = s.parent.layers[size_t(l)];
  std::vector<std::pair<int64_t, int64_t>> pairs{{a_rem, f_rem}, {a_min, f_rem}, {a_rem, f_min},
                                                 {a_min, f_min}};
  std::vector<LayerState> out;
  for (auto [a, f] : pairs) {
    if (a < 0 || f < 0) continue;
    LayerState st{a, f, att[size_t(a)].has_attention(), false};
    st.removed = (p.has_attention() || p.has_ffn()) && !st.attention_kept && !ffn[size_t(f)].has_ffn();
    bool dup = false;
    for (const auto& o : out) dup |= o.attention == a && o.ffn == f;
    if (!dup) out.push_back(st);
  }
  return out;
}

// The structural fix-up of repair_architecture; returns what it changed.
std::string fix_structure(const SearchSpace& s, ArchChoice& c) {
  std::vector<std::string> changes;
  for (int64_t l : by_influence(s)) {
    const std::string why = structural_violation(s, c);
    if (why.empty()) break;
    const auto& att = s.attention[size_t(l)];
    const auto& ffn = s.ffn[size_t(l)];
    const bool has_att = att[size_t(c.attention[size_t(l)])].has_attention();
    const bool has_ffn = ffn[size_t(c.ffn[size_t(l)])].has_ffn();
    if (why.find("no layer keeps") != std::string::npos) {
      int64_t a = smallest_kept(att, true);
      if (a < 0) continue;
      c.attention[size_t(l)] = a;
      changes.push_back(fmt::format("layer {} attention restored as {}", l, s.attention_label(l, a)));
    } else if (!has_att && !has_ffn) {
      int64_t f = smallest_kept(ffn, false);
      if (f < 0) continue;
      c.ffn[size_t(l)] = f;
      changes.push_back(fmt::format("layer {} FFN restored at width {}", l, s.ffn_label(l, f)));
    }
  }
  const std::string left = structural_violation(s, c);
  if (!left.empty())
    throw InternalError(msg("search", "the structural fix-up left: {}", left));
  return fmt::format("{}", fmt::join(changes, "; "));
}

// Every choice one move away that is nested-smaller in one decision and structurally valid.
struct Move {
  ArchChoice choice;
  std::string decision, from, to;
};
std::vector<Move> moves_from(const SearchSpace& s, const ArchChoice& c, bool lock_hidden) {
  std::vector<Move> out;
  auto add = [&](ArchChoice n, std::string decision, std::string from, std::string to) {
    if (structural_violation(s, n).empty())
      out.push_back({std::move(n), std::move(decision), std::move(from), std::move(to)});
  };
  for (int64_t d = c.hidden + 1; d < int64_t(s.hidden_sizes.size()) && !lock_hidden; ++d) {
    ArchChoice n = c;
    n.hidden = d;
    add(n, "hidden", std::to_string(s.hidden_sizes[size_t(c.hidden)]),
        std::to_string(s.hidden_sizes[size_t(d)]));
  }
  for (int64_t l = 0; l < s.num_layers(); ++l) {
    const auto& att = s.attention[size_t(l)];
    const int64_t a0 = c.attention[size_t(l)];
    for (int64_t a = 0; a < int64_t(att.size()); ++a) {
      if (!attention_nested_smaller(att[size_t(a0)], att[size_t(a)])) continue;
      ArchChoice n = c;
      n.attention[size_t(l)] = a;
      add(n, fmt::format("layer {} attention", l), s.attention_label(l, a0), s.attention_label(l, a));
    }
    const int64_t f0 = c.ffn[size_t(l)];
    for (int64_t f = f0 + 1; f < int64_t(s.ffn[size_t(l)].size()); ++f) {
      ArchChoice n = c;
      n.ffn[size_t(l)] = f;
      add(n, fmt::format("layer {} ffn", l), s.ffn_label(l, f0), s.ffn_label(l, f));
    }
  }
  return out;
}

// Total violation sum_k max(0, -slack_k).
double violation(const std::vector<LimitSlack>& slack) {
  double v = 0;
  for (const auto& k : slack) v += std::max(0.0, -k.slack);
  return v;
}

// Lateral moves for when no nested move helps: one layer set to one of its smallest states.
std::vector<Move> lateral_moves(const SearchSpace& s, const ArchChoice& c) {
  std::vector<Move> out;
  for (int64_t l = 0; l < s.num_layers(); ++l)
    for (const LayerState& st : smallest_states(s, l)) {
      ArchChoice n = c;
      n.attention[size_t(l)] = st.attention;
      n.ffn[size_t(l)] = st.ffn;
      if (n == c || !structural_violation(s, n).empty()) continue;
      out.push_back({n, fmt::format("layer {}", l),
                     s.attention_label(l, c.attention[size_t(l)]) + " + FFN " + s.ffn_label(l, c.ffn[size_t(l)]),
                     s.attention_label(l, st.attention) + " + FFN " + s.ffn_label(l, st.ffn)});
    }
  return out;
}

// Sum over the limits broken in `before` of the slack gained in `after`.
double slack_gained(const std::vector<LimitSlack>& before, const std::vector<LimitSlack>& after) {
  double gained = 0;
  for (size_t k = 0; k < before.size(); ++k)
    if (!before[k].holds()) gained += after[k].slack - before[k].slack;
  return gained;
}

}  // namespace

CostEstimate choice_cost(const SearchSpace& s, const ArchChoice& c, const CostFn& cost) {
  return cost(drop_removed_blocks(target_of(s, c)));
}

ReachableCost smallest_reachable(const SearchSpace& s, const CostFn& cost) {
  const ArchChoice base = smallest_choice(s);
  const CostEstimate base_cost = choice_cost(s, base, cost);
  const int64_t L = s.num_layers(), R = s.max_blocks_removed;
  // The four additive metrics of an estimate.
  auto metrics = [](const CostEstimate& e) {
    return std::array<double, 4>{e.ttft_ms, e.tpot_ms, double(e.weight_bytes + e.kv_cache_bytes),
                                 1.0 / std::max(e.throughput_tokens_per_s, 1e-300)};
  };
  const std::array<double, 4> m0 = metrics(base_cost);
  const double kInf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<LayerState>> states(static_cast<size_t>(L));
  // delta[l][j][k]: metric k of base with layer l in state j, minus base's.
  std::vector<std::vector<std::array<double, 4>>> delta(static_cast<size_t>(L));
  for (int64_t l = 0; l < L; ++l) {
    states[size_t(l)] = smallest_states(s, l);
    for (const LayerState& st : states[size_t(l)]) {
      ArchChoice c = base;
      c.attention[size_t(l)] = st.attention;
      c.ffn[size_t(l)] = st.ffn;
      std::array<double, 4> d;
      d.fill(kInf);
      try {
        std::array<double, 4> m = metrics(choice_cost(s, c, cost));
        for (int k = 0; k < 4; ++k) d[size_t(k)] = m[size_t(k)] - m0[size_t(k)];
      } catch (const ConfigError&) {  // every block removed: not an architecture
      }
      delta[size_t(l)].push_back(d);
    }
  }
  const bool need_attention =
      std::any_of(s.parent.layers.begin(), s.parent.layers.end(),
                  [](const LayerConfig& p) { return p.has_attention(); });
  ReachableCost out;
  std::vector<CostEstimate> seen{base_cost};
  for (int k = 0; k < 4; ++k) {
    // dp[l + 1][r][a]: least sum over layers < l + 1 with r blocks removed and a = any attention.
    std::vector<std::vector<std::array<double, 2>>> dp(
        size_t(L + 1), std::vector<std::array<double, 2>>(size_t(R + 1), {kInf, kInf}));
    std::vector<std::vector<std::array<int64_t, 2>>> from(
        size_t(L + 1), std::vector<std::array<int64_t, 2>>(size_t(R + 1), {-1, -1}));
    dp[0][0][0] = 0;
    for (int64_t l = 0; l < L; ++l)
      for (int64_t r = 0; r <= R; ++r)
        for (int a = 0; a < 2; ++a) {
          if (dp[size_t(l)][size_t(r)][size_t(a)] == kInf) continue;
          for (size_t j = 0; j < states[size_t(l)].size(); ++j) {
            const LayerState& st = states[size_t(l)][j];
            const int64_t r2 = r + st.removed;
            const int a2 = a | int(st.attention_kept);
            const double v = dp[size_t(l)][size_t(r)][size_t(a)] + delta[size_t(l)][j][size_t(k)];
            if (r2 > R || !(v < dp[size_t(l + 1)][size_t(r2)][size_t(a2)])) continue;
            dp[size_t(l + 1)][size_t(r2)][size_t(a2)] = v;
            from[size_t(l + 1)][size_t(r2)][size_t(a2)] = int64_t(j) * 4 + r * 2 + a;
          }
        }
    int64_t best_r = -1, best_a = need_attention ? 1 : 0;
    for (int64_t r = 0; r <= R; ++r)
      for (int a = best_a; a < 2; ++a)
        if (dp[size_t(L)][size_t(r)][size_t(a)] < kInf &&
            (best_r < 0 || dp[size_t(L)][size_t(r)][size_t(a)] < dp[size_t(L)][size_t(best_r)][size_t(best_a)]))
          best_r = r, best_a = a;
    ArchChoice w = base;
    if (best_r >= 0) {
      int64_t r = best_r, a = best_a;
      for (int64_t l = L; l > 0; --l) {
        const int64_t f = from[size_t(l)][size_t(r)][size_t(a)];
        const LayerState& st = states[size_t(l - 1)][size_t(f / 4)];
        w.attention[size_t(l - 1)] = st.attention;
        w.ffn[size_t(l - 1)] = st.ffn;
        r = (f % 4) / 2, a = f % 2;
      }
    }
    if (!structural_violation(s, w).empty()) w = base;
    out.witnesses.push_back(w);
    seen.push_back(choice_cost(s, w, cost));
  }
  out.ttft_ms = out.tpot_ms = kInf;
  out.peak_memory_bytes = std::numeric_limits<int64_t>::max();
  for (const CostEstimate& e : seen) {
    out.ttft_ms = std::min(out.ttft_ms, e.ttft_ms);
    out.tpot_ms = std::min(out.tpot_ms, e.tpot_ms);
    out.peak_memory_bytes = std::min(out.peak_memory_bytes, e.peak_memory_bytes);
    out.throughput_tokens_per_s = std::max(out.throughput_tokens_per_s, e.throughput_tokens_per_s);
  }
  return out;
}

std::string smallest_reachable_message(const ReachableCost& e, const Limits& limits) {
  std::vector<std::string> parts;
  if (limits.ttft_ms)
    parts.push_back(fmt::format("TTFT limit {:.6g} ms, smallest reachable {:.6g} ms",
                                *limits.ttft_ms, e.ttft_ms));
  if (limits.tpot_ms)
    parts.push_back(fmt::format("TPOT limit {:.6g} ms, smallest reachable {:.6g} ms",
                                *limits.tpot_ms, e.tpot_ms));
  if (limits.peak_memory_bytes)
    parts.push_back(fmt::format("memory limit {} bytes, smallest reachable {} bytes",
                                *limits.peak_memory_bytes, e.peak_memory_bytes));
  if (limits.min_throughput_tokens_per_s)
    parts.push_back(fmt::format("throughput limit {:.6g} tokens/s, largest reachable {:.6g} tokens/s",
                                *limits.min_throughput_tokens_per_s, e.throughput_tokens_per_s));
  return fmt::format("{}", fmt::join(parts, "; "));
}

void check_reachable(const SearchSpace& s, const ReachableCost& r, const Limits& limits) {
  const bool broken = (limits.ttft_ms && r.ttft_ms > *limits.ttft_ms) ||
                      (limits.tpot_ms && r.tpot_ms > *limits.tpot_ms) ||
                      (limits.peak_memory_bytes && r.peak_memory_bytes > *limits.peak_memory_bytes) ||
                      (limits.min_throughput_tokens_per_s &&
                       r.throughput_tokens_per_s < *limits.min_throughput_tokens_per_s);
  if (broken)
    throw InfeasibleError(fmt::format(
        "[search] no architecture meets the limits of the scenario (with the safety margin): {} "
        "(hidden sizes down to {}, widths down to {:.0f}% of the parent's, at most {} blocks "
        "removed)",
        smallest_reachable_message(r, limits), s.hidden_sizes.back(),
        100 * double(s.hidden_sizes.back()) / double(s.parent.hidden_size), s.max_blocks_removed));
}

nlohmann::json RepairStep::to_json() const {
  return {{"decision", decision}, {"from", from},  {"to", to},
          {"saved", saved},       {"lost", lost},  {"violation", violation}};
}

RepairResult repair_architecture(const SearchSpace& s, const ArchChoice& start, const CostFn& cost,
                                 const Limits& limits) {
  return repair_architecture(s, start, cost, limits, RepairOptions{});
}

RepairResult repair_architecture(const SearchSpace& s, const ArchChoice& start, const CostFn& cost,
                                 const Limits& limits, const RepairOptions& opt) {
  auto lost_of = [&](const ArchChoice& c) { return opt.lost ? opt.lost(c) : importance_lost(s, c); };
  RepairResult r;
  r.choice = start;
  target_of(s, r.choice);  // range check (ConfigError)
  r.fixed_structure = fix_structure(s, r.choice);
  r.cost = choice_cost(s, r.choice, cost);
  std::vector<LimitSlack> slack = limit_slack(r.cost, limits);  // ConfigError on relative limits
  double lost = lost_of(r.choice);
  while (!check_limits(r.cost, limits).empty()) {
    const Move* best = nullptr;
    double best_score = 0, best_saved = 0;
    CostEstimate best_cost;
    std::vector<Move> moves = moves_from(s, r.choice, opt.lock_hidden);
    for (const Move& m : moves) {
      CostEstimate e = choice_cost(s, m.choice, cost);
      // Only the part of the saving that mends a broken limit counts (no credit for overshoot).
      const double saved = violation(slack) - violation(limit_slack(e, limits));
      if (!(saved > 0)) continue;
      const double score = saved / std::max(lost_of(m.choice) - lost, 1e-9);
      if (!best || score > best_score || (score == best_score && saved > best_saved)) {
        best = &m, best_score = score, best_saved = saved, best_cost = e;
      }
    }
    std::vector<Move> lateral;
    if (!best) {  // no nested move helps: lateral moves that lower the total violation
      const double v0 = violation(slack);
      lateral = lateral_moves(s, r.choice);
      double best_drop = 0;
      for (const Move& m : lateral) {
        CostEstimate e = choice_cost(s, m.choice, cost);
        const double drop = v0 - violation(limit_slack(e, limits));
        if (drop > 1e-12 * std::max(1.0, v0) && drop > best_drop)
          best = &m, best_drop = drop, best_saved = slack_gained(slack, limit_slack(e, limits)),
          best_cost = e;
      }
    }
    if (!best)
      throw InfeasibleError(fmt::format(
          "[search] the repair found no move that mends the limits from {} ({}): {}",
          describe(drop_removed_blocks(target_of(s, r.choice))), check_limits(r.cost, limits),
          smallest_reachable_message(smallest_reachable(s, cost), limits)));
    RepairStep step{best->decision, best->from, best->to, best_saved, 0, ""};
    const double new_lost = lost_of(best->choice);
    step.lost = new_lost - lost;
    lost = new_lost;
    r.choice = best->choice;
    r.cost = best_cost;
    slack = limit_slack(r.cost, limits);
    step.violation = check_limits(r.cost, limits);
    r.steps.push_back(step);
  }
  r.target = target_of(s, r.choice);
  r.config = drop_removed_blocks(r.target);
  return r;
}

}  // namespace ac
