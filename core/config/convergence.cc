#include "core/config/convergence.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ddplab {

ConvergenceSettings ResolveConvergence(const v1::Convergence& c) {
  ConvergenceSettings s;
  s.exact = c.exact();
  if (c.steps() > 0) s.steps = static_cast<int>(c.steps());
  if (c.seeds() > 0) s.seeds = static_cast<int>(c.seeds());
  s.final_steps = c.final_steps() > 0 ? static_cast<int>(c.final_steps()) : std::max(1, s.steps / 10);
  if (c.tolerance_percent() > 0) s.tolerance = c.tolerance_percent() / 100;
  if (c.max_lossy_checked() > 0) s.max_lossy_checked = static_cast<int>(c.max_lossy_checked());
  return s;
}

absl::Status ValidateConvergence(const v1::Suite& suite, const Locator& at) {
  if (!suite.has_convergence()) return absl::OkStatus();
  const v1::Convergence& c = suite.convergence();
  if (c.exact().empty()) return at.Error("convergence.exact", "is required: the exact reference experiment");
  const bool found = std::any_of(suite.experiment().begin(), suite.experiment().end(),
                                 [&](const v1::Experiment& e) { return e.name() == c.exact(); });
  if (!found) return at.Error("convergence.exact", absl::StrCat("\"", c.exact(), "\" is no experiment of the suite"));
  if (c.steps() != 0 && (c.steps() < 10 || c.steps() > 100000)) {
    return at.Error("convergence.steps", absl::StrCat("must be from 10 to 100000, got ", c.steps()));
  }
  if (c.seeds() != 0 && (c.seeds() < 2 || c.seeds() > 20)) {
    return at.Error("convergence.seeds", absl::StrCat("must be from 2 to 20, got ", c.seeds()));
  }
  if (c.tolerance_percent() != 0 && !(c.tolerance_percent() >= 0.1 && c.tolerance_percent() <= 50)) {
    return at.Error("convergence.tolerance_percent", absl::StrCat("must be from 0.1 to 50, got ", c.tolerance_percent()));
  }
  if (c.max_lossy_checked() > 20) {
    return at.Error("convergence.max_lossy_checked", absl::StrCat("must be from 1 to 20, got ", c.max_lossy_checked()));
  }
  const ConvergenceSettings s = ResolveConvergence(c);
  if (s.final_steps > s.steps) {
    return at.Error("convergence.final_steps",
                    absl::StrCat("must be at most steps (", s.steps, "), got ", c.final_steps()));
  }
  return absl::OkStatus();
}

v1::Experiment ConvergenceExperiment(const v1::Experiment& e, const std::string& origin, const ConvergenceSettings& s,
                                     int seed_index, bool exact, v1::ConvergenceRun* record) {
  v1::Experiment c = e;
  c.set_name(absl::StrCat(origin, "-convergence-", seed_index + 1));
  c.set_description(absl::StrCat("the convergence check of ", origin));
  c.mutable_data()->set_task(v1::Data::LEARNABLE);
  c.mutable_data()->set_seed(e.data().seed() + static_cast<uint64_t>(seed_index));
  v1::Steps* steps = c.mutable_steps();
  steps->set_warmup(0);
  steps->set_measured(static_cast<uint32_t>(s.steps));
  steps->set_cooldown(0);
  steps->set_repetitions(1);
  record->set_of(origin);
  record->set_exact(exact);
  record->set_seed(static_cast<int32_t>(c.data().seed()));
  record->set_final_steps(s.final_steps);
  record->set_tolerance(s.tolerance);
  return c;
}

}  // namespace ddplab
