// For adamw_parity_test.py: ddplab's AdamW (core/training/adamw.h) on gradients drawn
// from a seed, as the test draws them for torch.optim.AdamW. Writes every parameter after
// the last step, float32 in order, to --out; --in_parts steps the parameters in two parts
// each step (as the engine's optimizer overlap does, bucket by bucket).
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <torch/types.h>
#include <torch/utils.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "core/training/adamw.h"

ABSL_FLAG(std::string, out, "", "where to write the parameters");
ABSL_FLAG(int, steps, 5, "");
ABSL_FLAG(double, lr, 1e-3, "");
ABSL_FLAG(double, beta1, 0.9, "");
ABSL_FLAG(double, beta2, 0.999, "");
ABSL_FLAG(double, eps, 1e-8, "");
ABSL_FLAG(double, weight_decay, 0.01, "");
ABSL_FLAG(bool, in_parts, false, "step parameter 0, then 1 and 2, each step");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // The test draws the same: parameters, then each step's gradients, from seed 0.
  torch::manual_seed(0);
  std::vector<at::Tensor> params;
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{37}, {5, 7}, {3, 4, 5}}) {
    params.push_back(torch::randn(shape).requires_grad_());
  }
  ddplab::AdamW adamw(params, {absl::GetFlag(FLAGS_lr), absl::GetFlag(FLAGS_beta1), absl::GetFlag(FLAGS_beta2),
                               absl::GetFlag(FLAGS_eps), absl::GetFlag(FLAGS_weight_decay)});
  for (int step = 0; step < absl::GetFlag(FLAGS_steps); ++step) {
    for (at::Tensor& p : params) p.mutable_grad() = torch::randn(p.sizes()) * (step + 1);
    if (absl::GetFlag(FLAGS_in_parts)) {
      adamw.StepParameters({0});
      adamw.StepParameters({1, 2});
    } else {
      adamw.Step();
    }
  }
  std::ofstream out(absl::GetFlag(FLAGS_out), std::ios::binary);
  for (const at::Tensor& p : params) {
    const at::Tensor c = p.detach().contiguous();
    out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * sizeof(float)));
  }
  return out ? 0 : 1;
}
