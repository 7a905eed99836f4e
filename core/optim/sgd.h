// Stochastic gradient descent as torch.optim.SGD: with fused=True (one kernel) where
// LibTorch has that kernel and the parameters are on a GPU, else with foreach=True
// (PyTorch's default on GPUs): each update is a few multi-tensor kernels over all
// parameters, not a few kernels per parameter.
//
//   ddplab::Sgd sgd(model->parameters(), /*learning_rate=*/0.1, /*momentum=*/0.9);
//   sgd.Step();   // optimizer.h: the interface
#ifndef DDPLAB_CORE_OPTIM_SGD_H_
#define DDPLAB_CORE_OPTIM_SGD_H_

#include <vector>

#include <ATen/ATen.h>

#include "core/optim/optimizer.h"

namespace ddplab {

class Sgd : public Optimizer {
 public:
  // `fused`: LibTorch's fused kernel where it has one for the parameters' device
  // (compat::kFusedOptimizers); false: foreach kernels everywhere.
  Sgd(std::vector<at::Tensor> params, double learning_rate, double momentum = 0, double weight_decay = 0,
      bool fused = true);

  bool fused() const override { return fused_; }

 private:
  // p -= lr * (momentum buffer or gradient).
  void Update(const std::vector<size_t>& indices, std::vector<at::Tensor> params,
              std::vector<at::Tensor> grads) override;
  void UpdateFused(const std::vector<size_t>& indices, std::vector<at::Tensor> params, std::vector<at::Tensor> grads);

  std::vector<at::Tensor> momentum_buffers_;  // per parameter; undefined until first used
  double lr_, momentum_, weight_decay_;
  bool fused_;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_OPTIM_SGD_H_
