// The tuner's last question: does the answer run faster with its step as one CUDA graph?
//
// Note [The tuner's last question]
// Bucket sizes trade the collectives' overlap with backward against their count. Where
// the step is short (bf16 autocast), the host's launches are its clock and no cap pays:
// the fastest is then one bucket after backward, and what pays is taking the host out of
// the step (plugins/cuda_graph; bench/NOTES.md, "The short step"). So once the cap is
// chosen, the tuner runs the answer once more as a graph, `repetitions` times, where the
// cuda_graph plugin is found and configures with the experiment (it refuses a CPU,
// per-step host decisions and the rest: its refusal is the note). The answer takes the
// graph only where it is faster beyond both spreads, as caps are chosen; the text says
// which, and why. `tune { skip_step_graph: true }` skips the question.
//
//   absl::StatusOr<std::optional<v1::Experiment>> graph = TryStepGraph(request, runner, tuning);
//   if (graph.ok() && *graph) ...   // write the answer from **graph
#ifndef DDPLAB_TUNE_STEP_GRAPH_H_
#define DDPLAB_TUNE_STEP_GRAPH_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "ddplab/v1/experiment.pb.h"
#include "ddplab/v1/report.pb.h"
#include "tune/tuner.h"

namespace ddplab::tune {

inline constexpr char kStepGraph[] = "cuda_graph";

// Runs `req.base` with `t`'s chosen cap and the step as a graph, and sets `t`'s graph
// fields. The experiment (with the cap, without a name of its own) where the answer takes
// the graph; nullopt where it does not, or was not tried (graph_note says why). An error
// only where nothing more may run.
absl::StatusOr<std::optional<v1::Experiment>> TryStepGraph(const TuneRequest& req, Runner& runner, v1::Tuning& t);

// The sentences on the graph for the answer's text; "" where the question was skipped.
std::string StepGraphText(const v1::Tuning& t);

}  // namespace ddplab::tune

#endif  // DDPLAB_TUNE_STEP_GRAPH_H_
