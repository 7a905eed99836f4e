// LibTorch's own profiler (Kineto; on GPUs through CUPTI) around a few training steps,
// written as a Chrome trace: the ATen operators and user scopes of the thread that starts
// it and of autograd's threads (which inherit its state; other threads', such as a
// communication hook's worker, are not recorded), each CUDA runtime call, and on a GPU
// every kernel, copy and memset on the stream that ran it, whichever thread launched it.
// It needs no tool beside LibTorch, where Nsight Systems may not be installed.
#ifndef DDPLAB_CORE_TORCH_PROFILE_H_
#define DDPLAB_CORE_TORCH_PROFILE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ddplab {

class TorchProfile {
 public:
  // Starts profiling this thread's (and autograd's) operators, and the GPU's activity
  // when `cuda`. Fails if a profiler is already on for this thread.
  static absl::StatusOr<std::unique_ptr<TorchProfile>> Start(bool cuda);
  ~TorchProfile();  // stops profiling if Stop was not called

  struct Summary {
    int64_t cpu_events = 0;
    int64_t gpu_events = 0;  // kernels, copies, memsets, and user scopes' spans on the GPU
  };
  // Stops profiling and writes what was recorded to `path` as a Chrome trace (a JSON
  // object with "traceEvents", opened by Perfetto or chrome://tracing): process
  // 2 * `rank` holds the CPU threads, 2 * `rank` + 1 the GPU, one track per stream.
  // Times are microseconds from the first event. Each event's args carry its correlation
  // id (a kernel's is its launch's), and a GPU event's its stream.
  absl::StatusOr<Summary> StopAndWrite(const std::string& path, int rank);

 private:
  TorchProfile() = default;
  bool running_ = false;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_TORCH_PROFILE_H_
