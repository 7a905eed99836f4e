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

// The exact reference's runs of the check, one per seed.
struct ExactRuns {
  std::string name;
  std::map<int, double> finals;  // by seed
  std::vector<double> sorted;    // the same, sorted
  double first_mean = 0;
  int processes = 0;
  bool lossy = false;
};

// Why the reference cannot judge a configuration of `processes`, or "".
std::string NotComparable(const ExactRuns& exact, int processes) {
  if (exact.lossy) return absl::StrFormat("not compared: the reference %s is lossy itself", exact.name);
  if (processes == exact.processes) return "";
  return absl::StrFormat("not compared: the reference %s ran %d process%s and this %d, so their batches differ; name a "
                         "reference of %d processes",
                         exact.name, exact.processes, exact.processes == 1 ? "" : "es", processes, processes);
}

// `v` from a configuration's runs by seed, each against the exact run of the same seed
// (the same weights and batches); false when no seed pairs.
bool JudgePaired(const ExactRuns& exact, const std::map<int, const v1::RunResult*>& runs, v1::ConvergenceVerdict* v) {
  double lossy_sum = 0, exact_sum = 0, difference_sum = 0, tolerance = 0.02;
  std::vector<double> differences;
  std::vector<std::string> each;
  for (const auto& [seed, r] : runs) {
    auto paired = exact.finals.find(seed);
    if (paired == exact.finals.end() || paired->second <= 0) continue;  // its seed's exact run failed
    const double final = FinalLoss(*r, r->convergence().final_steps());
    differences.push_back((final - paired->second) / paired->second);
    each.push_back(absl::StrFormat("%+.1f%%", 100 * differences.back()));
    lossy_sum += final;
    exact_sum += paired->second;
    difference_sum += differences.back();
    if (r->convergence().tolerance() > 0) tolerance = r->convergence().tolerance();
    v->set_steps(r->loss_size());
    v->set_final_steps(r->convergence().final_steps());
  }
  if (differences.empty()) return false;
  const double n = static_cast<double>(differences.size()), mean = difference_sum / n;
  v->set_exact(exact.name);
  v->set_first_loss(exact.first_mean);
  v->set_final_loss(lossy_sum / n);
  v->set_exact_final_same_seed(exact_sum / n);
  v1::Spread* s = v->mutable_exact_final();
  s->set_median(exact.sorted[exact.sorted.size() / 2]);
  s->set_min(exact.sorted.front());
  s->set_max(exact.sorted.back());
  s->set_count(static_cast<uint32_t>(exact.sorted.size()));
  for (double d : differences) v->add_paired_difference(d);
  v->set_tolerance(tolerance);
  v->set_within(mean <= tolerance);
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
  return true;
}

}  // namespace

void AddConvergenceVerdicts(const std::vector<const v1::RunResult*>& checks, v1::SuiteReport& report) {
  ExactRuns exact;
  double first_sum = 0;
  std::map<std::string, std::map<int, const v1::RunResult*>> lossy;  // by the experiment checked, by seed
  for (const v1::RunResult* r : checks) {
    if (!r->convergence().exact()) {
      lossy[r->convergence().of()][r->convergence().seed()] = r;
      continue;
    }
    exact.name = r->convergence().of();
    exact.processes = r->world_size();
    exact.lossy |= r->lossy();
    exact.finals[r->convergence().seed()] = FinalLoss(*r, r->convergence().final_steps());
    first_sum += r->loss_size() > 0 ? r->loss(0) : 0;
  }
  if (exact.finals.empty()) return;
  for (const auto& [seed, loss] : exact.finals) exact.sorted.push_back(loss);
  std::sort(exact.sorted.begin(), exact.sorted.end());
  exact.first_mean = first_sum / static_cast<double>(exact.finals.size());
  for (v1::ReportRow& row : *report.mutable_rows()) {
    auto it = lossy.find(row.origin());
    if (it == lossy.end()) continue;
    // Only a reference that is exact and sees the same batches compares.
    if (std::string why = NotComparable(exact, it->second.begin()->second->world_size()); !why.empty()) {
      v1::ConvergenceVerdict* v = row.mutable_convergence();
      v->set_exact(exact.name);
      v->set_not_compared(true);
      v->set_text(why);
      continue;
    }
    v1::ConvergenceVerdict verdict;
    if (JudgePaired(exact, it->second, &verdict)) *row.mutable_convergence() = verdict;
  }
}

}  // namespace internal_report
}  // namespace ddplab
