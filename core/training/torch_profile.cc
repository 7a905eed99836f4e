#include "core/training/torch_profile.h"

#include "core/record/run_files.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include <torch/csrc/autograd/profiler_kineto.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/torch_compat.h"

namespace ddplab {
namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// The events of `result` as a Chrome trace of ours, where LibTorch has no Kineto to
// write its own.
absl::StatusOr<TorchProfile::Summary> WriteOwnTrace(const profiler::ProfilerResult& result, const std::string& path,
                                                    const TorchProfile::Job& job,
                                                    const TorchProfile::Summary& summary) {
  const int rank = job.rank;
  const auto& events = result.events();
  int64_t origin_ns = 0;
  bool any = false;
  for (const auto& e : events) {
    const int64_t start = compat::ProfilerEventStartNs(e);
    if (start <= 0) continue;
    origin_ns = any ? std::min(origin_ns, start) : start;
    any = true;
  }
  const int cpu_pid = 2 * rank, gpu_pid = 2 * rank + 1;
  std::string body;
  absl::StrAppendFormat(&body,
                        "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": "
                        "\"rank %d CPU\"}},\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
                        "\"args\": {\"name\": \"rank %d GPU\"}}",
                        cpu_pid, rank, gpu_pid, rank);
  for (const auto& e : events) {
    const int64_t start = compat::ProfilerEventStartNs(e);
    if (start <= 0) continue;  // an instant the profiler did not time
    const bool gpu = e.deviceType() == c10::DeviceType::CUDA;
    const double ts_us = static_cast<double>(start - origin_ns) / 1e3;
    const double dur_us = static_cast<double>(std::max<int64_t>(compat::ProfilerEventDurationNs(e), 0)) / 1e3;
    if (gpu) {
      absl::StrAppendFormat(&body,
                            ",\n{\"name\": %s, \"cat\": \"gpu\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, "
                            "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"stream\": %d, \"correlation\": %d}}",
                            JsonString(e.name()), gpu_pid, e.deviceResourceId(), ts_us, dur_us,
                            e.deviceResourceId(), e.correlationId());
    } else {
      absl::StrAppendFormat(&body,
                            ",\n{\"name\": %s, \"cat\": \"cpu\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, "
                            "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"correlation\": %d}}",
                            JsonString(e.name()), cpu_pid, e.startThreadId(), ts_us, dur_us,
                            e.correlationId());
    }
  }
  // distributedInfo as torch.profiler writes it for a distributed job: HTA groups the
  // ranks' traces by it, and refuses a trace without it.
  const std::string info = absl::StrFormat(
      "\"distributedInfo\": {\"backend\": %s, \"rank\": %d, \"world_size\": %d},\n", JsonString(job.backend),
      job.rank, job.world);
  if (absl::Status s = WriteFileAtomically(path, absl::StrCat("{", info, "\"traceEvents\": [\n", body, "\n]}\n"));
      !s.ok()) {
    return s;
  }
  return summary;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TorchProfile>> TorchProfile::Start(bool cuda) {
  // Without it Kineto leaves CUPTI attached after the profile, and whatever the process
  // runs next (the next experiment of a suite run in one process) runs slower.
  setenv("TEARDOWN_CUPTI", "1", /*overwrite=*/0);
  ProfilerConfig config(ProfilerState::KINETO);
  std::set<ActivityType> activities{ActivityType::CPU};
  if (cuda) activities.insert(ActivityType::CUDA);
  try {
    profiler::prepareProfiler(config, activities);
    profiler::enableProfiler(config, activities);
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(
        absl::StrCat("LibTorch's profiler did not start: ", compat::WhatWithoutBacktrace(e)));
  }
  std::unique_ptr<TorchProfile> profile(new TorchProfile());
  profile->running_ = true;
  return profile;
}

TorchProfile::~TorchProfile() {
  if (!running_) return;
  try {
    (void)profiler::disableProfiler();
  } catch (...) {
  }
}

absl::StatusOr<TorchProfile::Summary> TorchProfile::StopAndWrite(const std::string& path, const Job& job) {
  if (!running_) return absl::FailedPreconditionError("the profiler was already stopped");
  running_ = false;
  std::unique_ptr<profiler::ProfilerResult> result;
  try {
    result = profiler::disableProfiler();
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("LibTorch's profiler did not stop: ", compat::WhatWithoutBacktrace(e)));
  }
  if (!result) return absl::InternalError("LibTorch's profiler returned no result");
  Summary summary;
  for (const auto& e : result->events()) {
    if (compat::ProfilerEventStartNs(e) <= 0) continue;  // an instant the profiler did not time
    ++(e.deviceType() == c10::DeviceType::CUDA ? summary.gpu_events : summary.cpu_events);
  }
  // Kineto's own file, where LibTorch has Kineto (without it, save() says so).
  const std::string tmp = path + ".kineto";
  try {
    result->save(tmp);
  } catch (const std::exception& e) {
    std::remove(tmp.c_str());
    const std::string why = compat::WhatWithoutBacktrace(e);
    if (why.find("Kineto") != std::string::npos) return WriteOwnTrace(*result, path, job, summary);
    return absl::UnavailableError(absl::StrCat("cannot write ", path, ": LibTorch's profiler: ", why));
  }
  std::ifstream in(tmp);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(tmp.c_str());
  std::string trace = text.str();
  const size_t open = trace.find('{');
  if (!in || open == std::string::npos) {
    return absl::DataLossError(absl::StrCat("cannot write ", path, ": LibTorch's profiler wrote no JSON object"));
  }
  // What torch.profiler adds for a distributed job, and what HTA groups the ranks by.
  trace.insert(open + 1, absl::StrFormat("\n  \"distributedInfo\": {\"backend\": %s, \"rank\": %d, "
                                         "\"world_size\": %d},",
                                         JsonString(job.backend), job.rank, job.world));
  if (absl::Status s = WriteFileAtomically(path, trace); !s.ok()) return s;
  return summary;
}

}  // namespace ddplab
