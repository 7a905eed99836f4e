// A model of one data-parallel training step: from one profiled step's parts (forward,
// backward, optimizer), when each gradient becomes ready in backward, and the
// all-reduce cost curve, the step time that a bucket partition and the communication
// levers (wire dtype, compression, optimizer overlap) would give, part by part, so that
// a report can set the predicted parts beside the measured ones.
//
//   ddplab::tune::StepInputs in;
//   in.forward_ms = 20; in.backward_ms = 40; in.optimizer_ms = 3;
//   in.gradients = {{2.5, 4 << 20}, {5.0, 9 << 20}, ...};   // ready order: ms, bytes
//   ddplab::tune::Levers levers;
//   levers.wire_factor = 0.5;                                // bf16 on the wire
//   absl::StatusOr<ddplab::tune::StepPrediction> p =
//       ddplab::tune::PredictStep(in, curve, levers, ddplab::tune::OneBucketPerGradient(n));
//   if (p.ok()) std::cout << p->step_ms << " ms, " << p->exposed_ms << " ms exposed\n";
//
// The model, kept simple on purpose:
//   - Bucket b is ready when its last gradient is (the latest of its gradients' times).
//   - Collectives run one after another, in bucket order:
//       start_b = max(ready_b, end_{b-1}),  end_b = start_b + cost(bytes_b * wire_factor).
//   - Backward's compute runs (1 + s) times slower while a collective is in flight
//     (s = overlap_slowdown, measured as backward beside communication against backward
//     alone): gradients' ready times are positions in backward's own compute, and a
//     position is reached later in wall time the longer collectives ran before it.
//     Collectives are not slowed.
//   - exposed = max(0, end_last - backward's end); without optimizer overlap,
//       step = forward + backward (with the slowdown) + exposed + optimizer.
//   - With optimizer overlap, the optimizer's time is shared among buckets in proportion
//     to their bytes, and bucket b's share runs after backward's compute, after b's
//     collective and after bucket b-1's share; the optimizer part is then what of it
//     is left after the last collective and backward.
//   Gradient layout (copies into flat buckets or not) is not a lever here: measure
//   backward with the layout in question and give its times.
#ifndef DDPLAB_TUNE_MODEL_STEP_MODEL_H_
#define DDPLAB_TUNE_MODEL_STEP_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tune/model/cost_curve.h"

namespace ddplab::tune {

// One parameter's gradient as backward produces it.
struct Gradient {
  double ready_ms = 0;  // from backward's start, on one GPU with no communication
  int64_t bytes = 0;    // the gradient's size as bucketed (before the wire's dtype)
};

// What one profiled step measured.
struct StepInputs {
  double forward_ms = 0;
  double backward_ms = 0;   // one GPU's backward, alone (no communication beside it)
  double optimizer_ms = 0;  // the optimizer's pass over every parameter
  // In ready order (the order autograd produces them); each ready time in
  // [0, backward_ms]. Times out of order are allowed: a bucket is ready at its latest.
  std::vector<Gradient> gradients;
};

// The communication levers a prediction applies.
struct Levers {
  // Bytes on the wire per byte of gradient: 1 for float32, 0.5 for bf16, a low-rank
  // compressor's ratio. The cost curve is looked up at bytes * wire_factor.
  double wire_factor = 1.0;
  // s: backward's compute runs (1 + s) times slower while a collective is in flight.
  double overlap_slowdown = 0.0;
  // The optimizer run per bucket once its average is in place (optimizer_overlap).
  bool overlap_optimizer = false;
};

// Buckets over the gradients in ready order, as their ends: bucket b holds gradients
// [ends[b-1], ends[b]), bucket 0 from gradient 0. Valid for n gradients when the ends
// rise strictly and the last is n.
struct Partition {
  std::vector<size_t> ends;

  size_t buckets() const { return ends.size(); }
  size_t begin(size_t b) const { return b == 0 ? 0 : ends[b - 1]; }
  // "[0,3) [3,4) [4,9)".
  std::string ToString() const;
};

// OK when `p` is a valid partition of n gradients; otherwise says what is wrong.
absl::Status CheckPartition(const Partition& p, size_t n);

// One bucket for all n gradients; one bucket per gradient.
Partition OneBucket(size_t n);
Partition OneBucketPerGradient(size_t n);

// One bucket's collective in a prediction. Times in ms from backward's start, wall clock.
struct BucketTiming {
  size_t begin = 0, end = 0;  // its gradients [begin, end)
  int64_t bytes = 0;          // gradient bytes; the wire carries bytes * wire_factor
  double ready_ms = 0;  // when its gradients and every earlier bucket's are ready
  double start_ms = 0;
  double end_ms = 0;
};

// A predicted step, part by part: step_ms = forward_ms + backward_ms + exposed_ms +
// optimizer_ms.
struct StepPrediction {
  double forward_ms = 0;
  double backward_ms = 0;       // backward's wall time, the slowdown included
  double slowdown_ms = 0;       // of which added by collectives beside it
  double communication_ms = 0;  // all collectives' time, hidden or not
  double exposed_ms = 0;        // collectives' time after backward's end
  double optimizer_ms = 0;      // the optimizer's time not hidden behind collectives
  double step_ms = 0;
  std::vector<BucketTiming> buckets;

  // The last collective's end, in ms from backward's start.
  double CommunicationEndMs() const { return buckets.empty() ? 0 : buckets.back().end_ms; }
};

// OK when the inputs and levers can be modelled: times finite and >= 0, at least one
// gradient, every ready time within backward, bytes >= 0, wire_factor > 0, s >= 0.
absl::Status CheckStepInputs(const StepInputs& in, const Levers& levers);

// The step that `partition` and `levers` would give, as the model above says. Errors
// where CheckStepInputs or CheckPartition fails.
absl::StatusOr<StepPrediction> PredictStep(const StepInputs& in, const CostCurve& curve, const Levers& levers,
                                           const Partition& partition);

}  // namespace ddplab::tune

#endif  // DDPLAB_TUNE_MODEL_STEP_MODEL_H_
