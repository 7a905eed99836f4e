#include "core/optim/sgd.h"

#include <utility>

#include "core/torch_compat.h"

namespace ddplab {

Sgd::Sgd(std::vector<at::Tensor> params, double learning_rate, double momentum, double weight_decay, bool fused)
    : Optimizer(params),
      momentum_buffers_(params.size()),
      lr_(learning_rate),
      momentum_(momentum),
      weight_decay_(weight_decay),
      fused_(fused && FusedKernelsFor(params)) {}

void Sgd::Update(const std::vector<size_t>& indices, std::vector<at::Tensor> params, std::vector<at::Tensor> grads) {
  if (fused_) {
    UpdateFused(indices, std::move(params), std::move(grads));
    return;
  }
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

// As torch.optim.sgd's _fused_sgd: one kernel call for the parameters whose momentum
// buffers exist and one, marked first, for those stepped for the first time (the kernel
// then sets each buffer to its gradient, weight decay included, as the foreach form does).
void Sgd::UpdateFused(const std::vector<size_t>& indices, std::vector<at::Tensor> params,
                      std::vector<at::Tensor> grads) {
  if (momentum_ == 0) {
    compat::FusedSgd(params, grads, {}, lr_, 0, weight_decay_, /*first_step=*/false);
    return;
  }
  std::vector<at::Tensor> part_params[2], part_grads[2], part_buffers[2];  // [first step]
  for (size_t k = 0; k < indices.size(); ++k) {
    at::Tensor& buf = momentum_buffers_[indices[k]];
    const bool first = !buf.defined();
    if (first) buf = at::empty_like(grads[k], at::MemoryFormat::Preserve);
    part_params[first].push_back(params[k]);
    part_grads[first].push_back(grads[k]);
    part_buffers[first].push_back(buf);
  }
  for (int first = 0; first < 2; ++first) {
    if (part_params[first].empty()) continue;
    compat::FusedSgd(part_params[first], part_grads[first], part_buffers[first], lr_, momentum_, weight_decay_,
                     /*first_step=*/first == 1);
  }
}

}  // namespace ddplab
