// Samples a lossy reduction's gradient error, the way a plugin asks for it
// (PluginRegistrar::Lossy): a hook wrapper outside the plugins' hooks, and a gradient tap.
//
// On a sampled step (never a timed or profiled one; FidelityMeter decides which), the tap
// keeps each gradient as backward produced it, in float32. The wrapper passes each bucket
// on, marked sampled, and once backward is done and every bucket's future has completed,
// averages the kept gradients exactly over the ranks and measures what the chain
// delivered against that (fidelity.h). No other step pays anything.
//
//   std::shared_ptr<ddplab::ErrorSampler> sampler = ddplab::AddErrorSampler(params, /*every=*/5, parts);
//   ddplab::DataParallelEngine engine(params, group, parts);
//   ... train; sampler->Pause(true) around profiled steps ...
//   ddplab::FillFidelity(sampler->stats(), names, result);
#ifndef DDPLAB_CORE_FIDELITY_ERROR_SAMPLER_H_
#define DDPLAB_CORE_FIDELITY_ERROR_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/engine/engine.h"
#include "core/engine/extension_points.h"
#include "core/fidelity/fidelity.h"

namespace ddplab {

class ErrorSampler : public GradientTap, public std::enable_shared_from_this<ErrorSampler> {
 public:
  // `numel`: each parameter's element count (the model's order). Windows of `window`
  // synced steps, one starting every `every` steps (FidelityMeter).
  ErrorSampler(const std::vector<int64_t>& numel, int every, int window = 8);

  // The wrapper to put outermost in the engine's hook chain.
  HookWrapper Wrapper();

  // While paused (steps being profiled, which should look like measured ones) no step
  // is sampled. Pausing, or DropWindow, frees the open window's sums: before timed
  // steps, so that their peak memory is their own.
  void Pause(bool paused);
  void DropWindow();

  const FidelityStats& stats() const { return meter_.stats(); }

  // GradientTap.
  bool Wants(int64_t step, bool timed) override;
  void Take(size_t param, const at::Tensor& grad) override;

  // The step's buckets, as the wrapper saw them (error_sampler.cc).
  struct Reduced {
    std::vector<size_t> parameters;
    std::vector<int64_t> offsets;
    std::vector<std::vector<int64_t>> sizes;
    bool flat = true;  // had a buffer
    c10::intrusive_ptr<c10::ivalue::Future> future;
  };
  // The wrapper: a bucket of a sampled step went to the chain; then, once backward is
  // done (CommHook::BackwardDone), measure the step.
  void Ran(const GradBucket& bucket, c10::intrusive_ptr<c10::ivalue::Future> future);
  void Measure(const CommContext& context);
  bool sampling() const { return sampling_; }

 private:

  std::vector<int64_t> numel_;
  FidelityMeter meter_;
  bool paused_ = false;
  bool sampling_ = false;          // this step
  std::mutex mu_;                  // Take runs on autograd's threads
  std::vector<at::Tensor> exact_;  // per parameter, this step's gradient (float32)
  std::vector<Reduced> reduced_;   // this step's buckets
};

// With `every` > 0: a sampler of `params`' error put into `parts` (its wrapper outermost
// in the chain, its tap), else null and `parts` as they were.
std::shared_ptr<ErrorSampler> AddErrorSampler(const std::vector<at::Tensor>& params, int every, EngineParts& parts,
                                              int window = 8);

}  // namespace ddplab

#endif  // DDPLAB_CORE_FIDELITY_ERROR_SAMPLER_H_
