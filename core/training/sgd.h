// Stochastic gradient descent as torch.optim.SGD with foreach=True (PyTorch's default on
// GPUs): each update is a few multi-tensor kernels over all parameters, not a few kernels
// per parameter.
#ifndef DDPLAB_CORE_SGD_H_
#define DDPLAB_CORE_SGD_H_

#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

namespace ddplab {

class Sgd {
 public:
  Sgd(std::vector<at::Tensor> params, double learning_rate, double momentum = 0,
      double weight_decay = 0);

  // p -= lr * (momentum buffer or gradient); parameters without a gradient are skipped.
  void Step();
  // The same for some of the parameters (indices into `params`), e.g. one bucket's as
  // soon as its gradients are averaged: a step over every parameter in parts updates
  // them exactly as one Step (the updates are elementwise).
  void StepParameters(const std::vector<size_t>& indices);
  // The same with their gradients given (shaped like them, in any dtype: cast to the
  // parameters'), e.g. views of a bucket's average; still only the parameters that have
  // a gradient (.grad()) are stepped.
  void StepParameters(const std::vector<size_t>& indices, const std::vector<at::Tensor>& grads);
  // Drops the gradients (set_to_none=True, PyTorch's default): backward then writes
  // fresh ones instead of adding to zeros.
  void ZeroGrad();

 private:
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> momentum_buffers_;  // per parameter; undefined until first used
  double lr_, momentum_, weight_decay_;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_SGD_H_
