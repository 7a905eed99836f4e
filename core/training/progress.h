// The progress line of a run on standard error ("[2/9] naive_ddp: step 12/31, 10.52
// steps/s"): on a terminal redrawn in place at most every 2 s, otherwise a plain line at
// most every 30 s; always at the last step. The rate is over the measured steps so far.
//
//   ddplab::Progress progress("[2/9] naive_ddp", /*warmup=*/5);
//   for (int step = 0; step < total; ++step) progress.Update(step, total);
#ifndef DDPLAB_CORE_TRAINING_PROGRESS_H_
#define DDPLAB_CORE_TRAINING_PROGRESS_H_

#include <chrono>
#include <string>

namespace ddplab {

class Progress {
 public:
  // `label` empty: prints nothing.
  Progress(std::string label, int warmup);
  void Update(int step, int total);

 private:
  std::string label_;
  int warmup_;
  bool terminal_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now() - std::chrono::hours(1),
                                        measured_start_ = last_;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_TRAINING_PROGRESS_H_
