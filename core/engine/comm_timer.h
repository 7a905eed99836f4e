// Times the engine's exposed communication: from the end of backward's compute to the
// last bucket averaged and in place, per synced step; each bucket's collective from its
// launch to its end, for the trace; and, where c10d measures them, the collectives' own
// durations. One interface, one implementation per device type (CUDA events on a GPU,
// read only when the timing ends; the host clock on a CPU), as c10d's reducer_timer.hpp
// does for the Reducer.
//
//   std::unique_ptr<CommTimer> timer = CommTimer::For(device);
//   timer->Start(/*bucket_times=*/true);
//   ...  // each synced step:
//   timer->Launched(b, work);            // as bucket b's collective is issued
//   timer->WaitBegins();                 // backward's compute is queued
//   ...  // wait for the buckets, put the averages in place
//   timer->WaitEnds(works);             // the buckets' collectives, in bucket order
//   CommTimer::Totals t = timer->Finish();
#ifndef DDPLAB_CORE_ENGINE_COMM_TIMER_H_
#define DDPLAB_CORE_ENGINE_COMM_TIMER_H_

#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "core/torch_compat.h"

namespace ddplab {

class CommTimer {
 public:
  // A bucket's collective in a timed step: issued at `launch_ms` (on a GPU: when the
  // compute stream reached that point), finished at `end_ms`; milliseconds from Start.
  struct BucketSpan {
    int step = 0;  // among the timed steps
    int bucket = 0;
    double launch_ms = 0;
    double end_ms = 0;
  };
  struct Totals {
    double exposed_ms = 0;  // summed over the timed steps
    int steps = 0;
    std::vector<double> bucket_ms;  // mean per bucket, where measured (else empty)
    std::vector<BucketSpan> spans;  // every collective of the engine's own (not a hook's)
    std::chrono::steady_clock::time_point start;  // the host's time at Start
  };

  // The timer for tensors on `device`.
  static std::unique_ptr<CommTimer> For(const at::Device& device);
  virtual ~CommTimer() = default;

  // Starts timing; `bucket_times`: also the collectives' own durations.
  void Start(bool bucket_times);
  bool timing() const { return timing_; }
  // Bucket `bucket`'s collective `work` was just issued (while timing).
  virtual void Launched(int bucket, const c10::intrusive_ptr<c10d::Work>& work) = 0;
  // Marks the start and end of one step's wait for its buckets. `works`: each bucket's
  // collective (null for a hook's), kept until the next step begins and read then
  // (reading them waits for them on the host).
  virtual void WaitBegins() = 0;
  void WaitEnds(std::vector<c10::intrusive_ptr<c10d::Work>> works);
  // Before a step's gradients exist: reads and drops the last step's collectives (which
  // hold their tensors).
  void StepBegins();
  // Stops timing and returns what was measured since Start.
  Totals Finish();

  // One step's gradient ready times (what the tuner models buckets over): from
  // BackwardBegins to each Ready, on the device's clock. Independent of Start/Finish.
  void BackwardBegins();
  void Ready(size_t parameter);
  // Each Ready's parameter and milliseconds since BackwardBegins, in the order they came;
  // waits for the device; forgets them.
  std::vector<std::pair<size_t, double>> ReadyTimes();

 protected:
  // The device's clock starts (the device is idle).
  virtual void MarkStart() = 0;
  // Marks a point on the device's clock (the ready times'); PointsMs: each point's
  // milliseconds after the first, waiting for the device; forgets them.
  virtual void MarkPoint() = 0;
  virtual std::vector<double> PointsMs() = 0;
  virtual void MarkEnd() = 0;
  // Waits for every marked end; returns the exposed milliseconds since the last call.
  virtual double ReadExposed() = 0;
  // Waits for the collectives' ends; returns their spans (each's step and bucket as
  // passed) and forgets them.
  virtual std::vector<BucketSpan> ReadSpans() = 0;
  int steps() const { return steps_; }  // timed steps so far
  std::chrono::steady_clock::time_point start() const { return start_; }

 private:
  void Harvest();
  bool timing_ = false;
  std::chrono::steady_clock::time_point start_;
  bool bucket_times_ = false;
  int steps_ = 0;
  std::vector<std::vector<c10::intrusive_ptr<c10d::Work>>> works_;
  std::vector<double> ms_sum_;
  std::vector<int> ms_count_;
  std::vector<size_t> ready_;  // the parameters of the points after the first
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_ENGINE_COMM_TIMER_H_
