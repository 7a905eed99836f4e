// The experiment's optimizer over parts of the parameters, as the engine makes it for a
// hook that updates the parameters itself (CommContext::optimizer_over_parts): a sharded
// optimizer steps this rank's part of each parameter and gathers the others'.
//
//   ddplab::PartsOptimizer shard = ddplab::MakePartsOptimizer(params, parts, maker, mark_stepped);
//   shard.step(bucket.parameters, shard_grads);   // each parameter's part, if it has a gradient
#ifndef DDPLAB_CORE_OPTIM_PARTS_OPTIMIZER_H_
#define DDPLAB_CORE_OPTIM_PARTS_OPTIMIZER_H_

#include <cstddef>
#include <functional>
#include <vector>

#include <ATen/ATen.h>

#include "core/engine/extension_points.h"

namespace ddplab {

// Makes the experiment's optimizer over `tensors` (parts of the parameters: views of
// them), stepping tensors[indices[k]] with grads[k] (the trainer's, core/optim).
using OptimizerMaker = std::function<ParameterStep(std::vector<at::Tensor> tensors)>;

// A PartsOptimizer over `parts` of `params` (one part each, in their order; the views
// share the parameters' storage, which must be contiguous). Its step steps only the
// parameters that have a gradient (.grad()), as the caller's optimizer would, and hands
// them to `stepped`. Throws where `maker` is empty or a part lies outside its parameter.
PartsOptimizer MakePartsOptimizer(const std::vector<at::Tensor>& params, const std::vector<ParameterPart>& parts,
                                  const OptimizerMaker& maker,
                                  std::function<void(const std::vector<size_t>&)> stepped);

}  // namespace ddplab

#endif  // DDPLAB_CORE_OPTIM_PARTS_OPTIMIZER_H_
