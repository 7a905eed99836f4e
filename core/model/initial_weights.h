// A ViT with the initial weights of a seed, built once per process and copied after.
//
// The weights are those `torch::manual_seed(seed); Vit model(config);` draws on the host,
// as PyTorch draws them, moved to `device`. Drawing ViT-L/32's 306M weights on the host
// takes seconds, longer than its 31 steps on a GPU, and a worker that runs a suite's runs
// one after another (core/launch/worker_pool.h) builds the same model from the same seed
// again and again: see Note [Initial weights kept].
//
//   Vit model = ddplab::MakeVit(config, experiment.data().seed(), device);
//   // the same parameters, bit for bit, and the same host random state after it as
//   //   torch::manual_seed(seed); Vit fresh(config); fresh->to(device);
#ifndef DDPLAB_CORE_MODEL_INITIAL_WEIGHTS_H_
#define DDPLAB_CORE_MODEL_INITIAL_WEIGHTS_H_

#include <cstdint>

#include "core/model/vit.h"
#include "core/model/vit_config.h"

namespace ddplab {

// Note [Initial weights kept]
// The first MakeVit of a process draws the weights and keeps a host copy of them (in
// page-locked memory when `device` is a GPU), with the host generator's state after the
// draws. A later MakeVit of the same sizes and seed builds the modules without drawing
// (Vit(config, /*initialize=*/false)), copies the kept weights in, and sets the host
// generator as the draws would have left it (the GPU generators are seeded as
// torch::manual_seed seeds them), so that what follows draws what it would in a fresh
// process. Other sizes or another seed replace the copy: a process keeps one, the size
// of its model's weights.
Vit MakeVit(const VitConfig& config, uint64_t seed, const at::Device& device);

// Drops the kept copy (its memory), if any.
void ForgetInitialWeights();

}  // namespace ddplab

#endif  // DDPLAB_CORE_MODEL_INITIAL_WEIGHTS_H_
