// AdamW as torch.optim.AdamW: with fused=True (one kernel that reads and writes each
// tensor once) where LibTorch has that kernel and the parameters are on a GPU, else with
// foreach=True (PyTorch's default on GPUs): the same operations in the same order, so that
// the same gradients give the same parameters.
//
//   ddplab::AdamW adamw(model->parameters(), {.learning_rate = 1e-3});
//   adamw.Step();   // optimizer.h: the interface
//
// Per parameter, at its step t (counted per parameter, as PyTorch's state["step"]):
//   p *= 1 - lr * weight_decay
//   m = beta1 m + (1 - beta1) g          (LibTorch 2's lerp; 1.13's mul and add)
//   v = beta2 v + (1 - beta2) g g
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
#ifndef DDPLAB_CORE_OPTIM_ADAMW_H_
#define DDPLAB_CORE_OPTIM_ADAMW_H_

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "core/optim/optimizer.h"

namespace ddplab {

class AdamW : public Optimizer {
 public:
  struct Options {
    double learning_rate = 1e-3;
    double beta1 = 0.9, beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 0.01;
    // LibTorch's fused kernel where it has one for the parameters' device
    // (compat::kFusedOptimizers); false: foreach kernels everywhere.
    bool fused = true;
  };
  AdamW(std::vector<at::Tensor> params, const Options& options);

  bool fused() const override { return fused_; }
  bool capturable() const override { return fused_; }

 private:
  void Update(const std::vector<size_t>& indices, std::vector<at::Tensor> params,
              std::vector<at::Tensor> grads) override;
  void UpdateFused(const std::vector<size_t>& indices, std::vector<at::Tensor> params, std::vector<at::Tensor> grads,
                   std::vector<at::Tensor> avgs, std::vector<at::Tensor> sqs);

  Options o_;
  const bool fused_;
  // Per parameter: the moving averages (undefined until its first step), its steps; in
  // the fused form its steps as a 0-dim float32 tensor on its device, as torch.optim
  // keeps state["step"], which the kernel reads there.
  std::vector<at::Tensor> exp_avg_, exp_avg_sq_;
  std::vector<int64_t> steps_;
  std::vector<at::Tensor> step_tensors_;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_OPTIM_ADAMW_H_
