#include "pipeline/report_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <tuple>

#include "common/error.h"
#include "common/json_io.h"
#include "common/svg.h"
#include "model/config.h"
#include "pipeline/report.h"

namespace ac {

namespace {
using json = nlohmann::json;
using svg::Canvas;
using svg::Scale;

// ---------------------------------------------------------------------------------------------
// Tolerant access to report.json / arch.json.

const json* find(const json& j, std::initializer_list<const char*> path) {
  const json* cur = &j;
  for (const char* k : path) {
    if (!cur->is_object() || !cur->contains(k)) return nullptr;
    cur = &(*cur)[k];
  }
  return cur;
}

std::optional<double> number(const json& j, std::initializer_list<const char*> path) {
  const json* v = find(j, path);
  return v && v->is_number() ? std::optional<double>(v->get<double>()) : std::nullopt;
}

std::string text(const json& j, std::initializer_list<const char*> path, const std::string& fallback = "?") {
  const json* v = find(j, path);
  if (!v) return fallback;
  return v->is_string() ? v->get<std::string>() : v->dump();
}

// "measured", "predicted from profile", "predicted from specs" (CostEstimate::source values).
std::string provenance(const std::string& source) {
  if (source == "profile") return "predicted from profile";
  if (source == "roofline") return "predicted from specs";
  if (source == "measured") return "measured";
  return "predicted (" + source + ")";
}
std::string short_provenance(const std::string& prov) {
  if (prov == "predicted from profile") return "pred., profile";
  if (prov == "predicted from specs") return "pred., specs";
  return prov;
}
std::string provenance_class(const std::string& prov) {
  if (prov == "measured") return "prov-measured";
  if (prov == "predicted from specs") return "prov-specs";
  return "prov-profile";
}

std::optional<ModelConfig> config_at(const json& j, std::initializer_list<const char*> path) {
  const json* c = find(j, path);
  if (!c || !c->is_object()) return std::nullopt;
  try {
    return config_from_hf_json(*c, "report");
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::string section(const std::string& id, const std::string& title, const std::string& intro,
                    const std::string& body) {
  return fmt::format("<section id=\"{}\">\n<h2>{}</h2>\n<p class=\"intro\">{}</p>\n<figure>\n{}"
                     "</figure>\n</section>\n", id, xml_escape(title), intro, body);
}

std::string note_svg(const std::string& plot, const std::string& message) {
  Canvas c(plot, 900, 60, message);
  c.text(20, 36, message, "note");
  return c.str();
}

// ---------------------------------------------------------------------------------------------
// Architecture per layer.

struct LayerSeries {
  std::string title;
  std::vector<double> original, result;  // [L]; NaN where the original is unknown
  std::vector<bool> removed;             // [L] the result removed this part
};

std::vector<LayerSeries> layer_series(const std::optional<ModelConfig>& orig, const ModelConfig& res) {
  std::vector<LayerSeries> out = {{"query heads", {}, {}, {}}, {"KV heads", {}, {}, {}},
                                  {"FFN width", {}, {}, {}}};
  const size_t L = res.layers.size();
  const bool aligned = orig && orig->layers.size() == L;
  for (size_t i = 0; i < L; ++i) {
    const LayerConfig& r = res.layers[i];
    const double nan = std::nan("");
    const LayerConfig* o = aligned ? &orig->layers[i] : nullptr;
    out[0].original.push_back(o ? double(o->num_attention_heads) : nan);
    out[1].original.push_back(o ? double(o->num_key_value_heads) : nan);
    out[2].original.push_back(o ? double(o->intermediate_size) : nan);
    out[0].result.push_back(r.has_attention() ? double(r.num_attention_heads) : 0);
    out[1].result.push_back(r.has_attention() ? double(r.num_key_value_heads) : 0);
    out[2].result.push_back(r.has_ffn() ? double(r.intermediate_size) : 0);
    for (int k = 0; k < 3; ++k) out[size_t(k)].removed.push_back(k < 2 ? !r.has_attention() : !r.has_ffn());
  }
  return out;
}

void layer_panel(Canvas& c, const LayerSeries& s, double top, double height) {
  const double left = 70, right = c.width() - 20;
  double hi = 0;
  for (size_t i = 0; i < s.result.size(); ++i)
    hi = std::max({hi, s.result[i], std::isnan(s.original[i]) ? 0.0 : s.original[i]});
  Scale y = Scale::nice(0, hi, top + height, top + 14, true);
  const size_t L = s.result.size();
  const double slot = (right - left) / double(std::max<size_t>(L, 1));
  c.y_axis(y, left, right, s.title);
  c.text(left + 4, top + 8, s.title + " per layer", "panel-title");
  for (size_t i = 0; i < L; ++i) {
    const double x = left + slot * double(i);
    if (!std::isnan(s.original[i]))
      c.rect(x + slot * 0.1, y(s.original[i]), slot * 0.8, y(0) - y(s.original[i]), "orig",
             fmt::format("layer {}: original {} {}", i, short_number(s.original[i]), s.title));
    c.rect(x + slot * 0.25, y(s.result[i]), slot * 0.5, y(0) - y(s.result[i]), "result",
           fmt::format("layer {}: result {} {}", i, short_number(s.result[i]), s.title));
    if (s.removed[i]) c.text(x + slot / 2, y(0) - 4, "×", "removed", "middle");
    if (L <= 40 || i % ((L + 39) / 40) == 0) c.text(x + slot / 2, y(0) + 14, std::to_string(i), "tick", "middle");
  }
}

// From arch.json "layers" (search/outcome.h): each entry has the result's counts, the removed
// flags and the parent's counts under "parent".
std::optional<std::vector<LayerSeries>> layer_series_from_arch(const json& arch) {
  const json* layers = find(arch, {"layers"});
  if (!layers || !layers->is_array() || layers->empty()) return std::nullopt;
  std::vector<LayerSeries> out = {{"query heads", {}, {}, {}}, {"KV heads", {}, {}, {}},
                                  {"FFN width", {}, {}, {}}};
  const char* keys[3] = {"num_attention_heads", "num_key_value_heads", "intermediate_size"};
  for (const auto& l : *layers)
    for (int k = 0; k < 3; ++k) {
      const bool removed = l.value(k < 2 ? "attention_removed" : "ffn_removed", false);
      out[size_t(k)].result.push_back(removed ? 0.0 : number(l, {keys[k]}).value_or(0));
      out[size_t(k)].original.push_back(number(l, {"parent", keys[k]}).value_or(std::nan("")));
      out[size_t(k)].removed.push_back(removed);
    }
  return out;
}

std::string layers_svg(const std::vector<LayerSeries>& series, bool have_original,
                       const std::string& hidden) {
  const double panel = 150, gap = 36;
  Canvas c("layers", 960, 40 + 3 * (panel + gap), "query heads, KV heads and FFN width per layer");
  c.rect(70, 8, 14, 10, "orig");
  c.text(90, 17, have_original ? "original (teacher)" : "original: not in the run folder", "legend");
  c.rect(260, 8, 14, 10, "result");
  c.text(280, 17, "result (× = removed)", "legend");
  c.text(460, 17, hidden, "legend");
  for (size_t k = 0; k < series.size(); ++k) layer_panel(c, series[k], 30 + double(k) * (panel + gap), panel);
  c.text(c.width() / 2, c.height() - 4, "layer (the architecture itself: no cost, nothing predicted)",
         "axis-label", "middle");
  return c.str();
}

std::string layers_plot(const RunReport& report, const json& arch) {
  if (auto series = layer_series_from_arch(arch)) {
    auto d = number(arch, {"hidden_size"}), pd = number(arch, {"parent_hidden_size"});
    return layers_svg(*series, true, fmt::format("hidden size {} → {}", pd ? short_number(*pd) : "?",
                                                 d ? short_number(*d) : "?"));
  }
  // (report.json keeps the teacher's structure as text only: without arch.json, no original.)
  std::optional<ModelConfig> orig;
  std::optional<ModelConfig> res = config_at(arch, {"config"});  // aligned: parent's layer count
  if (!res) res = config_at(json{{"c", report.compressed.hf_config}}, {"c"});
  if (!res) return note_svg("layers", "no architecture of the result in report.json or arch.json");
  return layers_svg(layer_series(orig, *res), orig.has_value(),
                    fmt::format("hidden size {} → {}", orig ? std::to_string(orig->hidden_size) : "?",
                                res->hidden_size));
}

// ---------------------------------------------------------------------------------------------
// Predicted vs measured cost.

struct Bar {
  std::string who, prov;  // "teacher" / "result"; provenance
  double value;
};

void cost_panel(Canvas& c, double left, double width, const std::string& title,
                const std::vector<Bar>& bars, std::optional<double> limit,
                std::optional<double> search_limit) {
  const double top = 40, bottom = c.height() - 70;
  double hi = 0;
  for (const auto& b : bars) hi = std::max(hi, b.value);
  if (limit) hi = std::max(hi, *limit);
  if (search_limit) hi = std::max(hi, *search_limit);
  Scale y = Scale::nice(0, hi * 1.12, bottom, top, true);
  c.y_axis(y, left, left + width, title);
  const double slot = width / double(std::max<size_t>(bars.size(), 1));
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const double x = left + slot * double(i) + slot * 0.15, w = slot * 0.7;
    c.rect(x, y(b.value), w, y(0) - y(b.value), provenance_class(b.prov),
           fmt::format("{} {}: {} ({})", b.who, title, short_number(b.value), b.prov));
    c.text(x + w / 2, y(b.value) - 16, short_number(b.value), "bar-value", "middle");
    c.text(x + w / 2, y(b.value) - 5, short_provenance(b.prov), "bar-prov", "middle");
    c.text(x + w / 2, bottom + 14, b.who, "tick", "middle");
  }
  // The two limits' labels go to opposite ends (left, above the line; right, below it), so that
  // close limits stay readable.
  auto limit_line = [&](double v, const std::string& cls, const std::string& label, bool at_left) {
    c.line(left, y(v), left + width, y(v), cls);
    c.text(at_left ? left + 3 : left + width, at_left ? y(v) - 3 : y(v) + 11, label, cls + "-label",
           at_left ? "start" : "end");
  };
  if (limit) limit_line(*limit, "limit", "limit " + short_number(*limit) + " (for measured)", true);
  if (search_limit && (!limit || std::fabs(*search_limit - *limit) > 1e-9 * std::fabs(*limit)))
    limit_line(*search_limit, "search-limit", "search limit " + short_number(*search_limit) + " (for predicted)", false);
  c.text(left + width / 2, 24, title, "panel-title", "middle");
}

std::string cost_plot(const RunReport& report) {
  struct Metric { const char* key; const char* limit_key; const char* title; double scale; };
  const Metric metrics[] = {{"ttft_ms", "ttft_ms", "TTFT (ms)", 1.0},
                            {"tpot_ms", "tpot_ms", "TPOT (ms)", 1.0},
                            {"peak_memory_bytes", "peak_memory_bytes", "peak memory (MiB)", 1.0 / (1 << 20)}};
  Canvas c("cost", 960, 330, "TTFT, TPOT and peak memory: predicted beside measured");
  const double panel = 250, gap = 75;
  for (int k = 0; k < 3; ++k) {
    const Metric& m = metrics[k];
    std::vector<Bar> bars;
    for (const auto& [label, predicted, measured] :
         {std::tuple<const char*, const json&, const json&>{"teacher", report.teacher.predicted,
                                                            report.teacher.measured},
          {"result", report.compressed.predicted, report.compressed.measured}}) {
      if (auto p = number(predicted, {m.key}))
        bars.push_back({label, provenance(text(predicted, {"source"})), *p * m.scale});
      if (auto v = number(measured, {m.key})) bars.push_back({label, "measured", *v * m.scale});
    }
    auto lim = number(report.scenario.limits, {m.limit_key});
    auto slim = number(report.scenario.limits_for_search, {m.limit_key});
    if (lim) *lim *= m.scale;
    if (slim) *slim *= m.scale;
    cost_panel(c, 70 + k * (panel + gap), panel, m.title, bars, lim, slim);
  }
  return c.str();
}

// ---------------------------------------------------------------------------------------------
// Quality vs cost of the candidates.

struct Point {
  double cost, loss;  // loss < 0: not ranked by quality
  bool chosen;
  std::string method, label;
};

// Every object of the arch files (each file and its members, one level down) holding a
// "candidates" array; the method is the object's "method", else the file's.
std::vector<Point> candidate_points(const std::vector<json>& archs, const std::string& cost_key) {
  std::vector<Point> out;
  auto take = [&](const json& s, const std::string& fallback_method) {
    if (!s.is_object() || !s.contains("candidates") || !s["candidates"].is_array()) return;
    const std::string method = s.contains("method") && s["method"].is_string()
                                   ? s["method"].get<std::string>() : fallback_method;
    for (const auto& c : s["candidates"]) {
      auto cost = number(c, {"cost", cost_key.c_str()});
      if (!cost) continue;
      const json* chosen = find(c, {"chosen"});
      out.push_back({*cost, number(c, {"loss_after_prune"}).value_or(-1),
                     chosen && chosen->is_boolean() && chosen->get<bool>(), method,
                     text(c, {"describe"}, "")});
    }
  };
  for (const json& arch : archs) {
    if (!arch.is_object()) continue;
    const std::string method = text(arch, {"method"}, "search");
    take(arch, method);
    for (auto it = arch.begin(); it != arch.end(); ++it) take(it.value(), method);
  }
  return out;
}

// The primary cost of the candidates: the first limited metric (by the search's limits).
std::pair<std::string, std::string> primary_cost(const RunReport& report) {
  const json* lim = &report.scenario.limits_for_search;
  using Named = std::pair<const char*, const char*>;
  for (auto [key, title] : std::initializer_list<Named>{
           {"tpot_ms", "TPOT (ms)"}, {"ttft_ms", "TTFT (ms)"},
           {"peak_memory_bytes", "peak memory (bytes)"},
           {"min_throughput_tokens_per_s", "throughput (tokens/s)"}})
    if (lim->is_object() && lim->contains(key))
      return {std::string(key) == "min_throughput_tokens_per_s" ? "throughput_tokens_per_s" : key, title};
  return {"tpot_ms", "TPOT (ms)"};
}

// Points not beaten by another in both cost and loss (lower is better for both, except
// throughput, where higher is better), sorted by cost.
std::vector<Point> pareto_front(std::vector<Point> pts, bool higher_is_better) {
  auto better_cost = [&](double a, double b) { return higher_is_better ? a >= b : a <= b; };
  std::vector<Point> front;
  for (const Point& p : pts) {
    bool dominated = false;
    for (const Point& q : pts)
      dominated = dominated || (better_cost(q.cost, p.cost) && q.loss <= p.loss &&
                                (q.cost != p.cost || q.loss < p.loss));
    if (!dominated) front.push_back(p);
  }
  std::sort(front.begin(), front.end(), [](const Point& a, const Point& b) { return a.cost < b.cost; });
  return front;
}

void mark_choices(Canvas& c, const std::vector<Point>& ranked, const Scale& x, const Scale& y) {
  for (const Point& p : ranked) {
    if (!p.chosen) continue;
    const bool baseline = p.method == "minitron";
    c.marker(baseline ? "star" : "diamond", x(p.cost), y(p.loss), 11, baseline ? "baseline" : "chosen",
             fmt::format("{} choice: {} (cost {}, KL {})", p.method, p.label, short_number(p.cost), short_number(p.loss)));
    c.text(x(p.cost) + 13, y(p.loss) - 8, baseline ? "Minitron baseline (chosen)" : p.method + " (chosen)",
           baseline ? "baseline-label" : "chosen-label");
  }
}

std::string pareto_plot(const RunReport& report, const std::vector<json>& archs) {
  const auto [key, title] = primary_cost(report);
  const json& arch = archs.empty() ? json() : archs.front();
  std::vector<Point> all = candidate_points(archs, key), ranked;
  for (const Point& p : all)
    if (p.loss >= 0) ranked.push_back(p);
  if (all.empty()) return note_svg("pareto", "no candidates in arch.json");
  std::string source = text(arch, {"predicted", "source"}, text(arch, {"search", "best", "cost", "source"}, ""));
  const std::string prov = source.empty() ? "predicted" : provenance(source);
  Canvas c("pareto", 960, 420, "quality vs cost of the candidates, Pareto front, Minitron baseline");
  double xlo = 1e300, xhi = -1e300, yhi = 0;
  for (const Point& p : all) xlo = std::min(xlo, p.cost), xhi = std::max(xhi, p.cost);
  for (const Point& p : ranked) yhi = std::max(yhi, p.loss);
  auto slim = number(report.scenario.limits_for_search,
                     {key == "throughput_tokens_per_s" ? "min_throughput_tokens_per_s" : key.c_str()});
  if (slim) xlo = std::min(xlo, *slim), xhi = std::max(xhi, *slim);
  Scale x = Scale::nice(xlo, xhi, 80, 930, false), y = Scale::nice(0, yhi * 1.1, 360, 20, true);
  c.x_axis(x, 360, title + ", " + prov + " (cost model)");
  c.y_axis(y, 80, 930, "KL after pruning (measured)");
  for (const Point& p : all)
    if (p.loss < 0) c.line(x(p.cost), 352, x(p.cost), 360, "unranked");
  if (slim) {
    c.line(x(*slim), 20, x(*slim), 360, "search-limit");
    c.text(x(*slim) + 4, 32, "limit " + short_number(*slim), "search-limit-label");
  }
  std::vector<std::pair<double, double>> line;
  for (const Point& p : pareto_front(ranked, key == "throughput_tokens_per_s"))
    line.emplace_back(x(p.cost), y(p.loss));
  c.polyline(line, "front");
  for (const Point& p : ranked)
    c.circle(x(p.cost), y(p.loss), 4.5, p.method == "minitron" ? "cand" : "cand-other",
             fmt::format("{}: {} — cost {} ({}), KL {} (measured)", p.method, p.label,
                         short_number(p.cost), prov, short_number(p.loss)));
  mark_choices(c, ranked, x, y);
  if (ranked.empty()) c.text(100, 60, "no candidate was ranked by quality", "note");
  c.text(930, 414, fmt::format("{} candidates costed, {} ranked by KL after pruning; ticks on the "
                               "axis: costed, not ranked", all.size(), ranked.size()),
         "legend", "end");
  return c.str();
}

// ---------------------------------------------------------------------------------------------
// Search trajectory (arch.json "trajectory", when the search wrote one).

// Numeric fields of the trajectory's entries, one level of nesting flattened ("cost.tpot_ms").
std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>> trajectory_series(const json& traj) {
  std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>> out;
  auto add = [&](const std::string& name, double step, double v) {
    for (auto& s : out)
      if (s.first == name) {
        s.second.emplace_back(step, v);
        return;
      }
    out.push_back({name, {{step, v}}});
  };
  for (size_t i = 0; i < traj.size(); ++i) {
    const json& e = traj[i];
    if (!e.is_object()) continue;
    const double step = e.contains("step") && e["step"].is_number() ? e["step"].get<double>() : double(i);
    for (auto it = e.begin(); it != e.end(); ++it) {
      if (it.key() == "step" || it.key() == "tokens" || it.key() == "frozen") continue;
      if (it.value().is_number()) add(it.key(), step, it.value().get<double>());
      if (it.value().is_object())
        for (auto jt = it.value().begin(); jt != it.value().end(); ++jt)
          if (jt.value().is_number()) add(it.key() + "." + jt.key(), step, jt.value().get<double>());
    }
  }
  return out;
}

std::string series_provenance(const std::string& name) {
  if (name.find("cost") != std::string::npos || name.find("_ms") != std::string::npos ||
      name.find("bytes") != std::string::npos)
    return "predicted (expected cost)";
  if (name.find("loss") != std::string::npos || name.find("kl") != std::string::npos)
    return "measured on the search batches";
  return "search state";
}

std::string trajectory_plot(const json& traj) {
  auto series = trajectory_series(traj);
  series.erase(std::remove_if(series.begin(), series.end(), [](const auto& s) {
                 return std::all_of(s.second.begin(), s.second.end(), [](const auto& p) { return p.second == 0; });
               }), series.end());
  if (series.size() > 10) series.resize(10);
  if (series.empty()) return note_svg("trajectory", "the trajectory holds no numeric field");
  const double pw = 440, ph = 150, gap = 50;
  const size_t rows = (series.size() + 1) / 2;
  Canvas c("trajectory", 960, double(rows) * (ph + gap + 30) + 10, "search trajectory");
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& [name, pts] = series[k];
    const double left = 70 + double(k % 2) * (pw + gap + 20), top = 30 + double(k / 2) * (ph + gap + 30);
    double xlo = 1e300, xhi = -1e300, ylo = 1e300, yhi = -1e300;
    for (const auto& [sx, sy] : pts)
      xlo = std::min(xlo, sx), xhi = std::max(xhi, sx), ylo = std::min(ylo, sy), yhi = std::max(yhi, sy);
    Scale x = Scale::nice(xlo, xhi, left, left + pw, false), y = Scale::nice(ylo, yhi, top + ph, top, false);
    c.x_axis(x, top + ph, "step");
    c.y_axis(y, left, left + pw, "");
    std::vector<std::pair<double, double>> line;
    for (const auto& [sx, sy] : pts) line.emplace_back(x(sx), y(sy));
    c.polyline(line, "series");
    c.text(left + 4, top - 8, name + " (" + series_provenance(name) + ")", "panel-title");
  }
  return c.str();
}

// ---------------------------------------------------------------------------------------------
// Distillation loss (distill_log.csv).

struct Csv {
  std::vector<std::string> header;
  std::vector<std::vector<double>> rows;
  int column(const std::string& name) const {
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return int(i);
    return -1;
  }
};

Csv parse_csv(const std::string& text) {
  Csv csv;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> cells;
    std::stringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, ',')) cells.push_back(cell);
    if (csv.header.empty()) {
      csv.header = cells;
      continue;
    }
    std::vector<double> row;
    for (const auto& c : cells) row.push_back(std::strtod(c.c_str(), nullptr));
    if (row.size() == csv.header.size()) csv.rows.push_back(row);
  }
  return csv;
}

