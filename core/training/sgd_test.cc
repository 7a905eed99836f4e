#include "core/training/sgd.h"

#include <torch/optim/sgd.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "gtest/gtest.h"

namespace ddplab {
namespace {

// Our foreach SGD against LibTorch's own torch::optim::SGD, over several steps, with a
// parameter that has no gradient on some steps.
void CompareWithTorch(double lr, double momentum, double weight_decay) {
  torch::manual_seed(0);
  std::vector<at::Tensor> ours, theirs;
  for (int i = 0; i < 3; ++i) {
    at::Tensor p = torch::randn({4, 3});
    ours.push_back(p.clone().requires_grad_());
    theirs.push_back(p.clone().requires_grad_());
  }
  Sgd sgd(ours, lr, momentum, weight_decay);
  torch::optim::SGD reference(theirs, torch::optim::SGDOptions(lr).momentum(momentum).weight_decay(weight_decay));
  for (int step = 0; step < 4; ++step) {
    at::Tensor target = torch::randn({4, 3});
    sgd.ZeroGrad();
    reference.zero_grad();
    // LibTorch 1.13's zero_grad zeroes instead of dropping; drop, as PyTorch does.
    for (at::Tensor& p : theirs) p.mutable_grad() = at::Tensor();
    for (int i = 0; i < 3; ++i) {
      if (i == 2 && step % 2 == 1) continue;  // no gradient this step
      ((ours[i] - target).pow(2).sum() * (i + 1)).backward();
      ((theirs[i] - target).pow(2).sum() * (i + 1)).backward();
    }
    sgd.Step();
    reference.step();
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(at::allclose(ours[i], theirs[i], 1e-6, 1e-6)) << "step " << step << " param " << i;
    }
  }
}

TEST(SgdTest, PlainMatchesTorchOptim) { CompareWithTorch(0.1, 0, 0); }
TEST(SgdTest, MomentumMatchesTorchOptim) { CompareWithTorch(0.05, 0.9, 0); }
TEST(SgdTest, WeightDecayMatchesTorchOptim) { CompareWithTorch(0.05, 0.9, 0.01); }

// A step taken in parts (one bucket's parameters at a time, as the engine does with the
// optimizer overlapped) is one Step, bit for bit, with momentum and weight decay.
TEST(SgdTest, StepInPartsEqualsOneStep) {
  torch::manual_seed(1);
  std::vector<at::Tensor> whole, parts;
  for (int i = 0; i < 4; ++i) {
    at::Tensor p = torch::randn({3, 5});
    whole.push_back(p.clone().requires_grad_());
    parts.push_back(p.clone().requires_grad_());
  }
  Sgd one(whole, 0.05, 0.9, 0.01), split(parts, 0.05, 0.9, 0.01);
  for (int step = 0; step < 3; ++step) {
    at::Tensor target = torch::randn({3, 5});
    one.ZeroGrad();
    split.ZeroGrad();
    for (int i = 0; i < 4; ++i) {
      if (i == 1 && step == 1) continue;  // no gradient this step: skipped in both
      ((whole[i] - target).pow(2).sum() * (i + 1)).backward();
      ((parts[i] - target).pow(2).sum() * (i + 1)).backward();
    }
    one.Step();
    split.StepParameters({3, 2});
    split.StepParameters({1});
    split.StepParameters({0});
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(at::equal(whole[i], parts[i])) << "step " << step << " param " << i;
  }
}

TEST(SgdTest, ZeroGradDropsGradients) {
  at::Tensor p = torch::ones({2}).requires_grad_();
  Sgd sgd({p}, 0.1);
  (p * 2).sum().backward();
  ASSERT_TRUE(p.grad().defined());
  sgd.ZeroGrad();
  EXPECT_FALSE(p.grad().defined());
}

}  // namespace
}  // namespace ddplab
