#include "core/report/report_html.h"

#include <cmath>
#include <limits>
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/report/report_svg.h"
#include "ddplab/v1/report.pb.h"
#include "gtest/gtest.h"

namespace ddplab {
namespace {

using v1::ReportRow;
using v1::SuiteReport;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

int Count(absl::string_view haystack, absl::string_view needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != absl::string_view::npos;
       at = haystack.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

// The <svg> of the chart of `kind` ("levers", "step", "scaling"), or "" if none.
std::string Chart(const std::string& html, absl::string_view kind) {
  const size_t start = html.find(absl::StrCat("class=\"chart ", kind, "\""));
  if (start == std::string::npos) return "";
  return html.substr(start, html.find("</svg>", start) - start);
}

void SetSpread(v1::Spread* s, double median, double min, double max, int count) {
  s->set_median(median);
  s->set_min(min);
  s->set_max(max);
  s->set_count(count);
}

void SetParts(ReportRow* row, double exposed_ms) {
  v1::StepParts* p = row->mutable_parts();
  p->set_forward_ms(28);
  p->set_backward_single_ms(50);
  p->set_compute_slowdown_ms(exposed_ms > 0 ? 2 : 0);
  p->set_exposed_comm_ms(exposed_ms);
  p->set_optimizer_ms(0.5);
  p->set_other_ms(0.5);
  p->set_step_ms(79 + (exposed_ms > 0 ? 2 : 0) + exposed_ms);
}

ReportRow* AddRow(SuiteReport& report, const std::string& config, const std::string& transport,
                  int gpus, double vs_single) {
  ReportRow* row = report.add_rows();
  row->set_configuration(config);
  row->set_experiment(
      absl::StrCat(config, "_", transport, gpus > 2 ? absl::StrCat("_", gpus) : ""));
  row->set_gpus(gpus);
  row->set_transport(transport);
  row->set_nccl_transport(transport == "NVLINK" ? "P2P" : "SHM");
  SetSpread(row->mutable_steps_per_s(), 12.5 * vs_single, 12.5 * vs_single, 12.5 * vs_single, 1);
  SetSpread(row->mutable_vs_single(), vs_single, vs_single, vs_single, 1);
  row->set_exposed_comm_ms(transport == "NVLINK" ? 5.4 : 42.9);
  row->set_peak_memory_gib(5.1);
  row->set_tflops_per_gpu(30);
  SetParts(row, row->exposed_comm_ms());
  return row;
}

// Two GPUs over two transports, with spread over three repetitions for naive_ddp; a
// lossy configuration, a diagnostic run, a single-process row, two recommendations.
SuiteReport Sample() {
  SuiteReport report;
  report.set_suite("seed");
  report.set_date("2025-11-02T03:51:00Z");
  report.set_repetitions(3);
  v1::Machine* m = report.mutable_machine();
  m->set_device("NVIDIA H200");
  m->set_device_count(2);
  m->set_nccl_version("2.28.9");
  m->set_topology("NV18");
  ReportRow* single = report.add_rows();
  single->set_experiment("single_gpu");
  single->set_configuration("single_gpu");
  single->set_gpus(1);
  SetSpread(single->mutable_steps_per_s(), 12.5, 12.4, 12.6, 3);
  SetParts(single, 0);
  ReportRow* naive = AddRow(report, "naive_ddp", "NVLINK", 2, 0.906);
  SetSpread(naive->mutable_vs_single(), 0.906, 0.9, 0.91, 3);
  SetSpread(naive->mutable_steps_per_s(), 11.3, 11.2, 11.4, 3);
  naive = AddRow(report, "naive_ddp", "HOST_MEMORY", 2, 0.634);
  SetSpread(naive->mutable_vs_single(), 0.634, 0.62, 0.64, 3);
  for (const auto& [transport, rate] : {std::pair<const char*, double>{"NVLINK", 0.931}, {"HOST_MEMORY", 0.883}}) {
    ReportRow* bf16 = AddRow(report, "bf16", transport, 2, rate);
    bf16->set_gradient_error(2.3e-3);
    bf16->set_lossy(true);  // as MakeReport marks a row whose error was sampled
  }
  AddRow(report, "trace", "NVLINK", 2, 0.897)->set_diagnostic(true);
  v1::Recommendation* r = report.add_recommendations();
  r->set_transport("NVLINK");
  r->set_text("On NVLink, bf16 is fastest.");
  r->set_pytorch("model = DDP(model, device_ids=[rank], bucket_cap_mb=25)");
  r->add_ddplab_only("zero_copy");
  r->set_fastest("bf16_NVLINK");
  r->set_runner_up("naive_ddp_NVLINK");
  r = report.add_recommendations();
  r->set_transport("HOST_MEMORY");
  r->set_within_noise(true);
  r->set_text("Over host memory, no winner.");
  return report;
}

TEST(ReportHtmlTest, PageStandsAlone) {
  const std::string html = FormatHtml(Sample());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<style>"), std::string::npos);
  EXPECT_NE(html.find("system-ui"), std::string::npos);
  EXPECT_EQ(Count(html, "<script"), 0);
  EXPECT_EQ(Count(html, "http://"), Count(html, "xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_EQ(Count(html, "https://"), 0);
  EXPECT_EQ(Count(html, "<link"), 0);
}

TEST(ReportHtmlTest, HeaderNamesTheMachineAndRepetitions) {
  const std::string html = FormatHtml(Sample());
  EXPECT_NE(html.find("<h1>seed</h1>"), std::string::npos);
  EXPECT_NE(html.find("2025-11-02T03:51:00Z"), std::string::npos);
  EXPECT_NE(html.find("NVIDIA H200 × 2"), std::string::npos);
  EXPECT_NE(html.find("<b>NCCL</b>2.28.9"), std::string::npos);
  EXPECT_NE(html.find("<b>topology</b>NV18"), std::string::npos);
  EXPECT_NE(html.find("up to 3 repetitions"), std::string::npos);
  EXPECT_NE(html.find("] ×3</div>"), std::string::npos) << "each row says how many repetitions it got";
  EXPECT_EQ(html.find("<b>driver</b>"), std::string::npos) << "empty fields are left out";
}

TEST(ReportHtmlTest, TwoChartsWithADotPerRowOfSeveralProcesses) {
  const std::string html = FormatHtml(Sample());
  EXPECT_EQ(Count(html, "<svg "), 2);
  const std::string levers = Chart(html, "levers");
  ASSERT_FALSE(levers.empty());
  EXPECT_EQ(Count(levers, "<g class=\"dot\""), 5);
  EXPECT_EQ(Count(levers, "<g class=\"row"), 3) << "naive_ddp, bf16, trace";
  EXPECT_EQ(Count(levers, "data-transport=\"NVLINK\""), 3);
  EXPECT_EQ(Count(levers, "data-transport=\"HOST_MEMORY\""), 2);
  EXPECT_LT(levers.find(">naive_ddp<"), levers.find(">bf16<")) << "in order of first appearance";
  EXPECT_EQ(Count(levers, "class=\"whisker\""), 2 * 3) << "only the rows of 3 repetitions";
  EXPECT_NE(levers.find(">0.906<"), std::string::npos) << "the median beside its dot";
  EXPECT_NE(levers.find(">5.4 / 42.9<"), std::string::npos) << "exposed comm per transport";
  EXPECT_EQ(Chart(html, "scaling"), "");
  EXPECT_NE(html.find("<h2>What each lever buys on 2 × NVIDIA H200</h2>"), std::string::npos);
}

TEST(ReportHtmlTest, LeversAxisFollowsTheDataAndMarksOneGpu) {
  const std::string levers = Chart(FormatHtml(Sample()), "levers");
  EXPECT_NE(levers.find("class=\"reference\""), std::string::npos);
  EXPECT_NE(levers.find(">1 GPU<"), std::string::npos);
  EXPECT_NE(levers.find(">0.70<"), std::string::npos);
  EXPECT_NE(levers.find(">1.00<"), std::string::npos);
  EXPECT_EQ(levers.find(">0.00<"), std::string::npos) << "the axis does not start at 0";
  EXPECT_GE(Count(levers, "class=\"grid\""), 4);
}

// #64: on CPUs the charts speak of processes, not GPUs.
TEST(ReportHtmlTest, ACpuReportsChartsNameProcessesNotGpus) {
  SuiteReport report = Sample();
  report.mutable_machine()->clear_device();
  report.mutable_machine()->set_device_count(0);
  report.mutable_machine()->set_cpu("Some CPU");
  const std::string html = FormatHtml(report);
  for (const char* kind : {"levers", "step"}) {
    const std::string chart = Chart(html, kind);
    ASSERT_FALSE(chart.empty()) << kind;
    EXPECT_EQ(chart.find("GPU"), std::string::npos) << kind << ": " << chart;
  }
  EXPECT_NE(Chart(html, "levers").find(">1 process<"), std::string::npos);
  EXPECT_NE(html.find("Per-process step rate as a fraction of one process alone"), std::string::npos);
}

// The error over the longest window beside one step's, the cosine as the cell's title.
TEST(ReportHtmlTest, TheGradientErrorCellShowsTheWindowedError) {
  SuiteReport report = Sample();
  ReportRow* bf16 = report.mutable_rows(3);  // bf16 over NVLink
  bf16->set_effective_error(9e-4);
  bf16->set_effective_error_steps(8);
  bf16->set_gradient_cosine(0.9995);
  const std::string html = FormatHtml(report);
  EXPECT_NE(html.find("<td class=\"num lossy\" title=\"cosine 0.9995\">2.3e-03 (8-step 9.0e-04)</td>"),
            std::string::npos);
  EXPECT_NE(html.find("class=\"num lossy\">2.3e-03</td>"), std::string::npos) << "the other bf16 row, as before";
}

// A row's share of its bound, the bound in words as the cell's title; a dash without one.
TEST(ReportHtmlTest, TheBoundCellShowsTheShare) {
  SuiteReport report = Sample();
  ddplab::v1::RowBound* bound = report.mutable_rows(3)->mutable_bound();
  bound->set_steps_per_s(12.25);
  bound->set_share(0.978);
  bound->set_text("bound 12.25 steps/s, set by compute (<hides>)");
  const std::string html = FormatHtml(report);
  EXPECT_NE(html.find("<th class=\"num\" title=\"the row's steps/s over the most its machine allows it\">of bound</th>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\" title=\"bound 12.25 steps/s, set by compute (&lt;hides&gt;)\">0.978 of "
                      "12.25</td>"),
            std::string::npos)
      << html;
}

TEST(ReportHtmlTest, LossyAndDiagnosticRowsAreMarked) {
  const std::string html = FormatHtml(Sample());
  const std::string levers = Chart(html, "levers");
  EXPECT_EQ(Count(levers, "<g class=\"row lossy\""), 1);
  EXPECT_EQ(Count(levers, "<g class=\"row diagnostic\""), 1);
  EXPECT_NE(levers.find(">trace (diagnostic)<"), std::string::npos);
  EXPECT_NE(levers.find("class=\"number lossy\">2.3e-03<"), std::string::npos);
  EXPECT_EQ(Count(levers, ">exact<"), 2);
  EXPECT_NE(html.find("<tr class=\"diagnostic\">"), std::string::npos);
  EXPECT_NE(html.find("<span class=\"tag\">diagnostic</span>"), std::string::npos);
}

TEST(ReportHtmlTest, StepChartHasABarPerRowSingleProcessFirst) {
  const std::string step = Chart(FormatHtml(Sample()), "step");
  ASSERT_FALSE(step.empty());
  EXPECT_EQ(Count(step, "<g class=\"bar"), 6);
  EXPECT_LT(step.find(">1 GPU<"), step.find(">naive_ddp_NVLINK<"));
  EXPECT_NE(step.find(">79.0 ms<"), std::string::npos) << "the single-process step's total";
  EXPECT_NE(step.find(">123.9 ms<"), std::string::npos) << "naive_ddp over host memory";
  EXPECT_EQ(Count(step, "<g class=\"seg exposed\""), 5);
  EXPECT_EQ(Count(step, "<g class=\"seg forward\""), 6);
  EXPECT_NE(step.find(">ms per step<"), std::string::npos);
}

TEST(ReportHtmlTest, TableHasEveryRowAndDashesForMissingValues) {
  const std::string html = FormatHtml(Sample());
  const size_t body = html.find("<tbody>");
  ASSERT_NE(body, std::string::npos);
  const std::string table = html.substr(body, html.find("</tbody>") - body);
  EXPECT_EQ(Count(table, "<tr"), 6);
  EXPECT_NE(table.find("NVLink (P2P)"), std::string::npos);
  EXPECT_NE(table.find("host memory (SHM)"), std::string::npos);
  EXPECT_NE(table.find("11.30<div class=\"range\">[11.20–11.40] ×3</div>"), std::string::npos);
  EXPECT_NE(table.find(">11.64</td>"), std::string::npos) << "no range for one repetition";
  EXPECT_GE(Count(table, ">—</td>"), 6) << "vs naive and busbw are absent";
}

TEST(ReportHtmlTest, RecommendationsWithBadgeAndPyTorch) {
  const std::string html = FormatHtml(Sample());
  EXPECT_EQ(Count(html, "<span class=\"badge noise\""), 1);
  EXPECT_NE(html.find(">within noise</span>"), std::string::npos);
  EXPECT_NE(html.find("<pre><code class=\"pytorch\">model = DDP(model, device_ids=[rank], "
                      "bucket_cap_mb=25)</code></pre>"),
            std::string::npos);
  EXPECT_NE(html.find("needs ddplab's engine: zero_copy"), std::string::npos);
  EXPECT_EQ(Count(html, "<article class=\"rec\">"), 2);
  EXPECT_NE(html.find("<h3>On NVLink</h3>"), std::string::npos);
  EXPECT_NE(html.find("fastest: bf16_NVLINK · runner-up: naive_ddp_NVLINK"), std::string::npos);
}

TEST(ReportHtmlTest, EscapesEverythingFromTheReport) {
  SuiteReport report = Sample();
  const std::string hostile = "<script>alert(\"x\" & 'y')</script>";
  const std::string escaped = "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;";
  report.set_suite(hostile);
  report.mutable_machine()->set_cpu(hostile);
  for (ReportRow& row : *report.mutable_rows()) {
    row.set_experiment(hostile + row.experiment());
    row.set_configuration(hostile + row.configuration());
    row.set_description(hostile);
    row.set_transport(row.transport().empty() ? "" : hostile);
  }
  report.mutable_recommendations(0)->set_text(hostile);
  report.mutable_recommendations(0)->set_pytorch(hostile);
  report.mutable_recommendations(0)->add_ddplab_only(hostile);
  const std::string html = FormatHtml(report);
  EXPECT_EQ(Count(html, "<script"), 0);
  EXPECT_EQ(Count(html, "'y'"), 0);
  EXPECT_GT(Count(html, escaped), 20);
  EXPECT_EQ(Count(Chart(html, "levers"), "<g class=\"dot\""), 5);
}

// No coordinate of any drawn element is NaN or infinite.
void ExpectFiniteGeometry(const std::string& html) {
  static const std::regex kBad(
      "\\b(x|y|x1|x2|y1|y2|cx|cy|r|width|height|points|transform|viewBox)=\"[^\"]*(nan|inf)",
      std::regex::icase);
  std::smatch m;
  EXPECT_FALSE(std::regex_search(html, m, kBad)) << m.str();
}

TEST(ReportHtmlTest, NaNAndInfinitiesSkipPointsNotCharts) {
  SuiteReport report = Sample();
  ReportRow* bad = report.mutable_rows(3);  // bf16 over NVLink
  SetSpread(bad->mutable_vs_single(), kNaN, kNaN, kInf, 3);
  SetSpread(bad->mutable_steps_per_s(), kNaN, -kInf, kInf, 3);
  bad->mutable_parts()->set_forward_ms(kNaN);
  bad->mutable_parts()->set_step_ms(kInf);
  bad->set_gradient_error(kNaN);
  bad->set_busbw_gbps(kInf);
  bad->set_exposed_comm_ms(kNaN);
  const std::string html = FormatHtml(report);
  ExpectFiniteGeometry(html);
  EXPECT_EQ(Count(Chart(html, "levers"), "<g class=\"dot\""), 4);
  EXPECT_EQ(Count(Chart(html, "step"), "<g class=\"bar"), 6);
  EXPECT_EQ(Count(Chart(html, "step"), "<g class=\"seg forward\""), 5);
  EXPECT_NE(html.find(">NaN<div class=\"range\">[-∞–∞] ×3</div>"), std::string::npos);
  EXPECT_NE(html.find(">∞</td>"), std::string::npos);
  EXPECT_NE(html.find("class=\"num lossy\">NaN</td>"), std::string::npos);
  EXPECT_NE(Chart(html, "levers").find(">NaN / 42.9<"), std::string::npos);

  for (ReportRow& row : *report.mutable_rows()) {
    SetSpread(row.mutable_vs_single(), kNaN, kNaN, kNaN, 3);
    row.mutable_parts()->set_step_ms(kNaN);
  }
  const std::string all_nan = FormatHtml(report);
  ExpectFiniteGeometry(all_nan);
  EXPECT_EQ(Count(Chart(all_nan, "levers"), "<g class=\"dot\""), 0);
  EXPECT_NE(Chart(all_nan, "step").find(">NaN ms<"), std::string::npos);
}

TEST(ReportHtmlTest, RowsWithoutTheFigureHaveNoDot) {
  SuiteReport report = Sample();
  report.mutable_rows(3)->clear_vs_single();
  report.mutable_rows(4)->clear_steps_per_s();
  const std::string levers = Chart(FormatHtml(report), "levers");
  EXPECT_EQ(Count(levers, "<g class=\"dot\""), 4);
  EXPECT_EQ(levers.find(">0.00<"), std::string::npos) << "no dot at 0 for a missing figure";

  for (ReportRow& row : *report.mutable_rows()) row.clear_vs_single();
  EXPECT_EQ(Count(Chart(FormatHtml(report), "levers"), "<g class=\"dot\""), 4);
}

TEST(ReportHtmlTest, StepsPerSecondWhenNoRowHasVsSingle) {
  SuiteReport report = Sample();
  for (ReportRow& row : *report.mutable_rows()) row.clear_vs_single();
  const std::string html = FormatHtml(report);
  const std::string levers = Chart(html, "levers");
  EXPECT_EQ(Count(levers, "<g class=\"dot\""), 5);
  EXPECT_EQ(levers.find("class=\"reference\""), std::string::npos);
  EXPECT_NE(levers.find(">steps/s (median)<"), std::string::npos);
  EXPECT_NE(html.find("raw steps/s are plotted"), std::string::npos);
  EXPECT_NE(levers.find(">11.30<"), std::string::npos);
}

TEST(ReportHtmlTest, ScalingChartOnlyWithSeveralGpuCounts) {
  SuiteReport report = Sample();
  // Another configuration at 4 GPUs alone: each configuration has one count.
  AddRow(report, "other", "NVLINK", 4, 0.85);
  EXPECT_EQ(Chart(FormatHtml(report), "scaling"), "");

  AddRow(report, "naive_ddp", "NVLINK", 4, 0.88);
  const std::string html = FormatHtml(report);
  EXPECT_EQ(Count(html, "<svg "), 3);
  const std::string scaling = Chart(html, "scaling");
  ASSERT_FALSE(scaling.empty());
  // naive_ddp over NVLink at 1, 2, 4 GPUs; over host memory at 1 and 2.
  EXPECT_EQ(Count(scaling, "<g class=\"point\""), 5);
  EXPECT_EQ(Count(scaling, "class=\"series\""), 2 + 2) << "two lines and their legend";
  EXPECT_NE(scaling.find("class=\"ideal\""), std::string::npos);
  EXPECT_NE(scaling.find(">naive_ddp, NVLink<"), std::string::npos);
  EXPECT_NE(scaling.find(">4<"), std::string::npos);
  // The levers chart tells the two counts apart.
  EXPECT_NE(Chart(html, "levers").find(">naive_ddp, 4 GPUs<"), std::string::npos);
  EXPECT_NE(html.find("<h2>What each lever buys on NVIDIA H200</h2>"), std::string::npos);
}

TEST(ReportHtmlTest, EmptyReport) {
  const std::string html = FormatHtml(SuiteReport());
  EXPECT_EQ(Count(html, "<svg"), 0);
  EXPECT_NE(html.find("No runs."), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
}

TEST(ReportSvgTest, NiceTicksAndDomains) {
  EXPECT_EQ(svg::NiceTicks(0, 1, 5), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1}));
  EXPECT_EQ(svg::NiceTicks(0.61, 1.02, 8).front(), 0.65);
  EXPECT_TRUE(svg::NiceTicks(kNaN, 1, 5).empty());
  EXPECT_TRUE(svg::NiceTicks(1, 1, 5).empty());
  EXPECT_EQ(svg::TickLabel(0.85, {0.8, 0.85, 0.9}), "0.85");
  EXPECT_EQ(svg::TickLabel(40, {0, 20, 40}), "40");
  const auto [lo, hi] = svg::PaddedDomain({2, kNaN, 4, kInf}, 0.5, false);
  EXPECT_EQ(lo, 1);
  EXPECT_EQ(hi, 5);
  EXPECT_EQ(svg::PaddedDomain({80, 120}, 0.05, true), std::make_pair(0.0, 126.0));
  EXPECT_EQ(svg::PaddedDomain({kNaN}, 0.05, false), std::make_pair(0.0, 1.0));
}

TEST(ReportSvgTest, CanvasEscapesAndDropsNonFiniteElements) {
  svg::Canvas c("chart <x>", 100, 50);
  c.Circle(kNaN, 1, 2);
  c.Rect(1, 1, kInf, 2);
  c.Line(0, 0, 1, 1, {{"class", "a\"b"}});
  c.Polyline({{0, 0}, {kNaN, 1}, {2, 2}});
  c.Text(5, 5, "a < b & c");
  const std::string out = c.Finish();
  EXPECT_EQ(Count(out, "<circle"), 0);
  EXPECT_EQ(Count(out, "<rect"), 0);
  EXPECT_NE(out.find("class=\"chart &lt;x&gt;\""), std::string::npos);
  EXPECT_NE(out.find("class=\"a&quot;b\""), std::string::npos);
  EXPECT_NE(out.find("points=\"0.0,0.0 2.0,2.0\""), std::string::npos);
  EXPECT_NE(out.find(">a &lt; b &amp; c</text>"), std::string::npos);
  EXPECT_EQ(svg::Truncate("abcdefghijklmnop", 10, 40).substr(0, 3), "abc");
  EXPECT_NE(svg::Truncate("abcdefghijklmnop", 10, 40).find("…"), std::string::npos);
  EXPECT_EQ(svg::Truncate("ab", 10, 40), "ab");
}

}  // namespace
}  // namespace ddplab
