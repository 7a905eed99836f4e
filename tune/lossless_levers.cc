// The lossless levers tried on the answer (Note [The tuner's last questions],
// lossless_levers.h).
#include "tune/lossless_levers.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tune/bucket_caps.h"
#include "tune/predict.h"
#include "tune/spread.h"

namespace ddplab::tune {
namespace {

// A lever the tuner tries, and what its text says of it.
struct Lever {
  const char* plugin;
  bool TuneSettings::*asked;  // whether the settings ask for it
  const char* infix;          // in its run's name, after the experiment's
  const char* what;           // "<what> (<plugin>) was not tried: <note>."
  const char* as;             // "With <as> (plugin { <plugin> {} }): <measured>."; the answer file's heading
  const char* taken;          // "The answer takes it: <taken>."
  const char* not_taken;      // "With <as>: <measured>, no faster beyond the noise: <not_taken>."
  const char* already;        // the note where the experiment has it
};

// In the order they are tried (the note says why).
constexpr Lever kLevers[] = {
    {kShardedOptimizer, &TuneSettings::try_sharded_optimizer, "_sharded", "The optimizer sharded over the ranks",
     "its optimizer sharded over the ranks",
     "each rank steps its share of the parameters beside backward, and the collectives move an all-reduce's bytes",
     "the answer keeps its all-reduce and whole optimizer", "the experiment shards its optimizer already"},
    {kStepGraph, &TuneSettings::try_step_graph, "_graph", "The step as one CUDA graph", "its step as one CUDA graph",
     "the host's launches, not the collectives, bound this step, and a replay launches the whole step at once",
     "the answer runs eagerly", "the experiment runs its step as one CUDA graph already"},
};

const Lever* LeverOf(const std::string& plugin) {
  for (const Lever& lever : kLevers) {
    if (plugin == lever.plugin) return &lever;
  }
  return nullptr;
}

// The answer's measured step: its verified candidate's runs, else the experiment as given.
v1::Spread AnswerSpread(const v1::Tuning& t) {
  for (const v1::TuneCandidate& c : t.candidates()) {
    if (c.bucket_cap_mb() == t.chosen_cap_mb() && c.measured_step_ms().count() > 0) return c.measured_step_ms();
  }
  return t.base_step_ms();
}

// `answer` (the cap and the levers taken so far, run as `infix`) with `lever` added:
// checked, run, and measured against `answer_ms` into `trial`. The experiment with the
// lever where the answer takes it; nullopt where it does not, or was not tried.
absl::StatusOr<std::optional<v1::Experiment>> TryLever(const TuneRequest& req, Runner& runner, const Lever& lever,
                                                       const v1::Experiment& answer, const v1::Spread& answer_ms,
                                                       const std::string& infix, const v1::Tuning& t,
                                                       v1::LeverTrial& trial) {
  const ExperimentSchema& schema = runner.schema();
  const std::vector<std::string> found = schema.plugins();
  if (std::find(found.begin(), found.end(), lever.plugin) == found.end()) {
    trial.set_note(absl::StrCat("the ", lever.plugin, " plugin is not among the plugins found"));
    return std::nullopt;
  }
  if (HasPlugin(answer, lever.plugin)) {
    trial.set_note(lever.already);
    return std::nullopt;
  }
  const double cap = t.chosen_cap_mb();
  v1::Experiment with = WithCap(answer, cap, CapRunName(req.base.name(), cap, absl::StrCat(infix, lever.infix)), schema);
  absl::StatusOr<v1::Plugin> entry = schema.Entry(lever.plugin);
  if (!entry.ok()) return entry.status();
  *with.add_plugin() = *entry;
  with.mutable_steps()->set_repetitions(static_cast<uint32_t>(req.settings.repetitions));
  if (absl::Status s = runner.Check(with); !s.ok()) {
    trial.set_note(std::string(s.message()));
    return std::nullopt;
  }
  req.say(absl::StrCat("tune: the answer with ", lever.as, ", ", req.settings.repetitions, " run(s)"));
  absl::StatusOr<std::vector<absl::StatusOr<v1::RunResult>>> ran = runner.Run({with}, req.settings.repetitions);
  if (!ran.ok()) return ran.status();
  if (ran->empty() || !ran->front().ok()) {
    trial.set_note(absl::StrCat("its run failed: ", ran->empty() ? "nothing ran" : ran->front().status().message()));
    return std::nullopt;
  }
  trial.set_experiment(ran->front()->experiment());
  *trial.mutable_step_ms() = StepSpread(*ran->front());
  *trial.mutable_answer_step_ms() = answer_ms;
  if (trial.step_ms().median() <= 0 || answer_ms.median() <= 0) {
    trial.set_note("its run or the answer's measured no step");
    return std::nullopt;
  }
  trial.set_gain(answer_ms.median() / trial.step_ms().median() - 1);
  trial.set_gain_noise(HalfWidth(answer_ms) + HalfWidth(trial.step_ms()));
  trial.set_chosen(trial.gain() > trial.gain_noise());
  if (!trial.chosen()) return std::nullopt;
  return with;
}

std::string TrialText(const Lever& lever, const v1::LeverTrial& trial) {
  if (!trial.note().empty()) {
    return absl::StrCat(lever.what, " (", lever.plugin, ") was not tried: ", trial.note(), ".\n");
  }
  if (trial.experiment().empty()) return "";
  const v1::Spread& s = trial.step_ms();
  const std::string measured = absl::StrFormat(
      "%.2f ms per step [%.2f-%.2f] over %d run(s) against the answer's %.2f ms, %+.1f%% (noise %.1f%%)", s.median(),
      s.min(), s.max(), s.count(), trial.answer_step_ms().median(), trial.gain() * 100, trial.gain_noise() * 100);
  if (trial.chosen()) {
    return absl::StrCat("With ", lever.as, " (plugin { ", lever.plugin, " {} }): ", measured,
                        ". The answer takes it: ", lever.taken, ".\n");
  }
  return absl::StrCat("With ", lever.as, ": ", measured, ", no faster beyond the noise: ", lever.not_taken, ".\n");
}

}  // namespace

absl::StatusOr<std::optional<v1::Experiment>> TryLosslessLevers(const TuneRequest& req, Runner& runner,
                                                                 v1::Tuning& t) {
  v1::Experiment answer = req.base;
  v1::Spread answer_ms = AnswerSpread(t);
  std::string infix;  // the levers taken, in the runs' names
  bool taken = false;
  for (const Lever& lever : kLevers) {
    if (!(req.settings.*lever.asked)) continue;
    v1::LeverTrial* trial = t.add_levers_tried();
    trial->set_plugin(lever.plugin);
    absl::StatusOr<std::optional<v1::Experiment>> with = TryLever(req, runner, lever, answer, answer_ms, infix, t, *trial);
    if (!with.ok()) return with.status();
    if (!*with) continue;
    answer = **with;
    answer_ms = trial->step_ms();
    infix += lever.infix;
    taken = true;
  }
  if (!taken) return std::nullopt;
  answer.set_name(req.base.name());
  return answer;
}

std::string LeversTaken(const v1::Tuning& t) {
  std::string out;
  for (const v1::LeverTrial& trial : t.levers_tried()) {
    const Lever* lever = LeverOf(trial.plugin());
    if (lever != nullptr && trial.chosen()) absl::StrAppend(&out, ", ", lever->as);
  }
  return out;
}

std::string LosslessLeversText(const v1::Tuning& t) {
  std::string out;
  for (const v1::LeverTrial& trial : t.levers_tried()) {
    if (const Lever* lever = LeverOf(trial.plugin())) out += TrialText(*lever, trial);
  }
  return out;
}

}  // namespace ddplab::tune
