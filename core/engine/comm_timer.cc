#include "core/engine/comm_timer.h"

#include <chrono>
#include <optional>
#include <thread>
#include <utility>

#if defined(DDPLAB_CUDA)
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ddplab {
namespace {

// The host's clock: on a CPU the waits are the host's own.
class HostTimer : public CommTimer {
 public:
  void WaitBegins() override { begin_ = std::chrono::steady_clock::now(); }

 protected:
  void MarkEnd() override {
    exposed_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin_).count();
  }
  double ReadExposed() override { return std::exchange(exposed_, 0.0); }

 private:
  std::chrono::steady_clock::time_point begin_;
  double exposed_ = 0;
};

#if defined(DDPLAB_CUDA)
// CUDA events on the device's current stream, read only in ReadExposed.
class CudaTimer : public CommTimer {
 public:
  explicit CudaTimer(c10::DeviceIndex device) : device_(device) {}
  void WaitBegins() override {
    events_.emplace_back(at::cuda::CUDAEvent(cudaEventDefault), at::cuda::CUDAEvent(cudaEventDefault));
    // On the parameters' device's stream: the caller's current device may be another.
    events_.back().first.record(c10::cuda::getCurrentCUDAStream(device_));
  }

 protected:
  void MarkEnd() override { events_.back().second.record(c10::cuda::getCurrentCUDAStream(device_)); }
  double ReadExposed() override {
    double ms = 0;
    for (auto& [begin, end] : events_) {
      end.synchronize();
      ms += begin.elapsed_time(end);
    }
    events_.clear();
    return ms;
  }

 private:
  c10::DeviceIndex device_;
  std::vector<std::pair<at::cuda::CUDAEvent, at::cuda::CUDAEvent>> events_;
};
#endif

}  // namespace

std::unique_ptr<CommTimer> CommTimer::For(const at::Device& device) {
#if defined(DDPLAB_CUDA)
  if (device.is_cuda()) return std::make_unique<CudaTimer>(device.index());
#endif
  (void)device;
  return std::make_unique<HostTimer>();
}

void CommTimer::Start(bool bucket_times) {
  timing_ = true;
  bucket_times_ = bucket_times;
  steps_ = 0;
  works_.clear();
  ms_sum_.clear();
  ms_count_.clear();
  ReadExposed();  // anything marked before
}

void CommTimer::WaitEnds(std::vector<c10::intrusive_ptr<c10d::Work>> works) {
  MarkEnd();
  ++steps_;
  if (bucket_times_) works_.push_back(std::move(works));
}

void CommTimer::StepBegins() { Harvest(); }

void CommTimer::Harvest() {
  for (const auto& works : works_) {
    if (ms_sum_.size() < works.size()) {
      ms_sum_.resize(works.size(), 0);
      ms_count_.resize(works.size(), 0);
    }
    for (size_t b = 0; b < works.size(); ++b) {
      if (!works[b]) continue;
      // c10d reads the duration from the collective's events, once both have passed.
      while (!works[b]->isCompleted()) std::this_thread::sleep_for(std::chrono::microseconds(50));
      if (std::optional<double> ms = compat::WorkDurationMs(works[b])) {
        ms_sum_[b] += *ms;
        ms_count_[b]++;
      }
    }
  }
  works_.clear();
}

CommTimer::Totals CommTimer::Finish() {
  Totals totals;
  totals.exposed_ms = ReadExposed();
  Harvest();
  totals.steps = steps_;
  for (size_t b = 0; b < ms_sum_.size() && ms_count_[b] > 0; ++b) {
    totals.bucket_ms.push_back(ms_sum_[b] / ms_count_[b]);
  }
  timing_ = false;
  return totals;
}

}  // namespace ddplab
