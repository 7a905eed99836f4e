#include "studies/bound/row_bound.h"

#include <cmath>

#include "gtest/gtest.h"

namespace ddplab {
namespace {

// The 4-GPU host-memory row of #62: 1.224 GB of float32 gradients over 4 ranks at 23 GB/s
// is 79.8 ms of communication against a 55 ms backward: bandwidth binds, at 0.763
// of one GPU's 80 ms step.
BoundInputs HostMemory() {
  BoundInputs in;
  in.forward_ms = 20;
  in.backward_ms = 55;
  in.optimizer_ms = 4;
  in.other_ms = 1;
  in.wire_bytes = 1.224e9;
  in.last_bucket_bytes = 25 * 1048576.0;
  in.ranks = 4;
  in.busbw_gbps = 23;
  return in;
}

TEST(RowBoundTest, BandwidthBindsWhereCommunicationOutlastsBackward) {
  const v1::RowBound b = BoundOf(HostMemory(), /*row_steps_per_s=*/9.45, /*compute_slowdown_ms=*/3,
                                 /*exposed_comm_ms=*/4);
  const double comm = 1.224e9 * 1.5 / 23e9 * 1e3;  // 79.83 ms
  const double tail = comm * 25 * 1048576.0 / 1.224e9;
  EXPECT_NEAR(b.comm_ms(), comm, 1e-9);
  EXPECT_NEAR(b.tail_ms(), tail, 1e-9);
  EXPECT_NEAR(b.steps_per_s(), 1e3 / (20 + (comm - tail) + tail + 4 + 1), 1e-9);
  EXPECT_NEAR(b.steps_per_s() / (1e3 / 80), 0.7632, 1e-3);  // of one GPU's
  EXPECT_EQ(b.binds(), "bandwidth");
  EXPECT_NEAR(b.share(), 9.45 / b.steps_per_s(), 1e-12);
  EXPECT_EQ(b.row_loses_to(), "");  // within 2% of the bound
  EXPECT_NE(b.text().find("set by bandwidth"), std::string::npos) << b.text();
}

TEST(RowBoundTest, ComputeBindsWhereCommunicationHides) {
  BoundInputs in = HostMemory();
  in.busbw_gbps = 350;  // NVLink: 5.2 ms
  const v1::RowBound b = BoundOf(in, /*row_steps_per_s=*/11, /*compute_slowdown_ms=*/6, /*exposed_comm_ms=*/1);
  EXPECT_EQ(b.binds(), "compute");
  EXPECT_NEAR(b.steps_per_s(), 1e3 / (80 + b.tail_ms()), 1e-9);
  // 90.9 ms against a bound of 80.1: compute slowed beside communication costs the most.
  EXPECT_EQ(b.row_loses_to(), "compute slowed beside communication");
}

TEST(RowBoundTest, OneBucketAfterBackwardIsAllTail) {
  BoundInputs in = HostMemory();
  in.busbw_gbps = 350;
  in.last_bucket_bytes = in.wire_bytes;  // naive_ddp: one bucket
  const v1::RowBound b = BoundOf(in, /*row_steps_per_s=*/10, /*compute_slowdown_ms=*/0, /*exposed_comm_ms=*/12);
  EXPECT_EQ(b.binds(), "the step's tail");
  EXPECT_NEAR(b.tail_ms(), b.comm_ms(), 1e-12);
  EXPECT_NEAR(b.steps_per_s(), 1e3 / (80 + b.comm_ms()), 1e-9);
  EXPECT_EQ(b.row_loses_to(), "exposed communication");
}

TEST(RowBoundTest, NoBoundWithoutBytesOrBandwidth) {
  BoundInputs in = HostMemory();
  in.busbw_gbps = 0;  // Gloo: c10d times no collective
  EXPECT_EQ(BoundOf(in, 9, 0, 0).steps_per_s(), 0);
  in = HostMemory();
  in.wire_bytes = 0;  // a hook that sends its own bytes
  EXPECT_EQ(BoundOf(in, 9, 0, 0).steps_per_s(), 0);
}

}  // namespace
}  // namespace ddplab
