// The convergence check's verdicts in words, for report.md and report.html (Note [The
// convergence check], core/config/convergence.h).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/report/report_html.h"

namespace ddplab {
namespace internal_report {

std::vector<std::string> ConvergenceLines(const v1::SuiteReport& report) {
  std::vector<std::string> lines;
  for (const v1::ReportRow& row : report.rows()) {
    if (!row.has_convergence()) continue;
    const v1::ConvergenceVerdict& v = row.convergence();
    lines.push_back(absl::StrCat(row.experiment(), ": ", v.text()));
  }
  return lines;
}

std::string ConvergenceHeading(const v1::SuiteReport& report) {
  bool any = false;
  for (const v1::ReportRow& row : report.rows()) {
    any |= row.has_convergence();
    if (!row.has_convergence() || row.convergence().not_compared()) continue;
    const v1::ConvergenceVerdict& v = row.convergence();
    return absl::StrFormat(
        "Convergence check: %d steps on the learnable task, each configuration from the same %d seeds (weights "
        "and batches) as the exact reference %s, whose loss fell from %.4f to %.4f-%.4f; final loss = the mean of "
        "the last %d steps, compared seed by seed",
        v.steps(), v.exact_final().count(), v.exact(), v.first_loss(), v.exact_final().min(), v.exact_final().max(),
        v.final_steps());
  }
  return any ? "Convergence check" : "";
}

}  // namespace internal_report
}  // namespace ddplab
