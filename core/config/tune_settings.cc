#include "core/config/tune_settings.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"

namespace ddplab {

TuneSettings ResolveTune(const v1::Tune& t) {
  TuneSettings s;
  s.experiment = t.experiment();
  if (t.bucket_cap_mb_size() > 0) s.caps_mib.assign(t.bucket_cap_mb().begin(), t.bucket_cap_mb().end());
  if (t.verify() > 0) s.verify = static_cast<int>(t.verify());
  s.verify = std::min<int>(s.verify, static_cast<int>(s.caps_mib.size()));
  if (t.repetitions() > 0) s.repetitions = static_cast<int>(t.repetitions());
  s.exhaustive = t.exhaustive();
  s.remeasure = t.remeasure();
  s.try_step_graph = !t.skip_step_graph();
  s.try_sharded_optimizer = !t.skip_sharded_optimizer();
  return s;
}

absl::Status ValidateTune(const v1::Suite& suite, const Locator& at) {
  if (!suite.has_tune()) return absl::OkStatus();
  const v1::Tune& t = suite.tune();
  if (!t.experiment().empty()) {
    const bool found = std::any_of(suite.experiment().begin(), suite.experiment().end(),
                                   [&](const v1::Experiment& e) { return e.name() == t.experiment(); });
    if (!found) return at.Error("tune.experiment", absl::StrCat("\"", t.experiment(), "\" is no experiment of the suite"));
  }
  std::set<double> seen;
  for (double cap : t.bucket_cap_mb()) {
    if (!std::isfinite(cap) || cap <= 0) {
      return at.Error("tune.bucket_cap_mb", absl::StrCat("each cap must be above 0 MiB, got ", cap));
    }
    if (!seen.insert(cap).second) return at.Error("tune.bucket_cap_mb", absl::StrCat(cap, " is listed twice"));
  }
  const size_t caps = t.bucket_cap_mb_size() > 0 ? t.bucket_cap_mb_size() : TuneSettings().caps_mib.size();
  if (t.verify() > caps) {
    return at.Error("tune.verify", absl::StrCat("must be at most the number of caps (", caps, "), got ", t.verify()));
  }
  if (t.repetitions() > 20) {
    return at.Error("tune.repetitions", absl::StrCat("must be from 1 to 20, got ", t.repetitions()));
  }
  return absl::OkStatus();
}

}  // namespace ddplab
