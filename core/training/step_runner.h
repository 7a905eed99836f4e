// How the trainer runs each training step: the trainer's extension point, which one plugin
// may take (PluginRegistrar::SetStepRunner), as the engine's are taken
// (core/engine/extension_points.h). Without a runner the trainer queues every step's work
// itself, eagerly. A runner decides how a step's work reaches the device: eagerly, or, as
// the cuda_graph plugin does, captured once into a CUDA graph and replayed.
//
//   class EveryStepEagerly : public ddplab::StepRunner {
//    public:
//     std::string Run(ddplab::TrainingStep& step) override {
//       return step.Compute(step.NextInputs());
//     }
//   };
//   class Factory : public ddplab::StepRunnerFactory {
//    public:
//     std::string Refusal(const ddplab::RunFacts& run) const override {
//       return run.accumulation > 1 ? "a step of several micro-batches" : "";
//     }
//     std::unique_ptr<ddplab::StepRunner> Make() const override {
//       return std::make_unique<EveryStepEagerly>();
//     }
//   };
//   registrar.SetStepRunner(std::make_shared<Factory>());
//
// Only virtual functions and plain types, so that a plugin needs no symbols from the host
// to call them.

#ifndef DDPLAB_CORE_TRAINING_STEP_RUNNER_H_
#define DDPLAB_CORE_TRAINING_STEP_RUNNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace ddplab {

// One micro-batch's inputs, on the run's device.
struct StepInputs {
  at::Tensor images;
  at::Tensor labels;
};

// One training step of one micro-batch, as the trainer offers it to a runner. The three
// parts are timed as the trainer's phases ("get batch", then forward, backward and the
// optimizer step) on the measured steps.
class TrainingStep {
 public:
  virtual ~TrainingStep() = default;
  // The step's index over the whole run, from 0 (warm-up steps first).
  virtual int64_t index() const = 0;
  virtual at::Device device() const = 0;
  // The next batch of the run's data (host work: the data pipeline's).
  virtual StepInputs NextInputs() = 0;
  // Queues on the current stream the step's device work for `inputs`: forward and loss,
  // zero_grad, backward with the engine's reductions, the optimizer step. Returns "" or
  // the step's error. While a CUDA graph is being captured, no phase is timed.
  virtual std::string Compute(const StepInputs& inputs) = 0;
  // For a runner that queues the step's work otherwise (a graph's replay): runs `launch`,
  // timed as one phase, reported as backward. The loss is the one the captured Compute
  // wrote, read after `launch`.
  virtual void Launch(const std::function<void()>& launch) = 0;
};

// Runs the steps of one run (one is made per run, StepRunnerFactory::Make).
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // Runs step `step`, every step of the run in order; "" or the step's error.
  virtual std::string Run(TrainingStep& step) = 0;
  // Whether the run's compute must go, from its start, on a stream of its own rather than
  // the device's default stream (Note [A graph's stream from the first step],
  // plugins/cuda_graph/cuda_graph.cc).
  virtual bool OwnStream() const { return false; }
  // For people and result records, e.g. "the step as one CUDA graph, captured at step 3".
  virtual std::string Describe() const = 0;
};

// What a runner may need to know of a run to accept it, from its experiment and its
// plugins, before anything runs.
struct RunFacts {
  bool cuda = false;  // the run's device is a GPU
  int warmup_steps = 0;
  int accumulation = 1;  // micro-batches per step
  // The optimizer reads nothing from the host that changes from step to step
  // (Optimizer::capturable, core/optim/optimizer.h).
  bool optimizer_capturable = true;
  // Lossy plugins whose error is sampled on some steps (PluginRegistrar::Lossy).
  std::vector<std::string> sampling_plugins;
};

class StepRunnerFactory {
 public:
  virtual ~StepRunnerFactory() = default;
  // "" to accept the run, else why not (the host refuses the experiment, naming the
  // plugin, before anything runs).
  virtual std::string Refusal(const RunFacts& run) const = 0;
  virtual std::unique_ptr<StepRunner> Make() const = 0;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_TRAINING_STEP_RUNNER_H_
