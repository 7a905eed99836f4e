// LibTorch's own profiler (Kineto; on GPUs through CUPTI) around a few training steps,
// written as a Chrome trace: the ATen operators and user scopes of the thread that starts
// it and of autograd's threads (which inherit its state; other threads', such as a
// communication hook's worker, are not recorded), each CUDA runtime call, and on a GPU
// every kernel, copy and memset on the stream that ran it, whichever thread launched it.
// It needs no tool beside LibTorch, where Nsight Systems may not be installed.
//
// Where LibTorch has Kineto, the file is Kineto's own (ProfilerResult::save, what
// torch.profiler's export_chrome_trace writes), with the job's "distributedInfo" (rank,
// world size, backend) as torch.profiler adds it, so that Holistic Trace Analysis and
// TensorBoard's profiler read the ranks' files as one job. Where it has none (Debian's
// CPU build), its events are written by us in the same Chrome trace form.
//
//   auto profile = ddplab::TorchProfile::Start(/*cuda=*/true);
//   ...  // the steps
//   ddplab::TorchProfile::Job job{/*rank=*/0, /*world=*/2, "nccl"};
//   (*profile)->StopAndWrite("run.torch_trace.rank0.json", job);
#ifndef DDPLAB_CORE_TRAINING_TORCH_PROFILE_H_
#define DDPLAB_CORE_TRAINING_TORCH_PROFILE_H_

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
  // The process's place in the job, for the trace's distributedInfo.
  struct Job {
    int rank = 0;
    int world = 1;
    std::string backend;  // "nccl", "gloo"
  };
  // Stops profiling and writes what was recorded to `path` (atomically) as a Chrome trace
  // (a JSON object with "traceEvents", opened by Perfetto, chrome://tracing, HTA). Without
  // Kineto: process 2 * rank holds the CPU threads, 2 * rank + 1 the GPU, one track per
  // stream; times are microseconds from the first event; each event's args carry its
  // correlation id (a kernel's is its launch's), and a GPU event's its stream.
  absl::StatusOr<Summary> StopAndWrite(const std::string& path, const Job& job);

 private:
  TorchProfile() = default;
  bool running_ = false;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_TRAINING_TORCH_PROFILE_H_
