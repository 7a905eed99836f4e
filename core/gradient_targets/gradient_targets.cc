#include "core/gradient_targets/gradient_targets.h"

#include <mutex>
#include <unordered_map>

namespace ddplab::gradient_targets {
namespace {

struct Targets {
  std::mutex mu;
  std::unordered_map<const c10::TensorImpl*, at::Tensor> by_param;
};

Targets& All() {
  static auto* targets = new Targets();  // never destroyed: engines may outlive statics
  return *targets;
}

}  // namespace

void Set(const at::Tensor& param, const at::Tensor& target) {
  Targets& t = All();
  std::lock_guard<std::mutex> lock(t.mu);
  if (target.defined()) {
    t.by_param[param.unsafeGetTensorImpl()] = target;
  } else {
    t.by_param.erase(param.unsafeGetTensorImpl());
  }
}

at::Tensor Take(const at::Tensor& param) {
  at::Tensor target;
  {
    Targets& t = All();
    std::lock_guard<std::mutex> lock(t.mu);
    auto it = t.by_param.find(param.unsafeGetTensorImpl());
    if (it == t.by_param.end()) return at::Tensor();
    target = std::move(it->second);
    t.by_param.erase(it);
  }
  if (param.grad().defined() || !target.sizes().equals(param.sizes()) ||
      target.scalar_type() != param.scalar_type() || target.device() != param.device() ||
      !target.is_contiguous() || !param.is_contiguous()) {
    return at::Tensor();
  }
  // A new TensorImpl over the target's memory: held by nothing else, autograd takes it.
  return target.view(target.sizes());
}

bool Has(const at::Tensor& param) {
  Targets& t = All();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.by_param.count(param.unsafeGetTensorImpl()) > 0;
}

}  // namespace ddplab::gradient_targets