std::string distill_plot(const std::string& text) {
  const Csv csv = parse_csv(text);
  const int loss = csv.column("loss"), tokens = csv.column("tokens"), skipped = csv.column("skipped");
  if (loss < 0 || csv.rows.empty()) return note_svg("distill", "no distill_log.csv rows in the run folder");
  const int xcol = tokens >= 0 ? tokens : csv.column("step");
  double xlo = 1e300, xhi = -1e300, yhi = 0;
  for (const auto& r : csv.rows) {
    const double xv = xcol >= 0 ? r[size_t(xcol)] : 0;
    xlo = std::min(xlo, xv), xhi = std::max(xhi, xv), yhi = std::max(yhi, r[size_t(loss)]);
  }
  Canvas c("distill", 960, 330, "distillation loss per step");
  Scale x = Scale::nice(xlo, xhi, 80, 930, false), y = Scale::nice(0, yhi * 1.05, 270, 20, true);
  c.x_axis(x, 270, tokens >= 0 ? "training tokens seen" : "step");
  c.y_axis(y, 80, 930, "loss (measured)");
  std::vector<std::pair<double, double>> line;
  for (const auto& r : csv.rows) {
    line.emplace_back(x(r[size_t(xcol)]), y(r[size_t(loss)]));
    if (skipped >= 0 && r[size_t(skipped)] != 0) c.circle(line.back().first, line.back().second, 4, "skipped", "skipped step");
  }
  c.polyline(line, "series");
  c.text(930, 324, fmt::format("{} steps; loss {} → {} (measured on the training batches)", csv.rows.size(),
                               short_number(csv.rows.front()[size_t(loss)]), short_number(csv.rows.back()[size_t(loss)])),
         "legend", "end");
  return c.str();
}

