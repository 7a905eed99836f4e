#include "core/report/report_svg.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddplab {
namespace svg {
namespace {

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

std::string Escape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Coord(double v) {
  std::string s = absl::StrFormat("%.1f", v);
  return s == "-0.0" ? "0.0" : s;
}

double TextWidth(absl::string_view text, double font_size) {
  double width = 0;
  for (char c : text) {
    if (IsContinuationByte(c)) continue;
    // Capitals and digits run wider than lower case; spaces and dots narrower.
    if (c == ' ' || c == '.' || c == ',' || c == 'i' || c == 'l') {
      width += 0.32;
    } else if ((c >= 'A' && c <= 'Z') || c == 'm' || c == 'w') {
      width += 0.72;
    } else {
      width += 0.58;
    }
  }
  return width * font_size;
}

std::string Truncate(absl::string_view text, double font_size, double max_width) {
  if (TextWidth(text, font_size) <= max_width) return std::string(text);
  const double room = max_width - TextWidth("…", font_size);
  size_t end = 0;
  for (size_t i = 1; i <= text.size(); ++i) {
    if (i < text.size() && IsContinuationByte(text[i])) continue;
    if (TextWidth(text.substr(0, i), font_size) > room) break;
    end = i;
  }
  return absl::StrCat(text.substr(0, end), "…");
}

Scale::Scale(double d0, double d1, double r0, double r1) : d0_(d0), d1_(d1), r0_(r0), r1_(r1) {}

double Scale::operator()(double v) const {
  if (d1_ == d0_) return r0_;
  return r0_ + (v - d0_) / (d1_ - d0_) * (r1_ - r0_);
}

std::pair<double, double> PaddedDomain(const std::vector<double>& values, double margin,
                                       bool from_zero) {
  double lo = INFINITY, hi = -INFINITY;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (lo > hi) return {0, 1};
  const double min = lo, max = hi;
  if (from_zero) {
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 0.0);
  }
  const double span = hi - lo;
  const double pad = span > 0 ? span * margin : (lo == 0 ? 1 : std::fabs(lo) * 0.1);
  // From zero, the side at zero stays there.
  if (!from_zero || min < 0) lo -= pad;
  if (!from_zero || max > 0 || span == 0) hi += pad;
  return {lo, hi};
}

std::vector<double> NiceTicks(double lo, double hi, int count) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || hi <= lo || count < 1) return {};
  const double raw = (hi - lo) / count;
  const int exponent = static_cast<int>(std::floor(std::log10(raw)));
  const double norm = raw / std::pow(10, exponent);
  const double mantissa = norm < 1.5 ? 1 : norm < 3.5 ? 2 : norm < 7.5 ? 5 : 10;
  // k * mantissa / 10^-exponent rather than k * 0.2: ticks land on the decimals they name.
  const auto value = [&](double k) {
    return exponent < 0 ? k * mantissa / std::pow(10, -exponent)
                        : k * mantissa * std::pow(10, exponent);
  };
  const double step = value(1);
  std::vector<double> ticks;
  for (double k = std::ceil(lo / step - 1e-9);; ++k) {
    const double v = value(k);
    if (v > hi + step * 1e-9) break;
    ticks.push_back(v == 0 ? 0 : v);  // no -0
  }
  return ticks;
}

std::string TickLabel(double v, const std::vector<double>& ticks) {
  if (ticks.size() < 2) return absl::StrFormat("%g", v);
  const double step = ticks[1] - ticks[0];
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  return absl::StrFormat("%.*f", decimals, v);
}

Canvas::Canvas(absl::string_view css_class, double width, double height) {
  absl::StrAppend(&out_, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"", Escape(css_class),
                  "\" viewBox=\"0 0 ", Coord(width), " ", Coord(height), "\" width=\"",
                  Coord(width), "\" height=\"", Coord(height), "\" role=\"img\">\n");
}

void Canvas::Element(absl::string_view tag, const std::vector<double>& coords,
                     const std::string& geometry, const Attrs& attrs) {
  for (double v : coords) {
    if (!std::isfinite(v)) return;
  }
  absl::StrAppend(&out_, "<", tag, geometry);
  for (const auto& [name, value] : attrs) {
    absl::StrAppend(&out_, " ", name, "=\"", Escape(value), "\"");
  }
  out_ += "/>\n";
}

