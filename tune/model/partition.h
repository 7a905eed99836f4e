// Searching bucket partitions: the exact best contiguous partition of the gradients (in
// ready order) for a cost curve, by dynamic programming; and DDP's own bucketing by a
// size cap (bucket_cap_mb), predicted for each of a list of caps, so that an answer can
// be given as a setting DDP takes.
//
//   absl::StatusOr<ddplab::tune::BestPartition> best =
//       ddplab::tune::FindBestPartition(inputs, curve, levers);
//   if (best.ok()) std::cout << best->partition.ToString() << ": " << best->prediction.step_ms;
//   absl::StatusOr<std::vector<ddplab::tune::CapPrediction>> caps =
//       ddplab::tune::SweepBucketCaps(inputs, curve, levers, {1, 5, 25, 100});
//   // caps->at(ddplab::tune::FastestCap(*caps)).cap_mib: "bucket_cap_mb=25"
#ifndef DDPLAB_TUNE_MODEL_PARTITION_H_
#define DDPLAB_TUNE_MODEL_PARTITION_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "tune/model/cost_curve.h"
#include "tune/model/step_model.h"

namespace ddplab::tune {

// The partition search's answer.
struct BestPartition {
  Partition partition;
  // The objective the search minimized: the last collective's end in ms from backward's
  // start, with no slowdown (see FindBestPartition).
  double communication_end_ms = 0;
  // The step this partition gives with every lever applied (PredictStep).
  StepPrediction prediction;
};

// The contiguous partition of in.gradients whose last collective ends first, under
// levers.wire_factor, found by the dynamic programme over prefixes
//   f(0) = 0,  f(i) = min over j < i of  max(ready(j..i), f(j)) + cost(bytes(j..i))
// (ready(j..i) the latest ready time of gradients j..i-1). It is exact: for a fixed last
// bucket, max(r, f) + c is nondecreasing in f, so a best partition ends with a best
// partition of the prefix before its last bucket. O(n^2) cost lookups; thousands of
// gradients take milliseconds. Ties (to rounding) go to fewer buckets, prefix by prefix.
//
// With no slowdown and no optimizer overlap the step is forward + max(backward, f(n)) +
// optimizer, so this partition is also a fastest step. With overlap_slowdown > 0 or
// overlap_optimizer, it is a heuristic: the best partition without them, predicted with
// them (a partition with fewer, later collectives may then be faster).
absl::StatusOr<BestPartition> FindBestPartition(const StepInputs& in, const CostCurve& curve,
                                                const Levers& levers);

// PyTorch DDP's bucketing (compute_bucket_assignment_by_size): gradients in ready order
// fill a bucket until it holds at least its cap, `first_cap_bytes` for the first bucket
// and `cap_bytes` after; a last bucket holds what is left. Caps > 0.
Partition BucketsByCap(const std::vector<Gradient>& gradients, int64_t first_cap_bytes, int64_t cap_bytes);

// One cap's predicted step.
struct CapPrediction {
  double cap_mib = 0;        // bucket_cap_mb as DDP takes it (MiB)
  double first_cap_mib = 0;  // the first bucket's cap: min(first_bucket_mib, cap_mib)
  Partition partition;
  StepPrediction prediction;
};

// For each cap in MiB (> 0, as DDP's bucket_cap_mb), DDP's buckets and their predicted
// step. DDP's first bucket is min(first_bucket_mib, cap): 1 MiB in PyTorch.
absl::StatusOr<std::vector<CapPrediction>> SweepBucketCaps(const StepInputs& in, const CostCurve& curve,
                                                           const Levers& levers, const std::vector<double>& caps_mib,
                                                           double first_bucket_mib = 1.0);

// The index of the fastest predicted step in a non-empty sweep (the first among equals).
size_t FastestCap(const std::vector<CapPrediction>& sweep);

}  // namespace ddplab::tune

#endif  // DDPLAB_TUNE_MODEL_PARTITION_H_
