// "Scaling": aggregate throughput against the number of GPUs, with linear scaling's line.
#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/report/report_charts.h"
#include "core/report/report_svg.h"

namespace ddplab {
namespace report_html {
namespace {

using svg::Canvas;
using svg::Scale;

constexpr double kWidth = 1100, kHeight = 340;
constexpr double kLeft = 90, kRight = 770, kTop = 20, kBottom = 280;

// One line of the chart: a configuration on a transport, (GPUs, steps/s x GPUs) points.
struct Series {
  std::string name;
  std::vector<std::pair<int, double>> points;
  std::vector<std::string> experiments;  // of each point
};

std::string ConfigurationOf(const v1::ReportRow& row) {
  return row.configuration().empty() ? row.experiment() : row.configuration();
}

// A row's median steps/s; NaN when it has none.
double StepsPerS(const v1::ReportRow& row) {
  return row.has_steps_per_s() ? row.steps_per_s().median() : NAN;
}

// The configurations of rows of several processes whose rows ran at two or more GPU
// counts, a single-process row of the same configuration counting as 1.
std::vector<std::string> ScalingConfigurations(const v1::SuiteReport& report) {
  std::vector<std::string> out;
  for (const v1::ReportRow& row : report.rows()) {
    const std::string config = ConfigurationOf(row);
    if (row.gpus() <= 1 || std::find(out.begin(), out.end(), config) != out.end()) continue;
    std::set<int> counts;
    for (const v1::ReportRow& other : report.rows()) {
      if (ConfigurationOf(other) == config) counts.insert(std::max(other.gpus(), 1));
    }
    if (counts.size() >= 2) out.push_back(config);
  }
  return out;
}

// The 1-GPU point of `config`: its own single-process row, else the report's first.
const v1::ReportRow* OneGpuRow(const v1::SuiteReport& report, const std::string& config) {
  const std::vector<const v1::ReportRow*> singles = SingleProcessRows(report);
  for (const v1::ReportRow* row : singles) {
    if (ConfigurationOf(*row) == config) return row;
  }
  return singles.empty() ? nullptr : singles.front();
}

std::vector<Series> ScalingSeries(const v1::SuiteReport& report) {
  std::vector<Series> out;
  for (const std::string& config : ScalingConfigurations(report)) {
    const v1::ReportRow* one = OneGpuRow(report, config);
    for (const std::string& transport : Transports(report)) {
      Series s{absl::StrCat(config, ", ", TransportName(transport)), {}, {}};
      if (one != nullptr) {
        s.points.push_back({1, StepsPerS(*one)});
        s.experiments.push_back(one->experiment());
      }
      for (const v1::ReportRow& row : report.rows()) {
        const std::string key = row.transport().empty() ? "default" : row.transport();
        if (row.gpus() <= 1 || ConfigurationOf(row) != config || key != transport) continue;
        s.points.push_back({row.gpus(), StepsPerS(row) * row.gpus()});
        s.experiments.push_back(row.experiment());
      }
      if (s.points.size() > (one != nullptr ? 1u : 0u)) out.push_back(std::move(s));
    }
  }
  for (Series& s : out) {
    // Points in GPU order, each with its experiment.
    std::vector<size_t> order(s.points.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return s.points[a].first < s.points[b].first; });
    Series sorted{s.name, {}, {}};
    for (size_t i : order) {
      sorted.points.push_back(s.points[i]);
      sorted.experiments.push_back(s.experiments[i]);
    }
    s = std::move(sorted);
  }
  return out;
}

const char* SeriesColor(size_t i) {
  static const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                         "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
  return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))];
}

void DrawSeries(Canvas& c, const Series& s, const char* color, const Scale& x, const Scale& y) {
  c.Open("series-group", {{"data-series", s.name}});
  std::vector<std::pair<double, double>> line;
  for (const auto& [gpus, value] : s.points) {
    if (std::isfinite(value)) line.push_back({x(gpus), y(value)});
  }
  c.Polyline(line, {{"class", "series"}, {"stroke", color}});
  for (size_t i = 0; i < s.points.size(); ++i) {
    const auto [gpus, value] = s.points[i];
    if (!std::isfinite(value)) continue;
    c.Open("point");
    c.Title(absl::StrCat(s.experiments[i], ": ", gpus, " GPU", gpus == 1 ? "" : "s", ", ",
                         Number(value, 2), " steps/s x GPUs"));
    c.Circle(x(gpus), y(value), 4.5, {{"fill", color}});
    c.Close();
  }
  c.Close();
}

// The ideal: the 1-GPU run's steps/s times the GPUs.
void DrawIdeal(Canvas& c, double one, int max_gpus, const Scale& x, const Scale& y) {
  if (!std::isfinite(one) || one <= 0) return;
  c.Polyline({{x(1), y(one)}, {x(max_gpus), y(one * max_gpus)}}, {{"class", "ideal"}});
  c.Text(x(max_gpus) - 4, y(one * max_gpus) - 8, "ideal (linear)",
         {{"class", "ideal-label"}, {"text-anchor", "end"}});
}

}  // namespace

std::string ScalingChart(const v1::SuiteReport& report) {
  const std::vector<Series> series = ScalingSeries(report);
  if (series.empty()) return "";
  std::set<int> counts;
  std::vector<double> values;
  for (const Series& s : series) {
    for (const auto& [gpus, value] : s.points) {
      counts.insert(gpus);
      values.push_back(value);
    }
  }
  const int max_gpus = *counts.rbegin();
  const std::vector<const v1::ReportRow*> singles = SingleProcessRows(report);
  const double one = singles.empty() ? NAN : StepsPerS(*singles.front());
  if (std::isfinite(one)) values.push_back(one * max_gpus);
  const auto [ylo, yhi] = svg::PaddedDomain(values, 0.08, true);
  const Scale x(0, max_gpus * 1.06, kLeft, kRight);
  const Scale y(ylo, yhi, kBottom, kTop);
  Canvas c("chart scaling", kWidth, std::max(kHeight, kTop + 22.0 * series.size() + 20));
  c.YAxis(y, svg::NiceTicks(ylo, yhi, 6), kLeft, kRight, "steps/s x GPUs");
  c.XAxis(x, std::vector<double>(counts.begin(), counts.end()), kTop, kBottom, "GPUs");
  DrawIdeal(c, one, max_gpus, x, y);
  c.Open("legend");
  for (size_t i = 0; i < series.size(); ++i) {
    const double ly = kTop + 10 + 22 * i;
    c.Line(kRight + 24, ly - 4, kRight + 48, ly - 4,
           {{"class", "series"}, {"stroke", SeriesColor(i)}});
    c.Text(kRight + 56, ly, svg::Truncate(series[i].name, 12, kWidth - kRight - 60),
           {{"class", "legend-text"}});
  }
  c.Close();
  for (size_t i = 0; i < series.size(); ++i) DrawSeries(c, series[i], SeriesColor(i), x, y);
  return absl::StrCat(
      "<section class=\"scaling\">\n<h2>Scaling</h2>\n<p class=\"subtitle\">Aggregate "
      "throughput: each process's steps/s (median) times the processes, which is samples/s "
      "over the batch per GPU. Dashed: linear scaling from the 1-GPU run.</p>\n"
      "<div class=\"figure\">",
      c.Finish(), "</div>\n</section>\n");
}

}  // namespace report_html
}  // namespace ddplab
