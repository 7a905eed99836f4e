// See initial_q.h.
#include "plugins/powersgd/initial_q.h"

#include <ATen/CPUGeneratorImpl.h>

namespace ddplab::powersgd {

std::vector<at::Tensor> RandomQs(int64_t seed, const std::vector<std::pair<int64_t, int64_t>>& shapes) {
  // A generator made with `seed` is the default one after torch.manual_seed(seed): an
  // MT19937 seeded so, with no normal sample held over.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
  std::vector<at::Tensor> qs;
  for (const auto& [rows, cols] : shapes) qs.push_back(at::randn({rows, cols}, gen));
  return qs;
}

}  // namespace ddplab::powersgd
