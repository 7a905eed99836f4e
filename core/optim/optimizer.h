// The optimizer a run steps its parameters with: SGD (sgd.h) or AdamW (adamw.h), made from
// the experiment's optimizer field. Every update is LibTorch's fused kernel over the
// parameters stepped where it has one for their device (torch.optim's fused=True), else a
// few multi-tensor (foreach) kernels, as PyTorch's default on GPUs; and elementwise:
// stepping the parameters in parts (a bucket's as soon as its gradients are averaged, the
// engine's optimizer overlap) updates them exactly as one Step.
//
//   std::unique_ptr<ddplab::Optimizer> optimizer = ddplab::MakeOptimizer(e.optimizer(), model->parameters());
//   loss.backward();
//   optimizer->Step();
//   optimizer->ZeroGrad();
#ifndef DDPLAB_CORE_OPTIM_OPTIMIZER_H_
#define DDPLAB_CORE_OPTIM_OPTIMIZER_H_

#include <functional>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "ddplab/v1/experiment.pb.h"

namespace ddplab {

class Optimizer {
 public:
  explicit Optimizer(std::vector<at::Tensor> params) : params_(std::move(params)) {}
  virtual ~Optimizer() = default;

  // Steps every parameter that has a gradient (.grad()).
  void Step();
  // The same for some of the parameters (indices into the parameters).
  void StepParameters(const std::vector<size_t>& indices) { StepParameters(indices, {}); }
  // The same with their gradients given (shaped like them, in any dtype: cast to the
  // parameters'), e.g. views of a bucket's average; still only the parameters that have
  // a gradient (.grad()) are stepped.
  void StepParameters(const std::vector<size_t>& indices, const std::vector<at::Tensor>& grads);
  // Steps exactly these tensors (indices into those it was made over) with `grads`, shaped
  // like them, in any dtype, without asking for a .grad(): an optimizer made over parts of
  // parameters (views of them, which have none), as a sharded optimizer steps its shard.
  void StepTensors(const std::vector<size_t>& indices, const std::vector<at::Tensor>& grads);
  // Drops the gradients (set_to_none=True, PyTorch's default): backward then writes
  // fresh ones instead of adding to zeros.
  void ZeroGrad();

  // Whether the updates run LibTorch's fused kernels (torch.optim's fused=True).
  virtual bool fused() const { return false; }
  // Whether an update reads nothing from the host that changes from step to step, so
  // that a CUDA graph captured once replays it right (AdamW's foreach form computes its
  // bias corrections on the host; its fused form counts steps on the device).
  virtual bool capturable() const { return true; }

 protected:
  // Updates params_[indices[k]] with grads[k] (each defined, in the parameter's dtype).
  virtual void Update(const std::vector<size_t>& indices, std::vector<at::Tensor> params,
                      std::vector<at::Tensor> grads) = 0;

 private:
  std::vector<at::Tensor> params_;
};

// Whether LibTorch's fused optimizer kernels serve `params`: this LibTorch has them
// (compat::kFusedOptimizers) and the parameters are on a GPU.
bool FusedKernelsFor(const std::vector<at::Tensor>& params);

// The optimizer `o` (resolved: AdamW's defaults filled in) asks for, over `params`.
std::unique_ptr<Optimizer> MakeOptimizer(const v1::Optimizer& o, std::vector<at::Tensor> params);

// What makes optimizers of `o`'s kind over tensors given later (parts of the parameters,
// views of them), for the engine (DataParallelEngine::SetOptimizerMaker): each returns a
// step of tensors[indices[k]] with grads[k] (Optimizer::StepTensors).
using TensorsStep = std::function<void(const std::vector<size_t>& indices, const std::vector<at::Tensor>& grads)>;
std::function<TensorsStep(std::vector<at::Tensor> tensors)> OptimizersOf(const v1::Optimizer& o);

}  // namespace ddplab

#endif  // DDPLAB_CORE_OPTIM_OPTIMIZER_H_
