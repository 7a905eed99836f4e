// The arithmetic a run's forward pass computes in (v1::Precision), as PyTorch users set
// it: float32 matmuls or TF32 ones for the whole run, bf16 autocast around forward and
// loss. Parameters and gradients stay float32 in every mode.
//
//   if (absl::Status s = ddplab::SetMatmulPrecision(e.precision(), device); !s.ok()) return s;
//   {
//     ddplab::ForwardPrecision scope(e.precision(), device);   // torch.autocast(...) for bf16
//     loss = at::cross_entropy_loss(model->forward(images), labels);
//   }
//   loss.backward();
#ifndef DDPLAB_CORE_TRAINING_PRECISION_H_
#define DDPLAB_CORE_TRAINING_PRECISION_H_

#include <optional>
#include <string>

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "core/torch_compat.h"
#include "ddplab/v1/experiment.pb.h"

namespace ddplab {

// Sets float32 matmuls for the process as `p` asks (TF32: torch.backends.cuda.matmul.
// allow_tf32 = True; otherwise full float32, PyTorch's default), every run anew so that a
// run after another in the same process starts as PyTorch would. TF32 on the CPU is an
// error.
absl::Status SetMatmulPrecision(v1::Precision p, const at::Device& device);

// torch.autocast(device, dtype=torch.bfloat16) while it lives, for BF16_AUTOCAST; nothing
// for the other modes.
class ForwardPrecision {
 public:
  ForwardPrecision(v1::Precision p, const at::Device& device);

 private:
  std::optional<compat::AutocastScope> autocast_;
};

// The word for `p` in results and reports: "float32", "tf32", "bfloat16".
std::string PrecisionWord(v1::Precision p);

}  // namespace ddplab

#endif  // DDPLAB_CORE_TRAINING_PRECISION_H_
