// The few lines a run prints about itself (FormatRunSummary, trainer.h).
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/fidelity/fidelity_result.h"
#include "core/training/trainer.h"

namespace ddplab {
namespace {

// "  engine: 14 bucket(s), exposed communication 0.43 ms per step; all-reduce 5.1 ms per
// step in all, bus bandwidth 341 GB/s (largest bucket)"
std::string EngineSummary(const v1::RunResult& r) {
  if (!r.engine()) return "";
  std::string out = absl::StrFormat("  engine: %d bucket(s), exposed communication %.2f ms per step",
                                    r.bucket_bytes_size(), r.exposed_comm_ms());
  if (r.bucket_allreduce_ms_size() > 0) {
    double total = 0;
    int largest = 0;
    for (int b = 0; b < r.bucket_allreduce_ms_size(); ++b) {
      total += r.bucket_allreduce_ms(b);
      if (r.bucket_bytes(b) > r.bucket_bytes(largest)) largest = b;
    }
    absl::StrAppendFormat(&out, "; all-reduce %.2f ms per step in all, bus bandwidth %.0f GB/s (largest bucket)",
                          total, r.bucket_busbw_gbps(largest));
  }
  absl::StrAppend(&out, FidelitySummary(r));
  if (auto it = r.hook_stats().find("compression_ratio"); it != r.hook_stats().end()) {
    absl::StrAppendFormat(&out, "; compression %.1fx", it->second);
  }
  return out + "\n";
}

}  // namespace

std::string FormatRunSummary(const v1::RunResult& r) {
  const v1::PhaseTimes& p = r.phases();
  // Figures a CPU run does not measure (FLOP/s, device memory) are left out, not shown as 0.
  std::string measured;
  if (r.tflops_per_gpu() > 0) {
    absl::StrAppendFormat(&measured, ", %.3g TFLOP/s per %s", r.tflops_per_gpu(), r.device() == "cpu" ? "process" : "GPU");
    if (r.has_peak_fraction()) {
      absl::StrAppendFormat(&measured, " (%.1f%% of its %s peak)", 100 * r.peak_fraction(), r.precision());
    }
  }
  if (r.peak_memory_gib() > 0) absl::StrAppendFormat(&measured, ", peak %.2f GiB", r.peak_memory_gib());
  return absl::StrFormat(
      "%s: %.3f steps/s, %.1f samples/s%s (%s, %d process%s)\n"
      "  per step %.2f ms: get batch %.2f, forward %.2f, backward %.2f, optimizer %.2f\n"
      "  waiting for data: %.2f%% of the step on the device, %.3f ms per step on the host\n"
      "  loss %.4f -> %.4f over %d steps\n"
      "  run %.2f s: setup %.2f, %d steps %.2f, finish %.2f\n%s",
      r.experiment(), r.steps_per_s(), r.samples_per_s(), measured, r.device(), r.world_size(), r.world_size() == 1 ? "" : "es", p.step_ms(), p.get_batch_ms(),
      p.forward_ms(), p.backward_ms(), p.optimizer_ms(), 100 * r.data_wait_fraction(),
      r.host_data_wait_ms(), r.loss_size() ? r.loss(0) : 0.0f,
      r.loss_size() ? r.loss(r.loss_size() - 1) : 0.0f, r.loss_size(),
      r.setup_seconds() + r.all_steps_seconds() + r.finish_seconds(), r.setup_seconds(), r.loss_size(),
      r.all_steps_seconds(), r.finish_seconds(), EngineSummary(r)) +
         (r.step_runner().empty() ? "" : absl::StrCat("  ", r.step_runner(), ": its phases timed as one\n"));
}

}  // namespace ddplab
