#include "common/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "common/error.h"

namespace ac {

namespace {
std::string num(double v) { return fmt::format("{:.2f}", std::isfinite(v) ? v : 0.0); }

std::string dash_attr(const std::string& dash) {
  return dash.empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", xml_escape(dash));
}
}  // namespace

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string short_number(double v) {
  const double a = std::fabs(v);
  if (a >= 1e9) return fmt::format("{:.3g}G", v / 1e9);
  if (a >= 1e6) return fmt::format("{:.3g}M", v / 1e6);
  if (a >= 1e3) return fmt::format("{:.3g}k", v / 1e3);
  return fmt::format("{:.3g}", v);
}

const std::string& palette(size_t i) {
  static const std::array<std::string, 10> kColors = {
      "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
      "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kColors[i % kColors.size()];
}

SvgWriter::SvgWriter(double width, double height) : width_(width), height_(height) {
  if (!(width > 0) || !(height > 0))
    throw ConfigError(msg("svg", "canvas {} x {}: expected positive sizes", width, height));
}

void SvgWriter::rect(double x, double y, double w, double h, const std::string& fill,
                     double opacity) {
  body_ += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" "
                       "fill-opacity=\"{}\"/>\n",
                       num(x), num(y), num(std::max(0.0, w)), num(std::max(0.0, h)),
                       xml_escape(fill), num(opacity));
}

void SvgWriter::line(double x1, double y1, double x2, double y2, const std::string& stroke,
                     double width, const std::string& dash) {
  body_ += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" "
                       "stroke-width=\"{}\"{}/>\n",
                       num(x1), num(y1), num(x2), num(y2), xml_escape(stroke), num(width),
                       dash_attr(dash));
}

void SvgWriter::polyline(const std::vector<double>& xs, const std::vector<double>& ys,
                         const std::string& stroke, double width, const std::string& dash) {
  if (xs.size() != ys.size())
    throw ConfigError(msg("svg", "polyline: {} x values but {} y values", xs.size(), ys.size()));
  if (xs.size() < 2) return;
  std::string pts;
  for (size_t i = 0; i < xs.size(); ++i)
    pts += fmt::format("{}{},{}", i ? " " : "", num(xs[i]), num(ys[i]));
  body_ += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\""
                       "{}/>\n",
                       pts, xml_escape(stroke), num(width), dash_attr(dash));
}

void SvgWriter::text(double x, double y, const std::string& s, double size,
                     const std::string& anchor, const std::string& fill, double rotate) {
  std::string transform =
      rotate == 0 ? "" : fmt::format(" transform=\"rotate({} {} {})\"", num(rotate), num(x), num(y));
  body_ += fmt::format("<text x=\"{}\" y=\"{}\" font-family=\"sans-serif\" font-size=\"{}\" "
                       "text-anchor=\"{}\" fill=\"{}\"{}>{}</text>\n",
                       num(x), num(y), num(size), xml_escape(anchor), xml_escape(fill), transform,
                       xml_escape(s));
}

std::string SvgWriter::str() const {
  return fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                     "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
                     "viewBox=\"0 0 {0} {1}\">\n"
                     "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n"
                     "{2}</svg>\n",
                     num(width_), num(height_), body_);
}

namespace svg {

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> out;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    out.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  return out;
}

double Scale::operator()(double v) const {
  return d1 == d0 ? (r0 + r1) / 2 : r0 + (v - d0) / (d1 - d0) * (r1 - r0);
}

Scale Scale::nice(double lo, double hi, double r0, double r1, bool zero) {
  if (zero) lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
  if (!(hi > lo)) hi = lo + (lo == 0 ? 1.0 : std::fabs(lo) * 0.1);
  std::vector<double> t = nice_ticks(lo, hi, 5);
  const double step = t.size() > 1 ? t[1] - t[0] : (hi - lo);
  double a = std::floor(lo / step + 1e-9) * step, b = std::ceil(hi / step - 1e-9) * step;
  if (b <= a) b = a + step;
  return {a, b, r0, r1};
}

Canvas::Canvas(std::string plot, double width, double height, std::string title)
    : plot_(std::move(plot)), title_(std::move(title)), width_(width), height_(height) {}

