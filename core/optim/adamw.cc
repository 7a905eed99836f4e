#include "core/optim/adamw.h"

#include <cmath>
#include <utility>

#include "core/torch_compat.h"

namespace ddplab {

AdamW::AdamW(std::vector<at::Tensor> params, const Options& options)
    : Optimizer(params),
      o_(options),
      fused_(options.fused && FusedKernelsFor(params)),
      exp_avg_(params.size()),
      exp_avg_sq_(params.size()),
      steps_(params.size(), 0),
      step_tensors_(params.size()) {}

void AdamW::Update(const std::vector<size_t>& indices, std::vector<at::Tensor> params, std::vector<at::Tensor> grads) {
  std::vector<at::Tensor> avgs, sqs;
  std::vector<at::Scalar> step_sizes, bias_correction2_sqrt;
  for (size_t k = 0; k < indices.size(); ++k) {
    const size_t i = indices[k];
    if (!exp_avg_[i].defined()) {
      exp_avg_[i] = at::zeros_like(params[k], at::MemoryFormat::Preserve);
      exp_avg_sq_[i] = at::zeros_like(params[k], at::MemoryFormat::Preserve);
    }
    avgs.push_back(exp_avg_[i]);
    sqs.push_back(exp_avg_sq_[i]);
    if (fused_) continue;
    const double t = static_cast<double>(++steps_[i]);
    step_sizes.emplace_back(-(o_.learning_rate / (1 - std::pow(o_.beta1, t))));
    bias_correction2_sqrt.emplace_back(std::sqrt(1 - std::pow(o_.beta2, t)));
  }
  if (fused_) {
    UpdateFused(indices, std::move(params), std::move(grads), std::move(avgs), std::move(sqs));
    return;
  }
  at::_foreach_mul_(params, 1 - o_.learning_rate * o_.weight_decay);
  compat::ForeachMovingAverage(avgs, grads, o_.beta1);
  at::_foreach_mul_(sqs, o_.beta2);
  at::_foreach_addcmul_(sqs, grads, grads, 1 - o_.beta2);
  std::vector<at::Tensor> denom = at::_foreach_sqrt(sqs);
  at::_foreach_div_(denom, bias_correction2_sqrt);
  at::_foreach_add_(denom, o_.eps);
  at::_foreach_addcdiv_(params, avgs, denom, step_sizes);
}

// As torch.optim.adamw's _fused_adamw: the steps are counted on the device (one
// multi-tensor add), then one kernel updates the parameters and both averages. No value
// is read back to the host, so the update can be captured in a CUDA graph.
void AdamW::UpdateFused(const std::vector<size_t>& indices, std::vector<at::Tensor> params,
                        std::vector<at::Tensor> grads, std::vector<at::Tensor> avgs, std::vector<at::Tensor> sqs) {
  std::vector<at::Tensor> steps;
  for (size_t k = 0; k < indices.size(); ++k) {
    at::Tensor& step = step_tensors_[indices[k]];
    if (!step.defined()) step = at::zeros({}, params[k].options().dtype(at::kFloat));
    steps.push_back(step);
  }
  at::_foreach_add_(steps, 1);
  compat::FusedAdamW(params, grads, avgs, sqs, steps, o_.learning_rate, o_.beta1, o_.beta2, o_.weight_decay, o_.eps);
}

}  // namespace ddplab
