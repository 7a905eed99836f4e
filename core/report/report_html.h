// The suite report as one self-contained HTML page (report.html): the machine, a chart
// of what each lever buys per transport with its spread over repetitions, where each
// step's time goes, how throughput scales with GPUs (when several counts ran), the
// table of every row and the recommendations with their PyTorch code. CSS and SVG are
// inline; the page loads nothing and runs no script, so it opens from disk or a CI
// artifact as it is. All text from the report is HTML-escaped.
//
//   ddplab::v1::SuiteReport report = ...;  // as report.json holds it
//   std::ofstream("report.html") << ddplab::FormatHtml(report);
#ifndef DDPLAB_CORE_REPORT_REPORT_HTML_H_
#define DDPLAB_CORE_REPORT_REPORT_HTML_H_

#include <string>
#include <vector>

#include "ddplab/v1/report.pb.h"

namespace ddplab {

std::string FormatHtml(const v1::SuiteReport& report);

// vit_ddp --tune's answer in markdown: each cap predicted and measured, then the answer's
// text. report.md ends with it where the report has one.
std::string FormatTuning(const v1::Tuning& t);

// Whether the runs were on CPUs (no GPU, a CPU named): columns then say processes, and
// the report says that it is a check of the pipeline whose figures do not carry over.
bool OnCpus(const v1::Machine& machine);
inline constexpr char kCpuNote[] =
    "These runs are on CPUs (Gloo): a check that the pipeline works end to end. Their speeds and recommendation "
    "do not carry over to GPUs; the figures to act on come from a run on them.";

namespace internal_report {
// The convergence check's verdicts as "<experiment>: <verdict>" lines, and the sentence
// that heads them ("" if none), for report.md and report.html.
std::vector<std::string> ConvergenceLines(const v1::SuiteReport& report);
std::string ConvergenceHeading(const v1::SuiteReport& report);
// The tuning table: a header row, then one per cap (report_tuning.cc).
std::vector<std::vector<std::string>> TuningRows(const v1::Tuning& t);
}  // namespace internal_report

}  // namespace ddplab

#endif  // DDPLAB_CORE_REPORT_REPORT_HTML_H_
