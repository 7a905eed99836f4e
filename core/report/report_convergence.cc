// The report's convergence verdicts (Note [The convergence check], core/config/convergence.h):
// each lossy row's final losses on the learnable task against the exact runs' of the same
// seeds.
#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/report/report.h"

namespace ddplab {
namespace internal_report {
namespace {

// The mean training loss of the last `n` steps of `r` (rank 0's; all of them if fewer).
double FinalLoss(const v1::RunResult& r, int n) {
  const int size = r.loss_size();
  const int from = std::max(0, size - std::max(n, 1));
  if (size == 0) return 0;
  double sum = 0;
  for (int i = from; i < size; ++i) sum += r.loss(i);
  return sum / (size - from);
}

}  // namespace

void AddConvergenceVerdicts(const std::vector<const v1::RunResult*>& checks, v1::SuiteReport& report) {
  std::map<int, double> exact_finals;  // by seed
  double first_sum = 0;
  std::string exact;
  int exact_processes = 0;
  bool exact_lossy = false;
  std::map<std::string, std::map<int, const v1::RunResult*>> lossy;  // by the experiment checked, by seed
  for (const v1::RunResult* r : checks) {
    if (!r->convergence().exact()) {
      lossy[r->convergence().of()][r->convergence().seed()] = r;
      continue;
    }
    exact = r->convergence().of();
    exact_processes = r->world_size();
    exact_lossy |= r->lossy();
    exact_finals[r->convergence().seed()] = FinalLoss(*r, r->convergence().final_steps());
    first_sum += r->loss_size() > 0 ? r->loss(0) : 0;
  }
  if (exact_finals.empty()) return;
  std::vector<double> finals;
  for (const auto& [seed, loss] : exact_finals) finals.push_back(loss);
  std::sort(finals.begin(), finals.end());
  for (v1::ReportRow& row : *report.mutable_rows()) {
    auto it = lossy.find(row.origin());
    if (it == lossy.end()) continue;
    // Only a reference that is exact and sees the same batches compares.
    const int processes = it->second.begin()->second->world_size();
    if (exact_lossy || processes != exact_processes) {
      v1::ConvergenceVerdict* v = row.mutable_convergence();
      v->set_exact(exact);
      v->set_not_compared(true);
      v->set_text(exact_lossy ? absl::StrFormat("not compared: the reference %s is lossy itself", exact)
                              : absl::StrFormat("not compared: the reference %s ran %d process%s and this %d, so their "
                                                "batches differ; name a reference of %d processes",
                                                exact, exact_processes, exact_processes == 1 ? "" : "es", processes,
                                                processes));
      continue;
    }
    // Each seed's lossy run against the exact run of the same weights and batches.
    double lossy_sum = 0, exact_sum = 0, difference_sum = 0, tolerance = 0;
    int steps = 0, final_steps = 0;
    std::vector<double> differences;
    for (const auto& [seed, r] : it->second) {
      auto paired = exact_finals.find(seed);
      if (paired == exact_finals.end() || paired->second <= 0) continue;  // its seed's exact run failed
      const double final = FinalLoss(*r, r->convergence().final_steps());
      differences.push_back((final - paired->second) / paired->second);
      lossy_sum += final;
      exact_sum += paired->second;
      difference_sum += differences.back();
      tolerance = r->convergence().tolerance() > 0 ? r->convergence().tolerance() : 0.02;
      steps = r->loss_size();
      final_steps = r->convergence().final_steps();
    }
    if (differences.empty()) continue;
    const double n = static_cast<double>(differences.size());
    v1::ConvergenceVerdict* v = row.mutable_convergence();
    v->set_exact(exact);
    v->set_steps(steps);
    v->set_final_steps(final_steps);
    v->set_first_loss(first_sum / static_cast<double>(exact_finals.size()));
    v->set_final_loss(lossy_sum / n);
    v->set_exact_final_same_seed(exact_sum / n);
    v1::Spread* s = v->mutable_exact_final();
    s->set_median(finals[finals.size() / 2]);
    s->set_min(finals.front());
    s->set_max(finals.back());
    s->set_count(static_cast<uint32_t>(finals.size()));
    for (double d : differences) v->add_paired_difference(d);
    v->set_tolerance(tolerance);
    const double mean = difference_sum / n;
    v->set_within(mean <= tolerance);
    std::vector<std::string> each;
    for (double d : differences) each.push_back(absl::StrFormat("%+.1f%%", 100 * d));
    const std::string detail = absl::StrFormat(
        "final loss %.4f against %.4f, %+.1f%% on average over %d seed%s from the same weights and batches: %s",
        v->final_loss(), v->exact_final_same_seed(), 100 * mean, differences.size(), differences.size() == 1 ? "" : "s",
        absl::StrJoin(each, ", "));
    if (v->within()) {
      v->set_text(absl::StrFormat("within %g%% of the exact runs (%s)", 100 * tolerance, detail));
    } else {
      v->set_worse_by(mean);
      v->set_text(absl::StrFormat("worse by %.1f%% (%s; the check allows %g%%)", 100 * mean, detail, 100 * tolerance));
    }
  }
}

}  // namespace internal_report
}  // namespace ddplab
