#include "core/step_timer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddplab {

StepTimer::StepTimer(bool cuda, int steps) : cuda_(cuda), host_(steps * kNumPoints) {
#if defined(DDPLAB_CUDA)
  if (cuda_) {
    for (int i = 0; i < steps * kNumPoints; ++i) events_.emplace_back(cudaEventDefault);
  }
#endif
}

void StepTimer::Mark(int step, Point point) {
  const int i = step * kNumPoints + point;
#if defined(DDPLAB_CUDA)
  if (cuda_) {
    events_[i].record();
    return;
  }
#endif
  host_[i] = std::chrono::steady_clock::now();
}

double StepTimer::Ms(int step, Point from, Point to) {
  return Between(step * kNumPoints + from, step * kNumPoints + to);
}

double StepTimer::Since(int step, Point point) { return Between(0, step * kNumPoints + point); }

double StepTimer::Between(int a, int b) {
#if defined(DDPLAB_CUDA)
  if (cuda_) return events_[a].elapsed_time(events_[b]);
#endif
  return std::chrono::duration<double, std::milli>(host_[b] - host_[a]).count();
}

std::string StepTimer::TraceEvents(int rank, int steps, int first_step) {
  std::string events;
  auto event = [&](const std::string& name, double from_ms, double to_ms) {
    absl::StrAppendFormat(&events,
                          "%s{\"name\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": 0, "
                          "\"ts\": %.3f, \"dur\": %.3f}",
                          events.empty() ? "" : ",\n", name, rank, from_ms * 1e3, (to_ms - from_ms) * 1e3);
  };
  absl::StrAppendFormat(&events, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
                        "\"args\": {\"name\": \"rank %d\"}}", rank, rank);
  for (int m = 0; m < steps; ++m) {
    event(absl::StrCat("Batch ", first_step + m), Since(m, kStart), Since(m, kOptimizer));
    event("get batch", Since(m, kStart), Since(m, kBatch));
    event("forward", Since(m, kBatch), Since(m, kForward));
    event("backward", Since(m, kForward), Since(m, kBackward));
    event("optimizer step", Since(m, kBackward), Since(m, kOptimizer));
  }
  return events;
}

}  // namespace ddplab