// ---------------------------------------------------------------------------------------------
// Tables and page.

std::string cell(const json& j, std::initializer_list<const char*> path, double scale = 1,
                 const char* unit = "") {
  auto v = number(j, path);
  return v ? xml_escape(short_number(*v * scale) + unit) : "—";
}

std::string summary_table(const RunReport& r) {
  const RunReport::Teacher& te = r.teacher;
  const RunReport::Compressed& co = r.compressed;
  const std::string tp = provenance(text(te.predicted, {"source"})),
                    cp = provenance(text(co.predicted, {"source"}));
  std::string t = "<table>\n<tr><th>metric</th><th>teacher, " + xml_escape(tp) +
                  "</th><th>teacher, measured</th><th>result, " + xml_escape(cp) +
                  "</th><th>result, measured</th></tr>\n";
  struct Row { const char* name; const char* key; double scale; const char* unit; };
  for (const Row& row : {Row{"TTFT", "ttft_ms", 1, " ms"}, Row{"TPOT", "tpot_ms", 1, " ms"},
                         Row{"throughput", "throughput_tokens_per_s", 1, " tok/s"},
                         Row{"peak memory", "peak_memory_bytes", 1.0 / (1 << 20), " MiB"}})
    t += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", row.name,
                     cell(te.predicted, {row.key}, row.scale, row.unit),
                     cell(te.measured, {row.key}, row.scale, row.unit),
                     cell(co.predicted, {row.key}, row.scale, row.unit),
                     cell(co.measured, {row.key}, row.scale, row.unit));
  t += fmt::format("<tr><td>parameters</td><td colspan=\"2\">{}</td><td colspan=\"2\">{}</td></tr>\n",
                   xml_escape(short_number(double(te.parameters))), xml_escape(short_number(double(co.parameters))));
  t += fmt::format("<tr><td>KL to teacher (held-out, measured)</td><td colspan=\"2\">0</td>"
                   "<td colspan=\"2\">{} after pruning, {} after distillation</td></tr>\n",
                   cell(co.eval_after_prune, {"kl_to_teacher"}), cell(co.eval, {"kl_to_teacher"}));
  t += fmt::format("<tr><td>perplexity (held-out, measured)</td><td colspan=\"2\">{}</td>"
                   "<td colspan=\"2\">{}</td></tr>\n</table>\n",
                   cell(te.eval, {"perplexity"}), cell(co.eval, {"perplexity"}));
  return t;
}

