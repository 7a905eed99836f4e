#include "core/training/sgd.h"

#include <utility>

namespace ddplab {

Sgd::Sgd(std::vector<at::Tensor> params, double learning_rate, double momentum,
         double weight_decay)
    : params_(std::move(params)),
      momentum_buffers_(params_.size()),
      lr_(learning_rate),
      momentum_(momentum),
      weight_decay_(weight_decay) {}

void Sgd::Step() {
  std::vector<size_t> all(params_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  StepParameters(all);
}

void Sgd::StepParameters(const std::vector<size_t>& which) {
  StepParameters(which, {});
}

void Sgd::StepParameters(const std::vector<size_t>& which, const std::vector<at::Tensor>& given) {
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> params, grads;
  std::vector<size_t> indices;
  for (size_t k = 0; k < which.size(); ++k) {
    const size_t i = which[k];
    const at::Tensor& grad = params_.at(i).grad();
    if (!grad.defined()) continue;
    params.push_back(params_[i]);
    if (given.empty()) {
      grads.push_back(grad);
    } else {
      const at::Tensor& g = given.at(k);
      grads.push_back(g.scalar_type() == params_[i].scalar_type() ? g : g.to(params_[i].scalar_type()));
    }
    indices.push_back(i);
  }
  if (params.empty()) return;
  if (weight_decay_ != 0) grads = at::_foreach_add(grads, params, weight_decay_);
  if (momentum_ != 0) {
    // buf = momentum * buf + grad; a parameter's first buffer is its gradient.
    std::vector<at::Tensor> bufs, old_bufs, old_grads;
    for (size_t k = 0; k < indices.size(); ++k) {
      at::Tensor& buf = momentum_buffers_[indices[k]];
      if (!buf.defined()) {
        buf = grads[k].detach().clone();
      } else {
        old_bufs.push_back(buf);
        old_grads.push_back(grads[k]);
      }
      bufs.push_back(buf);
    }
    if (!old_bufs.empty()) {
      at::_foreach_mul_(old_bufs, momentum_);
      at::_foreach_add_(old_bufs, old_grads);
    }
    grads = std::move(bufs);
  }
  at::_foreach_add_(params, grads, -lr_);
}

void Sgd::ZeroGrad() {
  for (at::Tensor& p : params_) {
    if (p.grad().defined()) p.mutable_grad() = at::Tensor();
  }
}

}  // namespace ddplab
