// The all-reduce cost curve of a process group on this machine, measured as nccl-tests'
// all_reduce_perf measures it, but through c10d (the collectives the engine issues):
// per size, a few warm-up all-reduces, then the mean time of `iters` back to back
// (CUDA events around them on a GPU, the host clock on a CPU), every rank's buffer
// filled with its rank + 1 so that the sum is known and checked (#wrong: elements off).
// The rows are nccl-tests' own (tune/model/nccl_tests.h): written in its format, they compare
// with all_reduce_perf's numbers on the same machine, and make the tuner's cost curve.
//
//   ddplab::tune::SweepOptions options;   // 1 KiB to 256 MiB, float32
//   absl::StatusOr<std::vector<ddplab::tune::NcclTestsRow>> rows =
//       ddplab::tune::SweepAllReduce(*group, device, options);
//   std::cout << ddplab::tune::FormatNcclTestsTable(*rows);
#ifndef DDPLAB_TUNE_ALLREDUCE_SWEEP_H_
#define DDPLAB_TUNE_ALLREDUCE_SWEEP_H_

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/torch_compat.h"
#include "ddplab/v1/result.pb.h"
#include "tune/model/nccl_tests.h"

namespace ddplab::tune {

struct SweepOptions {
  // Bytes per all-reduce: powers of two from 1 KiB to 256 MiB unless given.
  std::vector<int64_t> bytes;
  at::ScalarType dtype = at::kFloat;  // float32 or bfloat16 (what the levers send)
  int warmup = 3;
  int iters = 10;
};

// The sizes of SweepOptions' default: 2^10 to 2^28 bytes.
std::vector<int64_t> DefaultSweepBytes();

// Every rank of `group` must call it with the same options (a collective). Tensors on
// `device`. An error names the size at which c10d failed; a wrong sum is a row's #wrong,
// not an error (as nccl-tests reports it).
absl::StatusOr<std::vector<NcclTestsRow>> SweepAllReduce(compat::CollectiveGroup& group, const at::Device& device,
                                                         const SweepOptions& options);

// The sweep a run asks for with profiling.allreduce_sweep, into result.allreduce_sweep:
// float32, and on a GPU bfloat16 too (what bf16 on the wire sends; Gloo has no bfloat16
// sum), powers of two from 1 KiB to the first at or above the model's gradient bytes
// (result.parameters() * 4, at least 64 KiB). A collective, as SweepAllReduce; a wrong sum
// is an error here (the curve would be of a broken transport).
absl::Status SweepIntoResult(compat::CollectiveGroup& group, const at::Device& device, v1::RunResult& result);

}  // namespace ddplab::tune

#endif  // DDPLAB_TUNE_ALLREDUCE_SWEEP_H_
