#include "core/model/initial_weights.h"

#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>

namespace ddplab {
namespace {

struct Kept {
  std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, uint64_t> key;
  std::vector<at::Tensor> tensors;  // parameters, then buffers, in the module's order
  at::Tensor generator_state;       // the host generator's after the draws
};

std::mutex& Lock() {
  static std::mutex mu;
  return mu;
}
// Never destroyed: at exit CUDA may be gone before static destructors run, and freeing
// page-locked memory then throws (std::terminate). The process's end frees it.
std::unique_ptr<Kept>& KeptCopy() {
  static auto* kept = new std::unique_ptr<Kept>();
  return *kept;
}

auto KeyOf(const VitConfig& c, uint64_t seed) {
  return std::make_tuple(c.image_size, c.patch_size, c.hidden_dim, c.num_layers, c.num_heads, c.mlp_dim,
                         c.num_classes, seed);
}

std::vector<at::Tensor> TensorsOf(Vit& model) {
  std::vector<at::Tensor> out = model->parameters();
  for (const at::Tensor& b : model->buffers()) out.push_back(b);
  return out;
}

}  // namespace

Vit MakeVit(const VitConfig& config, uint64_t seed, const at::Device& device) {
  std::lock_guard<std::mutex> lock(Lock());
  std::unique_ptr<Kept>& kept = KeptCopy();
  torch::manual_seed(seed);  // the GPU generators too, as a fresh process would have them
  if (kept && kept->key == KeyOf(config, seed)) {
    Vit model(config, /*initialize=*/false);
    torch::NoGradGuard no_grad;
    std::vector<at::Tensor> tensors = TensorsOf(model);
    for (size_t i = 0; i < tensors.size(); ++i) {
      // Module::to's way: the tensor keeps its identity (and parameters their autograd
      // state); its data is the kept copy's, on `device`.
      tensors[i].set_data(device.is_cpu() ? kept->tensors[i].clone()
                                          : kept->tensors[i].to(device, /*non_blocking=*/true));
    }
    at::Generator host = at::detail::getDefaultCPUGenerator();  // a handle on the one generator
    std::lock_guard<std::mutex> generator_lock(host.mutex());
    host.set_state(kept->generator_state);
    return model;
  }
  kept.reset();  // its memory first
  Vit model(config);
  auto fresh = std::make_unique<Kept>();
  fresh->key = KeyOf(config, seed);
  fresh->generator_state = at::detail::getDefaultCPUGenerator().get_state();
  {
    torch::NoGradGuard no_grad;
    for (const at::Tensor& t : TensorsOf(model)) {
      fresh->tensors.push_back(device.is_cpu() ? t.detach().clone() : t.detach().pin_memory());
    }
  }
  model->to(device);
  kept = std::move(fresh);
  return model;
}

void ForgetInitialWeights() {
  std::lock_guard<std::mutex> lock(Lock());
  KeptCopy().reset();
}

}  // namespace ddplab