void Canvas::Rect(double x, double y, double w, double h, const Attrs& attrs) {
  if (w < 0 || h < 0) return;
  Element("rect", {x, y, w, h},
          absl::StrCat(" x=\"", Coord(x), "\" y=\"", Coord(y), "\" width=\"", Coord(w),
                       "\" height=\"", Coord(h), "\""),
          attrs);
}

void Canvas::Line(double x1, double y1, double x2, double y2, const Attrs& attrs) {
  Element("line", {x1, y1, x2, y2},
          absl::StrCat(" x1=\"", Coord(x1), "\" y1=\"", Coord(y1), "\" x2=\"", Coord(x2),
                       "\" y2=\"", Coord(y2), "\""),
          attrs);
}

void Canvas::Circle(double cx, double cy, double r, const Attrs& attrs) {
  Element("circle", {cx, cy, r},
          absl::StrCat(" cx=\"", Coord(cx), "\" cy=\"", Coord(cy), "\" r=\"", Coord(r), "\""),
          attrs);
}

void Canvas::Polyline(const std::vector<std::pair<double, double>>& points, const Attrs& attrs) {
  std::string list;
  int kept = 0;
  for (const auto& [x, y] : points) {
    if (!std::isfinite(x) || !std::isfinite(y)) continue;
    absl::StrAppend(&list, kept++ ? " " : "", Coord(x), ",", Coord(y));
  }
  if (kept < 2) return;
  Element("polyline", {}, absl::StrCat(" points=\"", list, "\" fill=\"none\""), attrs);
}

void Canvas::Text(double x, double y, absl::string_view text, const Attrs& attrs) {
  if (!std::isfinite(x) || !std::isfinite(y)) return;
  absl::StrAppend(&out_, "<text x=\"", Coord(x), "\" y=\"", Coord(y), "\"");
  for (const auto& [name, value] : attrs) {
    absl::StrAppend(&out_, " ", name, "=\"", Escape(value), "\"");
  }
  absl::StrAppend(&out_, ">", Escape(text), "</text>\n");
}

void Canvas::Title(absl::string_view text) {
  absl::StrAppend(&out_, "<title>", Escape(text), "</title>\n");
}

void Canvas::Open(absl::string_view css_class, const Attrs& attrs) {
  absl::StrAppend(&out_, "<g class=\"", Escape(css_class), "\"");
  for (const auto& [name, value] : attrs) {
    absl::StrAppend(&out_, " ", name, "=\"", Escape(value), "\"");
  }
  out_ += ">\n";
  ++open_groups_;
}

void Canvas::Close() {
  if (open_groups_ == 0) return;
  out_ += "</g>\n";
  --open_groups_;
}

void Canvas::XAxis(const Scale& x, const std::vector<double>& ticks, double y_top, double y_bottom,
                   absl::string_view label) {
  Open("axis x");
  for (double t : ticks) {
    Line(x(t), y_top, x(t), y_bottom, {{"class", "grid"}});
    Text(x(t), y_bottom + 16, TickLabel(t, ticks), {{"class", "tick"}, {"text-anchor", "middle"}});
  }
  if (!label.empty()) {
    Text((x.range_min() + x.range_max()) / 2, y_bottom + 34, label,
         {{"class", "axis-label"}, {"text-anchor", "middle"}});
  }
  Close();
}

void Canvas::YAxis(const Scale& y, const std::vector<double>& ticks, double x_left, double x_right,
                   absl::string_view label) {
  Open("axis y");
  for (double t : ticks) {
    Line(x_left, y(t), x_right, y(t), {{"class", "grid"}});
    Text(x_left - 8, y(t) + 4, TickLabel(t, ticks), {{"class", "tick"}, {"text-anchor", "end"}});
  }
  if (!label.empty()) {
    const double cy = (y.range_min() + y.range_max()) / 2;
    Text(x_left - 52, cy, label,
         {{"class", "axis-label"},
          {"text-anchor", "middle"},
          {"transform", absl::StrCat("rotate(-90 ", Coord(x_left - 52), " ", Coord(cy), ")")}});
  }
  Close();
}

std::string Canvas::Finish() {
  while (open_groups_ > 0) Close();
  return absl::StrCat(out_, "</svg>\n");
}

}  // namespace svg
}  // namespace ddplab
