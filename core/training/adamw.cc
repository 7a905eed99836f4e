#include "core/training/adamw.h"

#include <cmath>
#include <utility>

#include "core/torch_compat.h"

namespace ddplab {

AdamW::AdamW(std::vector<at::Tensor> params, const Options& options)
    : Optimizer(params),
      o_(options),
      exp_avg_(params.size()),
      exp_avg_sq_(params.size()),
      steps_(params.size(), 0) {}

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
    const double t = static_cast<double>(++steps_[i]);
    step_sizes.emplace_back(-(o_.learning_rate / (1 - std::pow(o_.beta1, t))));
    bias_correction2_sqrt.emplace_back(std::sqrt(1 - std::pow(o_.beta2, t)));
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

}  // namespace ddplab
