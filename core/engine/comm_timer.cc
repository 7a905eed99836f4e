#include "core/engine/comm_timer.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <thread>
#include <utility>

#if defined(DDPLAB_CUDA)
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ddplab {
namespace {

using Clock = std::chrono::steady_clock;

// The host's clock: on a CPU the waits are the host's own, and a collective ends when
// its future completes (on the backend's thread, which runs the callbacks first).
class HostTimer : public CommTimer {
 public:
  void WaitBegins() override { begin_ = Clock::now(); }
  void Launched(int bucket, const c10::intrusive_ptr<c10d::Work>& work) override {
    const Clock::time_point origin = start();
    const double launch_ms = Since(origin);
    auto end = std::make_shared<std::atomic<double>>(kPending);
    try {
      work->getFuture()->addCallback([end, origin](c10::ivalue::Future&) { end->store(Since(origin)); });
    } catch (const std::exception&) {
      end->store(kNever);  // a backend without futures: no span
    }
    spans_.push_back({steps(), bucket, launch_ms, end});
  }

 protected:
  void MarkStart() override { spans_.clear(); }
  void MarkPoint() override { points_.push_back(Clock::now()); }
  std::vector<double> PointsMs() override {
    std::vector<double> ms;
    for (const Clock::time_point& t : points_) ms.push_back(std::chrono::duration<double, std::milli>(t - points_[0]).count());
    points_.clear();
    return ms;
  }
  std::vector<BucketSpan> ReadSpans() override {
    std::vector<BucketSpan> out;
    for (const Span& s : spans_) {
      // The engine has waited for every collective by now; a callback still to run
      // runs on the backend's thread in a moment. One that never comes costs its span.
      const Clock::time_point give_up = Clock::now() + std::chrono::seconds(10);
      while (s.end->load() == kPending && Clock::now() < give_up) std::this_thread::sleep_for(std::chrono::microseconds(50));
      const double end = s.end->load();
      if (end >= 0) out.push_back({s.step, s.bucket, s.launch_ms, end});
    }
    spans_.clear();
    return out;
  }
  void MarkEnd() override {
    exposed_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin_).count();
  }
  double ReadExposed() override { return std::exchange(exposed_, 0.0); }

 private:
  static constexpr double kPending = -1, kNever = -2;
  struct Span {
    int step, bucket;
    double launch_ms;
    std::shared_ptr<std::atomic<double>> end;  // shared with the future's callback
  };
  static double Since(Clock::time_point origin) {
    return std::chrono::duration<double, std::milli>(Clock::now() - origin).count();
  }
  Clock::time_point begin_;
  double exposed_ = 0;
  std::vector<Span> spans_;
  std::vector<Clock::time_point> points_;
};

#if defined(DDPLAB_CUDA)
// CUDA events on the device's current stream, read only in ReadExposed and ReadSpans.
// A collective's end is an event on a stream of the timer's own that waits for the
// collective (Work::wait() makes the current stream wait): it passes when the collective
// ends, whatever the compute stream is doing.
class CudaTimer : public CommTimer {
 public:
  explicit CudaTimer(c10::DeviceIndex device) : device_(device) {}
  void Launched(int bucket, const c10::intrusive_ptr<c10d::Work>& work) override {
    if (!side_) side_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_);
    spans_.push_back({steps(), bucket, at::cuda::CUDAEvent(cudaEventDefault), at::cuda::CUDAEvent(cudaEventDefault)});
    spans_.back().launch.record(c10::cuda::getCurrentCUDAStream(device_));
    c10::cuda::CUDAStreamGuard guard(*side_);
    work->wait();
    spans_.back().end.record(*side_);
  }
  void WaitBegins() override {
    events_.emplace_back(at::cuda::CUDAEvent(cudaEventDefault), at::cuda::CUDAEvent(cudaEventDefault));
    // On the parameters' device's stream: the caller's current device may be another.
    events_.back().first.record(c10::cuda::getCurrentCUDAStream(device_));
  }

 protected:
  void MarkPoint() override {
    points_.emplace_back(cudaEventDefault);
    points_.back().record(c10::cuda::getCurrentCUDAStream(device_));
  }
  std::vector<double> PointsMs() override {
    std::vector<double> ms;
    for (at::cuda::CUDAEvent& e : points_) {
      e.synchronize();
      ms.push_back(points_[0].elapsed_time(e));
    }
    points_.clear();
    return ms;
  }
  void MarkStart() override {
    origin_.emplace(cudaEventDefault);
    origin_->record(c10::cuda::getCurrentCUDAStream(device_));
    spans_.clear();
  }
  std::vector<BucketSpan> ReadSpans() override {
    std::vector<BucketSpan> out;
    for (Span& s : spans_) {
      s.end.synchronize();
      out.push_back({s.step, s.bucket, origin_->elapsed_time(s.launch), origin_->elapsed_time(s.end)});
    }
    spans_.clear();
    return out;
  }
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
  struct Span {
    int step, bucket;
    at::cuda::CUDAEvent launch, end;
  };
  c10::DeviceIndex device_;
  std::vector<std::pair<at::cuda::CUDAEvent, at::cuda::CUDAEvent>> events_;
  std::optional<at::cuda::CUDAEvent> origin_;
  std::optional<c10::cuda::CUDAStream> side_;
  std::vector<Span> spans_;
  std::vector<at::cuda::CUDAEvent> points_;
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
  start_ = Clock::now();
  MarkStart();
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

void CommTimer::BackwardBegins() {
  PointsMs();  // any points of an unfinished recording
  ready_.clear();
  MarkPoint();
}

void CommTimer::Ready(size_t parameter) {
  ready_.push_back(parameter);
  MarkPoint();
}

std::vector<std::pair<size_t, double>> CommTimer::ReadyTimes() {
  const std::vector<double> ms = PointsMs();
  std::vector<std::pair<size_t, double>> out;
  for (size_t k = 0; k < ready_.size() && k + 1 < ms.size(); ++k) out.emplace_back(ready_[k], ms[k + 1]);
  ready_.clear();
  return out;
}

CommTimer::Totals CommTimer::Finish() {
  Totals totals;
  totals.exposed_ms = ReadExposed();
  totals.spans = ReadSpans();
  totals.start = start_;
  Harvest();
  totals.steps = steps_;
  for (size_t b = 0; b < ms_sum_.size() && ms_count_[b] > 0; ++b) {
    totals.bucket_ms.push_back(ms_sum_[b] / ms_count_[b]);
  }
  timing_ = false;
  return totals;
}

}  // namespace ddplab
