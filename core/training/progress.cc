#include "core/training/progress.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

#include "absl/strings/str_format.h"

namespace ddplab {

Progress::Progress(std::string label, int warmup)
    : label_(std::move(label)), warmup_(warmup), terminal_(isatty(STDERR_FILENO) == 1) {}

void Progress::Update(int step, int total) {
  if (label_.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  if (step == warmup_) measured_start_ = now;
  const bool last = step == total - 1;
  if (now - last_ < std::chrono::seconds(terminal_ ? 2 : 30) && !last) return;
  std::string rate = "warming up";
  if (step > warmup_) {
    const double elapsed = std::chrono::duration<double>(now - measured_start_).count();
    rate = absl::StrFormat("%.2f steps/s", elapsed > 0 ? (step - warmup_) / elapsed : 0.0);
  }
  std::fprintf(stderr, "%s%s: step %d/%d, %s%s", terminal_ ? "\r" : "", label_.c_str(), step + 1, total,
               rate.c_str(), terminal_ && !last ? " " : "\n");
  std::fflush(stderr);
  last_ = now;
}

}  // namespace ddplab
