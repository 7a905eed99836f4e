#include "core/training/sgd.h"

#include <utility>

namespace ddplab {

Sgd::Sgd(std::vector<at::Tensor> params, double learning_rate, double momentum, double weight_decay)
    : Optimizer(params),
      momentum_buffers_(params.size()),
      lr_(learning_rate),
      momentum_(momentum),
      weight_decay_(weight_decay) {}

void Sgd::Update(const std::vector<size_t>& indices, std::vector<at::Tensor> params, std::vector<at::Tensor> grads) {
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

}  // namespace ddplab
