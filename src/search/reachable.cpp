#include "search/reachable.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>

#include "common/error.h"
#include "common/units.h"

namespace ac {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
using Metrics = std::array<double, 4>;  // TTFT, TPOT, weight + KV bytes, 1 / throughput

// The four additive metrics of an estimate.
Metrics additive_metrics(const CostEstimate& e) {
  return {e.ttft_ms, e.tpot_ms, double(e.weight_bytes + e.kv_cache_bytes),
          1.0 / std::max(e.throughput_tokens_per_s, 1e-300)};
}

// delta[l][j][k]: metric k of `base` with layer l in states[l][j], minus base's (+inf where
// that leaves no architecture).
std::vector<std::vector<Metrics>> layer_deltas(const SearchSpace& s, const ArchChoice& base,
                                               const CostEstimate& base_cost,
                                               const std::vector<std::vector<LayerState>>& states,
                                               const CostFn& cost) {
  const Metrics m0 = additive_metrics(base_cost);
  std::vector<std::vector<Metrics>> delta(states.size());
  for (size_t l = 0; l < states.size(); ++l)
    for (const LayerState& st : states[l]) {
      ArchChoice c = base;
      c.attention[l] = st.attention;
      c.ffn[l] = st.ffn;
      Metrics d;
      d.fill(kInf);
      try {
        const Metrics m = additive_metrics(choice_cost(s, c, cost));
        for (size_t k = 0; k < 4; ++k) d[k] = m[k] - m0[k];
      } catch (const ConfigError&) {  // every block removed: not an architecture
      }
      delta[l].push_back(d);
    }
  return delta;
}

// The choice of least sum of metric k over the layers, at most s.max_blocks_removed blocks
// removed and (when the parent has attention) one attention kept; `base` when none.
ArchChoice least_of_metric(const SearchSpace& s, const ArchChoice& base,
                           const std::vector<std::vector<LayerState>>& states,
                           const std::vector<std::vector<Metrics>>& delta, size_t k) {
  const int64_t L = s.num_layers(), R = s.max_blocks_removed;
  // dp[l][r][a]: least sum over layers < l with r blocks removed and a = any attention kept;
  // from[l][r][a] = j * 4 + r_prev * 2 + a_prev, how it was reached.
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
          const double v = dp[size_t(l)][size_t(r)][size_t(a)] + delta[size_t(l)][j][k];
          if (r2 > R || !(v < dp[size_t(l + 1)][size_t(r2)][size_t(a2)])) continue;
          dp[size_t(l + 1)][size_t(r2)][size_t(a2)] = v;
          from[size_t(l + 1)][size_t(r2)][size_t(a2)] = int64_t(j) * 4 + r * 2 + a;
        }
      }
  const bool need_attention =
      std::any_of(s.parent.layers.begin(), s.parent.layers.end(),
                  [](const LayerConfig& p) { return p.has_attention(); });
  int64_t best_r = -1, best_a = need_attention ? 1 : 0;
  const auto& last = dp[size_t(L)];
  for (int64_t r = 0; r <= R; ++r)
    for (int a = int(best_a); a < 2; ++a)
      if (last[size_t(r)][size_t(a)] < kInf &&
          (best_r < 0 || last[size_t(r)][size_t(a)] < last[size_t(best_r)][size_t(best_a)]))
        best_r = r, best_a = a;
  ArchChoice w = base;
  if (best_r < 0) return w;
  for (int64_t l = L, r = best_r, a = best_a; l > 0; --l) {  // walk `from` back to layer 0
    const int64_t f = from[size_t(l)][size_t(r)][size_t(a)];
    const LayerState& st = states[size_t(l - 1)][size_t(f / 4)];
    w.attention[size_t(l - 1)] = st.attention;
    w.ffn[size_t(l - 1)] = st.ffn;
    r = (f % 4) / 2, a = f % 2;
  }
  return w;
}

}  // namespace

ReachableCost best_of(const std::vector<CostEstimate>& estimates) {
  ReachableCost out;
  out.ttft_ms = out.tpot_ms = kInf;
  out.peak_memory_bytes = std::numeric_limits<int64_t>::max();
  for (const CostEstimate& e : estimates) {
    out.ttft_ms = std::min(out.ttft_ms, e.ttft_ms);
    out.tpot_ms = std::min(out.tpot_ms, e.tpot_ms);
    out.peak_memory_bytes = std::min(out.peak_memory_bytes, e.peak_memory_bytes);
    out.throughput_tokens_per_s = std::max(out.throughput_tokens_per_s, e.throughput_tokens_per_s);
  }
  return out;
}

