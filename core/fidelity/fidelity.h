// How faithful a lossy gradient reduction is to the exact one: the engine's measure of
// the error sampler's steps (error_sampler.h), against a shadow exact float32
// mean of the same gradients.
//
// Per sampled step, over the whole model and per parameter: the relative L2 error
// ||reduced - exact|| / ||exact|| and the cosine similarity of `reduced` and `exact`.
// Over windows of consecutive sampled steps: the effective error
// ||sum(reduced - exact)|| / ||sum(exact)|| over the window's first W steps, for
// W = 1, 2, 4, ... up to the window's length: what error feedback drives down (Note
// [Windowed effective error], fidelity.cc). Nothing is computed on other steps.
//
//   ddplab::FidelityMeter meter({/*numel of each parameter*/ 64, 8}, /*every=*/10, /*window=*/8);
//   for (int64_t step = 0; ...; ++step) {
//     if (meter.Samples(step, /*eligible=*/!timed)) {
//       ... the reduced gradients and the exact mean beside them, per parameter ...
//       meter.Add(reduced, exact);
//     }
//   }
//   const ddplab::FidelityStats& s = meter.stats();
//   double error = s.relative_error_sum / s.samples;           // the mean per-step error
//   double effective = s.windows.back().error_sum / s.windows.back().count;  // over 8 steps

#ifndef DDPLAB_CORE_FIDELITY_FIDELITY_H_
#define DDPLAB_CORE_FIDELITY_FIDELITY_H_

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

namespace ddplab {

// Sums over the sampled steps; a mean is a sum over its count.
struct FidelityStats {
  // Steps sampled, and the sums over them of the whole model's relative error and cosine
  // (all parameters as one vector).
  int samples = 0;
  double relative_error_sum = 0;
  double cosine_sum = 0;
  struct Parameter {
    int64_t numel = 0;
    // Over the sampled steps where its exact mean was not zero.
    int samples = 0;
    double relative_error_sum = 0;
    double cosine_sum = 0;
    // Over the complete windows where its exact sum was not zero: the effective error
    // over the whole window.
    int windows = 0;
    double effective_error_sum = 0;
  };
  std::vector<Parameter> parameters;  // in the engine's parameter order
  // The effective error over the first `steps` steps of each window that got that far,
  // summed over those windows (`count`); `steps` 1, 2, 4, ... and the window's length.
  struct Window {
    int steps = 0;
    int count = 0;
    double error_sum = 0;
  };
  std::vector<Window> windows;
};

class FidelityMeter {
 public:
  // `numel`: each parameter's element count. A window of `window` consecutive synced
  // steps (1: single steps) starts at each multiple of `every` that is not inside one.
  FidelityMeter(const std::vector<int64_t>& numel, int every, int window);

  // Whether synced step `step` is sampled. A step that is not `eligible` (timed, or
  // sampling paused) is never sampled and ends the window it falls in: that window is
  // dropped from the figures of the lengths it had not reached. Calling it again for the
  // same step gives the same answer.
  bool Samples(int64_t step, bool eligible);

  // A sampled step: per parameter, the gradient the reduction delivered (undefined: none,
  // as for an unused parameter) and the exact mean, each flat, float32, on one device.
  void Add(const std::vector<at::Tensor>& reduced, const std::vector<at::Tensor>& exact);

  const FidelityStats& stats() const { return stats_; }

  // Ends the open window, if any, as a step that is not eligible would, and frees its
  // sums: before timed steps, so that their peak memory is the step's own.
  void DropWindow();

 private:
  double AddStep(const std::vector<at::Tensor>& reduced, const std::vector<at::Tensor>& exact);
  void Accumulate(const std::vector<at::Tensor>& reduced, const std::vector<at::Tensor>& exact);
  void EndWindowLevel(size_t level);

  int every_;
  int window_;
  int position_ = 0;  // steps of the open window so far (0: none open)
  // The open window's sums per parameter: of reduced - exact, and of exact.
  std::vector<at::Tensor> diff_sum_, exact_sum_;
  FidelityStats stats_;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_FIDELITY_FIDELITY_H_
