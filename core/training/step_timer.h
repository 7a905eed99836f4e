// Times the phases of a run's measured steps ("get batch", "forward", "backward",
// "optimizer step"): CUDA events on the compute stream on a GPU, read only after the run
// so that nothing waits; the host clock on a CPU. Also places them on the host's clock,
// for the trace (core/training/run_trace.h).
//
//   ddplab::StepTimer timer(/*cuda=*/true, /*steps=*/20);
//   timer.Mark(m, ddplab::kStart);  ...  timer.Mark(m, ddplab::kOptimizer);
//   // after the device is synchronized:
//   double backward_ms = timer.Ms(m, ddplab::kForward, ddplab::kBackward);
#ifndef DDPLAB_CORE_TRAINING_STEP_TIMER_H_
#define DDPLAB_CORE_TRAINING_STEP_TIMER_H_

#include <chrono>
#include <string>
#include <vector>

#if defined(DDPLAB_CUDA)
#include <ATen/cuda/CUDAEvent.h>
#endif

namespace ddplab {

// The points of a step at which time is taken: start, after get batch, after forward,
// after backward, after the optimizer step.
enum Point { kStart, kBatch, kForward, kBackward, kOptimizer, kNumPoints };

class StepTimer {
 public:
  StepTimer(bool cuda, int steps);
  // Marks `point` of measured step `step` (from 0).
  void Mark(int step, Point point);
  // Milliseconds from `from` to `to` of `step`; valid once the device is synchronized.
  double Ms(int step, Point from, Point to);
  // Milliseconds from the first measured step's start to `point` of `step`.
  double Since(int step, Point point);
  // When `point` of `step` happened on the host's clock. On a GPU: the first measured
  // step's start as the host marked it (the device idle then, so the event passed at
  // once), plus the events' time since; valid once the device is synchronized.
  std::chrono::steady_clock::time_point HostTime(int step, Point point);

 private:
  double Between(int a, int b);
  [[maybe_unused]] bool cuda_;  // read only in the CUDA build
  std::vector<std::chrono::steady_clock::time_point> host_;
#if defined(DDPLAB_CUDA)
  std::vector<at::cuda::CUDAEvent> events_;
#endif
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_TRAINING_STEP_TIMER_H_