double reachable_value(const ReachableCost& r, const std::string& name) {
  if (name == "ttft_ms") return r.ttft_ms;
  if (name == "tpot_ms") return r.tpot_ms;
  if (name == "peak_memory_bytes") return double(r.peak_memory_bytes);
  if (name == "min_throughput_tokens_per_s") return r.throughput_tokens_per_s;
  throw ConfigError(msg("search", "unknown limit '{}'", name));
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
    parts.push_back(fmt::format("memory limit {}, smallest reachable {}",
                                bytes_text(double(*limits.peak_memory_bytes)),
                                bytes_text(double(e.peak_memory_bytes))));
  if (limits.min_throughput_tokens_per_s)
    parts.push_back(fmt::format("throughput limit {:.6g} tokens/s, largest reachable {:.6g} tokens/s",
                                *limits.min_throughput_tokens_per_s, e.throughput_tokens_per_s));
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::vector<LayerState> smallest_states(const SearchSpace& s, int64_t l) {
  const auto& att = s.attention[size_t(l)];
  const auto& ffn = s.ffn[size_t(l)];
  const int64_t a_min = smallest_kept_option(att, true), a_rem = removed_option(att, true);
  const int64_t f_min = smallest_kept_option(ffn, false), f_rem = removed_option(ffn, false);
  const LayerConfig& p = s.parent.layers[size_t(l)];
  const std::pair<int64_t, int64_t> pairs[] = {{a_rem, f_rem}, {a_min, f_rem}, {a_rem, f_min},
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

ReachableCost smallest_reachable(const SearchSpace& s, const CostFn& cost) {
  const ArchChoice base = smallest_choice(s);
  const CostEstimate base_cost = choice_cost(s, base, cost);
  std::vector<std::vector<LayerState>> states;
  for (int64_t l = 0; l < s.num_layers(); ++l) states.push_back(smallest_states(s, l));
  const auto delta = layer_deltas(s, base, base_cost, states, cost);
  std::vector<CostEstimate> seen{base_cost};
  std::vector<ArchChoice> witnesses;
  for (size_t k = 0; k < 4; ++k) {
    ArchChoice w = least_of_metric(s, base, states, delta, k);
    if (!structural_violation(s, w).empty()) w = base;
    witnesses.push_back(w);
    seen.push_back(choice_cost(s, w, cost));
  }
  ReachableCost out = best_of(seen);
  out.witnesses = std::move(witnesses);
  return out;
}

std::string search_space_summary(const SearchSpace& s) {
  std::vector<std::string> kept;
  for (int64_t D : s.hidden_sizes) kept.push_back(std::to_string(D));
  std::string hidden = fmt::format("hidden sizes {}", fmt::join(kept, ", "));
  if (!s.widths_left_out.empty())
    hidden += fmt::format(" ({} left out: the profile moved there by more than twice the safety "
                          "margin with one of its passes left out; profile again with nothing "
                          "else running)",
                          fmt::join(s.widths_left_out, ", "));
  // The narrowest kept query-head count and FFN width of any layer, against that layer's parent.
  double heads = 1, ffn = 1;
  for (int64_t l = 0; l < s.num_layers(); ++l) {
    const LayerConfig& p = s.parent.layers[size_t(l)];
    for (const LayerConfig& o : s.attention[size_t(l)])
      if (o.has_attention() && p.num_attention_heads > 0)
        heads = std::min(heads, double(o.num_attention_heads) / double(p.num_attention_heads));
    for (const LayerConfig& o : s.ffn[size_t(l)])
      if (o.has_ffn() && p.intermediate_size > 0)
        ffn = std::min(ffn, double(o.intermediate_size) / double(p.intermediate_size));
  }
  return fmt::format("{}; query heads down to {:.0f}% and FFN widths down to {:.0f}% of the "
                     "parent's; at most {} of {} layers removed whole (--max-removed-layers)",
                     hidden, 100 * heads, 100 * ffn, s.max_blocks_removed, s.num_layers());
}

void check_reachable(const SearchSpace& s, const ReachableCost& r, const Limits& limits) {
  const bool broken = (limits.ttft_ms && r.ttft_ms > *limits.ttft_ms) ||
                      (limits.tpot_ms && r.tpot_ms > *limits.tpot_ms) ||
                      (limits.peak_memory_bytes && r.peak_memory_bytes > *limits.peak_memory_bytes) ||
                      (limits.min_throughput_tokens_per_s &&
                       r.throughput_tokens_per_s < *limits.min_throughput_tokens_per_s);
  if (broken)
    throw InfeasibleError(fmt::format(
        "[search] no architecture meets the limits of the scenario (with the safety margin): {}. "
        "The space searched: {}. Widen the space, loosen the limit or choose a faster deployment",
        smallest_reachable_message(r, limits), search_space_summary(s)));
}

}  // namespace ac
