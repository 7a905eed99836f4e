// A small builder of inline SVG for the report's charts: linear scales, tick values a
// reader can read, axes with gridlines, and elements whose coordinates are never NaN or
// infinite (an element with such a coordinate is left out, so a bad value costs a point,
// never the picture). Text is escaped here; callers pass plain strings.
//
//   ddplab::svg::Scale x(0, 120, 200, 900);  // ms onto pixels
//   ddplab::svg::Canvas c("chart step", 1000, 400);
//   c.Rect(x(0), 40, x(79.7) - x(0), 18, {{"fill", "#7eaee0"}});
//   c.Text(x(79.7) + 6, 53, "79.7 ms");
//   c.XAxis(x, NiceTicks(0, 120, 6), 30, 360);
//   std::string markup = c.Finish();  // <svg class="chart step" ...>...</svg>
#ifndef DDPLAB_CORE_REPORT_REPORT_SVG_H_
#define DDPLAB_CORE_REPORT_REPORT_SVG_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace ddplab {
namespace svg {

// Attributes of an element, in order: {{"fill", "#fff"}, {"class", "dot"}}. Values are
// escaped when written.
using Attrs = std::vector<std::pair<std::string, std::string>>;

// `text` with & < > " ' as character references: safe as element text and as a quoted
// attribute value, in HTML and in SVG.
std::string Escape(absl::string_view text);

// A coordinate with one decimal ("12.5"). Only for finite values.
std::string Coord(double v);

// The rough width in pixels of `text` at `font_size` in a proportional sans-serif font
// (the browser's real font is not known here): for leaving room, not for alignment.
double TextWidth(absl::string_view text, double font_size);

// `text` cut to at most `max_width` pixels (TextWidth's), ending in "…" when cut.
std::string Truncate(absl::string_view text, double font_size, double max_width);

// Maps [d0, d1] onto [r0, r1] linearly. A zero-width domain maps everything to r0.
class Scale {
 public:
  Scale(double d0, double d1, double r0, double r1);
  double operator()(double v) const;
  double domain_min() const { return d0_; }
  double domain_max() const { return d1_; }
  double range_min() const { return r0_; }
  double range_max() const { return r1_; }

 private:
  double d0_, d1_, r0_, r1_;
};

// A domain for `values` (non-finite ones ignored) widened by `margin` of its span on
// each side, and to 0 when `from_zero`. A single value gets a margin of its own size (or
// 1 when it is 0); no finite value at all gives [0, 1].
std::pair<double, double> PaddedDomain(const std::vector<double>& values, double margin,
                                       bool from_zero);

// Tick values inside [lo, hi] at a step of 1, 2 or 5 times a power of ten, about
// `count` of them.
std::vector<double> NiceTicks(double lo, double hi, int count);

// A tick value written with the decimals its step needs: 0.05 steps give "0.85".
std::string TickLabel(double v, const std::vector<double>& ticks);

// An <svg> element under construction. Elements are written in the order they are
// added; later ones are drawn on top.
class Canvas {
 public:
  // `css_class` is the <svg>'s class ("chart levers"); width and height its viewBox.
  Canvas(absl::string_view css_class, double width, double height);

  void Rect(double x, double y, double w, double h, const Attrs& attrs = {});
  void Line(double x1, double y1, double x2, double y2, const Attrs& attrs = {});
  void Circle(double cx, double cy, double r, const Attrs& attrs = {});
  // Points with a non-finite coordinate are dropped; fewer than two draw nothing.
  void Polyline(const std::vector<std::pair<double, double>>& points, const Attrs& attrs = {});
  void Text(double x, double y, absl::string_view text, const Attrs& attrs = {});
  // A tooltip for the enclosing group: call right after Open.
  void Title(absl::string_view text);
  // A <g> with `css_class` (and `attrs`), closed by Close.
  void Open(absl::string_view css_class, const Attrs& attrs = {});
  void Close();

  // Vertical gridlines from y_top to y_bottom at `ticks`, with their labels below
  // y_bottom and, when given, `label` under them.
  void XAxis(const Scale& x, const std::vector<double>& ticks, double y_top, double y_bottom,
             absl::string_view label = "");
  // Horizontal gridlines from x_left to x_right at `ticks`, labels left of x_left.
  void YAxis(const Scale& y, const std::vector<double>& ticks, double x_left, double x_right,
             absl::string_view label = "");

  // The markup, with every group closed.
  std::string Finish();

 private:
  void Element(absl::string_view tag, const std::vector<double>& coords,
               const std::string& geometry, const Attrs& attrs);

  std::string out_;
  int open_groups_ = 0;
};

}  // namespace svg
}  // namespace ddplab

#endif  // DDPLAB_CORE_REPORT_REPORT_SVG_H_
