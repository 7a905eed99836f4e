#include "core/fidelity/error_sampler.h"

#include <utility>

#include "core/engine/group_collectives.h"

namespace ddplab {
namespace {

class SamplingHook : public HookWrapperBase {
 public:
  SamplingHook(std::unique_ptr<CommHook> inner, std::shared_ptr<ErrorSampler> sampler, const CommContext& context)
      : HookWrapperBase(std::move(inner)), sampler_(std::move(sampler)), context_(context) {}

  c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) override {
    if (!sampler_->sampling()) return inner_->Run(bucket);
    bucket.sampled = true;
    c10::intrusive_ptr<c10::ivalue::Future> future = inner_->Run(bucket);
    sampler_->Ran(bucket, future);
    return future;
  }

  void BackwardDone() override {
    inner_->BackwardDone();
    sampler_->Measure(context_);
  }

 private:
  std::shared_ptr<ErrorSampler> sampler_;
  CommContext context_;
};

}  // namespace

ErrorSampler::ErrorSampler(const std::vector<int64_t>& numel, int every, int window)
    : numel_(numel), meter_(numel, every, window) {}

HookWrapper ErrorSampler::Wrapper() {
  std::shared_ptr<ErrorSampler> self = shared_from_this();
  return [self](std::unique_ptr<CommHook> inner, const CommContext& context) -> std::unique_ptr<CommHook> {
    return std::make_unique<SamplingHook>(std::move(inner), self, context);
  };
}

void ErrorSampler::Pause(bool paused) {
  paused_ = paused;
  if (paused) DropWindow();
}

void ErrorSampler::DropWindow() {
  meter_.DropWindow();
  exact_.clear();
  reduced_.clear();
}

bool ErrorSampler::Wants(int64_t step, bool timed) {
  sampling_ = meter_.Samples(step, /*eligible=*/!timed && !paused_);
  exact_.assign(sampling_ ? numel_.size() : 0, at::Tensor());
  reduced_.clear();
  return sampling_;
}

void ErrorSampler::Take(size_t param, const at::Tensor& grad) {
  at::Tensor copy = grad.detach().to(at::kFloat, /*non_blocking=*/false, /*copy=*/true).reshape(-1);
  std::lock_guard<std::mutex> lock(mu_);
  exact_[param] = std::move(copy);
}

void ErrorSampler::Ran(const GradBucket& bucket, c10::intrusive_ptr<c10::ivalue::Future> future) {
  reduced_.push_back(Reduced{bucket.parameters, bucket.offsets, bucket.sizes, bucket.buffer.defined(), std::move(future)});
}

// Every bucket's own reduction is done before the exact means start (a hook may issue
// its collectives from a thread of its own; starting these while it does could order
// them differently on each rank). Every rank averages every parameter: zeros for one
// without a gradient here.
void ErrorSampler::Measure(const CommContext& context) {
  if (reduced_.empty()) return;  // not a sampled step
  std::vector<at::Tensor> reduced(numel_.size()), exact;
  at::TensorOptions options;
  for (const at::Tensor& t : exact_) {
    if (t.defined()) options = t.options();
  }
  for (const Reduced& bucket : reduced_) {
    bucket.future->wait();
    if (bucket.future->hasError()) return;  // the engine reports it
    const std::vector<at::Tensor> parts = ReducedGradients(bucket.future->value(), bucket.flat, bucket.offsets, bucket.sizes);
    for (size_t slot = 0; slot < bucket.parameters.size(); ++slot) {
      const size_t i = bucket.parameters[slot];
      if (exact_[i].defined()) reduced[i] = parts[slot].reshape(-1).to(at::kFloat);
    }
  }
  for (size_t i = 0; i < numel_.size(); ++i) {
    exact.push_back(exact_[i].defined() ? exact_[i] : at::zeros({numel_[i]}, options));
  }
  StartMeanCoalesced(*context.process_group, exact, context.nccl).wait();
  meter_.Add(reduced, exact);
  exact_.clear();
  reduced_.clear();
}

std::shared_ptr<ErrorSampler> AddErrorSampler(const std::vector<at::Tensor>& params, int every, EngineParts& parts,
                                              int window) {
  if (every <= 0) return nullptr;
  std::vector<int64_t> numel;
  for (const at::Tensor& p : params) numel.push_back(p.numel());
  auto sampler = std::make_shared<ErrorSampler>(numel, every, window);
  parts.hooks.push_back(sampler->Wrapper());
  parts.tap = sampler;
  return sampler;
}

}  // namespace ddplab
