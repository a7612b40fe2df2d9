#include "search/refine.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "common/error.h"

namespace ac {

namespace {

// Decision k of a choice: 0 = hidden, 1 + 2l = attention of layer l, 2 + 2l = FFN of layer l.
int64_t num_decisions_of(const SearchSpace& s) { return 1 + 2 * s.num_layers(); }

int64_t& option_of(ArchChoice& c, int64_t k) {
  if (k == 0) return c.hidden;
  const size_t l = size_t((k - 1) / 2);
  return (k - 1) % 2 == 0 ? c.attention[l] : c.ffn[l];
}

int64_t option_at(const ArchChoice& c, int64_t k) {
  return option_of(const_cast<ArchChoice&>(c), k);  // read-only
}

std::string decision_name(int64_t k) {
  if (k == 0) return "hidden";
  return fmt::format("layer {} {}", (k - 1) / 2, (k - 1) % 2 == 0 ? "attention" : "ffn");
}

std::string option_label(const SearchSpace& s, int64_t k, int64_t o) {
  if (k == 0) return std::to_string(s.hidden_sizes[size_t(o)]);
  const int64_t l = (k - 1) / 2;
  return (k - 1) % 2 == 0 ? s.attention_label(l, o) : s.ffn_label(l, o);
}

int64_t per_group(const LayerConfig& a) { return a.num_attention_heads / a.num_key_value_heads; }

// Options of decision k one step larger than `o` (nested): see swap_neighbours.
std::vector<int64_t> larger_options(const SearchSpace& s, int64_t k, int64_t o) {
  if (k == 0) return o > 0 ? std::vector<int64_t>{o - 1} : std::vector<int64_t>{};
  const size_t l = size_t((k - 1) / 2);
  if ((k - 1) % 2 == 1) {
    const auto& ffn = s.ffn[l];
    if (ffn[size_t(o)].has_ffn()) return o > 0 ? std::vector<int64_t>{o - 1} : std::vector<int64_t>{};
    for (int64_t f = int64_t(ffn.size()) - 1; f >= 0; --f)  // removed: smallest kept width
      if (ffn[size_t(f)].has_ffn()) return {f};
    return {};
  }
  const auto& att = s.attention[l];
  const LayerConfig& cur = att[size_t(o)];
  std::vector<int64_t> out;
  if (!cur.has_attention()) {  // removed: smallest kept option
    for (int64_t a = int64_t(att.size()) - 1; a >= 0; --a)
      if (att[size_t(a)].has_attention()) return {a};
    return {};
  }
  for (int64_t a = 0; a < int64_t(att.size()); ++a) {
    const LayerConfig& b = att[size_t(a)];
    if (!b.has_attention() || !attention_nested_smaller(b, cur)) continue;
    if ((b.num_key_value_heads - cur.num_key_value_heads) + (per_group(b) - per_group(cur)) == 1)
      out.push_back(a);
  }
  return out;
}

// Options of decision k nested-smaller than `o`, largest first.
std::vector<int64_t> smaller_options(const SearchSpace& s, int64_t k, int64_t o) {
  std::vector<int64_t> out;
  if (k == 0) {
    for (int64_t d = o + 1; d < int64_t(s.hidden_sizes.size()); ++d) out.push_back(d);
    return out;
  }
  const size_t l = size_t((k - 1) / 2);
  if ((k - 1) % 2 == 1) {
    for (int64_t f = o + 1; f < int64_t(s.ffn[l].size()); ++f) out.push_back(f);
    return out;
  }
  const auto& att = s.attention[l];
  for (int64_t a = 0; a < int64_t(att.size()); ++a)  // the list is by heads kept, descending
    if (attention_nested_smaller(att[size_t(o)], att[size_t(a)])) out.push_back(a);
  return out;
}

bool fits(const SearchSpace& s, const ArchChoice& c, const CostFn& cost, const Limits& limits) {
  return structural_violation(s, c).empty() && check_limits(choice_cost(s, c, cost), limits).empty();
}

void require_fits(const SearchSpace& s, const ArchChoice& c, const CostFn& cost,
                  const Limits& limits, const char* who) {
  target_of(s, c);  // range check (ConfigError)
  const std::string why = structural_violation(s, c);
  const std::string over = why.empty() ? check_limits(choice_cost(s, c, cost), limits) : why;
  if (!over.empty())
    throw ConfigError(msg("search", "{}: the start architecture must meet every limit, found: {}",
                          who, over));
}

double slack_sum(const std::vector<LimitSlack>& slack) {
  double v = 0;
  for (const auto& k : slack) v += k.slack;
  return v;
}

}  // namespace

nlohmann::json RefineStep::to_json() const {
  return {{"move", move}, {"loss", loss}, {"accepted", accepted}};
}

ArchChoice fill_slack(const SearchSpace& s, const ArchChoice& start, const CostFn& cost,
                      const Limits& limits, const RepairOptions& opt) {
  require_fits(s, start, cost, limits, "fill_slack");
  auto lost_of = [&](const ArchChoice& c) { return opt.lost ? opt.lost(c) : importance_lost(s, c); };
  ArchChoice c = start;
  double lost = lost_of(c), slack = slack_sum(limit_slack(choice_cost(s, c, cost), limits));
  for (;;) {
    ArchChoice best;
    double best_score = -1, best_lost = 0, best_slack = 0;
    for (int64_t k = opt.lock_hidden ? 1 : 0; k < num_decisions_of(s); ++k)
      for (int64_t o : larger_options(s, k, option_at(c, k))) {
        ArchChoice n = c;
        option_of(n, k) = o;
        if (!structural_violation(s, n).empty()) continue;
        const CostEstimate e = choice_cost(s, n, cost);
        if (!check_limits(e, limits).empty()) continue;
        const double n_lost = lost_of(n), n_slack = slack_sum(limit_slack(e, limits));
        const double regained = lost - n_lost;
        if (!(regained > 0)) continue;
        const double score = regained / std::max(slack - n_slack, 1e-9);
        if (score > best_score) best = n, best_score = score, best_lost = n_lost, best_slack = n_slack;
      }
    if (best_score < 0) return c;
    c = best, lost = best_lost, slack = best_slack;
  }
}

std::vector<std::pair<ArchChoice, std::string>> swap_neighbours(const SearchSpace& s,
                                                                const ArchChoice& c,
                                                                const CostFn& cost,
                                                                const Limits& limits,
                                                                const ChoicePriorFn& prior,
                                                                bool lock_hidden) {
  std::vector<std::pair<ArchChoice, std::string>> out;
  std::set<std::vector<int64_t>> seen;
  auto key = [&](const ArchChoice& n) {
    std::vector<int64_t> v;
    for (int64_t k = 0; k < num_decisions_of(s); ++k) v.push_back(option_at(n, k));
    return v;
  };
  auto add = [&](const ArchChoice& n, std::string move) {
    if (seen.insert(key(n)).second) out.emplace_back(n, std::move(move));
  };
  const int64_t K = num_decisions_of(s), first = lock_hidden ? 1 : 0;
  for (int64_t i = first; i < K; ++i)
    for (int64_t o : larger_options(s, i, option_at(c, i))) {
      ArchChoice g = c;
      option_of(g, i) = o;
      const std::string grow = fmt::format("{} {} -> {}", decision_name(i),
                                           option_label(s, i, option_at(c, i)),
                                           option_label(s, i, o));
      if (fits(s, g, cost, limits)) {
        add(g, grow);
        continue;
      }
      for (int64_t j = first; j < K; ++j) {
        if (j == i) continue;
        for (int64_t q : smaller_options(s, j, option_of(g, j))) {
          ArchChoice n = g;
          option_of(n, j) = q;
          if (!fits(s, n, cost, limits)) continue;
          add(n, fmt::format("{}; {} {} -> {}", grow, decision_name(j),
                             option_label(s, j, option_of(g, j)), option_label(s, j, q)));
          break;  // the largest that fits
        }
      }
    }
  std::vector<double> score;
  for (const auto& n : out) score.push_back(prior ? prior(n.first) : -importance_lost(s, n.first));
  std::vector<size_t> order(out.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
  std::vector<std::pair<ArchChoice, std::string>> sorted;
  for (size_t i : order) sorted.push_back(out[i]);
  return sorted;
}

RefineResult refine_choice(const SearchSpace& s, const ArchChoice& start, double start_loss,
                           const CostFn& cost, const Limits& limits, const ChoiceLossFn& loss,
                           const ChoicePriorFn& prior, const RefineOptions& opt) {
  require_fits(s, start, cost, limits, "refine_choice");
  RefineResult r;
  r.choice = start;
  r.loss = start_loss;
  std::set<std::vector<int64_t>> evaluated;  // never pay twice for the same architecture
  auto key = [&](const ArchChoice& n) {
    std::vector<int64_t> v;
    for (int64_t k = 0; k < num_decisions_of(s); ++k) v.push_back(option_at(n, k));
    return v;
  };
  evaluated.insert(key(start));
  bool improved = true;
  while (improved && r.evaluations < opt.max_evaluations) {
    improved = false;
    for (const auto& [n, move] : swap_neighbours(s, r.choice, cost, limits, prior, opt.lock_hidden)) {
      if (r.evaluations >= opt.max_evaluations) break;
      if (!evaluated.insert(key(n)).second) continue;
      const double l = loss(n);
      ++r.evaluations;
      RefineStep step{move, l, l < r.loss};
      r.steps.push_back(step);
      if (step.accepted) {
        r.choice = n, r.loss = l, improved = true;
        break;
      }
    }
  }
  return r;
}

}  // namespace ac
