#include "core/training/run_trace.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/record/run_files.h"

namespace ddplab {
namespace {

enum Track { kSteps = 0, kCommunication = 1 };

}  // namespace

RunTrace::RunTrace(int rank, Time origin) : rank_(rank), origin_(origin) {
  absl::StrAppendFormat(&events_,
                        "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": \"rank %d\"}},\n"
                        "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": "
                        "\"steps\"}},\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
                        "\"args\": {\"name\": \"communication\"}}",
                        rank, rank, rank, kSteps, rank, kCommunication);
}

RunTrace::Time RunTrace::AgreeOnOrigin(compat::CollectiveGroup& group, const at::Device& device, bool one_host,
                                       Time exit) {
  if (!one_host || group.getSize() == 1) return exit;
  std::vector<at::Tensor> ns{at::tensor({static_cast<int64_t>(exit.time_since_epoch().count())},
                                        at::TensorOptions().dtype(at::kLong)).to(device)};
  group.broadcast(ns)->wait();
  return Time(Time::duration(ns[0].cpu().item<int64_t>()));
}

double RunTrace::Ms(Time t) const { return std::chrono::duration<double, std::milli>(t - origin_).count(); }

void RunTrace::Event(absl::string_view name, int track, double from_ms, double to_ms, absl::string_view args) {
  absl::StrAppendFormat(&events_,
                        ",\n{\"name\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f%s}",
                        name, rank_, track, from_ms * 1e3, std::max(to_ms - from_ms, 0.0) * 1e3,
                        args.empty() ? "" : absl::StrCat(", \"args\": {", args, "}"));
}

void RunTrace::AddSteps(StepTimer& timer, int steps, int first_step) {
  auto at = [&](int m, Point p) { return Ms(timer.HostTime(m, p)); };
  for (int m = 0; m < steps; ++m) {
    Event(absl::StrCat("Batch ", first_step + m), kSteps, at(m, kStart), at(m, kOptimizer));
    Event("get batch", kSteps, at(m, kStart), at(m, kBatch));
    Event("forward", kSteps, at(m, kBatch), at(m, kForward));
    Event("backward", kSteps, at(m, kForward), at(m, kBackward));
    Event("optimizer step", kSteps, at(m, kBackward), at(m, kOptimizer));
  }
}

void RunTrace::AddBuckets(const EngineStats& stats) {
  const double shift = Ms(stats.timing_start);
  double previous_end = 0;
  int previous_step = -1;
  for (const CommTimer::BucketSpan& s : stats.bucket_spans) {
    if (s.step != previous_step) previous_end = s.launch_ms;
    const double from = std::max(s.launch_ms, previous_end);
    const int64_t bytes = s.bucket < static_cast<int>(stats.bucket_bytes.size()) ? stats.bucket_bytes[s.bucket] : 0;
    Event(absl::StrCat("bucket ", s.bucket, " all-reduce"), kCommunication, shift + from, shift + s.end_ms,
          absl::StrFormat("\"bucket\": %d, \"launched_ms\": %.3f, \"bytes\": %d", s.bucket, shift + s.launch_ms,
                          bytes));
    previous_end = std::max(previous_end, s.end_ms);
    previous_step = s.step;
  }
}

void RunTrace::AddSpan(absl::string_view name, Time from, Time to) { Event(name, kSteps, Ms(from), Ms(to)); }

absl::Status RunTrace::Write(const std::string& path) const {
  return WriteFileAtomically(path, absl::StrCat("[\n", events_, "\n]\n"));
}

}  // namespace ddplab
