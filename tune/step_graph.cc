// The answer as one CUDA graph (Note [The tuner's last question], step_graph.h).
#include "tune/step_graph.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tune/bucket_caps.h"
#include "tune/predict.h"
#include "tune/spread.h"

namespace ddplab::tune {
namespace {

// The answer's measured step: its verified candidate's runs, else the experiment as given.
v1::Spread AnswerSpread(const v1::Tuning& t) {
  for (const v1::TuneCandidate& c : t.candidates()) {
    if (c.bucket_cap_mb() == t.chosen_cap_mb() && c.measured_step_ms().count() > 0) return c.measured_step_ms();
  }
  return t.base_step_ms();
}

}  // namespace

absl::StatusOr<std::optional<v1::Experiment>> TryStepGraph(const TuneRequest& req, Runner& runner, v1::Tuning& t) {
  const ExperimentSchema& schema = runner.schema();
  const std::vector<std::string> found = schema.plugins();
  if (std::find(found.begin(), found.end(), kStepGraph) == found.end()) {
    t.set_graph_note(absl::StrCat("the ", kStepGraph, " plugin is not among the plugins found"));
    return std::nullopt;
  }
  if (HasPlugin(req.base, kStepGraph)) {
    t.set_graph_note("the experiment runs its step as one CUDA graph already");
    return std::nullopt;
  }
  v1::Experiment graph =
      WithCap(req.base, t.chosen_cap_mb(), CapRunName(req.base.name(), t.chosen_cap_mb(), "_graph"), schema);
  absl::StatusOr<v1::Plugin> entry = schema.Entry(kStepGraph);
  if (!entry.ok()) return entry.status();
  *graph.add_plugin() = *entry;
  graph.mutable_steps()->set_repetitions(static_cast<uint32_t>(req.settings.repetitions));
  if (absl::Status s = runner.Check(graph); !s.ok()) {
    t.set_graph_note(std::string(s.message()));
    return std::nullopt;
  }
  req.say(absl::StrCat("tune: the answer with its step as one CUDA graph, ", req.settings.repetitions, " run(s)"));
  absl::StatusOr<std::vector<absl::StatusOr<v1::RunResult>>> ran = runner.Run({graph}, req.settings.repetitions);
  if (!ran.ok()) return ran.status();
  if (ran->empty() || !ran->front().ok()) {
    t.set_graph_note(absl::StrCat("its run failed: ", ran->empty() ? "nothing ran" : ran->front().status().message()));
    return std::nullopt;
  }
  t.set_graph_experiment(ran->front()->experiment());
  *t.mutable_graph_step_ms() = StepSpread(*ran->front());
  *t.mutable_answer_step_ms() = AnswerSpread(t);
  if (t.graph_step_ms().median() <= 0 || t.answer_step_ms().median() <= 0) {
    t.set_graph_note("its run or the answer's measured no step");
    return std::nullopt;
  }
  t.set_graph_gain(t.answer_step_ms().median() / t.graph_step_ms().median() - 1);
  t.set_graph_gain_noise(HalfWidth(t.answer_step_ms()) + HalfWidth(t.graph_step_ms()));
  t.set_graph_chosen(t.graph_gain() > t.graph_gain_noise());
  if (!t.graph_chosen()) return std::nullopt;
  graph.set_name(req.base.name());
  return graph;
}

std::string StepGraphText(const v1::Tuning& t) {
  if (!t.graph_note().empty()) {
    return absl::StrCat("The step as one CUDA graph (", kStepGraph, ") was not tried: ", t.graph_note(), ".\n");
  }
  if (t.graph_experiment().empty()) return "";
  const v1::Spread& g = t.graph_step_ms();
  const std::string measured = absl::StrFormat(
      "%.2f ms per step [%.2f-%.2f] over %d run(s) against the answer's %.2f ms, %+.1f%% (noise %.1f%%)", g.median(),
      g.min(), g.max(), g.count(), t.answer_step_ms().median(), t.graph_gain() * 100, t.graph_gain_noise() * 100);
  if (t.graph_chosen()) {
    return absl::StrCat("With its step as one CUDA graph (plugin { ", kStepGraph, " {} }): ", measured,
                        ". The answer takes it: the host's launches, not the collectives, bound this step, and a "
                        "replay launches the whole step at once.\n");
  }
  return absl::StrCat("With its step as one CUDA graph: ", measured,
                      ", no faster beyond the noise: the answer runs eagerly.\n");
}

}  // namespace ddplab::tune
