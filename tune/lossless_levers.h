// The tuner's last questions: does the answer run faster with a lossless lever added?
//
// Note [The tuner's last questions]
// Bucket sizes trade the collectives' overlap with backward against their count. Two
// levers change what that trade is made of, and lose nothing, so the tuner tries each on
// its answer once the cap is chosen, in this order, each on the answer as the one before
// left it:
// - the optimizer sharded over the ranks (plugins/sharded_optimizer): each rank steps
//   1/W of the parameters beside backward, and the reduce-scatter and all-gather move an
//   all-reduce's bytes. Where the optimizer is a large part of a short step (bf16
//   autocast and AdamW) it pays (bench/NOTES.md, "The optimizer sharded over the ranks");
//   where it is small (float32 SGD) it does not;
// - the step as one CUDA graph (plugins/cuda_graph). Where the step is short the host's
//   launches are its clock and no cap pays: the fastest is then one bucket after
//   backward, and what pays is taking the host out of the step (bench/NOTES.md, "The
//   short step").
// Each runs `repetitions` times where its plugin is found and configures with the
// experiment (the plugin's refusal, say of a CPU or of a codec, is the note). The answer
// takes a lever only where it is faster beyond both spreads, as caps are chosen; the text
// says which, and why. `tune { skip_sharded_optimizer: true }` and `skip_step_graph`
// skip them.
//
//   absl::StatusOr<std::optional<v1::Experiment>> taken = TryLosslessLevers(request, runner, tuning);
//   if (taken.ok() && *taken) ...   // write the answer from **taken
#ifndef DDPLAB_TUNE_LOSSLESS_LEVERS_H_
#define DDPLAB_TUNE_LOSSLESS_LEVERS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "ddplab/v1/experiment.pb.h"
#include "ddplab/v1/report.pb.h"
#include "tune/tuner.h"

namespace ddplab::tune {

inline constexpr char kStepGraph[] = "cuda_graph";
inline constexpr char kShardedOptimizer[] = "sharded_optimizer";

// Tries the levers `req.settings` asks for on `req.base` with `t`'s chosen cap, adding a
// LeverTrial to `t` for each. The experiment (with the cap and the levers taken, without
// a name of its own) where the answer takes at least one; nullopt where it takes none.
// An error only where nothing more may run.
absl::StatusOr<std::optional<v1::Experiment>> TryLosslessLevers(const TuneRequest& req, Runner& runner,
                                                                 v1::Tuning& t);

// The sentences on the levers tried, for the answer's text; "" where none was asked.
std::string LosslessLeversText(const v1::Tuning& t);

// The levers the answer took, for its file's heading: ", its step as one CUDA graph"; ""
// where it took none.
std::string LeversTaken(const v1::Tuning& t);

}  // namespace ddplab::tune

#endif  // DDPLAB_TUNE_LOSSLESS_LEVERS_H_
