#include "core/training/step_timer.h"

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
  host_[i] = std::chrono::steady_clock::now();
#if defined(DDPLAB_CUDA)
  if (cuda_) events_[i].record();
#endif
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

std::chrono::steady_clock::time_point StepTimer::HostTime(int step, Point point) {
  const std::chrono::duration<double, std::milli> since(Since(step, point));
  return host_[0] + std::chrono::duration_cast<std::chrono::steady_clock::duration>(since);
}

}  // namespace ddplab
