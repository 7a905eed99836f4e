#include "core/optim/optimizer.h"

#include <c10/core/GradMode.h>

#include "core/torch_compat.h"
#include "core/optim/adamw.h"
#include "core/optim/sgd.h"

namespace ddplab {

void Optimizer::Step() {
  std::vector<size_t> all(params_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  StepParameters(all);
}

void Optimizer::StepParameters(const std::vector<size_t>& which, const std::vector<at::Tensor>& given) {
  std::vector<size_t> indices;
  std::vector<at::Tensor> grads;
  for (size_t k = 0; k < which.size(); ++k) {
    const at::Tensor& grad = params_.at(which[k]).grad();
    if (!grad.defined()) continue;
    indices.push_back(which[k]);
    grads.push_back(given.empty() ? grad : given.at(k));
  }
  StepTensors(indices, grads);
}

void Optimizer::StepTensors(const std::vector<size_t>& indices, const std::vector<at::Tensor>& given) {
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> params, grads;
  for (size_t k = 0; k < indices.size(); ++k) {
    const at::Tensor& p = params_.at(indices[k]);
    const at::Tensor& g = given.at(k);
    params.push_back(p);
    grads.push_back(g.scalar_type() == p.scalar_type() ? g : g.to(p.scalar_type()));
  }
  if (!params.empty()) Update(indices, std::move(params), std::move(grads));
}

void Optimizer::ZeroGrad() {
  for (at::Tensor& p : params_) {
    if (p.grad().defined()) p.mutable_grad() = at::Tensor();
  }
}

bool FusedKernelsFor(const std::vector<at::Tensor>& params) {
  return compat::kFusedOptimizers && !params.empty() && params.front().is_cuda();
}

std::unique_ptr<Optimizer> MakeOptimizer(const v1::Optimizer& o, std::vector<at::Tensor> params) {
  if (o.has_adamw()) {
    const v1::AdamW& a = o.adamw();
    return std::make_unique<AdamW>(std::move(params), AdamW::Options{a.learning_rate(), a.beta1(), a.beta2(), a.eps(),
                                                                     a.weight_decay(), !o.foreach()});
  }
  const v1::Sgd& s = o.sgd();
  return std::make_unique<Sgd>(std::move(params), s.learning_rate(), s.momentum(), s.weight_decay(), !o.foreach());
}

std::function<TensorsStep(std::vector<at::Tensor> tensors)> OptimizersOf(const v1::Optimizer& o) {
  return [o](std::vector<at::Tensor> tensors) -> TensorsStep {
    std::shared_ptr<Optimizer> optimizer = MakeOptimizer(o, std::move(tensors));
    return [optimizer](const std::vector<size_t>& indices, const std::vector<at::Tensor>& grads) {
      optimizer->StepTensors(indices, grads);
    };
  };
}

}  // namespace ddplab
