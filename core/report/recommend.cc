// The report's recommendation over the runs of several processes on one transport: the
// fastest by median steps/s, named a winner only when it is ahead by more than the spread
// of the repetitions, with its PyTorch form and what of it needs ddplab's engine.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/report/report.h"

namespace ddplab {
namespace internal_report {
namespace {

std::string RateWithSpread(const v1::ReportRow& r) {
  const v1::Spread& s = r.steps_per_s();
  if (s.count() <= 1) return absl::StrFormat("%.3f steps/s", s.median());
  return absl::StrFormat("%.3f steps/s (median of %d, %.3f-%.3f)", s.median(), s.count(), s.min(), s.max());
}

// Whether `a` (the faster by median) is ahead of `b` by more than their spread: a's
// slowest repetition above b's fastest, each side of at least two (one run has no spread
// to judge by).
bool AheadBeyondNoise(const v1::ReportRow& a, const v1::ReportRow& b) {
  return a.steps_per_s().count() >= 2 && b.steps_per_s().count() >= 2 && a.steps_per_s().min() > b.steps_per_s().max();
}

// Whether `r` may be recommended: exact, or lossy and judged within by the convergence
// check. Only such rows race for the recommendation (a faster one that may not is said
// apart, TrustedOrFallback).
bool MayRecommend(const v1::ReportRow& r) { return !r.lossy() || (r.has_convergence() && r.convergence().within()); }

// The first row after `after` in `by_rate` that may be recommended, or none.
const v1::ReportRow* RivalOf(const v1::ReportRow* after, const std::vector<const v1::ReportRow*>& by_rate) {
  bool past = false;
  for (const v1::ReportRow* r : by_rate) {
    if (past && MayRecommend(*r)) return r;
    past |= r == after;
  }
  return nullptr;
}

// `use` against its rival (the next row that may be recommended): sets runner_up and
// within_noise, and says "neither wins" (after `lead`) where their spreads overlap or
// either ran once. False where `use` wins beyond the noise (or has no rival): then
// nothing is said here.
bool SayNeitherWins(const v1::ReportRow& use, const v1::ReportRow* rival, const char* lead, v1::Recommendation& rec,
                    std::string& out) {
  if (rival == nullptr) return false;
  rec.set_runner_up(rival->experiment());
  rec.set_within_noise(!AheadBeyondNoise(use, *rival));
  if (!rec.within_noise()) return false;
  absl::StrAppend(&out, lead);
  const int once = (use.steps_per_s().count() < 2) + (rival->steps_per_s().count() < 2);
  if (once > 0) {
    absl::StrAppend(&out, use.experiment(), " and ", rival->experiment(), ": ", RateWithSpread(use), " against ",
                    RateWithSpread(*rival), " on ", use.gpus(), " processes, but ",
                    once == 2 ? "each ran once" : absl::StrCat(use.steps_per_s().count() < 2 ? use.experiment()
                                                                                             : rival->experiment(),
                                                               " ran once"),
                    ": with no spread to judge by, neither wins.");
    // The leader repeated and its rival not: a suite spares the runs clear of their
    // transport's fastest after their first (Note [Repetitions that decide]), which is
    // what a user then reads here; say how to have both judged by their spreads.
    if (use.steps_per_s().count() >= 2) {
      absl::StrAppend(&out, " A suite repeats only the runs close to their transport's fastest; --all_repetitions "
                            "repeats every run, so that each has a spread to judge by.");
    }
  } else {
    absl::StrAppend(&out, use.experiment(), " and ", rival->experiment(), " are within noise: ", RateWithSpread(use),
                    " and ", RateWithSpread(*rival), " on ", use.gpus(), " processes overlap; neither wins.");
  }
  return true;
}

void SayCommunication(const v1::ReportRow& r, const std::string& one, std::string& out) {
  const v1::StepParts& p = r.parts();
  if (!r.step_runner().empty()) {
    // A replay's phases are timed as one (ReportRow.step_runner): what it costs beyond one
    // GPU run the same way is not split between waiting and slowed compute.
    absl::StrAppendFormat(&out, " Its steps ran as %s, whose phases are timed as one", r.step_runner());
    if (p.compute_slowdown_ms() > 0) {
      absl::StrAppendFormat(&out, ": of its %.1f ms step, %.2f ms are beyond %s's run the same way, communication's "
                            "wait and compute slowed beside it together",
                            p.step_ms(), p.compute_slowdown_ms(), one);
    }
    absl::StrAppend(&out, ".");
    return;
  }
  absl::StrAppendFormat(&out, " Of its %.1f ms step, communication costs %.2f ms of exposed wait", p.step_ms(),
                        p.exposed_comm_ms());
  if (p.compute_slowdown_ms() > 0) {
    absl::StrAppendFormat(&out, " and %.2f ms of compute slowed beside it (forward and backward against %s's)",
                          p.compute_slowdown_ms(), one);
  }
  absl::StrAppend(&out, ".");
}

// The row's PyTorch code and what of it has no PyTorch form; the sentence on the latter
// ends the recommendation, after what the studies add (SayDdplabOnly).
void SayPyTorch(const v1::ReportRow& r, v1::Recommendation& rec) {
  rec.set_pytorch(r.pytorch());
  *rec.mutable_ddplab_only() = r.ddplab_only();
}

// For a lossy `best` (by_rate's first): its error and its convergence verdict in words,
// and the row to recommend: `best` where the check judged it within, else the fastest
// that is exact or judged within (Note [Down the list], studies/convergence/check_walk.h),
// or none.
const v1::ReportRow* TrustedOrFallback(const v1::ReportRow& best, const std::vector<const v1::ReportRow*>& by_rate,
                                       const std::string& one, v1::Recommendation& rec) {
  std::string& out = *rec.mutable_text();
  const v1::ReportRow* use = &best;
  if (best.has_gradient_error()) {
    absl::StrAppendFormat(&out, " It is lossy: gradients differ from exact all-reduce by %.1e (relative)",
                          best.gradient_error());
  } else {
    absl::StrAppend(&out, " It is lossy (its error was not sampled: sample_error_every)");
  }
  if (best.has_effective_error()) {
    absl::StrAppendFormat(&out, ", summed over %d steps by %.1e", best.effective_error_steps(), best.effective_error());
  }
  absl::StrAppend(&out, ".");
  // Note [The convergence check] (core/config/convergence.h): lossy only with a verdict.
  const bool trusted = best.has_convergence() && best.convergence().within();
  if (trusted) {
    absl::StrAppend(&out, " In the convergence check it trains as the exact reference does: ",
                    best.convergence().text(), ".");
  } else if (best.has_convergence() && best.convergence().not_compared()) {
    absl::StrAppend(&out, " The convergence check could not judge it (", best.convergence().text(),
                    "): it is not the recommendation.");
  } else if (best.has_convergence()) {
    absl::StrAppend(&out, " In the convergence check it trains worse than the exact reference: ",
                    best.convergence().text(), "; it is not the recommendation.");
  } else {
    absl::StrAppend(&out, " The convergence check did not train it (the suite has no convergence field, --only "
                    "left the check out, or it is not faster than the fastest exact one beyond the noise): it is not "
                    "the recommendation.");
  }
  const v1::ReportRow* exact = nullptr;
  for (const v1::ReportRow* r : by_rate) {
    if (!r->lossy()) {
      exact = r;
      break;
    }
  }
  if (exact != nullptr) {
    rec.set_fastest_exact(exact->experiment());
    absl::StrAppend(&out, " The fastest exact one is ", exact->experiment(), ", ", RateWithSpread(*exact));
    if (exact->has_vs_single()) absl::StrAppendFormat(&out, " (%.3f of %s's)", exact->vs_single().median(), one);
    absl::StrAppend(&out, ".");
  }
  if (!trusted) {
    // Down the list (Note [Down the list], studies/convergence/check_walk.h): the
    // fastest that is exact or judged within.
    use = exact;
    for (const v1::ReportRow* r : by_rate) {
      if (r == exact) break;
      if (r->lossy() && r->has_convergence() && r->convergence().within()) {
        use = r;
        absl::StrAppend(&out, " The fastest lossy one the convergence check judged within is ", r->experiment(),
                        ", ", RateWithSpread(*r), ": ", r->convergence().text(), "; it is the recommendation.");
        break;
      }
    }
  }
  return use;
}

}  // namespace

v1::Recommendation RecommendAmong(const std::vector<const v1::ReportRow*>& rows, const std::string& transport,
                                  bool on_cpus) {
  const std::string one = on_cpus ? "one process" : "one GPU";  // what the rows are measured against
  std::vector<const v1::ReportRow*> by_rate = rows;
  std::stable_sort(by_rate.begin(), by_rate.end(), [](const v1::ReportRow* a, const v1::ReportRow* b) {
    return a->steps_per_s().median() > b->steps_per_s().median();
  });
  const v1::ReportRow& best = *by_rate[0];
  v1::Recommendation rec;
  rec.set_transport(transport);
  rec.set_fastest(best.experiment());
  std::string& out = *rec.mutable_text();
  // Only rows that may be recommended race (MayRecommend): the fastest is raced against
  // the next such row where it may be recommended itself; otherwise the row recommended
  // in its place is, after the fastest is said apart.
  const bool best_may = MayRecommend(best);
  if (!best_may || !SayNeitherWins(best, RivalOf(&best, by_rate), "", rec, out)) {
    absl::StrAppend(&out, best.experiment(), " is the fastest on this machine, ", RateWithSpread(best), " on ",
                    best.gpus(), best.gpus() == 1 ? " process" : " processes");
    if (best.has_vs_naive() && best.vs_naive() != 1) {
      absl::StrAppendFormat(&out, ", %.0f%% over naive_ddp (one bucket after backward)", 100 * (best.vs_naive() - 1));
    }
    if (best.has_vs_single()) absl::StrAppendFormat(&out, ", %.3f of %s's step rate", best.vs_single().median(), one);
    absl::StrAppend(&out, ".");
  }
  SayCommunication(best, one, out);
  const v1::ReportRow* use = best.lossy() ? TrustedOrFallback(best, by_rate, one, rec) : &best;
  if (use != nullptr && !best_may) SayNeitherWins(*use, RivalOf(use, by_rate), " ", rec, out);
  if (use != nullptr) {
    rec.set_recommended(use->experiment());
    SayPyTorch(*use, rec);
  }
  return rec;
}

void SayDdplabOnly(v1::Recommendation& rec) {
  if (rec.ddplab_only_size() == 0) return;
  absl::StrAppend(rec.mutable_text(), " PyTorch's DDP has no form of ", absl::StrJoin(rec.ddplab_only(), ", "),
                  ": that part of the gain needs ddplab's engine.");
}

}  // namespace internal_report
}  // namespace ddplab
