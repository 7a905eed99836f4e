// For optimizer_parity_test.py: ddplab's optimizer (core/optim/optimizer.h), AdamW or
// SGD, on gradients drawn from a seed, as the test draws them for torch.optim. Writes every
// parameter after the last step, float32 in order, to --out. --in_parts steps the
// parameters in two parts each step (as the engine's optimizer overlap does, bucket by
// bucket); --device=cuda steps them on the GPU (drawn on the CPU, then moved), where the
// optimizer takes LibTorch's fused kernels if it has them; --foreach keeps the foreach
// kernels there.
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>
#include <torch/utils.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "core/optim/adamw.h"
#include "core/optim/sgd.h"

ABSL_FLAG(std::string, out, "", "where to write the parameters");
ABSL_FLAG(std::string, optimizer, "adamw", "adamw or sgd");
ABSL_FLAG(std::string, device, "cpu", "cpu or cuda");
ABSL_FLAG(bool, foreach, false, "foreach kernels even where LibTorch has fused ones");
ABSL_FLAG(int, steps, 5, "");
ABSL_FLAG(double, lr, 1e-3, "");
ABSL_FLAG(double, beta1, 0.9, "");
ABSL_FLAG(double, beta2, 0.999, "");
ABSL_FLAG(double, eps, 1e-8, "");
ABSL_FLAG(double, weight_decay, 0.01, "");
ABSL_FLAG(double, momentum, 0, "SGD's");
ABSL_FLAG(bool, in_parts, false, "step parameter 0, then 1 and 2, each step");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const at::Device device(absl::GetFlag(FLAGS_device));
  // The test draws the same: parameters, then each step's gradients, from seed 0.
  torch::manual_seed(0);
  std::vector<at::Tensor> params;
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{37}, {5, 7}, {3, 4, 5}}) {
    params.push_back(torch::randn(shape).to(device).requires_grad_());
  }
  const bool fused = !absl::GetFlag(FLAGS_foreach);
  std::unique_ptr<ddplab::Optimizer> optimizer;
  if (absl::GetFlag(FLAGS_optimizer) == "sgd") {
    optimizer = std::make_unique<ddplab::Sgd>(params, absl::GetFlag(FLAGS_lr), absl::GetFlag(FLAGS_momentum),
                                              absl::GetFlag(FLAGS_weight_decay), fused);
  } else {
    optimizer = std::make_unique<ddplab::AdamW>(
        params, ddplab::AdamW::Options{absl::GetFlag(FLAGS_lr), absl::GetFlag(FLAGS_beta1), absl::GetFlag(FLAGS_beta2),
                                       absl::GetFlag(FLAGS_eps), absl::GetFlag(FLAGS_weight_decay), fused});
  }
  std::cout << "fused: " << (optimizer->fused() ? "yes" : "no") << "\n";
  for (int step = 0; step < absl::GetFlag(FLAGS_steps); ++step) {
    for (at::Tensor& p : params) p.mutable_grad() = (torch::randn(p.sizes()) * (step + 1)).to(device);
    if (absl::GetFlag(FLAGS_in_parts)) {
      optimizer->StepParameters({0});
      optimizer->StepParameters({1, 2});
    } else {
      optimizer->Step();
    }
  }
  std::ofstream out(absl::GetFlag(FLAGS_out), std::ios::binary);
  for (const at::Tensor& p : params) {
    const at::Tensor c = p.detach().cpu().contiguous();
    out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * sizeof(float)));
  }
  return out ? 0 : 1;
}
