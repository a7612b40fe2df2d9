// A small, self-contained SVG 1.1 writer for the plots the tools write beside their JSON
// (search/plots.h): line charts and bar charts, no external library, no scripts, no fonts
// beyond the generic "sans-serif" family.
//
// Coordinates are in user units (1 unit = 1 CSS px at the default size), origin top-left,
// y growing downwards (SVG 1.1, W3C 2011, section 7). Text is XML-escaped.
#pragma once
#include <string>
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

/// Escapes &, <, >, " and ' for XML text and attribute values.
std::string xml_escape(const std::string& s);

/// A short number for axis labels: 3 significant digits, k/M/G suffixes above 1e3.
std::string short_number(double v);

/// The small palette every plot uses (Tableau 10), index modulo its size.
const std::string& palette(size_t i);

}  // namespace ac
