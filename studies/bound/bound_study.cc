// The bound study: each row of several processes beside the highest steps/s its machine
// allows it (Note [A row's bound], row_bound.h), from the single-process run's phases,
// the row's bytes per step and its transport's bus bandwidth, the best measured on the
// largest bucket of a row of the same processes and transport. It sets each row's
// `bound`, lists them after report.md's table, and where the row recommended is within
// 5% of its bound, says that only fewer bytes can do much better. Rows whose step a
// plugin ran whole (a CUDA graph) have no bound: such a step's phases are timed as one,
// so neither the row nor one GPU has a backward to hide the bytes behind.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/report/report.h"
#include "studies/bound/row_bound.h"
#include "suite/study.h"

namespace ddplab {
namespace {

// The median over `r`'s repetitions of one phase, ms.
double Phase(const v1::RunResult& r, double (v1::PhaseTimes::*f)() const) {
  std::vector<double> values;
  for (const v1::Repetition& rep : RepetitionsOf(r)) values.push_back((rep.phases().*f)());
  return Median(values);
}

// One GPU's step by phase, from the single-process run.
BoundInputs OneGpu(const v1::RunResult& single) {
  BoundInputs one;
  one.forward_ms = Phase(single, &v1::PhaseTimes::forward_ms);
  one.backward_ms = Phase(single, &v1::PhaseTimes::backward_ms);
  one.optimizer_ms = Phase(single, &v1::PhaseTimes::optimizer_ms);
  one.other_ms = std::max(0.0, Phase(single, &v1::PhaseTimes::step_ms) - one.forward_ms - one.backward_ms -
                                   one.optimizer_ms);
  return one;
}

class BoundStudy : public Study {
 public:
  std::string Name() const override { return "bound"; }

  void DecideRows(const std::vector<v1::RunResult>& runs, v1::SuiteReport& report) const override {
    std::map<std::pair<int, std::string>, double> busbw;  // by processes and transport
    for (const v1::ReportRow& row : report.rows()) {
      double& best = busbw[{row.gpus(), row.transport()}];
      if (row.has_busbw_gbps()) best = std::max(best, row.busbw_gbps());
    }
    v1::ReportSection section;
    section.set_study(Name());
    section.set_heading("What this machine allows each row (its bound, from one GPU's step and the row's bytes at "
                        "its transport's bus bandwidth)");
    for (size_t i = 0; i < runs.size() && static_cast<int>(i) < report.rows_size(); ++i) {
      const v1::RunResult& r = runs[i];
      v1::ReportRow& row = *report.mutable_rows(static_cast<int>(i));
      if (row.gpus() <= 1 || !r.engine() || row.diagnostic() || r.bucket_bytes_size() == 0) continue;
      if (!r.step_runner().empty()) continue;  // its phases timed as one (above)
      const v1::RunResult* single = SingleProcessRun(runs, &r);
      if (single == nullptr || !single->step_runner().empty()) continue;
      double bucket_sum = 0;
      for (int64_t b : r.bucket_bytes()) bucket_sum += static_cast<double>(b);
      BoundInputs in = OneGpu(*single);
      in.wire_bytes = static_cast<double>(r.wire_bytes());
      in.last_bucket_bytes = bucket_sum > 0 ? in.wire_bytes * r.bucket_bytes(r.bucket_bytes_size() - 1) / bucket_sum : 0;
      in.ranks = row.gpus();
      in.busbw_gbps = busbw[{row.gpus(), row.transport()}];
      v1::RowBound b = BoundOf(in, row.steps_per_s().median(), row.parts().compute_slowdown_ms(),
                               row.parts().exposed_comm_ms());
      if (b.steps_per_s() <= 0) continue;
      section.add_lines(absl::StrCat(row.experiment(), ": ", b.text()));
      *row.mutable_bound() = std::move(b);
    }
    if (section.lines_size() > 0) *report.add_sections() = std::move(section);
  }

  // Near its bound, only fewer bytes do much better (Note [A row's bound]).
  void AddToRecommendations(v1::SuiteReport& report) const override {
    for (v1::Recommendation& rec : *report.mutable_recommendations()) {
      // The row recommended: of several processes, not diagnostic, on the recommendation's
      // transport (RecommendAmong's rows), by its name.
      const v1::ReportRow* use = nullptr;
      for (const v1::ReportRow& row : report.rows()) {
        if (row.experiment() == rec.recommended() && row.transport() == rec.transport() && row.gpus() > 1 &&
            !row.diagnostic()) {
          use = &row;
          break;
        }
      }
      if (use == nullptr || !use->has_bound() || use->bound().share() < 0.95) continue;
      absl::StrAppendFormat(rec.mutable_text(),
                            " %s reaches %.3f of the %.2f steps/s this machine allows it (set by %s): no setting of "
                            "the same bytes does much better; only sending fewer (compression) can.",
                            use->experiment(), use->bound().share(), use->bound().steps_per_s(), use->bound().binds());
    }
  }
};

}  // namespace

DDPLAB_REGISTER_STUDY(BoundStudy)

}  // namespace ddplab
