#include "search/plots.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "common/svg.h"

namespace ac {

namespace {

struct Series {
  std::string name;
  std::vector<double> y;
  std::string dash;
};

// One line chart in the box (x0, y0, w, h): every series over x = step, a dashed reference
// line at `ref` when finite, the y range on the left, the legend along the top.
void line_panel(SvgWriter& svg, double x0, double y0, double w, double h, const std::string& title,
                const std::vector<double>& x, const std::vector<Series>& series,
                double ref = NAN) {
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& s : series)
    for (double v : s.y)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (std::isfinite(ref)) lo = std::min(lo, ref), hi = std::max(hi, ref);
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) hi = lo + std::max(1e-9, std::fabs(lo) * 0.1 + 1e-9);
  const double pad = 0.05 * (hi - lo);
  lo -= pad, hi += pad;
  const double xmax = x.empty() ? 1.0 : std::max(1.0, x.back());
  auto px = [&](double v) { return x0 + w * v / xmax; };
  auto py = [&](double v) { return y0 + h - h * (v - lo) / (hi - lo); };

  svg.rect(x0, y0, w, h, "#f7f7f7");
  svg.line(x0, y0 + h, x0 + w, y0 + h, "#888");
  svg.line(x0, y0, x0, y0 + h, "#888");
  svg.text(x0, y0 - 6, title, 12, "start", "#222");
  for (double v : {lo + pad, (lo + hi) / 2, hi - pad}) {
    svg.line(x0 - 3, py(v), x0, py(v), "#888");
    svg.text(x0 - 5, py(v) + 4, short_number(v), 9, "end", "#555");
  }
  svg.text(x0 + w, y0 + h + 12, fmt::format("step {}", short_number(xmax)), 9, "end", "#555");
  if (std::isfinite(ref)) svg.line(x0, py(ref), x0 + w, py(ref), "#444", 1.0, "4 3");
  double lx = x0 + w;
  for (size_t i = series.size(); i-- > 0;) {
    const Series& s = series[i];
    std::vector<double> xs, ys;
    for (size_t k = 0; k < s.y.size() && k < x.size(); ++k)
      if (std::isfinite(s.y[k])) xs.push_back(px(x[k])), ys.push_back(py(s.y[k]));
    svg.polyline(xs, ys, palette(i), 1.5, s.dash);
    lx -= 7.0 * double(s.name.size()) + 22;
    svg.line(lx, y0 - 10, lx + 12, y0 - 10, palette(i), 2, s.dash);
    svg.text(lx + 15, y0 - 6, s.name, 10, "start", "#222");
  }
}

}  // namespace

