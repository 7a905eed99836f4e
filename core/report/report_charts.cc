// "What each lever buys" and "Where the step goes", and what the charts share.
#include "core/report/report_charts.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/report/report_svg.h"

namespace ddplab {
namespace report_html {
namespace {

using svg::Attrs;
using svg::Canvas;
using svg::Scale;

constexpr double kWidth = 1100;
constexpr double kLabelFont = 13;

// "" and "default" are one transport: NCCL's own choice.
std::string TransportKey(absl::string_view transport) {
  return transport.empty() ? "default" : std::string(transport);
}

std::string Section(absl::string_view css_class, absl::string_view title,
                    absl::string_view subtitle, const std::string& svg) {
  return absl::StrCat("<section class=\"", css_class, "\">\n<h2>", svg::Escape(title),
                      "</h2>\n<p class=\"subtitle\">", svg::Escape(subtitle), "</p>\n",
                      "<div class=\"figure\">", svg, "</div>\n</section>\n");
}

// The width of the label column for `labels`: room for the longest, within limits.
double LabelColumn(const std::vector<std::string>& labels) {
  double widest = 0;
  for (const std::string& l : labels) widest = std::max(widest, svg::TextWidth(l, kLabelFont));
  return std::clamp(widest + 18, 120.0, 300.0);
}

void Swatch(Canvas& c, double x, double y, const std::string& color, bool round) {
  if (round) {
    c.Circle(x + 6, y - 4, 6, {{"fill", color}});
  } else {
    c.Rect(x, y - 10, 12, 12, {{"fill", color}});
  }
}

// Legend entries (swatch colour and words) in a row from x at y: dots when `round`.
void Legend(Canvas& c, double x, double y,
            const std::vector<std::pair<std::string, std::string>>& items, bool round) {
  c.Open("legend");
  for (const auto& [color, words] : items) {
    Swatch(c, x, y, color, round);
    c.Text(x + 17, y, words, {{"class", "legend-text"}});
    x += 17 + svg::TextWidth(words, 12) + 26;
  }
  c.Close();
}

// The NCCL transport all rows of `transport` used, when they agree on one.
std::string NcclTransportOf(const v1::SuiteReport& report, absl::string_view transport) {
  std::string seen;
  for (const v1::ReportRow& row : report.rows()) {
    if (row.gpus() <= 1 || TransportKey(row.transport()) != transport) continue;
    if (row.nccl_transport().empty() || (!seen.empty() && seen != row.nccl_transport())) return "";
    seen = row.nccl_transport();
  }
  return seen;
}

// One line of the levers chart: the rows of one configuration and process count.
struct LeverLine {
  std::string label;
  std::vector<const v1::ReportRow*> rows;
  bool lossy = false;
  bool diagnostic = false;
};

std::vector<LeverLine> LeverLines(const v1::SuiteReport& report) {
  std::vector<LeverLine> lines;
  std::vector<std::pair<std::string, int>> keys;
  std::vector<int> counts;
  for (const v1::ReportRow& row : report.rows()) {
    if (row.gpus() <= 1) continue;
    if (std::find(counts.begin(), counts.end(), row.gpus()) == counts.end()) {
      counts.push_back(row.gpus());
    }
    const std::string config = row.configuration().empty() ? row.experiment() : row.configuration();
    const std::pair<std::string, int> key{config, row.gpus()};
    auto it = std::find(keys.begin(), keys.end(), key);
    if (it == keys.end()) {
      keys.push_back(key);
      lines.push_back({config, {}});
      it = keys.end() - 1;
    }
    LeverLine& line = lines[it - keys.begin()];
    line.rows.push_back(&row);
    line.lossy |= row.lossy();
    line.diagnostic |= row.diagnostic();
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    if (counts.size() > 1) absl::StrAppend(&lines[i].label, ", ", keys[i].second, " GPUs");
    if (lines[i].diagnostic) absl::StrAppend(&lines[i].label, " (diagnostic)");
  }
  return lines;
}

// What the levers chart plots of a row.
struct LeverMetric {
  bool vs_single;  // vs_single, else steps/s
  const v1::Spread& Of(const v1::ReportRow& row) const {
    return vs_single ? row.vs_single() : row.steps_per_s();
  }
  // Whether `row` has a dot: the figure is there and its median finite.
  bool Plots(const v1::ReportRow& row) const {
    return (vs_single ? row.has_vs_single() : row.has_steps_per_s()) &&
           std::isfinite(Of(row).median());
  }
};

// The exposed comm ms of `line` per transport of the report ("5.4 / 42.9"), and the
// largest gradient error ("exact" without one).
std::pair<std::string, std::string> LeverNumbers(const v1::SuiteReport& report,
                                                 const LeverLine& line) {
  std::vector<std::string> comm;
  for (const std::string& t : Transports(report)) {
    std::string value = "—";
    for (const v1::ReportRow* row : line.rows) {
      if (TransportKey(row->transport()) == t) value = Number(row->exposed_comm_ms(), 1);
    }
    comm.push_back(value);
  }
  std::string error = "exact";
  double worst = -1;
  for (const v1::ReportRow* row : line.rows) {
    if (!row->has_gradient_error()) continue;
    const double e = row->gradient_error();
    if (!std::isfinite(e) || e > worst) {
      error = Number(e, 1, true);
      if (!std::isfinite(e)) break;
      worst = e;
    }
  }
  return {absl::StrJoin(comm, " / "), error};
}

// A row's dot at its median, its whisker over the repetitions, its value beside it.
void LeverDot(Canvas& c, const v1::SuiteReport& report, const v1::ReportRow& row,
              const LeverMetric& metric, const Scale& x, double y, int side) {
  const v1::Spread& s = metric.Of(row);
  const std::string color = TransportColor(report, TransportKey(row.transport()));
  c.Open("dot", {{"data-experiment", row.experiment()},
                 {"data-transport", TransportKey(row.transport())}});
  std::string tip = absl::StrCat(row.experiment(), " (", TransportName(row.transport()),
                                 "): ", Number(s.median(), 3));
  if (s.count() > 1) {
    absl::StrAppend(&tip, ", ", Number(s.min(), 3), "–", Number(s.max(), 3), " over ", s.count(),
                    " repetitions");
  }
  c.Title(tip);
  if (s.count() > 1 && std::isfinite(s.min()) && std::isfinite(s.max())) {
    const Attrs whisker = {{"class", "whisker"}, {"stroke", color}};
    c.Line(x(s.min()), y, x(s.max()), y, whisker);
    c.Line(x(s.min()), y - 5, x(s.min()), y + 5, whisker);
    c.Line(x(s.max()), y - 5, x(s.max()), y + 5, whisker);
  }
  c.Circle(x(s.median()), y, 6, {{"fill", color}});
  const char* anchor = side < 0 ? "end" : side > 0 ? "start" : "middle";
  c.Text(x(s.median()) + 5 * side, y - 9, Number(s.median(), metric.vs_single ? 3 : 2),
         {{"class", "value"}, {"fill", color}, {"text-anchor", anchor}});
  c.Close();
}

// One line: its band, label, connector, dots and numbers at the right.
void LeverRow(Canvas& c, const v1::SuiteReport& report, const LeverLine& line,
              const LeverMetric& metric, const Scale& x, double y, double right) {
  std::string css = "row";
  if (line.lossy) css += " lossy";
  if (line.diagnostic) css += " diagnostic";
  c.Open(css);
  const double label_x = x.range_min() - 14;
  c.Text(label_x, y + 4, svg::Truncate(line.label, kLabelFont, label_x - 4),
         {{"class", "label"}, {"text-anchor", "end"}});
  std::vector<std::pair<double, const v1::ReportRow*>> dots;
  for (const v1::ReportRow* row : line.rows) {
    if (metric.Plots(*row)) dots.push_back({metric.Of(*row).median(), row});
  }
  std::sort(dots.begin(), dots.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  if (dots.size() > 1) {
    c.Line(x(dots.front().first), y, x(dots.back().first), y, {{"class", "connector"}});
  }
  for (size_t i = 0; i < dots.size(); ++i) {
    // The lowest value's number left of its dot, the others' right: close dots stay legible.
    const int side = dots.size() == 1 ? 0 : i == 0 ? -1 : 1;
    LeverDot(c, report, *dots[i].second, metric, x, y, side);
  }
  const auto [comm, error] = LeverNumbers(report, line);
  c.Text(right, y + 4, comm, {{"class", "number"}});
  c.Text(right + 150, y + 4, error, {{"class", line.lossy ? "number lossy" : "number"}});
  c.Close();
}

std::string LeversSubtitle(const v1::SuiteReport& report, const LeverMetric& metric) {
  std::string s = metric.vs_single
                      ? "Per-GPU step rate as a fraction of one GPU alone (1.0: communication "
                        "costs nothing); the dot is the median"
                      : "Steps/s per process (median): no row has a step rate relative to a "
                        "single-process run, so raw steps/s are plotted";
  if (report.repetitions() > 1) {
    absl::StrAppend(&s, " of up to ", report.repetitions(),
                    " repetitions, the whisker their min–max.");
  } else {
    absl::StrAppend(&s, " of one run each.");
  }
  return s;
}

// "What each lever buys", on what: "on 2 × NVIDIA H200" when the lines share a count.
std::string LeversTitle(const v1::SuiteReport& report, const std::vector<LeverLine>& lines) {
  std::string title = "What each lever buys";
  const std::string& device = report.machine().device();
  if (device.empty()) return title;
  const int gpus = lines.front().rows.front()->gpus();
  for (const LeverLine& line : lines) {
    if (line.rows.front()->gpus() != gpus) return absl::StrCat(title, " on ", device);
  }
  return absl::StrCat(title, " on ", gpus, " × ", device);
}

std::vector<double> LeverDomainValues(const std::vector<LeverLine>& lines,
                                      const LeverMetric& metric) {
  std::vector<double> values;
  if (metric.vs_single) values.push_back(1.0);
  for (const LeverLine& line : lines) {
    for (const v1::ReportRow* row : line.rows) {
      if (!metric.Plots(*row)) continue;
      const v1::Spread& s = metric.Of(*row);
      values.push_back(s.median());
      if (s.count() > 1) values.insert(values.end(), {s.min(), s.max()});
    }
  }
  return values;
}

void LeverLegend(Canvas& c, const v1::SuiteReport& report, const std::vector<LeverLine>& lines,
                 double x, double y) {
  std::vector<std::pair<std::string, std::string>> items;
  for (const std::string& t : Transports(report)) {
    std::string words = TransportName(t);
    const std::string nccl = NcclTransportOf(report, t);
    if (!nccl.empty()) absl::StrAppend(&words, " (NCCL ", nccl, ")");
    items.push_back({TransportColor(report, t), words});
  }
  Legend(c, x, y, items, true);
  std::vector<std::string> notes;
  if (std::any_of(lines.begin(), lines.end(), [](const LeverLine& l) { return l.lossy; })) {
    notes.push_back("orange labels: lossy (compressed) gradients");
  }
  if (std::any_of(lines.begin(), lines.end(), [](const LeverLine& l) { return l.diagnostic; })) {
    notes.push_back("grey: diagnostic runs, never recommended");
  }
  c.Text(x, y + 22, absl::StrJoin(notes, " · "), {{"class", "note"}});
}

}  // namespace

std::string TransportName(absl::string_view transport) {
  if (transport.empty() || transport == "default") return "default";
  if (transport == "NVLINK") return "NVLink";
  if (transport == "HOST_MEMORY") return "host memory";
  if (transport == "NETWORK") return "network";
  return std::string(transport);
}

std::vector<std::string> Transports(const v1::SuiteReport& report) {
  std::vector<std::string> out;
  for (const v1::ReportRow& row : report.rows()) {
    const std::string key = TransportKey(row.transport());
    if (row.gpus() > 1 && std::find(out.begin(), out.end(), key) == out.end()) out.push_back(key);
  }
  return out;
}

std::string TransportColor(const v1::SuiteReport& report, absl::string_view transport) {
  if (transport == "NVLINK") return "#1f77b4";
  if (transport == "HOST_MEMORY") return "#d62728";
  if (transport == "NETWORK") return "#2ca02c";
  if (transport.empty() || transport == "default") return "#9467bd";
  static const char* const kPalette[] = {"#17becf", "#8c564b", "#e377c2", "#bcbd22", "#393b79"};
  const std::vector<std::string> all = Transports(report);
  const size_t i = std::find(all.begin(), all.end(), transport) - all.begin();
  return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))];
}