void Canvas::rect(double x, double y, double w, double h, const std::string& cls,
                  const std::string& tooltip) {
  body_ += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" class=\"{}\">",
                       x, y, std::max(0.0, w), std::max(0.0, h), cls);
  body_ += tooltip.empty() ? "" : "<title>" + xml_escape(tooltip) + "</title>";
  body_ += "</rect>\n";
}

void Canvas::line(double x1, double y1, double x2, double y2, const std::string& cls) {
  body_ += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" class=\"{}\"/>\n",
                       x1, y1, x2, y2, cls);
}

void Canvas::polyline(const std::vector<std::pair<double, double>>& points, const std::string& cls) {
  if (points.empty()) return;
  std::string pts;
  for (const auto& [x, y] : points) pts += fmt::format("{:.1f},{:.1f} ", x, y);
  body_ += fmt::format("<polyline points=\"{}\" class=\"{}\"/>\n", pts, cls);
}

void Canvas::circle(double cx, double cy, double r, const std::string& cls,
                    const std::string& tooltip) {
  body_ += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{:.1f}\" class=\"{}\">", cx, cy, r, cls);
  body_ += tooltip.empty() ? "" : "<title>" + xml_escape(tooltip) + "</title>";
  body_ += "</circle>\n";
}

void Canvas::marker(const std::string& shape, double cx, double cy, double r,
                    const std::string& cls, const std::string& tooltip) {
  std::string d;
  if (shape == "star") {
    for (int i = 0; i < 10; ++i) {
      const double a = -M_PI / 2 + i * M_PI / 5, rr = i % 2 ? r * 0.45 : r;
      d += fmt::format("{}{:.1f},{:.1f} ", i ? "L" : "M", cx + rr * std::cos(a), cy + rr * std::sin(a));
    }
  } else {  // diamond
    d = fmt::format("M{:.1f},{:.1f} L{:.1f},{:.1f} L{:.1f},{:.1f} L{:.1f},{:.1f} ", cx, cy - r,
                    cx + r, cy, cx, cy + r, cx - r, cy);
  }
  body_ += fmt::format("<path d=\"{}Z\" class=\"{}\">", d, cls);
  body_ += tooltip.empty() ? "" : "<title>" + xml_escape(tooltip) + "</title>";
  body_ += "</path>\n";
}

void Canvas::text(double x, double y, const std::string& t, const std::string& cls,
                  const std::string& anchor, double rotate) {
  std::string tr = rotate == 0 ? "" : fmt::format(" transform=\"rotate({:.0f} {:.1f} {:.1f})\"", rotate, x, y);
  body_ += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\" class=\"{}\"{}>{}</text>\n",
                       x, y, anchor, cls, tr, xml_escape(t));
}

void Canvas::x_axis(const Scale& s, double y, const std::string& label) {
  line(std::min(s.r0, s.r1), y, std::max(s.r0, s.r1), y, "axis");
  for (double t : nice_ticks(s.d0, s.d1, 6)) {
    line(s(t), y, s(t), y + 4, "axis");
    text(s(t), y + 16, short_number(t), "tick", "middle");
  }
  text((s.r0 + s.r1) / 2, y + 34, label, "axis-label", "middle");
}

void Canvas::y_axis(const Scale& s, double x, double grid_to, const std::string& label) {
  line(x, std::min(s.r0, s.r1), x, std::max(s.r0, s.r1), "axis");
  for (double t : nice_ticks(s.d0, s.d1, 5)) {
    line(x, s(t), grid_to, s(t), "grid");
    text(x - 6, s(t) + 4, short_number(t), "tick", "end");
  }
  text(x - 44, (s.r0 + s.r1) / 2, label, "axis-label", "middle", -90);
}

std::string Canvas::str() const {
  return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" data-plot=\"{}\" "
                     "viewBox=\"0 0 {:.0f} {:.0f}\" width=\"{:.0f}\" height=\"{:.0f}\" role=\"img\" "
                     "aria-label=\"{}\">\n<title>{}</title>\n{}</svg>\n",
                     plot_, width_, height_, width_, height_, xml_escape(title_), xml_escape(title_), body_);
}

}  // namespace svg
}  // namespace ac
