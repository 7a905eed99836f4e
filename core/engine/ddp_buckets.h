// DDP's bucketing rule, written once: the default cap, the first bucket, MiB to bytes and
// the assignment by size. The engine's default planner (CapPlanner, extension_points.h),
// the bucket_sizing plugin and the tuner's model (tune/) all take it from here, so that a
// cap the tuner predicts makes the buckets the engine then makes. Plain C++: no LibTorch.
//
//   const double first = ddplab::ddp::FirstCapMiB(cap_mib);      // min(1 MiB, cap)
//   auto buckets = ddplab::ddp::AssignBuckets(bytes, order, ddplab::ddp::MiBToBytes(first),
//                                             ddplab::ddp::MiBToBytes(cap_mib));
#ifndef DDPLAB_CORE_ENGINE_DDP_BUCKETS_H_
#define DDPLAB_CORE_ENGINE_DDP_BUCKETS_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ddplab::ddp {

inline constexpr int64_t kMiB = 1024 * 1024;
// DistributedDataParallel's bucket_cap_mb default.
inline constexpr double kDefaultCapMiB = 25;
// DDP's first bucket (torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES), so that the
// first all-reduce starts early in backward.
inline constexpr double kFirstBucketMiB = 1;

// The first bucket's cap under a cap of `cap_mib`, as DDP: 1 MiB, or the cap where smaller.
inline double FirstCapMiB(double cap_mib) { return std::min(kFirstBucketMiB, cap_mib); }

// MiB (bucket_cap_mb's unit) to bytes, to the nearest byte.
inline int64_t MiBToBytes(double mib) { return static_cast<int64_t>(std::llround(mib * static_cast<double>(kMiB))); }

// PyTorch's compute_bucket_assignment_by_size for parameters of one dtype and device:
// parameters are taken in `order` (indices into `bytes`); a bucket is closed once it
// holds at least its cap, `first_cap` for the first bucket and `cap` after.
inline std::vector<std::vector<size_t>> AssignBuckets(const std::vector<int64_t>& bytes,
                                                      const std::vector<size_t>& order, int64_t first_cap,
                                                      int64_t cap) {
  std::vector<std::vector<size_t>> buckets;
  std::vector<size_t> current;
  int64_t size = 0;
  for (size_t index : order) {
    current.push_back(index);
    size += bytes[index];
    if (size >= (buckets.empty() ? first_cap : cap)) {
      buckets.push_back(std::move(current));
      current.clear();
      size = 0;
    }
  }
  if (!current.empty()) buckets.push_back(std::move(current));
  return buckets;
}

}  // namespace ddplab::ddp

#endif  // DDPLAB_CORE_ENGINE_DDP_BUCKETS_H_