std::string Number(double v, int decimals, bool scientific) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "∞" : "-∞";
  return scientific ? absl::StrFormat("%.*e", decimals, v) : absl::StrFormat("%.*f", decimals, v);
}

std::vector<const v1::ReportRow*> SingleProcessRows(const v1::SuiteReport& report) {
  std::vector<const v1::ReportRow*> out;
  for (const v1::ReportRow& row : report.rows()) {
    if (row.gpus() <= 1) out.push_back(&row);
  }
  return out;
}

std::string LeversChart(const v1::SuiteReport& report) {
  const std::vector<LeverLine> lines = LeverLines(report);
  if (lines.empty()) return "";
  LeverMetric metric{false};
  for (const LeverLine& line : lines) {
    for (const v1::ReportRow* row : line.rows) metric.vs_single |= row->has_vs_single();
  }
  std::vector<std::string> labels;
  for (const LeverLine& line : lines) labels.push_back(line.label);
  const double label_w = LabelColumn(labels), right = kWidth - 260;
  const double top = 46, row_h = 28, bottom = top + row_h * lines.size();
  const auto [lo, hi] = svg::PaddedDomain(LeverDomainValues(lines, metric), 0.06, false);
  const Scale x(lo, hi, label_w + 20, right - 30);
  Canvas c("chart levers", kWidth, bottom + 96);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i % 2 == 0) c.Rect(0, top + row_h * i, kWidth, row_h, {{"class", "band"}});
  }
  c.XAxis(x, svg::NiceTicks(lo, hi, 8), top, bottom,
          metric.vs_single ? "steps/s per GPU over one GPU's" : "steps/s (median)");
  if (metric.vs_single) {
    c.Line(x(1.0), top - 6, x(1.0), bottom, {{"class", "reference"}});
    c.Text(x(1.0), top - 12, "1 GPU", {{"class", "reference-label"}, {"text-anchor", "middle"}});
  }
  std::vector<std::string> names;
  for (const std::string& t : Transports(report)) names.push_back(TransportName(t));
  c.Text(right, top - 24, absl::StrJoin(names, " / "), {{"class", "column-note"}});
  c.Text(right, top - 10, "exposed comm ms", {{"class", "column-head"}});
  c.Text(right + 150, top - 10, "grad error", {{"class", "column-head"}});
  for (size_t i = 0; i < lines.size(); ++i) {
    LeverRow(c, report, lines[i], metric, x, top + row_h * (i + 0.5), right);
  }
  LeverLegend(c, report, lines, label_w + 20, bottom + 62);
  return Section("levers", LeversTitle(report, lines), LeversSubtitle(report, metric), c.Finish());
}

