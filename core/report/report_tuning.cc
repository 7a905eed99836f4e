// The report's tuning section (vit_ddp --tune; Note [The tuner], tune/tuner.h): each
// bucket cap predicted, and measured where it ran.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/report/report_html.h"

namespace ddplab {
namespace internal_report {

std::vector<std::vector<std::string>> TuningRows(const v1::Tuning& t) {
  std::vector<std::vector<std::string>> rows = {
      {"bucket_cap_mb", "buckets", "predicted ms", "measured ms [min-max]", "off by", ""}};
  for (const v1::TuneCandidate& c : t.candidates()) {
    const v1::Spread& m = c.measured_step_ms();
    const bool measured = m.count() > 0;
    std::string note = c.bucket_cap_mb() == t.chosen_cap_mb() ? "chosen" : "";
    if (c.missed()) note = note.empty() ? "missed" : absl::StrCat(note, ", missed");
    if (c.verified() && !measured) note = "failed";
    if (c.same_as() > 0) note = absl::StrFormat("the buckets of %g", c.same_as());
    rows.push_back({absl::StrFormat("%g", c.bucket_cap_mb()), absl::StrCat(c.buckets()),
                    absl::StrFormat("%.2f", c.predicted_step_ms()),
                    measured ? absl::StrFormat("%.2f [%.2f-%.2f]", m.median(), m.min(), m.max()) : "",
                    measured ? absl::StrFormat("%+.1f%%", c.error() * 100) : "", note});
  }
  return rows;
}

}  // namespace internal_report

std::string FormatTuning(const v1::Tuning& t) {
  const std::vector<std::vector<std::string>> rows = internal_report::TuningRows(t);
  std::string out = absl::StrCat("## Tuning ", t.experiment(), "\n\n| ", absl::StrJoin(rows[0], " | "), " |\n|");
  for (size_t c = 0; c < rows[0].size(); ++c) absl::StrAppend(&out, c == 0 ? " ---: |" : " ---: |");
  absl::StrAppend(&out, "\n");
  for (size_t r = 1; r < rows.size(); ++r) absl::StrAppend(&out, "| ", absl::StrJoin(rows[r], " | "), " |\n");
  absl::StrAppend(&out, "\n", t.text());
  if (!t.pytorch().empty()) absl::StrAppend(&out, "\nIn PyTorch, for training:\n\n```python\n", t.pytorch(), "```\n");
  return out;
}

}  // namespace ddplab
