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
      int64_t a = smallest_kept_option(att, true);
      if (a < 0) continue;
      c.attention[size_t(l)] = a;
      changes.push_back(fmt::format("layer {} attention restored as {}", l, s.attention_label(l, a)));
    } else if (!has_att && !has_ffn) {
      int64_t f = smallest_kept_option(ffn, false);
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
      const double saved = total_violation(slack) - total_violation(limit_slack(e, limits));
      if (!(saved > 0)) continue;
      const double score = saved / std::max(lost_of(m.choice) - lost, 1e-9);
      if (!best || score > best_score || (score == best_score && saved > best_saved)) {
        best = &m, best_score = score, best_saved = saved, best_cost = e;
      }
    }
    std::vector<Move> lateral;
    if (!best) {  // no nested move helps: lateral moves that lower the total violation
      const double v0 = total_violation(slack);
      lateral = lateral_moves(s, r.choice);
      double best_drop = 0;
      for (const Move& m : lateral) {
        CostEstimate e = choice_cost(s, m.choice, cost);
        const double drop = v0 - total_violation(limit_slack(e, limits));
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
