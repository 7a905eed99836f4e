#include "studies/bound/row_bound.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace ddplab {

v1::RowBound BoundOf(const BoundInputs& in, double row_steps_per_s, double compute_slowdown_ms,
                     double exposed_comm_ms) {
  v1::RowBound b;
  if (in.wire_bytes <= 0 || in.busbw_gbps <= 0 || in.ranks < 2 || row_steps_per_s <= 0) return b;
  const double n = in.ranks;
  const double comm = in.wire_bytes * 2 * (n - 1) / n / (in.busbw_gbps * 1e9) * 1e3;
  const double tail = comm * std::clamp(in.last_bucket_bytes / in.wire_bytes, 0.0, 1.0);
  const double hidden = comm - tail;
  const double step = in.forward_ms + std::max(in.backward_ms, hidden) + tail + in.optimizer_ms + in.other_ms;
  b.set_steps_per_s(1e3 / step);
  b.set_share(row_steps_per_s / b.steps_per_s());
  b.set_comm_ms(comm);
  b.set_tail_ms(tail);
  b.set_busbw_gbps(in.busbw_gbps);
  std::string why;
  if (hidden > in.backward_ms) {
    b.set_binds("bandwidth");
    why = absl::StrFormat("%.1f ms of communication at %.0f GB/s, %.1f of it able to hide behind a %.1f ms backward",
                          comm, in.busbw_gbps, hidden, in.backward_ms);
  } else if (tail > 0.02 * step) {
    b.set_binds("the step's tail");
    why = absl::StrFormat("the last bucket's %.1f ms after backward, of %.1f ms of communication at %.0f GB/s", tail,
                          comm, in.busbw_gbps);
  } else {
    b.set_binds("compute");
    why = absl::StrFormat("%.1f ms of communication at %.0f GB/s hides behind a %.1f ms backward", comm, in.busbw_gbps,
                          in.backward_ms);
  }
  const double gap = 1e3 / row_steps_per_s - step;  // ms the row's step is above the bound's
  if (gap > 0.02 * step) {
    const double exposed_beyond_tail = std::max(0.0, exposed_comm_ms - tail);
    b.set_row_loses_to(compute_slowdown_ms >= exposed_beyond_tail ? "compute slowed beside communication"
                                                                  : "exposed communication");
  }
  b.set_text(absl::StrFormat("bound %.2f steps/s, set by %s (%s); the row reaches %.3f of it%s", b.steps_per_s(),
                             b.binds(), why, b.share(),
                             b.row_loses_to().empty() ? "" : absl::StrFormat(", losing most to %s", b.row_loses_to())));
  return b;
}

}  // namespace ddplab
