#include "core/hook_updates/hook_updates.h"

#include <stdexcept>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ddplab {

void HookUpdates::SetParameterStep(ParameterStep step) {
  std::lock_guard<std::mutex> lock(mu_);
  step_ = std::move(step);
}

void HookUpdates::SetOptimizerMaker(OptimizerMaker maker) {
  std::lock_guard<std::mutex> lock(mu_);
  maker_ = std::move(maker);
}

void HookUpdates::BeginStep() {
  std::lock_guard<std::mutex> lock(mu_);
  stepped_.assign(params_.size(), false);
}

void HookUpdates::Step(const std::vector<size_t>& indices, const std::vector<at::Tensor>& grads) {
  ParameterStep step;
  {
    std::lock_guard<std::mutex> lock(mu_);
    step = step_;
  }
  if (!step) throw std::runtime_error("a hook stepped parameters, but the engine was given no optimizer");
  step(indices, grads);
  MarkStepped(indices);
}

void HookUpdates::MarkStepped(const std::vector<size_t>& indices) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i : indices) stepped_.at(i) = true;
}

PartsOptimizer HookUpdates::MakeParts(const std::vector<ParameterPart>& parts) {
  OptimizerMaker maker;
  {
    std::lock_guard<std::mutex> lock(mu_);
    maker = maker_;
  }
  if (!maker) {
    throw std::runtime_error("a hook asked for an optimizer over parts of the parameters, but the engine was given none");
  }
  if (parts.size() != params_.size()) {
    throw std::invalid_argument(
        absl::StrCat("a hook named parts of ", parts.size(), " parameters; the model has ", params_.size()));
  }
  PartsOptimizer out;
  std::vector<at::Tensor> views;
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor flat = params_[i].detach().view(-1);
    const ParameterPart& part = parts[i];
    if (part.begin < 0 || part.numel < 0 || part.begin + part.numel > flat.numel()) {
      throw std::out_of_range(absl::StrCat("a hook named elements [", part.begin, ", ", part.begin + part.numel,
                                           ") of parameter ", i, ", which has ", flat.numel()));
    }
    out.flat_parameters.push_back(flat);
    views.push_back(flat.narrow(0, part.begin, part.numel));
  }
  ParameterStep step = maker(std::move(views));
  std::weak_ptr<HookUpdates> weak = weak_from_this();
  out.step = [weak, step](const std::vector<size_t>& indices, const std::vector<at::Tensor>& grads) {
    std::shared_ptr<HookUpdates> self = weak.lock();
    if (!self) return;
    std::vector<size_t> with_gradient;  // as the caller's optimizer steps only these
    std::vector<at::Tensor> their_grads;
    for (size_t k = 0; k < indices.size(); ++k) {
      if (!self->params_.at(indices[k]).grad().defined()) continue;
      with_gradient.push_back(indices[k]);
      their_grads.push_back(grads.at(k));
    }
    step(with_gradient, their_grads);
    self->MarkStepped(with_gradient);
  };
  return out;
}

bool HookUpdates::SteppedAll() {
  std::lock_guard<std::mutex> lock(mu_);
  bool any = false;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    if (!stepped_[i]) return false;
    any = true;
  }
  return any;
}

}  // namespace ddplab
