// The highest steps/s a row's machine allows it, from what was measured: one GPU's step
// and the row's bytes at its transport's bus bandwidth (Note [A row's bound]).
//
// Note [A row's bound]
// A run of several processes does one GPU's work (forward F, backward B, optimizer O and
// the rest of the step X, as the single-process run measured them) and sends its
// gradients: C ms for the bytes each rank sends per step at the transport's bus bandwidth
// (nccl-tests' busbw: a ring all-reduce moves 2(n-1)/n of the buffer per rank), of which
// the last bucket's T ms can only start after backward's last gradient. At best the rest
// hides behind backward:
//
//   step >= F + max(B, C - T) + T + O + X
//
// The bound is bandwidth's where C - T > B, the step's tail's where T is more than 2% of
// the step, else compute's (one GPU's step). A row near its bound is as fast as this
// machine lets those bytes be: only sending fewer (compression) does much better. Where
// a row is more than 2% below, what it loses is named from its own step's parts: compute
// slowed beside communication, or communication exposed beyond the tail.
//
//   ddplab::BoundInputs in{.forward_ms = 20, .backward_ms = 55, .optimizer_ms = 5,
//                          .wire_bytes = 1.224e9, .last_bucket_bytes = 26.2e6, .ranks = 4,
//                          .busbw_gbps = 23};
//   v1::RowBound b = ddplab::BoundOf(in, /*row_steps_per_s=*/9.45, /*compute_slowdown_ms=*/1,
//                                    /*exposed_comm_ms=*/2);
//   // b.steps_per_s() 9.54, b.binds() "bandwidth", b.share() 0.991
#ifndef DDPLAB_STUDIES_BOUND_ROW_BOUND_H_
#define DDPLAB_STUDIES_BOUND_ROW_BOUND_H_

#include "ddplab/v1/report.pb.h"

namespace ddplab {

struct BoundInputs {
  // One GPU's step by phase (the single-process run's medians), ms.
  double forward_ms = 0, backward_ms = 0, optimizer_ms = 0, other_ms = 0;
  double wire_bytes = 0;         // what each rank sends per step, every bucket
  double last_bucket_bytes = 0;  // of it, the bucket launched after backward's last gradient
  int ranks = 1;
  double busbw_gbps = 0;         // the transport's bus bandwidth
};

// The bound of a row that measured `row_steps_per_s` (median) with the parts of its
// step given; a default RowBound (steps_per_s 0) where the inputs cannot give one (no
// bytes, no bandwidth, one rank).
v1::RowBound BoundOf(const BoundInputs& in, double row_steps_per_s, double compute_slowdown_ms,
                     double exposed_comm_ms);

}  // namespace ddplab

#endif  // DDPLAB_STUDIES_BOUND_ROW_BOUND_H_
