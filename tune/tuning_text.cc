// The tuner's answer in sentences (TuningText, tune/tuner.h): what it chose, against the
// experiment as given, where the model missed, the verdict and how to run it.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tune/model/verdict.h"
#include "tune/lossless_levers.h"
#include "tune/tuner.h"

namespace ddplab::tune {
namespace {

std::string Buckets(int n) { return absl::StrFormat("%d bucket%s", n, n == 1 ? "" : "s"); }

// Every cap made the experiment's own buckets: keep its cap.
std::string NothingToTuneText(const v1::Tuning& t) {
  double lo = 0, hi = 0;
  for (const v1::TuneCandidate& c : t.candidates()) {
    lo = lo == 0 ? c.bucket_cap_mb() : std::min(lo, c.bucket_cap_mb());
    hi = std::max(hi, c.bucket_cap_mb());
  }
  const v1::Spread& ms = t.base_step_ms();
  return absl::StrFormat(
      "Nothing to tune in %s: every bucket_cap_mb tried (%g to %g) makes the buckets it makes already (%s), so "
      "keep bucket_cap_mb %g. Its step: %.2f ms measured (%d run%s), %.2f ms predicted; no other cap ran.\n",
      t.experiment(), lo, hi, Buckets(t.candidates_size() > 0 ? t.candidates(0).buckets() : 0), t.chosen_cap_mb(),
      ms.median(), ms.count(), ms.count() == 1 ? "" : "s", t.base_predicted_step_ms());
}

// The fastest verified cap, against the experiment as given: the answer is its cap only
// where it is faster beyond the noise and makes other buckets (Answer, tuner.cc).
std::string ChosenText(const v1::Tuning& t, const v1::TuneCandidate& chosen) {
  const v1::Spread& ms = chosen.measured_step_ms();
  const std::string step = absl::StrFormat("%.2f ms per step [%.2f-%.2f] over %d run(s), predicted %.2f ms (off by %+.1f%%)",
                                           ms.median(), ms.min(), ms.max(), ms.count(), chosen.predicted_step_ms(),
                                           chosen.error() * 100);
  const std::string given = absl::StrFormat("the experiment as given (%.2f ms%s)", t.base_step_ms().median(),
                                            t.base_step_ms().count() == 1 ? ", one run" : "");
  if (t.base_same_as() == chosen.bucket_cap_mb() && t.base_same_as() > 0) {
    return absl::StrFormat("Tuned %s: keep bucket_cap_mb %g. The fastest verified cap, %g, makes the buckets it makes "
                           "already (%s): %s.\n",
                           t.experiment(), t.chosen_cap_mb(), chosen.bucket_cap_mb(), Buckets(chosen.buckets()), step);
  }
  if (t.gain() <= t.gain_noise()) {
    return absl::StrFormat("Tuned %s: keep bucket_cap_mb %g. The fastest verified cap, %g (%s), is no faster than %s "
                           "beyond the noise (%+.1f%%, noise %.1f%%): %s.\n",
                           t.experiment(), t.chosen_cap_mb(), chosen.bucket_cap_mb(), Buckets(chosen.buckets()), given,
                           t.gain() * 100, t.gain_noise() * 100, step);
  }
  return absl::StrFormat("Tuned %s: bucket_cap_mb %g (%s), %s.\nAgainst %s: %.1f%% faster (noise %.1f%%).\n",
                         t.experiment(), t.chosen_cap_mb(), Buckets(chosen.buckets()), step, given, t.gain() * 100,
                         t.gain_noise() * 100);
}

// Whether the answer is `chosen`'s cap and makes the fewest buckets of the caps tried (at
// most 2: DDP's first bucket, then the rest), where other caps made more.
bool FewestBuckets(const v1::Tuning& t, const v1::TuneCandidate& chosen) {
  if (chosen.bucket_cap_mb() != t.chosen_cap_mb() || chosen.buckets() > 2) return false;
  bool more = false;
  for (const v1::TuneCandidate& c : t.candidates()) {
    if (c.buckets() < chosen.buckets()) return false;
    more |= c.buckets() > chosen.buckets();
  }
  return more;
}

}  // namespace

std::string TuningText(const v1::Tuning& t) {
  std::string out;
  if (t.nothing_to_tune()) {
    out = NothingToTuneText(t);
  } else {
    const v1::TuneCandidate* chosen = nullptr;
    for (const v1::TuneCandidate& c : t.candidates()) {
      if (c.experiment() == t.chosen_experiment() && !c.experiment().empty()) chosen = &c;
    }
    if (chosen == nullptr) return "The tuner verified no candidate.\n";
    out = ChosenText(t, *chosen);
    if (FewestBuckets(t, *chosen)) {
      absl::StrAppendFormat(&out,
                            "Overlap does not pay here: the fewest buckets tried (%s), reduced once backward is done, "
                            "are fastest. Beside the collectives backward runs %.0f%% slower (calibrated), which costs "
                            "more than they hide.\n",
                            Buckets(chosen->buckets()), t.slowdown() * 100);
    }
  }
  std::vector<std::string> missed;
  for (const v1::TuneCandidate& c : t.candidates()) {
    if (c.missed()) {
      missed.push_back(absl::StrFormat("cap %g predicted %.2f ms, measured %.2f (%+.1f%%)", c.bucket_cap_mb(),
                                       c.predicted_step_ms(), c.measured_step_ms().median(), c.error() * 100));
    }
  }
  if (!t.nothing_to_tune()) {
    absl::StrAppend(&out, missed.empty() ? "The model was within 5% of every verified candidate.\n"
                                         : absl::StrCat("The model missed: ", absl::StrJoin(missed, "; "), ".\n"));
  }
  absl::StrAppendFormat(&out,
                        "Calibrated on the experiment as given: backward %.0f%% slower beside collectives, %s per "
                        "collective beyond the bare all-reduce's.\n",
                        t.slowdown() * 100, FormatMicros(t.collective_overhead_us()));
  absl::StrAppend(&out, t.verdict(), "\n");
  absl::StrAppendFormat(&out, "Tuning took %.0f s%s.\n", t.tuning_seconds(),
                        t.cached() ? " (the probe and sweep from this machine's cache)" : "");
  if (t.exhaustive_seconds() > 0) {
    absl::StrAppendFormat(&out,
                          "The exhaustive sweep of the same caps took %.0f s and found bucket_cap_mb %g fastest; "
                          "the tuned cap runs at %.1f%% of its steps/s there.\n",
                          t.exhaustive_seconds(), t.exhaustive_best_cap_mb(), t.vs_exhaustive_best() * 100);
  }
  absl::StrAppend(&out, LosslessLeversText(t));
  if (!t.textproto_path().empty()) {
    absl::StrAppend(&out, "Run it: bazel run //experiments:vit_ddp -- --experiment=", t.textproto_path(), "\n");
  }
  return out;
}

}  // namespace ddplab::tune
