// PowerSGD's random initial Q, drawn as PyTorch's powerSGD_hook draws it: for the same
// random_seed, ddplab's power iteration starts from PyTorch's Q (parity/ checks it,
// number for number).
//
// PyTorch's PowerSGDState holds numpy.random.RandomState(random_seed). Each time a bucket
// needs new Qs (at its first compressed step with warm start; every step without), the
// hook draws v = rng.randint(1_000_000_000), calls torch.manual_seed(v), and fills the
// bucket's Qs one after another, each torch.randn(cols, rank) from that generator.
//
//   ddplab::powersgd::QSeeds seeds(random_seed);
//   std::vector<at::Tensor> qs = ddplab::powersgd::RandomQs(seeds.Next(), {{48, 4}, {96, 4}});
#ifndef DDPLAB_PLUGINS_POWERSGD_INITIAL_Q_H_
#define DDPLAB_PLUGINS_POWERSGD_INITIAL_Q_H_

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

namespace ddplab::powersgd {

// numpy's legacy RandomState(random_seed), for its randint(1_000_000_000) alone.
class QSeeds {
 public:
  // numpy seeds MT19937 with init_genrand(random_seed), as std::mt19937 does; it takes
  // seeds below 2^32 only.
  explicit QSeeds(uint32_t random_seed) : engine_(random_seed) {}

  // The next randint(1_000_000_000): 32-bit outputs masked to 30 bits until one is below
  // 10^9 (numpy's masked rejection sampling).
  int64_t Next() {
    for (;;) {
      const uint32_t v = static_cast<uint32_t>(engine_()) & ((uint32_t{1} << 30) - 1);
      if (v < 1000000000u) return v;
    }
  }

 private:
  std::mt19937 engine_;
};

// torch.manual_seed(seed), then torch.randn(rows, cols) for each of `shapes` in order: on
// the CPU, in float32.
std::vector<at::Tensor> RandomQs(int64_t seed, const std::vector<std::pair<int64_t, int64_t>>& shapes);

}  // namespace ddplab::powersgd

#endif  // DDPLAB_PLUGINS_POWERSGD_INITIAL_Q_H_
