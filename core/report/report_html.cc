#include "core/report/report_html.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/report/report_charts.h"
#include "core/report/report_svg.h"

namespace ddplab {
namespace {

using report_html::Number;
using report_html::TransportName;
using svg::Escape;

constexpr char kDash[] = "—";

// The page's only style. Charts draw with classes from here; fonts are the system's.
constexpr char kStyle[] = R"css(
:root { color-scheme: light; }
body { margin: 0; background: #fafafa; color: #1d1d1f;
  font-family: system-ui, -apple-system, "Segoe UI", "DejaVu Sans", "Liberation Sans", sans-serif;
  font-size: 14px; line-height: 1.45; }
main { max-width: 1360px; margin: 0 auto; padding: 24px 20px 48px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 36px 0 2px; }
h3 { font-size: 15px; margin: 0 0 6px; }
.meta, .subtitle { color: #5f6368; margin: 0 0 10px; }
.machine { margin: 6px 0 0; display: flex; flex-wrap: wrap; gap: 4px 18px; }
.machine b { color: #5f6368; font-weight: 600; margin-right: 4px; }
.figure { overflow-x: auto; background: #fff; border: 1px solid #e3e3e3; border-radius: 6px;
  padding: 10px 6px; }
svg.chart { display: block; max-width: 100%; height: auto; font-family: inherit; }
svg .band { fill: #f4f4f4; }
svg .grid { stroke: #e6e6e6; stroke-width: 1; }
svg .tick, svg .legend-text, svg .total, svg .number { font-size: 12px; fill: #333; }
svg .axis-label, svg .note, svg .column-note { font-size: 11.5px; fill: #6b6b6b; }
svg .column-head { font-size: 12px; font-weight: 600; fill: #222; }
svg .label { font-size: 13px; fill: #1d1d1f; }
svg .lossy .label, svg .number.lossy { fill: #c0580a; }
svg .diagnostic .label, svg .diagnostic .number { fill: #9a9a9a; font-style: italic; }
svg .diagnostic .dot, svg .bar.diagnostic .seg { opacity: 0.45; }
svg .value { font-size: 10.5px; }
svg .connector { stroke: #a8a8a8; stroke-width: 1.5; }
svg .whisker { stroke-width: 2; opacity: 0.55; }
svg .reference { stroke: #222; stroke-width: 1.5; stroke-dasharray: 5 4; }
svg .reference-label { font-size: 12px; font-weight: 600; fill: #222; }
svg .series { stroke-width: 2.2; fill: none; }
svg .ideal { stroke: #888; stroke-width: 1.5; stroke-dasharray: 6 5; fill: none; }
svg .ideal-label { font-size: 11.5px; fill: #777; }
table { border-collapse: collapse; width: 100%; background: #fff; font-size: 13px; }
.figure table { border: 0; }
th, td { padding: 5px 8px; border-bottom: 1px solid #e6e6e6; text-align: left;
  vertical-align: top; }
th { background: #f1f1f1; font-weight: 600; vertical-align: bottom; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num { white-space: nowrap; }
td { overflow-wrap: anywhere; }
td .range { color: #777; font-size: 11px; }
td .desc { color: #666; font-size: 12px; }
tr.diagnostic td { color: #8a8a8a; }
td.lossy { color: #c0580a; }
.tag, .badge { display: inline-block; font-size: 11px; border-radius: 9px; padding: 0 7px;
  margin-left: 6px; vertical-align: 1px; }
.tag { background: #ececec; color: #666; }
.badge.noise { background: #fff1d6; color: #8a5200; border: 1px solid #f0c674; }
.rec { background: #fff; border: 1px solid #e3e3e3; border-radius: 6px; padding: 12px 16px;
  margin: 12px 0; }
.rec .text, .tuning .text { white-space: pre-line; margin: 0 0 8px; }
pre { background: #f6f8fa; border: 1px solid #e3e3e3; border-radius: 4px; padding: 8px 10px;
  white-space: pre-wrap; overflow-wrap: anywhere; margin: 6px 0; }
code { font-family: ui-monospace, "DejaVu Sans Mono", "Liberation Mono", monospace;
  font-size: 12.5px; }
.ddplab-only, .facts { color: #5f6368; margin: 6px 0 0; font-size: 13px; }
footer { color: #888; font-size: 12px; margin-top: 36px; }
)css";

std::string MachineItem(absl::string_view name, const std::string& value) {
  if (value.empty()) return "";
  return absl::StrCat("<span><b>", name, "</b>", Escape(value), "</span>");
}

std::string Header(const v1::SuiteReport& report) {
  const v1::Machine& m = report.machine();
  std::string meta = Escape(report.date().empty() ? "undated" : report.date());
  if (!report.first_date().empty() && report.first_date() != report.date()) {
    absl::StrAppend(&meta, " (runs measured from ", Escape(report.first_date()), ")");
  }
  if (report.repetitions() > 0) {
    absl::StrAppend(&meta, " · ",
                    report.repetitions() == 1
                        ? "1 repetition"
                        : absl::StrCat("up to ", report.repetitions(), " repetitions"),
                    " per run");
  }
  std::string device = m.device();
  if (m.device_count() > 0) absl::StrAppend(&device, " × ", m.device_count());
  const std::string nodes =
      m.nodes() > 0 ? absl::StrCat(m.nodes(), m.nodes() == 1 ? " node" : " nodes") : "";
  const std::string items = absl::StrCat(
      MachineItem("Machine", device), MachineItem("driver", m.driver()),
      MachineItem("CUDA", m.cuda_runtime()), MachineItem("NCCL", m.nccl_version()),
      MachineItem("LibTorch", m.torch_version()), MachineItem("topology", m.topology()),
      MachineItem("CPU", m.cpu()), MachineItem("nodes", nodes));
  return absl::StrCat(
      "<header>\n<h1>", Escape(report.suite().empty() ? "Suite report" : report.suite()),
      "</h1>\n<p class=\"meta\">", meta, "</p>\n",
      items.empty() ? "" : absl::StrCat("<div class=\"machine\">", items, "</div>\n"),
      OnCpus(m) ? absl::StrCat("<p class=\"note\">", kCpuNote, "</p>\n") : "", "</header>\n");
}

std::string Cell(const std::string& html, absl::string_view css = "num") {
  return absl::StrCat("<td class=\"", css, "\">", html, "</td>");
}

// Steps/s: the median, and [min–max] ×count over several repetitions.
std::string StepsCell(const v1::ReportRow& row) {
  if (!row.has_steps_per_s()) return Cell(kDash);
  const v1::Spread& s = row.steps_per_s();
  std::string html = Number(s.median(), 2);
  if (s.count() > 1) {
    absl::StrAppend(&html, "<div class=\"range\">[", Number(s.min(), 2), "–", Number(s.max(), 2), "] ×",
                    s.count(), "</div>");
  }
  return Cell(html);
}

// TFLOP/s per GPU, and its share of the GPU's peak for the run's precision where known.
std::string TflopsCell(const v1::ReportRow& row) {
  if (row.tflops_per_gpu() <= 0) return Cell(kDash);
  std::string html = absl::StrFormat("%.3g", row.tflops_per_gpu());
  if (row.has_peak_fraction()) {
    absl::StrAppendFormat(&html, "<div class=\"range\">%.1f%% of %s peak</div>", 100 * row.peak_fraction(),
                          Escape(row.precision()));
  }
  return Cell(html);
}

std::string ExperimentCell(const v1::ReportRow& row) {
  std::string html = Escape(row.experiment());
  if (row.diagnostic()) absl::StrAppend(&html, "<span class=\"tag\">diagnostic</span>");
  if (!row.description().empty()) {
    absl::StrAppend(&html, "<div class=\"desc\">", Escape(row.description()), "</div>");
  }
  return Cell(html, "experiment");
}

std::string TransportCell(const v1::ReportRow& row) {
  if (row.gpus() <= 1 && row.transport().empty()) return Cell(kDash, "transport");
  std::string html = Escape(TransportName(row.transport()));
  if (!row.nccl_transport().empty())
    absl::StrAppend(&html, " (", Escape(row.nccl_transport()), ")");
  return Cell(html, "transport");
}

// One step's relative error, and over the longest window where measured; the cosine as
// the cell's title.
std::string GradientErrorCell(const v1::ReportRow& row) {
  std::string text = Number(row.gradient_error(), 1, true);
  if (row.has_effective_error()) {
    absl::StrAppend(&text, " (", row.effective_error_steps(), "-step ", Number(row.effective_error(), 1, true), ")");
  }
  if (!row.has_gradient_cosine()) return Cell(text, "num lossy");
  return absl::StrCat("<td class=\"num lossy\" title=\"cosine ", absl::StrFormat("%.6g", row.gradient_cosine()),
                      "\">", text, "</td>");
}

// The row's share of its bound (Note [A row's bound], studies/bound/row_bound.h), the bound
// in words as the cell's title.
std::string BoundCell(const v1::ReportRow& row) {
  if (!row.has_bound()) return Cell(kDash);
  return absl::StrCat("<td class=\"num\" title=\"", Escape(row.bound().text()), "\">", Number(row.bound().share(), 3),
                      " of ", Number(row.bound().steps_per_s(), 2), "</td>");
}

// `bounds`: the table has the column of the rows' bounds (a study set some).
std::string TableRow(const v1::ReportRow& row, bool bounds) {
  const bool several = row.gpus() > 1;
  return absl::StrCat(
      "<tr", row.diagnostic() ? " class=\"diagnostic\"" : "", ">", ExperimentCell(row),
      Cell(absl::StrCat(row.gpus())), TransportCell(row), StepsCell(row),
      Cell(row.has_vs_single() ? Number(row.vs_single().median(), 3) : kDash),
      Cell(row.has_vs_naive() ? absl::StrCat(Number(row.vs_naive(), 2), "×") : kDash), bounds ? BoundCell(row) : "",
      Cell(several && row.step_runner().empty() ? Number(row.exposed_comm_ms(), 1) : kDash),
      Cell(row.has_busbw_gbps() ? Number(row.busbw_gbps(), 1) : kDash),
      Cell(row.peak_memory_gib() > 0 ? Number(row.peak_memory_gib(), 2) : kDash),
      row.has_gradient_error() ? GradientErrorCell(row)
      : row.lossy()            ? "<td class=\"num\" title=\"lossy: its error was not sampled\">not sampled</td>"
                               : "<td class=\"num\" title=\"exact: no gradient error\">—</td>",
      TflopsCell(row), "</tr>\n");
}

std::string Table(const v1::SuiteReport& report) {
  if (report.rows_size() == 0) return "<h2>Runs</h2>\n<p>No runs.</p>\n";
  std::string html =
      "<section class=\"runs\">\n<h2>Runs</h2>\n<p class=\"subtitle\">Medians over the "
      "repetitions, [min–max] where there were several; — where a figure does not "
      "apply.</p>\n<div class=\"figure\"><table>\n<thead><tr><th>experiment</th>"
      "<th class=\"num\">$P</th><th>transport</th><th class=\"num\">steps/s</th>"
      "<th class=\"num\">vs 1 $1</th><th class=\"num\">vs naive</th>$B"
      "<th class=\"num\">exposed comm ms</th><th class=\"num\">busbw GB/s</th>"
      "<th class=\"num\">peak GiB</th><th class=\"num\">grad error</th>"
      "<th class=\"num\">$F</th></tr></thead>\n<tbody>\n";
  const bool gpus = !OnCpus(report.machine());  // else: the words of processes on CPUs
  // The bounds' column where a study gave rows a bound (studies/bound), else none.
  const bool bounds = std::any_of(report.rows().begin(), report.rows().end(),
                                  [](const v1::ReportRow& row) { return row.has_bound(); });
  html = absl::StrReplaceAll(
      html, {{"$B", bounds ? "<th class=\"num\" title=\"the row's steps/s over the most its machine allows it\">of "
                             "bound</th>"
                           : ""},
             {"$P", gpus ? "GPUs" : "processes"},
                                    {"$1", gpus ? "GPU" : "process"},
                                    {"$F", gpus ? "TFLOP/s/GPU" : "TFLOP/s"}});
  for (const v1::ReportRow& row : report.rows()) html += TableRow(row, bounds);
  return html + "</tbody>\n</table></div>\n</section>\n";
}

std::string RecommendationHtml(const v1::Recommendation& r) {
  const std::string where = r.transport().empty() || r.transport() == "default"
                                ? "On the default transport"
                                : absl::StrCat("On ", Escape(TransportName(r.transport())));
  std::string html = absl::StrCat("<article class=\"rec\">\n<h3>", where);
  if (r.within_noise()) {
    absl::StrAppend(&html,
                    "<span class=\"badge noise\" title=\"the fastest's slowest repetition is "
                    "not above the runner-up's fastest\">within noise</span>");
  }
  absl::StrAppend(&html, "</h3>\n<p class=\"text\">", Escape(r.text()), "</p>\n");
  std::vector<std::string> facts;
  if (!r.fastest().empty()) facts.push_back(absl::StrCat("fastest: ", Escape(r.fastest())));
  if (!r.runner_up().empty()) facts.push_back(absl::StrCat("runner-up: ", Escape(r.runner_up())));
  if (!r.fastest_exact().empty()) {
    facts.push_back(absl::StrCat("fastest exact: ", Escape(r.fastest_exact())));
  }
  if (!r.recommended().empty()) facts.push_back(absl::StrCat("recommended: ", Escape(r.recommended())));
  if (!facts.empty()) {
    absl::StrAppend(&html, "<p class=\"facts\">", absl::StrJoin(facts, " · "), "</p>\n");
  }
  if (!r.pytorch().empty()) {
    absl::StrAppend(&html, "<pre><code class=\"pytorch\">", Escape(r.pytorch()), "</code></pre>\n");
  }
  if (r.ddplab_only_size() > 0) {
    std::vector<std::string> levers;
    for (const std::string& l : r.ddplab_only()) levers.push_back(Escape(l));
    absl::StrAppend(&html,
                    "<p class=\"ddplab-only\">needs ddplab's engine: ", absl::StrJoin(levers, ", "),
                    "</p>\n");
  }
  return html + "</article>\n";
}

// Note [The convergence check] (core/config/convergence.h): each lossy row's verdict.
std::string Convergence(const v1::SuiteReport& report) {
  const std::string heading = internal_report::ConvergenceHeading(report);
  if (heading.empty()) return "";
  std::string html = absl::StrCat("<section class=\"convergence\">\n<h2>Convergence</h2>\n<p class=\"subtitle\">",
                                  Escape(heading), ".</p>\n<ul>\n");
  for (const std::string& line : internal_report::ConvergenceLines(report)) {
    absl::StrAppend(&html, "<li>", Escape(line), "</li>\n");
  }
  return html + "</ul>\n</section>\n";
}

// vit_ddp --tune's answer (Note [The tuner], tune/tuner.h).
std::string Tuning(const v1::SuiteReport& report) {
  if (!report.has_tuning()) return "";
  const v1::Tuning& t = report.tuning();
  std::string html = absl::StrCat("<section class=\"tuning\">\n<h2>Tuning ", Escape(t.experiment()),
                                  "</h2>\n<div class=\"scroll\"><table>\n<thead><tr>");
  const std::vector<std::vector<std::string>> rows = internal_report::TuningRows(t);
  for (const std::string& h : rows[0]) absl::StrAppend(&html, "<th>", Escape(h), "</th>");
  absl::StrAppend(&html, "</tr></thead>\n<tbody>\n");
  for (size_t r = 1; r < rows.size(); ++r) {
    absl::StrAppend(&html, "<tr>");
    for (const std::string& cell : rows[r]) absl::StrAppend(&html, "<td>", Escape(cell), "</td>");
    absl::StrAppend(&html, "</tr>\n");
  }
  // The sentences wrap; the code keeps its lines, and scrolls rather than clips.
  absl::StrAppend(&html, "</tbody>\n</table></div>\n<p class=\"text\">", Escape(t.text()), "</p>\n");
  if (!t.pytorch().empty()) {
    absl::StrAppend(&html, "<p>In PyTorch, for training:</p>\n<pre><code class=\"pytorch\">", Escape(t.pytorch()),
                    "</code></pre>\n");
  }
  return absl::StrCat(html, "</section>\n");
}

std::string Recommendations(const v1::SuiteReport& report) {
  if (report.recommendations_size() == 0) return "";
  std::string html = "<section class=\"recommendations\">\n<h2>Recommendations</h2>\n";
  for (const v1::Recommendation& r : report.recommendations()) html += RecommendationHtml(r);
  return html + "</section>\n";
}

// The runs that failed, with what they said.
std::string FailedRuns(const v1::SuiteReport& report) {
  if (report.failed_size() == 0) return "";
  std::string html = absl::StrCat("<section class=\"failed\">\n<h2>",
                                  report.rows_size() == 0 ? "No run completed: every run failed" : "Failed runs",
                                  "</h2>\n<ul>\n");
  for (const v1::FailedRun& f : report.failed()) {
    absl::StrAppend(&html, "<li><b>", Escape(f.experiment()), "</b>: ", Escape(f.reason()), "</li>\n");
  }
  return absl::StrCat(html, "</ul>\n</section>\n");
}

}  // namespace

bool OnCpus(const v1::Machine& m) { return m.device_count() == 0 && !m.cpu().empty(); }

namespace {

// The charts in the words of the machine's processes: on CPUs, a process is what a GPU
// is elsewhere (#64: no GPU words on a CPU page).
std::string Charts(const v1::SuiteReport& report) {
  std::string charts = absl::StrCat(report_html::LeversChart(report), report_html::StepChart(report),
                                    report_html::ScalingChart(report));
  if (!OnCpus(report.machine())) return charts;
  return absl::StrReplaceAll(charts, {{"Per-GPU step rate as a fraction of one GPU alone",
                                       "Per-process step rate as a fraction of one process alone"},
                                      {"steps/s per GPU", "steps/s per process"},
                                      {"backward as on 1 GPU", "backward as in 1 process"},
                                      {"compute slower than on 1 GPU", "compute slower than in 1 process"},
                                      {">1 GPU<", ">1 process<"},
                                      {">1 GPU: ", ">1 process: "},
                                      {" GPUs<", " processes<"},
                                      {" GPUs,", " processes,"},
                                      {"one GPU", "one process"}});
}

}  // namespace

std::string FormatHtml(const v1::SuiteReport& report) {
  const std::string title = report.suite().empty() ? "Suite report" : report.suite();
  return absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      // Nothing to fetch and nothing to run: the page stands alone.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; img-src data:\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
      Escape(title), " · ddplab report</title>\n<style>", kStyle,
      "</style>\n</head>\n<body>\n<main>\n", Header(report), Charts(report), Table(report), FailedRuns(report),
      Convergence(report), Recommendations(report), Tuning(report),
      "<footer>Drawn by ddplab from the suite's "
      "report.json.</footer>\n</main>\n</body>\n</html>\n");
}

}  // namespace ddplab
