// One rank's timeline of a run's measured steps as Chrome trace events (the elements of a
// JSON array; MergeTraces in run_files.h joins the ranks' into one file): each step and
// its phases on the rank's first track, each bucket's collective on a second
// ("communication"), and any span the caller adds, such as a barrier's.
//
// Note [One clock for all ranks]
// Every time in the trace is microseconds from the end of the barrier that opens the
// measured window, as rank 0 left it. Ranks on one host share its monotonic clock, so
// rank 0's time, broadcast, puts them on one clock exactly: what the trace shows apart
// happened apart. Ranks on several hosts, whose clocks need not agree, each count from
// their own exit of that barrier, which all leave at one instant to within the barrier's
// skew (tens of microseconds). GPU times (CUDA events) are placed on the host's clock
// where the device was idle when the host marked them (after a synchronize): the first
// measured step's start and the engine's StartTiming.
//
//   RunTrace::Time origin = RunTrace::AgreeOnOrigin(group, device, one_host, barrier_exit);
//   ddplab::RunTrace trace(rank, origin);
//   trace.AddSteps(timer, measured, /*first_step=*/warmup);
//   trace.AddBuckets(engine.stats());
//   trace.AddSpan("barrier", barrier_enter, barrier_exit);
//   absl::Status s = trace.Write(path);
#ifndef DDPLAB_CORE_TRAINING_RUN_TRACE_H_
#define DDPLAB_CORE_TRAINING_RUN_TRACE_H_

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/engine/engine.h"
#include "core/torch_compat.h"
#include "core/training/step_timer.h"

namespace ddplab {

class RunTrace {
 public:
  using Time = std::chrono::steady_clock::time_point;
  // The trace of rank `rank`, whose time 0 is `origin` (Note [One clock for all ranks]).
  RunTrace(int rank, Time origin);

  // Time 0 for every rank of `group`, each passing the time it left the barrier that
  // opens the measured window (`exit`): rank 0's where `one_host`, else the rank's own.
  // A collective over `group` (tensors on `device`); throws what c10d throws.
  static Time AgreeOnOrigin(compat::CollectiveGroup& group, const at::Device& device, bool one_host, Time exit);

  // The measured steps' spans ("Batch <first_step + m>") and their phases.
  void AddSteps(StepTimer& timer, int steps, int first_step);
  // Each bucket's collective, on the communication track: from when it could start (its
  // launch, or the end of the collective before it: one process group runs them in
  // order) to its end, with its launch and bytes in args.
  void AddBuckets(const EngineStats& stats);
  // A span on the steps' track.
  void AddSpan(absl::string_view name, Time from, Time to);

  // The events (a JSON array's elements, without the brackets).
  const std::string& events() const { return events_; }
  // Writes them as a JSON array to `path`, atomically.
  absl::Status Write(const std::string& path) const;

 private:
  void Event(absl::string_view name, int track, double from_ms, double to_ms, absl::string_view args = "");
  double Ms(Time t) const;

  int rank_;
  Time origin_;
  std::string events_;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_TRAINING_RUN_TRACE_H_