std::string widths_svg(const ModelConfig& parent, const ModelConfig& target, const std::string& title) {
  if (parent.layers.size() != target.layers.size())
    throw ConfigError(msg("plots", "parent has {} layers, target {}: expected the same count "
                                   "(removed blocks marked, not dropped)",
                          parent.layers.size(), target.layers.size()));
  const size_t L = parent.layers.size();
  const double bar = 14, group = 3 * bar + 18, left = 50, top = 50, ph = 200;
  SvgWriter svg(left + double(L + 1) * group + 30, top + ph + 60);
  svg.text(left, 20, title, 13, "start", "#111");
  const char* names[] = {"query heads", "KV heads", "FFN width", "hidden size"};
  double lx = left;
  for (int k = 0; k < 4; ++k) {
    svg.rect(lx, 30, 10, 10, palette(size_t(k)));
    svg.text(lx + 14, 39, names[k], 10);
    lx += 14 + 7.0 * double(std::string(names[k]).size()) + 16;
  }
  auto py = [&](double f) { return top + ph - ph * f; };
  for (double f : {0.0, 0.5, 1.0}) {
    svg.line(left - 4, py(f), left + double(L + 1) * group, py(f), "#ddd");
    svg.text(left - 6, py(f) + 4, fmt::format("{:.0f}%", f * 100), 9, "end", "#555");
  }
  // One bar: grey parent (full height) behind the kept fraction, the kept value on top.
  auto draw = [&](double x, size_t colour, int64_t kept, int64_t full) {
    svg.rect(x, py(1.0), bar - 2, ph, "#e3e3e3");
    if (full <= 0) return;
    const double f = double(kept) / double(full);
    if (kept <= 0) {
      svg.text(x + (bar - 2) / 2, py(0) - 3, "x", 11, "middle", "#c00");
      return;
    }
    svg.rect(x, py(f), bar - 2, ph * f, palette(colour));
    svg.text(x + (bar - 2) / 2 + 3, py(f) - 3, std::to_string(kept), 8, "start", "#333", -90);
  };
  for (size_t l = 0; l < L; ++l) {
    const LayerConfig& p = parent.layers[l];
    const LayerConfig& t = target.layers[l];
    const double x = left + double(l) * group + 6;
    draw(x, 0, t.has_attention() ? t.num_attention_heads : 0, p.num_attention_heads);
    draw(x + bar, 1, t.has_attention() ? t.num_key_value_heads : 0, p.num_key_value_heads);
    draw(x + 2 * bar, 2, t.has_ffn() ? t.intermediate_size : 0, p.intermediate_size);
    std::string label = fmt::format("layer {}", l);
    if (!t.has_attention() && !t.has_ffn()) label += " (removed)";
    svg.text(x + 1.5 * bar, top + ph + 16, label, 10, "middle");
  }
  const double xd = left + double(L) * group + 6 + bar;
  draw(xd, 3, target.hidden_size, parent.hidden_size);
  svg.text(xd + bar / 2, top + ph + 16, "hidden", 10, "middle");
  svg.text(left, top + ph + 40,
           fmt::format("parent {} | chosen {}", describe(parent), describe(target)), 10, "start", "#444");
  return svg.str();
}

std::string trajectory_svg(const std::vector<TrajectoryPoint>& tr,
                           const std::vector<CostBudget>& budgets, const std::string& title) {
  const double left = 70, w = 620, ph = 130, gap = 60, top = 60;
  SvgWriter svg(left + w + 30, top + 4 * (ph + gap));
  svg.text(left, 22, title, 13, "start", "#111");
  if (tr.empty()) {
    svg.text(left, 50, "no search steps (the parent met every limit, or the method has no trajectory)", 11);
    return svg.str();
  }
  std::vector<double> x;
  Series loss{"loss", {}, ""}, kl{"KL", {}, "5 3"}, temp{"temperature", {}, ""};
  for (const auto& p : tr) {
    x.push_back(double(p.step));
    loss.y.push_back(p.loss);
    kl.y.push_back(p.kl);
    temp.y.push_back(p.temperature);
  }
  std::vector<Series> ratio, mult;
  for (const auto& b : budgets) {
    Series r{b.name, {}, ""}, m{b.name, {}, ""};
    for (const auto& p : tr) {
      double v = b.name == "ttft_ms"    ? p.ttft_ms
                 : b.name == "tpot_ms"  ? p.tpot_ms
                 : b.name == "peak_memory_bytes" ? p.peak_memory_bytes
                                                 : p.throughput_tokens_per_s;
      r.y.push_back(v / b.budget);
      auto it = p.multipliers.find(b.name);
      m.y.push_back(it == p.multipliers.end() ? NAN : it->second);
    }
    ratio.push_back(r);
    mult.push_back(m);
  }
  double y = top;
  line_panel(svg, left, y, w, ph, "loss = KL + cost term (nats/token)", x, {loss, kl});
  y += ph + gap;
  line_panel(svg, left, y, w, ph, "expected cost / budget (throughput: expected / floor)", x, ratio, 1.0);
  y += ph + gap;
  line_panel(svg, left, y, w, ph, "Lagrange multipliers", x, mult);
  y += ph + gap;
  line_panel(svg, left, y, w, ph, "Gumbel-softmax temperature", x, {temp});
  return svg.str();
}

}  // namespace ac
