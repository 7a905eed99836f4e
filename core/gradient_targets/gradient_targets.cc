#include "core/gradient_targets/gradient_targets.h"

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>

#include <ATen/core/grad_mode.h>

namespace ddplab::gradient_targets {
namespace {

struct Entry {
  // The parameter, weakly: while the entry lives its TensorImpl's memory does too, so no
  // other tensor can take its address (the map's key) and find this target.
  c10::weak_intrusive_ptr<c10::TensorImpl> param;
  at::Tensor target;
};

struct Targets {
  std::mutex mu;
  std::unordered_map<const c10::TensorImpl*, Entry> by_param;
};

Targets& All() {
  static auto* targets = new Targets();  // never destroyed: engines may outlive statics
  return *targets;
}

// Where a fresh tensor of the device's allocator starts: 256 bytes on a GPU (also the
// most cuBLAS's heuristics look at: a product into memory aligned less may take another
// kernel, and with TF32 another result), 64 on a CPU.
bool AlignedAsFresh(const at::Tensor& t) {
  const uintptr_t alignment = t.is_cuda() ? 256 : 64;
  return reinterpret_cast<uintptr_t>(t.data_ptr()) % alignment == 0;
}

}  // namespace

void Set(const at::Tensor& param, const at::Tensor& target) {
  Targets& t = All();
  std::lock_guard<std::mutex> lock(t.mu);
  if (target.defined()) {
    t.by_param.insert_or_assign(param.unsafeGetTensorImpl(),
                                Entry{c10::weak_intrusive_ptr<c10::TensorImpl>(param.getIntrusivePtr()), target});
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
    target = std::move(it->second.target);
    t.by_param.erase(it);
  }
  // Recording the backward (create_graph) asks for gradients autograd can differentiate,
  // which an out= product is not, and AccumulateGrad would not take the alias anyway.
  if (at::GradMode::is_enabled() || param.grad().defined() || !target.sizes().equals(param.sizes()) ||
      target.scalar_type() != param.scalar_type() || target.device() != param.device() ||
      !target.is_contiguous() || !param.is_contiguous() || !AlignedAsFresh(target)) {
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
