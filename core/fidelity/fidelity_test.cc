#include "core/fidelity/fidelity.h"

#include <cmath>
#include <vector>

#include <torch/types.h>
#include <torch/utils.h>

#include "gtest/gtest.h"

namespace ddplab {
namespace {

// Half the exact gradient: relative error 0.5 and cosine 1, per parameter and whole.
// Orthogonal to it with the same length: relative error sqrt(2), cosine 0.
TEST(FidelityMeterTest, RelativeErrorAndCosineOfKnownTensors) {
  torch::manual_seed(1);
  const at::Tensor a = torch::randn({12}), b = torch::randn({5});
  FidelityMeter meter({12, 5}, /*every=*/1, /*window=*/1);
  ASSERT_TRUE(meter.Samples(0, true));
  meter.Add({a * 0.5, b * 0.5}, {a, b});
  const FidelityStats& s = meter.stats();
  ASSERT_EQ(s.samples, 1);
  EXPECT_NEAR(s.relative_error_sum, 0.5, 1e-9);
  EXPECT_NEAR(s.cosine_sum, 1.0, 1e-9);
  for (const FidelityStats::Parameter& p : s.parameters) {
    EXPECT_EQ(p.samples, 1);
    EXPECT_NEAR(p.relative_error_sum, 0.5, 1e-9);
    EXPECT_NEAR(p.cosine_sum, 1.0, 1e-9);
  }
  const at::Tensor x = torch::tensor({3.0f, 0.0f}), y = torch::tensor({0.0f, 3.0f});
  FidelityMeter orthogonal({2}, 1, 1);
  orthogonal.Add({y}, {x});
  EXPECT_NEAR(orthogonal.stats().relative_error_sum, std::sqrt(2.0), 1e-9);
  EXPECT_NEAR(orthogonal.stats().cosine_sum, 0.0, 1e-9);
}

// Parameters with an exact mean of zero (unused ones) count in no per-parameter figure;
// one with no gradient at all counts as zeros: relative error 1.
TEST(FidelityMeterTest, ZeroMeansAndMissingGradients) {
  const at::Tensor a = torch::ones({4});
  FidelityMeter meter({4, 3, 2}, 1, 1);
  meter.Add({a, torch::zeros({3}), at::Tensor()}, {a, torch::zeros({3}), torch::ones({2})});
  const FidelityStats& s = meter.stats();
  EXPECT_EQ(s.parameters[0].samples, 1);
  EXPECT_NEAR(s.parameters[0].relative_error_sum, 0.0, 1e-12);
  EXPECT_EQ(s.parameters[1].samples, 0);
  EXPECT_NEAR(s.parameters[2].relative_error_sum, 1.0, 1e-12);
  EXPECT_NEAR(s.parameters[2].cosine_sum, 0.0, 1e-12);
  EXPECT_NEAR(s.relative_error_sum, std::sqrt(2.0 / 6.0), 1e-9);
}

// Windows of 4 starting at multiples of 6: steps 0-3 and 6-9; a timed step inside a
// window ends it; a step asked about twice (micro-steps) gets the same answer.
TEST(FidelityMeterTest, WindowsStartAtMultiplesAndEndWhenNotEligible) {
  FidelityMeter meter({1}, /*every=*/6, /*window=*/4);
  std::vector<int> sampled;
  for (int64_t step = 0; step < 14; ++step) {
    const bool eligible = step != 12;
    EXPECT_EQ(meter.Samples(step, eligible), meter.Samples(step, eligible));
    if (!meter.Samples(step, eligible)) continue;
    sampled.push_back(static_cast<int>(step));
    meter.Add({torch::ones({1})}, {torch::ones({1})});
  }
  // 12 starts a window, but is timed: 13 is not sampled, being no multiple of 6.
  EXPECT_EQ(sampled, (std::vector<int>{0, 1, 2, 3, 6, 7, 8, 9}));
  FidelityMeter back_to_back({1}, 2, 4);
  int count = 0;
  for (int64_t step = 0; step < 10; ++step) {
    if (!back_to_back.Samples(step, true)) continue;
    back_to_back.Add({torch::ones({1})}, {torch::ones({1})});
    ++count;
  }
  EXPECT_EQ(count, 10);  // windows of 4 every 2: back to back
  // A window cut short after 2 steps counts for W = 1 and 2, not 4.
  FidelityMeter cut({1}, 10, 4);
  for (int64_t step = 0; step < 3; ++step) {
    if (cut.Samples(step, step < 2)) cut.Add({torch::full({1}, 2.0)}, {torch::ones({1})});
  }
  ASSERT_EQ(cut.stats().windows.size(), 3u);
  EXPECT_EQ(cut.stats().windows[0].steps, 1);
  EXPECT_EQ(cut.stats().windows[0].count, 1);
  EXPECT_EQ(cut.stats().windows[1].count, 1);
  EXPECT_EQ(cut.stats().windows[2].steps, 4);
  EXPECT_EQ(cut.stats().windows[2].count, 0);
}

// An error that alternates in sign (what error feedback sends: last step's residual back)
// cancels over the window; a constant bias does not. Exact gradient 1 each step, reduced
// 1 + 0.5 (-1)^t: per-step error 0.5, over 2 steps 0, over 3 steps 0.5/3, over 4 steps 0.
// Reduced 1.5 always: 0.5 over every window length.
TEST(FidelityMeterTest, WindowedErrorCancelsAlternatingErrorsNotBias) {
  const at::Tensor exact = torch::ones({2});
  FidelityMeter alternating({2}, 100, 4), biased({2}, 100, 4);
  for (int64_t step = 0; step < 4; ++step) {
    ASSERT_TRUE(alternating.Samples(step, true));
    ASSERT_TRUE(biased.Samples(step, true));
    alternating.Add({exact * (step % 2 == 0 ? 1.5 : 0.5)}, {exact});
    biased.Add({exact * 1.5}, {exact});
  }
  const std::vector<FidelityStats::Window>& a = alternating.stats().windows;
  const std::vector<FidelityStats::Window>& b = biased.stats().windows;
  ASSERT_EQ(a.size(), 3u);  // W = 1, 2, 4
  EXPECT_EQ(a[2].steps, 4);
  EXPECT_NEAR(a[0].error_sum, 0.5, 1e-9);
  EXPECT_NEAR(a[1].error_sum, 0.0, 1e-9);
  EXPECT_NEAR(a[2].error_sum, 0.0, 1e-9);
  for (const FidelityStats::Window& w : b) {
    EXPECT_EQ(w.count, 1);
    EXPECT_NEAR(w.error_sum, 0.5, 1e-9) << w.steps;
  }
  EXPECT_EQ(alternating.stats().parameters[0].windows, 1);
  EXPECT_NEAR(alternating.stats().parameters[0].effective_error_sum, 0.0, 1e-9);
  EXPECT_NEAR(biased.stats().parameters[0].effective_error_sum, 0.5, 1e-9);
  // The per-step figures are the same for both.
  EXPECT_NEAR(alternating.stats().relative_error_sum, biased.stats().relative_error_sum, 1e-9);
}

// A window whose length is no power of two reports 1, 2, 4 and itself; two windows give
// means over two.
TEST(FidelityMeterTest, LevelsAndMeansOverWindows) {
  FidelityMeter meter({1}, 6, 6);
  for (int64_t step = 0; step < 12; ++step) {
    ASSERT_TRUE(meter.Samples(step, true));
    meter.Add({torch::full({1}, step < 6 ? 1.1 : 1.3)}, {torch::ones({1})});
  }
  const std::vector<FidelityStats::Window>& w = meter.stats().windows;
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[3].steps, 6);
  for (const FidelityStats::Window& level : w) {
    EXPECT_EQ(level.count, 2);
    EXPECT_NEAR(level.error_sum / level.count, 0.2, 1e-6) << level.steps;
  }
  EXPECT_EQ(meter.stats().samples, 12);
}

}  // namespace
}  // namespace ddplab
