// The tuner's measurements kept per machine and experiment (Note [The tuner],
// tune/tuner.h): <directory>/<experiment>.json, protobuf's JSON of a ddplab.v1.TuneCache.
// A second tuning reuses them while the machine (GPU, count, driver, CUDA, NCCL, LibTorch,
// topology), the probe and the experiment as given (its bucket cap included) are those
// they were taken on.
//
//   ddplab::tune::CacheLookup found = ddplab::tune::LookUp(path, machine, probe, base);
//   if (found.cache) { reuse *found.cache } else { std::cout << found.note; measure }
//   ddplab::tune::Store(path, cache);
#ifndef DDPLAB_TUNE_TUNE_CACHE_H_
#define DDPLAB_TUNE_TUNE_CACHE_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "ddplab/v1/tune.pb.h"

namespace ddplab::tune {

struct CacheLookup {
  std::optional<v1::TuneCache> cache;  // usable measurements, if any
  // Why there are none: "" (no cache there), or what changed ("the driver: 580.1 -> 590.2"),
  // or why the file could not be read.
  std::string note;
};

// The cache at `path` if it was measured on `machine` with `probe` and `base` (the
// experiment as given, as it runs for the tuner: one repetition).
CacheLookup LookUp(const std::string& path, const v1::Machine& machine, const v1::Experiment& probe,
                   const v1::Experiment& base);

// Writes `cache` to `path` whole (or leaves the file as it was), making its directory.
absl::Status Store(const std::string& path, const v1::TuneCache& cache);

// What of `now` differs from `then`, as LookUp's note says it; "" when nothing does.
std::string MachineChange(const v1::Machine& then, const v1::Machine& now);

}  // namespace ddplab::tune

#endif  // DDPLAB_TUNE_TUNE_CACHE_H_
