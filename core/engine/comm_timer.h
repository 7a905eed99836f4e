// Times the engine's exposed communication: from the end of backward's compute to the
// last bucket averaged and in place, per synced step; and, where c10d measures them,
// each bucket's collective. One interface, one implementation per device type (CUDA
// events on a GPU, read only when the timing ends; the host clock on a CPU), as c10d's
// reducer_timer.hpp does for the Reducer.
//
//   std::unique_ptr<CommTimer> timer = CommTimer::For(device);
//   timer->Start(/*bucket_times=*/true);
//   ...  // each synced step:
//   timer->WaitBegins();                 // backward's compute is queued
//   ...  // wait for the buckets, put the averages in place
//   timer->WaitEnds(works);             // the buckets' collectives, in bucket order
//   CommTimer::Totals t = timer->Finish();
#ifndef DDPLAB_CORE_ENGINE_COMM_TIMER_H_
#define DDPLAB_CORE_ENGINE_COMM_TIMER_H_

#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "core/torch_compat.h"

namespace ddplab {

class CommTimer {
 public:
  struct Totals {
    double exposed_ms = 0;  // summed over the timed steps
    int steps = 0;
    std::vector<double> bucket_ms;  // mean per bucket, where measured (else empty)
  };

  // The timer for tensors on `device`.
  static std::unique_ptr<CommTimer> For(const at::Device& device);
  virtual ~CommTimer() = default;

  // Starts timing; `bucket_times`: also the collectives' own durations.
  void Start(bool bucket_times);
  bool timing() const { return timing_; }
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

 protected:
  virtual void MarkEnd() = 0;
  // Waits for every marked end; returns the exposed milliseconds since the last call.
  virtual double ReadExposed() = 0;

 private:
  void Harvest();
  bool timing_ = false;
  bool bucket_times_ = false;
  int steps_ = 0;
  std::vector<std::vector<c10::intrusive_ptr<c10d::Work>>> works_;
  std::vector<double> ms_sum_;
  std::vector<int> ms_count_;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_ENGINE_COMM_TIMER_H_
