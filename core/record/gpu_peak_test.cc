#include "core/record/gpu_peak.h"

#include "gtest/gtest.h"

namespace ddplab {
namespace {

TEST(GpuPeakTest, ThePrecisionsRateOfTheGpuNamed) {
  EXPECT_EQ(PeakTflops("NVIDIA H200", v1::BF16_AUTOCAST), 989.4);
  EXPECT_EQ(PeakTflops("NVIDIA H100 80GB HBM3", v1::TF32), 494.7);
  EXPECT_EQ(PeakTflops("NVIDIA H100 80GB HBM3", v1::FLOAT32), 67);
  EXPECT_EQ(PeakTflops("NVIDIA H100 PCIe", v1::BF16_AUTOCAST), 756);  // not the SXM part's
  EXPECT_EQ(PeakTflops("NVIDIA A100-SXM4-80GB", v1::PRECISION_UNSPECIFIED), 19.5);  // float32
}

TEST(GpuPeakTest, NoneForWhatItDoesNotKnow) {
  EXPECT_EQ(PeakTflops("cpu", v1::FLOAT32), std::nullopt);
  EXPECT_EQ(PeakTflops("NVIDIA GeForce RTX 4090", v1::BF16_AUTOCAST), std::nullopt);
}

}  // namespace
}  // namespace ddplab
