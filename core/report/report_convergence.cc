// The report's convergence verdicts (Note [The convergence check], core/config/convergence.h):
// each lossy row's final loss on the learnable task against the exact runs' spread.
#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include "absl/strings/str_format.h"
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
  std::map<std::string, const v1::RunResult*> lossy;  // by the experiment checked
  for (const v1::RunResult* r : checks) {
    if (!r->convergence().exact()) {
      lossy[r->convergence().of()] = r;
      continue;
    }
    exact = r->convergence().of();
    exact_finals[r->convergence().seed()] = FinalLoss(*r, r->convergence().final_steps());
    first_sum += r->loss_size() > 0 ? r->loss(0) : 0;
  }
  if (exact_finals.size() < 2) return;  // no spread to judge by
  std::vector<double> finals;
  for (const auto& [seed, loss] : exact_finals) finals.push_back(loss);
  std::sort(finals.begin(), finals.end());
  const double spread = finals.back() - finals.front();
  for (v1::ReportRow& row : *report.mutable_rows()) {
    auto it = lossy.find(row.origin());
    if (!row.has_gradient_error() || it == lossy.end()) continue;
    const v1::RunResult& r = *it->second;
    auto paired = exact_finals.find(r.convergence().seed());
    if (paired == exact_finals.end()) continue;  // its seed's exact run failed
    v1::ConvergenceVerdict* v = row.mutable_convergence();
    v->set_exact(exact);
    v->set_steps(r.loss_size());
    v->set_final_steps(r.convergence().final_steps());
    v->set_first_loss(first_sum / exact_finals.size());
    v->set_final_loss(FinalLoss(r, r.convergence().final_steps()));
    v->set_exact_final_same_seed(paired->second);
    v1::Spread* s = v->mutable_exact_final();
    s->set_median(finals[finals.size() / 2]);
    s->set_min(finals.front());
    s->set_max(finals.back());
    s->set_count(static_cast<uint32_t>(finals.size()));
    // Against the exact run from the same weights and batches; a difference no larger than
    // the seeds' own spread is noise.
    const double above = v->final_loss() - paired->second;
    v->set_within(above <= spread);
    const std::string detail = absl::StrFormat("final loss %.4f against %.4f from the same seed; the %d seeds' spread %.4f",
                                               v->final_loss(), paired->second, s->count(), spread);
    if (v->within()) {
      v->set_text(absl::StrCat("within the exact runs' spread (", detail, ")"));
    } else {
      v->set_worse_by(above / paired->second);
      v->set_text(absl::StrFormat("worse by %.1f%% (%s)", 100 * v->worse_by(), detail));
    }
  }
}

}  // namespace internal_report
}  // namespace ddplab
