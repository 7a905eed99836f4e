// The size of what PowerSGD's error feedback carries, measured on the engine's sampled
// steps (GradBucket::sampled) for the hook's Stats(): per step, ||residual|| / ||gradient||
// over this rank's compressed matrices in all buckets (the residual after the step, the
// gradient of the step), and the mean over the sampled steps. Large against 1: the
// residual carries several steps' worth of what compression leaves out.
//
//   ddplab::powersgd::ResidualMeter meter;
//   meter.AddGradients(groups);           // in each bucket of a sampled step, before the passes
//   meter.AddResiduals(groups, errors);   // after them
//   if (bucket.is_last) meter.EndStep();
//   if (meter.steps() > 0) stats["residual_ratio"] = meter.mean();
#ifndef DDPLAB_PLUGINS_POWERSGD_RESIDUAL_H_
#define DDPLAB_PLUGINS_POWERSGD_RESIDUAL_H_

#include <mutex>
#include <vector>

#include "plugins/powersgd/groups.h"

namespace ddplab::powersgd {

class ResidualMeter {
 public:
  // The groups' gradients (Matrix::source), before they are dropped.
  void AddGradients(const std::vector<Group>& groups);
  // Each group's parameters' errors (what error feedback keeps for the next step).
  void AddResiduals(const std::vector<Group>& groups, const ErrorState& errors);
  // The step's last bucket is done: its ratio joins the mean (a step without compressed
  // gradients does not count).
  void EndStep();

  // Any thread.
  double mean() const;
  int steps() const;

 private:
  double gradient_sq_ = 0, residual_sq_ = 0;  // the step's so far (the hook's thread)
  mutable std::mutex mu_;
  double ratio_sum_ = 0;
  int steps_ = 0;
};

}  // namespace ddplab::powersgd

#endif  // DDPLAB_PLUGINS_POWERSGD_RESIDUAL_H_
