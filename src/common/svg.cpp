#include "common/svg.h"

#include <fmt/format.h>

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

}  // namespace ac
