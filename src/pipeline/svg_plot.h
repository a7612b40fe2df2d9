// A small SVG writer for the plots of report.html: linear scales with round ticks, axes, and the
// shapes the plots need. Output is plain SVG text styled by CSS classes of the page (no script),
// so the page stays self-contained and renders in any browser.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace ac::svg {

/// Text safe inside HTML / SVG elements and attribute values (& < > " ').
std::string escape(const std::string& text);

/// A number in at most 3-4 significant digits ("0.0123", "12.3", "1.23k", "4.5M").
std::string short_num(double v);

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

/// One <svg> element built up shape by shape. Coordinates in pixels of its viewBox.
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
  std::string str() const;

 private:
  std::string plot_, title_, body_;
  double width_, height_;
};

}  // namespace ac::svg