namespace {

struct Segment {
  const char* css;
  const char* name;
  const char* color;
  double (v1::StepParts::*ms)() const;
};

const Segment kSegments[] = {
    {"forward", "forward", "#7eaee0", &v1::StepParts::forward_ms},
    {"backward", "backward as on 1 GPU", "#8c6bc8", &v1::StepParts::backward_single_ms},
    // Forward and backward slower than on one GPU: beside overlapping collectives, or
    // (one bucket after backward, which overlaps nothing) beside the other processes.
    {"slowdown", "compute slower than on 1 GPU", "#f0a94a", &v1::StepParts::compute_slowdown_ms},
    {"exposed", "exposed comm", "#d62728", &v1::StepParts::exposed_comm_ms},
    {"optimizer", "optimizer", "#6f6f6f", &v1::StepParts::optimizer_ms},
    {"other", "other", "#c4c4c4", &v1::StepParts::other_ms},
};

// A bar's rows and labels: the single-process rows first ("1 GPU"), then the others.
std::vector<std::pair<std::string, const v1::ReportRow*>> StepBars(const v1::SuiteReport& report) {
  std::vector<std::pair<std::string, const v1::ReportRow*>> bars;
  const std::vector<const v1::ReportRow*> singles = SingleProcessRows(report);
  for (const v1::ReportRow* row : singles) {
    if (!row->has_parts()) continue;
    bars.push_back(
        {singles.size() == 1 ? "1 GPU" : absl::StrCat("1 GPU: ", row->experiment()), row});
  }
  for (const v1::ReportRow& row : report.rows()) {
    if (row.gpus() <= 1 || !row.has_parts()) continue;
    bars.push_back(
        {row.diagnostic() ? absl::StrCat(row.experiment(), " (diagnostic)") : row.experiment(),
         &row});
  }
  return bars;
}

// The drawn length of a bar: its segments (finite, positive) end to end.
double SegmentsMs(const v1::StepParts& parts) {
  double sum = 0;
  for (const Segment& s : kSegments) {
    const double ms = (parts.*s.ms)();
    if (std::isfinite(ms) && ms > 0) sum += ms;
  }
  return sum;
}

void StepBar(Canvas& c, const std::string& label, const v1::ReportRow& row, const Scale& x,
             double y, double height) {
  const v1::StepParts& parts = row.parts();
  c.Open(row.diagnostic() ? "bar diagnostic" : "bar", {{"data-experiment", row.experiment()}});
  const double label_x = x.range_min() - 10;
  c.Text(label_x, y + height / 2 + 4, svg::Truncate(label, kLabelFont, label_x - 4),
         {{"class", "label"}, {"text-anchor", "end"}});
  double at = 0;
  for (const Segment& s : kSegments) {
    const double ms = (parts.*s.ms)();
    if (!std::isfinite(ms) || ms <= 0) continue;
    c.Open(absl::StrCat("seg ", s.css));
    c.Title(absl::StrCat(s.name, ": ", Number(ms, 1), " ms"));
    c.Rect(x(at), y, x(at + ms) - x(at), height, {{"fill", s.color}});
    c.Close();
    at += ms;
  }
  // The step's own total when it has one (NaN said as such), else the segments'.
  const double step = parts.step_ms();
  std::string total = Number(at, 1);
  double end = at;
  if (!std::isfinite(step)) {
    total = Number(step, 1);
  } else if (step > 0) {
    total = Number(step, 1);
    end = std::max(at, step);
  }
  c.Text(x(end) + 6, y + height / 2 + 4, absl::StrCat(total, " ms"), {{"class", "total"}});
  c.Close();
}

}  // namespace

