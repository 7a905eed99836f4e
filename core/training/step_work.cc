#include "core/training/step_work.h"

#include <utility>

#include <ATen/record_function.h>  // RECORD_USER_SCOPE

#include "absl/strings/str_cat.h"
#include "core/training/nvtx.h"
#include "core/training/precision.h"

#if defined(DDPLAB_CUDA)
#include <c10/cuda/CUDAGraphsC10Utils.h>
#endif

namespace ddplab {

void StepWork::Begin(int64_t step, int measured) {
  step_ = step;
  measured_ = measured;
  launched_ = false;
  error_ = absl::OkStatus();
}

bool StepWork::Timed() const {
  if (measured_ < 0) return false;
#if defined(DDPLAB_CUDA)
  if (p_.device.is_cuda() && c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None) {
    return false;
  }
#endif
  return true;
}

absl::Status StepWork::RunEagerly() {
  // Gradient accumulation: micro-batches 0..n-2 accumulate locally, the last one
  // reduces. "get batch" and "forward" time the first micro-batch; "backward" runs from
  // there to the end of the last backward.
  const int micro_batches = static_cast<int>(p_.experiment.steps().accumulation());
  for (int micro = 0; micro < micro_batches; ++micro) {
    const StepInputs inputs = Fetch(/*timed=*/micro == 0);
    if (absl::Status s = ForwardBackward(inputs, micro, Timed() && micro == 0); !s.ok()) return s;
  }
  return Optimize();
}

StepInputs StepWork::NextInputs() { return Fetch(/*timed=*/true); }

StepInputs StepWork::Fetch(bool timed) {
  StepInputs inputs;
  {
    NvtxRange r(p_.nvtx, "get batch");
    RECORD_USER_SCOPE("get batch");  // for LibTorch's profiler, when on
    Batch batch = p_.data.Next();  // a module's one input as images (Note [One input for now])
    inputs = StepInputs{std::move(batch.images), std::move(batch.labels)};
  }
  if (timed && Timed()) p_.timer.Mark(measured_, kBatch);
  return inputs;
}

std::string StepWork::Compute(const StepInputs& inputs) {
  error_ = ForwardBackward(inputs, /*micro=*/0, Timed());
  if (error_.ok()) error_ = Optimize();
  return error_.ok() ? "" : std::string(error_.message());
}

void StepWork::Launch(const std::function<void()>& launch) {
  launched_ = true;
  const bool timed = Timed();
  if (timed) p_.timer.Mark(measured_, kForward);
  {
    NvtxRange r(p_.nvtx, "backward");
    RECORD_USER_SCOPE("backward");  // for LibTorch's profiler, when on
    launch();
  }
  if (timed) {
    p_.timer.Mark(measured_, kBackward);
    p_.timer.Mark(measured_, kOptimizer);
  }
}

absl::Status StepWork::Ran(const std::string& runner_error) {
  if (runner_error.empty()) return absl::OkStatus();
  if (!error_.ok()) return error_;
  return absl::InternalError(absl::StrCat("rank ", p_.rank, ", step ", step_, ": ", runner_error));
}

at::Tensor StepWork::loss() const {
  const int micro_batches = static_cast<int>(p_.experiment.steps().accumulation());
  if (micro_batches > 1) return loss_.detach() * static_cast<double>(micro_batches);
  // A copy where the step was launched otherwise: a graph's replay writes the next step's
  // loss where this one is.
  return launched_ ? loss_.detach().clone() : loss_.detach();
}

absl::Status StepWork::ForwardBackward(const StepInputs& inputs, int micro, bool timed) {
  const int micro_batches = static_cast<int>(p_.experiment.steps().accumulation());
  {
    NvtxRange r(p_.nvtx, "forward");
    RECORD_USER_SCOPE("forward");  // for LibTorch's profiler, when on
    // As PyTorch's DDP (broadcast_buffers=True): rank 0's buffers (a BatchNorm's running
    // statistics) before each forward whose gradients are reduced. A ViT has none.
    if (p_.engine && micro == micro_batches - 1) p_.engine->Broadcast(buffers_);
    ForwardPrecision precision(p_.experiment.precision(), p_.device);
    loss_ = p_.model.Loss(Batch{inputs.images, inputs.labels});
    if (micro_batches > 1) loss_ = loss_ / micro_batches;
  }
  if (timed) p_.timer.Mark(measured_, kForward);
  {
    NvtxRange r(p_.nvtx, "backward");
    RECORD_USER_SCOPE("backward");  // for LibTorch's profiler, when on
    if (micro == 0) {
      if (p_.engine) {
        p_.engine->ZeroGrad();
      } else {
        p_.optimizer.ZeroGrad();
      }
    }
    if (p_.engine) p_.engine->BeginStep(/*sync=*/micro == micro_batches - 1);
    loss_.backward();
  }
  if (p_.engine) {
    if (absl::Status s = p_.engine->EndBackward(); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("rank ", p_.rank, ", step ", step_, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status StepWork::Optimize() {
  const bool timed = Timed();
  if (timed) p_.timer.Mark(measured_, kBackward);
  {
    NvtxRange r(p_.nvtx, "optimizer step");
    RECORD_USER_SCOPE("optimizer step");  // for LibTorch's profiler, when on
    // Where a plugin updates each bucket's parameters as its average comes in, the
    // engine has updated every parameter already.
    if (!p_.engine || !p_.engine->updated_parameters()) p_.optimizer.Step();
  }
  if (timed) p_.timer.Mark(measured_, kOptimizer);
  return absl::OkStatus();
}

}  // namespace ddplab
