#include "core/fidelity/fidelity_result.h"

#include "gtest/gtest.h"

namespace ddplab {
namespace {

// Sums over 4 sampled steps and 2 windows become means; a window length no window
// reached and a parameter never sampled are left out.
TEST(FidelityResultTest, MeansOfTheEnginesSums) {
  FidelityStats s;
  s.samples = 4;
  s.relative_error_sum = 3.0;
  s.cosine_sum = 2.6;
  s.windows = {{1, 2, 1.5}, {2, 2, 0.5}, {4, 0, 0}};
  s.parameters.resize(2);
  s.parameters[0] = {6, 4, 2.0, 3.6, 2, 0.2};
  s.parameters[1].numel = 3;
  v1::RunResult r;
  FillFidelity(s, {"head.weight", "head.bias"}, r);
  EXPECT_DOUBLE_EQ(r.gradient_error(), 0.75);
  EXPECT_EQ(r.gradient_error_samples(), 4);
  EXPECT_DOUBLE_EQ(r.gradient_cosine(), 0.65);
  ASSERT_EQ(r.effective_error_size(), 2);
  EXPECT_EQ(r.effective_error(1).steps(), 2u);
  EXPECT_DOUBLE_EQ(r.effective_error(1).error(), 0.25);
  EXPECT_EQ(r.effective_error(1).windows(), 2);
  ASSERT_EQ(r.parameter_fidelity_size(), 2);
  const v1::ParameterFidelity& p = r.parameter_fidelity(0);
  EXPECT_EQ(p.name(), "head.weight");
  EXPECT_EQ(p.numel(), 6);
  EXPECT_DOUBLE_EQ(p.relative_error(), 0.5);
  EXPECT_DOUBLE_EQ(p.cosine(), 0.9);
  EXPECT_DOUBLE_EQ(p.effective_error(), 0.1);
  EXPECT_FALSE(r.parameter_fidelity(1).has_effective_error());
  EXPECT_EQ(FidelitySummary(r), "; gradient error 7.50e-01, cosine 0.650 (4 sampled steps), over 2 steps 2.50e-01");
}

TEST(FidelityResultTest, NothingWithoutSampledSteps) {
  FidelityStats s;
  s.parameters.resize(3);
  v1::RunResult r;
  FillFidelity(s, {}, r);
  EXPECT_EQ(r.gradient_error_samples(), 0);
  EXPECT_EQ(r.parameter_fidelity_size(), 0);
  EXPECT_EQ(FidelitySummary(r), "");
}

}  // namespace
}  // namespace ddplab