std::string StepChart(const v1::SuiteReport& report) {
  const auto bars = StepBars(report);
  if (bars.empty()) return "";
  std::vector<std::string> labels;
  std::vector<double> totals;
  for (const auto& [label, row] : bars) {
    labels.push_back(label);
    totals.push_back(SegmentsMs(row->parts()));
    totals.push_back(row->parts().step_ms());
  }
  const double label_w = LabelColumn(labels);
  const double top = 12, row_h = 28, bar_h = 19, bottom = top + row_h * bars.size();
  const auto [lo, hi] = svg::PaddedDomain(totals, 0.04, true);
  const std::vector<double> ticks = svg::NiceTicks(lo, hi, 8);
  const Scale x(lo, hi, label_w, kWidth - 90);
  Canvas c("chart step", kWidth, bottom + 76);
  c.XAxis(x, ticks, top, bottom, "ms per step");
  for (size_t i = 0; i < bars.size(); ++i) {
    StepBar(c, bars[i].first, *bars[i].second, x, top + row_h * i + (row_h - bar_h) / 2, bar_h);
  }
  std::vector<std::pair<std::string, std::string>> items;
  for (const Segment& s : kSegments) items.push_back({s.color, s.name});
  Legend(c, label_w, bottom + 62, items, false);
  return Section("step", "Where the step goes (ms per step, rank 0)",
                 "Medians. Compute is split into what it takes on one GPU and what communication "
                 "beside it slows it by; exposed comm is the wait for the last bucket after "
                 "backward.",
                 c.Finish());
}

}  // namespace report_html
}  // namespace ddplab
