// The one SVG writer of the project: no external library, no scripts, no fonts beyond the
// generic "sans-serif" family. Two kinds of document share its escaping, numbers, palette and
// scales:
//   - SvgWriter: a standalone .svg file styled by presentation attributes (fill, stroke), for
//     the plots the tools write beside their JSON (search/plots.h): line and bar charts;
//   - svg::Canvas: an <svg> element inside an HTML page, styled by the page's CSS classes, with
//     axes, round ticks, circles, markers and tooltips (pipeline/report_html.h).
//
// Coordinates are in user units (1 unit = 1 CSS px at the default size), origin top-left,
// y growing downwards (SVG 1.1, W3C 2011, section 7). Text is XML-escaped.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace ac {

/// Builds one SVG document element by element; str() returns the whole file.
class SvgWriter {
 public:
  /// width, height: the canvas size in px (> 0; ConfigError otherwise).
  SvgWriter(double width, double height);

  /// A filled rectangle; fill like "#4e79a7"; opacity in [0, 1].
  void rect(double x, double y, double w, double h, const std::string& fill, double opacity = 1.0);
  /// A straight line; dash like "4 3" or "" for solid.
  void line(double x1, double y1, double x2, double y2, const std::string& stroke,
            double width = 1.0, const std::string& dash = "");
  /// An open polyline through (xs[i], ys[i]); sizes must agree (ConfigError). Fewer than two
  /// points draws nothing.
  void polyline(const std::vector<double>& xs, const std::vector<double>& ys,
                const std::string& stroke, double width = 1.5, const std::string& dash = "");
  /// Text at (x, y) (baseline); anchor "start", "middle" or "end"; rotate in degrees about (x, y).
  void text(double x, double y, const std::string& s, double size = 11,
            const std::string& anchor = "start", const std::string& fill = "#222",
            double rotate = 0);

  /// The document: XML prolog, <svg> with width/height/viewBox, the elements in order.
  std::string str() const;

  double width() const { return width_; }
  double height() const { return height_; }

 private:
  double width_, height_;
  std::string body_;
};

/// Escapes &, <, >, " and ' for XML and HTML text and attribute values.
std::string xml_escape(const std::string& s);

/// A short number for axis labels: 3 significant digits, k/M/G suffixes above 1e3.
std::string short_number(double v);

/// The small palette every plot uses (Tableau 10), index modulo its size.
const std::string& palette(size_t i);

namespace svg {

/// Round tick values covering [lo, hi]: steps of 1, 2 or 5 x 10^k, about `target` of them.
/// Returns {lo} when lo == hi.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

/// Linear map of the domain [d0, d1] onto pixels [r0, r1] (r1 < r0 for a y axis).
struct Scale {
  double d0 = 0, d1 = 1, r0 = 0, r1 = 1;
  double operator()(double v) const;
  /// A domain [lo, hi] widened to round ticks (and to include 0 when `zero`).
  static Scale nice(double lo, double hi, double r0, double r1, bool zero);
};

/// One <svg> element of an HTML page built up shape by shape, styled by the page's CSS classes
/// (`cls`). Coordinates in pixels of its viewBox; tooltips become <title> children.
class Canvas {
 public:
  /// `plot`: the value of data-plot (what the page's tests look for); `title`: accessible name.
  Canvas(std::string plot, double width, double height, std::string title);

  void rect(double x, double y, double w, double h, const std::string& cls,
            const std::string& tooltip = "");
  void line(double x1, double y1, double x2, double y2, const std::string& cls);
  void polyline(const std::vector<std::pair<double, double>>& points, const std::string& cls);
  void circle(double cx, double cy, double r, const std::string& cls,
              const std::string& tooltip = "");
  /// A marker for a highlighted point: "star" or "diamond".
  void marker(const std::string& shape, double cx, double cy, double r, const std::string& cls,
              const std::string& tooltip = "");
  /// anchor: "start", "middle" or "end"; rotate in degrees about (x, y).
  void text(double x, double y, const std::string& text, const std::string& cls = "",
            const std::string& anchor = "start", double rotate = 0);
  /// A bottom axis at pixel row `y` from the scale's range, with ticks and a label.
  void x_axis(const Scale& s, double y, const std::string& label);
  /// A left axis at pixel column `x`, with ticks, grid lines to `grid_to` and a label.
  void y_axis(const Scale& s, double x, double grid_to, const std::string& label);

  double width() const { return width_; }
  double height() const { return height_; }
  /// The element: <svg class="plot" data-plot=... viewBox role="img" aria-label> with a
  /// <title>, no XML prolog (it sits inside the page).
  std::string str() const;

 private:
  std::string plot_, title_, body_;
  double width_, height_;
};

}  // namespace svg
}  // namespace ac