std::string verdict_line(const RunReport& r) {
  return fmt::format("<p class=\"verdict\">Limits by the cost model: <b>{}</b>. Measured: <b>{}</b>.</p>\n",
                     xml_escape(limits_verdict_text(json(r.compressed.limits_predicted))),
                     xml_escape(limits_verdict_text(r.compressed.limits_measured)));
}

std::string stages_table(const RunReport& r) {
  if (r.stages.empty()) return "";
  std::string t = "<h2>Time per stage (measured wall time)</h2>\n<table>\n<tr><th>stage</th><th>seconds</th></tr>\n";
  for (const RunReport::Stage& s : r.stages)
    t += fmt::format("<tr><td>{}{}</td><td>{}</td></tr>\n", xml_escape(s.stage),
                     s.resumed ? " (earlier attempt)" : "", xml_escape(short_number(s.seconds)));
  return t + "</table>\n";
}

const char* kStyle = R"(<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1000px;margin:24px auto;color:#222;padding:0 12px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
p.intro,p.meta{color:#555}table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}figure{margin:0}svg.plot{max-width:100%;height:auto;background:#fff}
.axis{stroke:#444;stroke-width:1}.grid{stroke:#eee;stroke-width:1}.tick{font-size:11px;fill:#444}
.axis-label{font-size:12px;fill:#333}.panel-title{font-size:13px;font-weight:600;fill:#222}.legend{font-size:12px;fill:#333}
.note{font-size:14px;fill:#777}.orig{fill:#cfcfcf}.result{fill:#e08214}.removed{font-size:12px;fill:#b2182b}
.prov-measured{fill:#1b7837}.prov-profile{fill:#2166ac}.prov-specs{fill:#92c5de}
.bar-value{font-size:11px;fill:#222}.bar-prov{font-size:9px;fill:#555}
.limit{stroke:#b2182b;stroke-width:1.5;stroke-dasharray:6 3}.limit-label{font-size:10px;fill:#b2182b}
.search-limit{stroke:#762a83;stroke-width:1.2;stroke-dasharray:2 3}.search-limit-label{font-size:10px;fill:#762a83}
.cand{fill:#2166ac;fill-opacity:.75}.cand-other{fill:#e08214;fill-opacity:.75}.unranked{stroke:#999;stroke-width:1}
.front{fill:none;stroke:#444;stroke-width:1.5}.baseline{fill:#f1c40f;stroke:#333}.chosen{fill:#e08214;stroke:#333}
.baseline-label,.chosen-label{font-size:12px;font-weight:600;fill:#333}.series{fill:none;stroke:#2166ac;stroke-width:1.5}
.limit-label,.search-limit-label,.bar-value,.bar-prov{paint-order:stroke;stroke:#fff;stroke-width:3px}
.skipped{fill:#b2182b}.key span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:-1px}
</style>
)";

std::string page_header(const RunReport& r) {
  const std::string& name = r.scenario.name;
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>autocompress report — " +
                  xml_escape(name) + "</title>\n" + kStyle + "</head>\n<body>\n";
  h += "<h1>autocompress report — scenario <code>" + xml_escape(name) + "</code></h1>\n";
  h += fmt::format("<p class=\"meta\">Device {} ({} cores, {} threads, torch {}), engine <code>{}</code>, "
                   "batch {}, {} prompt + {} output tokens. Date {}.</p>\n",
                   xml_escape(r.device.cpu_model), r.device.cores, r.device.threads,
                   xml_escape(r.device.torch), xml_escape(r.scenario.engine), r.scenario.batch_size,
                   r.scenario.prompt_tokens, r.scenario.output_tokens, xml_escape(r.date));
  h += "<p class=\"key\">Every number says where it comes from:<span class=\"prov\" style=\"background:#1b7837\"></span>"
       "measured on this device<span style=\"background:#2166ac\"></span>predicted from profile (cost model, "
       "tables of this device)<span style=\"background:#92c5de\"></span>predicted from specs (cost model, "
       "datasheet roofline)</p>\n";
  return h;
}

}  // namespace

std::string render_report_html(const RunReport& report, const std::vector<json>& archs,
                               const std::string& distill_csv) {
  const json& arch = archs.empty() ? json() : archs.front();
  std::string h = page_header(report);
  h += "<h2>Summary</h2>\n" + summary_table(report) + verdict_line(report);
  h += "<p>" + xml_escape(describe_run_data(report.data)) + "</p>\n";
  h += section("layers", "Architecture per layer",
               "Query heads, KV heads and FFN width of every layer: the result (orange) over the original "
               "(grey). Removed parts are marked ×.",
               layers_plot(report, arch));
  h += section("cost", "Cost: predicted beside measured",
               "Teacher and result, each predicted by the cost model and measured on this device. Dashed: the "
               "limit the measurement must meet; dotted: the limit the search met by prediction.",
               cost_plot(report));
  h += section("pareto", "Quality vs cost of the candidates",
               "Every candidate the search costed (x, predicted) and, for those ranked, its KL to the teacher "
               "right after pruning (y, measured on calibration text). Line: the Pareto front; star: the "
               "Minitron baseline's choice.",
               pareto_plot(report, archs));
  for (const json& a : archs)
    if (const json* t = find(a, {"trajectory"}); t && t->is_array() && !t->empty()) {
      h += section("trajectory", "Search trajectory (" + text(a, {"method"}, "search") + ")",
                   "The search's state per step, as its arch.json records it: its loss (measured on the "
                   "search batches), the expected cost of each limit (predicted) and the multipliers.",
                   trajectory_plot(*t));
      break;
    }
  h += section("distill", "Distillation loss", "Loss per distillation step (distill_log.csv).",
               distill_plot(distill_csv));
  h += stages_table(report);
  return h + "</body>\n</html>\n";
}

std::string report_html_of(const fs::path& run_dir, const RunReport& report) {
  std::vector<json> archs;
  if (fs::exists(run_dir / "arch.json")) archs.push_back(read_json_file(run_dir / "arch.json"));
  std::vector<fs::path> others;  // arch.<method>.json of the other methods (search/outcome.h)
  for (const auto& e : fs::directory_iterator(run_dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 10 && name.rfind("arch.", 0) == 0 && e.path().extension() == ".json")
      others.push_back(e.path());
  }
  std::sort(others.begin(), others.end());
  for (const auto& p : others) archs.push_back(read_json_file(p));
  std::string csv;
  if (fs::exists(run_dir / "distill_log.csv")) csv = read_file(run_dir / "distill_log.csv");
  return render_report_html(report, archs, csv);
}

void write_report_html(const fs::path& run_dir, const RunReport& report) {
  write_file_atomic(run_dir / "report.html", report_html_of(run_dir, report));
}

void rerender_reports(const fs::path& run_dir) {
  const fs::path file = run_dir / "report.json";
  if (!fs::exists(file))
    throw FormatError(msg("report", "{}: no such file; expected the folder of a finished `compress` run",
                          file.string()));
  const RunReport report = RunReport::from_json(read_json_file(file), file.string());
  write_file_atomic(run_dir / "report.md", render_report_md(report));
  write_report_html(run_dir, report);
}

}  // namespace ac
