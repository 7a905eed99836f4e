#include "core/optim/parts_optimizer.h"

#include <stdexcept>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ddplab {

PartsOptimizer MakePartsOptimizer(const std::vector<at::Tensor>& params, const std::vector<ParameterPart>& parts,
                                  const OptimizerMaker& maker,
                                  std::function<void(const std::vector<size_t>&)> stepped) {
  if (!maker) {
    throw std::runtime_error("a hook asked for an optimizer over parts of the parameters, but the engine was given none");
  }
  if (parts.size() != params.size()) {
    throw std::invalid_argument(
        absl::StrCat("a hook named parts of ", parts.size(), " parameters; the model has ", params.size()));
  }
  PartsOptimizer out;
  std::vector<at::Tensor> views;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor flat = params[i].detach().view(-1);
    const ParameterPart& part = parts[i];
    if (part.begin < 0 || part.numel < 0 || part.begin + part.numel > flat.numel()) {
      throw std::out_of_range(absl::StrCat("a hook named elements [", part.begin, ", ", part.begin + part.numel,
                                           ") of parameter ", i, ", which has ", flat.numel()));
    }
    out.flat_parameters.push_back(flat);
    views.push_back(flat.narrow(0, part.begin, part.numel));
  }
  ParameterStep step = maker(std::move(views));
  out.step = [params, step, stepped = std::move(stepped)](const std::vector<size_t>& indices,
                                                          const std::vector<at::Tensor>& grads) {
    std::vector<size_t> with_gradient;  // as the caller's optimizer steps only these
    std::vector<at::Tensor> their_grads;
    for (size_t k = 0; k < indices.size(); ++k) {
      if (!params.at(indices[k]).grad().defined()) continue;
      with_gradient.push_back(indices[k]);
      their_grads.push_back(grads.at(k));
    }
    step(with_gradient, their_grads);
    stepped(with_gradient);
  };
  return out;
}

}  // namespace ddplab
