// What the engine's communication hooks update themselves: the experiment's optimizer
// as the engine hands it to them (CommContext::step for whole parameters,
// CommContext::optimizer_over_parts for a part of each, as a sharded optimizer steps its
// shard), and which parameters they stepped in a synced step, so that the caller's
// optimizer does not step those again.
//
//   auto updates = std::make_shared<ddplab::HookUpdates>(params);
//   updates->SetParameterStep([&](const auto& p, const auto& g) { optimizer.StepParameters(p, g); });
//   updates->SetOptimizerMaker(ddplab::OptimizersOf(experiment.optimizer()));
//   updates->BeginStep();
//   ...                                  // hooks call Step, or the step of MakeParts(parts)
//   if (!updates->SteppedAll()) optimizer.Step();
#ifndef DDPLAB_CORE_HOOK_UPDATES_HOOK_UPDATES_H_
#define DDPLAB_CORE_HOOK_UPDATES_HOOK_UPDATES_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/ATen.h>

#include "core/engine/extension_points.h"

namespace ddplab {

// Makes the experiment's optimizer over `tensors` (parts of the parameters: views of
// them), stepping tensors[indices[k]] with grads[k] (the trainer's: OptimizersOf,
// core/optim/optimizer.h).
using OptimizerMaker = std::function<ParameterStep(std::vector<at::Tensor> tensors)>;

// Thread-safe: hooks step parameters from their own threads. Made shared (the steps it
// hands out hold it weakly).
class HookUpdates : public std::enable_shared_from_this<HookUpdates> {
 public:
  // `params` in the model's order; they outlive this.
  explicit HookUpdates(const std::vector<at::Tensor>& params) : params_(params), stepped_(params.size(), false) {}

  void SetParameterStep(ParameterStep step);
  void SetOptimizerMaker(OptimizerMaker maker);

  // Before a synced step: nothing stepped yet.
  void BeginStep();
  // CommContext::step: the experiment's optimizer steps these parameters with `grads`.
  // Throws where it was given none.
  void Step(const std::vector<size_t>& indices, const std::vector<at::Tensor>& grads);
  // CommContext::optimizer_over_parts: the experiment's optimizer over `parts` of the
  // parameters (one each, in their order; the views share the parameters' storage, which
  // must be contiguous). Its step steps only the parameters that have a gradient
  // (.grad()), as the caller's optimizer would. Throws where no maker was given or a part
  // lies outside its parameter.
  PartsOptimizer MakeParts(const std::vector<ParameterPart>& parts);
  // Whether hooks stepped every parameter that has a gradient this step (and one at
  // least).
  bool SteppedAll();

 private:
  void MarkStepped(const std::vector<size_t>& indices);

  const std::vector<at::Tensor>& params_;
  std::mutex mu_;
  ParameterStep step_;
  OptimizerMaker maker_;
  std::vector<bool> stepped_;  // by a hook, this step
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_HOOK_UPDATES_HOOK_UPDATES_H_
