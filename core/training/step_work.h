// One training step's work in one process, as the trainer runs it and offers it to a step
// runner (TrainingStep, step_runner.h): the data, forward and loss, zero_grad, backward
// with the engine's reductions, the optimizer step, each inside its NVTX range and
// LibTorch profiler scope ("get batch", "forward", "backward", "optimizer step") and timed
// on the measured steps (StepTimer).
//
//   ddplab::StepWork work({experiment, model, optimizer, engine, data, timer, nvtx, rank, device});
//   work.Begin(step, measured_index);     // -1: not a measured step
//   absl::Status s = runner ? work.Ran(runner->Run(work)) : work.RunEagerly();
//   losses.push_back(work.loss());
#ifndef DDPLAB_CORE_TRAINING_STEP_WORK_H_
#define DDPLAB_CORE_TRAINING_STEP_WORK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "core/data/batch_source.h"
#include "core/engine/engine.h"
#include "core/model/trained_model.h"
#include "core/optim/optimizer.h"
#include "core/training/step_runner.h"
#include "core/training/step_timer.h"
#include "ddplab/v1/experiment.pb.h"

namespace ddplab {

class StepWork : public TrainingStep {
 public:
  struct Parts {
    const v1::Experiment& experiment;
    TrainedModel& model;
    Optimizer& optimizer;
    DataParallelEngine* engine;  // none: one process without the engine
    BatchSource& data;
    StepTimer& timer;
    bool nvtx;
    int rank;
    at::Device device;
  };
  explicit StepWork(const Parts& parts) : p_(parts), buffers_(parts.model.buffers()) {}

  // Before each step: its index over the run, and its index among the measured steps
  // (-1: not measured, so not timed).
  void Begin(int64_t step, int measured);
  // The step as the trainer runs it without a runner: every micro-batch's data, forward
  // and backward (the engine reducing on the last), then the optimizer step.
  absl::Status RunEagerly();
  // A runner's answer for the step as a status: its error with the step's, where Compute
  // failed, or the runner's own.
  absl::Status Ran(const std::string& runner_error);
  // The step's loss (of its last micro-batch, undivided), its own copy.
  at::Tensor loss() const;

  // TrainingStep: one micro-batch's step, in parts.
  int64_t index() const override { return step_; }
  at::Device device() const override { return p_.device; }
  StepInputs NextInputs() override;
  std::string Compute(const StepInputs& inputs) override;
  void Launch(const std::function<void()>& launch) override;

 private:
  // The next batch inside its "get batch" range; marked where `timed` and the step is.
  StepInputs Fetch(bool timed);
  // Forward, loss and backward of micro-batch `micro`; the reduction on the last.
  absl::Status ForwardBackward(const StepInputs& inputs, int micro, bool timed);
  absl::Status Optimize();
  // Whether this step is measured and its device work is not being captured (a graph's
  // capture records no event that a replay would set again).
  bool Timed() const;

  Parts p_;
  std::vector<at::Tensor> buffers_;  // the model's, asked once (a module keeps its tensors)
  int64_t step_ = 0;
  int measured_ = -1;
  bool launched_ = false;  // the step's work was queued by Launch
  at::Tensor loss_;
  absl::Status error_;  // Compute's, for Ran
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_TRAINING_STEP_WORK_H_
