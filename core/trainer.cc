#include "core/trainer.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include <torch/torch.h>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/build_flags.h"
#include "core/engine/engine.h"
#include "core/device_report.h"
#include "core/matmul_target.h"
#include "core/nvtx.h"
#include "core/sgd.h"
#include "core/synthetic_data.h"
#include "core/torch_profile.h"
#include "core/vit.h"
#include "google/protobuf/util/json_util.h"

#if defined(DDPLAB_CUDA)
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#endif

namespace ddplab {
namespace {

// The points of a step at which time is taken: start, after get batch, after forward,
// after backward, after the optimizer step.
enum Point { kStart, kBatch, kForward, kBackward, kOptimizer, kNumPoints };

// Plans the calling thread's matrix products for `multiprocessors` (0: all of the GPU's).
// The target stays on the thread's cuBLAS handle, so it is set only when it changes: not
// at all in runs that never ask for a carveout. Runs inside backward, so a failure
// throws, and backward reports it.
void TargetThisThread(int multiprocessors) {
  thread_local int applied = 0;
  if (applied == multiprocessors) return;
  if (absl::Status s = SetMatmulMultiprocessors(multiprocessors); !s.ok()) {
    throw std::runtime_error(absl::StrCat("distributed.backward_sm_carveout: ", s.message()));
  }
  applied = multiprocessors;
}

// Times the phases of measured steps: CUDA events on the compute stream on a GPU (read
// after the run, so nothing waits), the host clock on a CPU.
class StepTimer {
 public:
  StepTimer(bool cuda, int steps) : cuda_(cuda), host_(steps * kNumPoints) {
#if defined(DDPLAB_CUDA)
    if (cuda_) {
      for (int i = 0; i < steps * kNumPoints; ++i) events_.emplace_back(cudaEventDefault);
    }
#endif
  }

  void Mark(int step, Point point) {
    int i = step * kNumPoints + point;
#if defined(DDPLAB_CUDA)
    if (cuda_) {
      events_[i].record();
      return;
    }
#endif
    host_[i] = std::chrono::steady_clock::now();
  }

  // Milliseconds from `from` to `to` of `step`; valid once the device is synchronized.
  double Ms(int step, Point from, Point to) { return Between(step * kNumPoints + from, step * kNumPoints + to); }

  // Milliseconds from the first measured step's start to `point` of `step`.
  double Since(int step, Point point) { return Between(0, step * kNumPoints + point); }

 private:
  double Between(int a, int b) {
#if defined(DDPLAB_CUDA)
    if (cuda_) return events_[a].elapsed_time(events_[b]);
#endif
    return std::chrono::duration<double, std::milli>(host_[b] - host_[a]).count();
  }

  bool cuda_;
  std::vector<std::chrono::steady_clock::time_point> host_;
#if defined(DDPLAB_CUDA)
  std::vector<at::cuda::CUDAEvent> events_;
#endif
};

void Synchronize(const at::Device& device) {
#if defined(DDPLAB_CUDA)
  if (device.is_cuda()) {
    cudaDeviceSynchronize();
    return;
  }
#endif
  (void)device;
}

absl::StatusOr<at::Device> ChooseDevice(const v1::Experiment& e, int local_rank) {
  v1::Distributed::Device want = e.distributed().device();
  bool has_gpu = DDPLAB_CUDA_BUILD && torch::cuda::is_available();
  if (want == v1::Distributed::CPU || (want == v1::Distributed::DEVICE_UNSPECIFIED && !has_gpu)) {
    return at::Device(at::kCPU);
  }
  if (!DDPLAB_CUDA_BUILD) {
    return absl::FailedPreconditionError(absl::StrCat(
        "experiment \"", e.name(), "\" asks for distributed.device CUDA, but this is a CPU build"));
  }
  int count = static_cast<int>(torch::cuda::device_count());
  if (local_rank >= count) {
    return absl::FailedPreconditionError(absl::StrCat("experiment \"", e.name(), "\" needs GPU ",
                                                      local_rank, " but this machine has ", count));
  }
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
}

}  // namespace

absl::Status MakeDirectories(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    std::string prefix = path.substr(0, i);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::UnavailableError(
          absl::StrCat("cannot create directory ", prefix, ": ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

namespace {

absl::StatusOr<v1::RunResult> TrainOrThrow(const v1::Experiment& e, const TrainOptions& options) {
  const int local_rank = options.worker ? options.worker->local_rank : 0;
  const int rank = options.worker ? options.worker->rank : 0;
  const int world = options.worker ? options.worker->world_size : 1;
  absl::StatusOr<at::Device> device_or = ChooseDevice(e, local_rank);
  if (!device_or.ok()) return device_or.status();
  const at::Device device = *device_or;
  const bool cuda = device.is_cuda();
  const bool nvtx = e.profiling().nvtx();
#if defined(DDPLAB_CUDA)
  std::unique_ptr<c10::cuda::CUDAGuard> guard;
  if (cuda) guard = std::make_unique<c10::cuda::CUDAGuard>(device);
  // Everything below is queued on the current stream: a high-priority one if asked.
  std::optional<c10::cuda::CUDAStreamGuard> stream_guard;
  if (cuda && e.distributed().high_priority_compute()) {
    stream_guard.emplace(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device.index()));
  }
#endif
  absl::StatusOr<VitConfig> config = VitConfigForModel(e.model(), e.data().image_size());
  if (!config.ok()) return config.status();

  // The same weights on every run with the same seed, made on the host as PyTorch does.
  torch::manual_seed(e.data().seed());
  Vit model(*config);
  model->to(device);
  model->train();
  int64_t parameters = 0;
  for (const at::Tensor& p : model->parameters()) parameters += p.numel();
  const v1::Sgd& sgd = e.optimizer().sgd();
  Sgd optimizer(model->parameters(), sgd.learning_rate(), sgd.momentum(), sgd.weight_decay());

  // The data-parallel engine, for runs of several processes or when asked for.
  std::unique_ptr<DataParallelEngine> engine;
  if (world > 1 || e.distributed().force_engine()) {
    // One process alone (no worker environment) meets no one: its store is in memory.
    WorkerEnv env;
    if (options.worker) env = *options.worker;
    // NCCL reads its environment when the communicator is created.
    EnvironmentList nccl_variables = cuda ? NcclEnvironment(e.distributed()) : EnvironmentList();
    // Per-bucket timing on NCCL's stream, when asked for (it costs a little of the step).
    if (cuda && e.profiling().bucket_timing()) nccl_variables.emplace_back("TORCH_NCCL_ENABLE_TIMING", "1");
    ScopedEnvironment nccl_env(nccl_variables);
    GroupOptions group_options;
    group_options.nccl_channels = static_cast<int>(e.distributed().nccl_channels());
    absl::StatusOr<std::vector<ProcessGroupPtr>> group = CreateProcessGroups(
        env, cuda, std::chrono::seconds(e.distributed().timeout_seconds()), {group_options});
    if (!group.ok()) return group.status();
    engine = std::make_unique<DataParallelEngine>(model->parameters(), group->front(),
                                                  options.plugins ? options.plugins->engine_parts() : EngineParts());
    engine->BroadcastParameters();
    engine->SetParameterStep([&optimizer](const std::vector<size_t>& indices) { optimizer.StepParameters(indices); });
  }

  SyntheticData::Options data_options;
  data_options.batch_size = e.data().batch_size();
  data_options.image_size = e.data().image_size();
  data_options.num_classes = config->num_classes;
  data_options.num_workers = static_cast<int>(e.data().num_workers());
  data_options.pin_memory = e.data().pin_memory();
  data_options.prefetch = static_cast<int>(e.data().prefetch());
  data_options.task = e.data().task();
  data_options.seed = e.data().seed();
  data_options.rank = rank;
  data_options.device = device;
  SyntheticData data(data_options);

  // distributed.backward_sm_carveout: the multiprocessors backward's products are planned
  // for (0: all), set by a hook at the start of each backward on the thread that runs it
  // (for a GPU, autograd's own thread, whose cuBLAS handle is its own).
  int backward_sms = 0;
  if (cuda && e.distributed().backward_sm_carveout() > 0) {
    absl::StatusOr<int> sms = CurrentDeviceMultiprocessors();
    if (!sms.ok()) return sms.status();
    const int64_t carveout = e.distributed().backward_sm_carveout();
    if (carveout >= *sms) {
      return absl::InvalidArgumentError(absl::StrCat("distributed.backward_sm_carveout: ", carveout,
                                                     " leaves backward's products none of the GPU's ",
                                                     *sms, " multiprocessors"));
    }
    backward_sms = *sms - static_cast<int>(carveout);
    // cuBLAS has the target (checked here, on this thread, and left at its default).
    if (absl::Status s = SetMatmulMultiprocessors(0); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("distributed.backward_sm_carveout: ", s.message()));
    }
  }

  const int warmup = static_cast<int>(e.steps().warmup());
  const int measured = static_cast<int>(e.steps().measured());
  // Profiled steps (TrainOptions::torch_profile_path) follow the measured ones.
  const int profiled = options.torch_profile_path.empty() ? 0 : std::max(options.torch_profile_steps, 0);
  const int total = warmup + measured + profiled + static_cast<int>(e.steps().cooldown());
  std::unique_ptr<TorchProfile> profile;
  StepTimer timer(cuda, measured);
  std::vector<at::Tensor> losses;
  double host_wait_before = 0, host_wait_after = 0;  // around the measured steps
  std::chrono::steady_clock::time_point window_start, window_end;

  auto last_progress = std::chrono::steady_clock::now();
  const auto run_start = last_progress;
  for (int step = 0; step < total; ++step) {
    if (!options.progress_label.empty()) {
      auto now = std::chrono::steady_clock::now();
      if (now - last_progress > std::chrono::seconds(2) || step == total - 1) {
        double elapsed = std::chrono::duration<double>(now - run_start).count();
        std::fprintf(stderr, "\r%s: step %d/%d, %.2f steps/s ", options.progress_label.c_str(), step + 1,
                     total, elapsed > 0 ? step / elapsed : 0.0);
        if (step == total - 1) std::fprintf(stderr, "\n");
        std::fflush(stderr);
        last_progress = now;
      }
    }
    const int m = step - warmup;  // index among measured steps
    const bool timed = m >= 0 && m < measured;
    if (step == warmup) {
      Synchronize(device);
#if defined(DDPLAB_CUDA)
      if (cuda) {
        c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
        cudaProfilerStart();
      }
#endif
      host_wait_before = data.host_wait_seconds();
      if (engine) engine->StartTiming(/*bucket_times=*/e.profiling().bucket_timing());
      window_start = std::chrono::steady_clock::now();
    }
    if (profiled > 0 && step == warmup + measured) {
      if (engine) engine->PauseErrorSampling(true);
      Synchronize(device);
      absl::StatusOr<std::unique_ptr<TorchProfile>> started = TorchProfile::Start(cuda);
      if (!started.ok()) return started.status();
      profile = std::move(*started);
    }
    // The step's name is only built when NVTX is on: nothing on the hot path otherwise.
    NvtxRange batch_range(nvtx, nvtx ? absl::StrCat("Batch ", step).c_str() : "");
    if (timed) timer.Mark(m, kStart);
    // Gradient accumulation: micro-batches 0..n-2 accumulate locally, the last one
    // reduces. "get batch" and "forward" time the first micro-batch; "backward" runs from
    // there to the end of the last backward.
    const int micro_batches = static_cast<int>(e.steps().accumulation());
    at::Tensor loss;
    for (int micro = 0; micro < micro_batches; ++micro) {
      Batch batch;
      {
        NvtxRange r(nvtx, "get batch");
        RECORD_USER_SCOPE("get batch");  // for LibTorch's profiler, when on
        batch = data.Next();
      }
      if (timed && micro == 0) timer.Mark(m, kBatch);
      {
        NvtxRange r(nvtx, "forward");
        RECORD_USER_SCOPE("forward");  // for LibTorch's profiler, when on
        loss = at::cross_entropy_loss(model->forward(batch.images), batch.labels);
        if (micro_batches > 1) loss = loss / micro_batches;
      }
      if (timed && micro == 0) timer.Mark(m, kForward);
      {
        NvtxRange r(nvtx, "backward");
        RECORD_USER_SCOPE("backward");  // for LibTorch's profiler, when on
        if (micro == 0) {
          if (engine) {
            engine->ZeroGrad();
          } else {
            optimizer.ZeroGrad();
          }
        }
        const bool last = micro == micro_batches - 1;
        if (engine) engine->BeginStep(/*sync=*/last);
        // Every GPU run sets its own target (0 without a carveout), so that one run's does
        // not stay on autograd's thread for the next run of the same process.
        if (cuda) loss.register_hook([backward_sms](const at::Tensor&) { TargetThisThread(backward_sms); });
        loss.backward();
        if (engine) {
          if (absl::Status s = engine->EndBackward(); !s.ok()) {
            return absl::Status(s.code(), absl::StrCat("rank ", rank, ", step ", step, ": ", s.message()));
          }
        }
      }
    }
    if (timed) timer.Mark(m, kBackward);
    {
      NvtxRange r(nvtx, "optimizer step");
      RECORD_USER_SCOPE("optimizer step");  // for LibTorch's profiler, when on
      // With the optimizer overlapped, the engine updated every bucket's parameters as
      // its average came in.
      if (!engine || !engine->updated_parameters()) optimizer.Step();
    }
    if (timed) timer.Mark(m, kOptimizer);
    // The last micro-batch's loss, undivided.
    losses.push_back(micro_batches > 1 ? loss.detach() * static_cast<double>(micro_batches) : loss.detach());
    batch_range.End();
    if (profile && step == warmup + measured + profiled - 1) {
      if (engine) engine->PauseErrorSampling(false);
      Synchronize(device);
      absl::StatusOr<TorchProfile::Summary> written = profile->StopAndWrite(options.torch_profile_path, rank);
      profile.reset();
      if (!written.ok()) return written.status();
      if (cuda && written->gpu_events == 0) {
        std::cerr << "rank " << rank << ": the profile " << options.torch_profile_path
                  << " has no GPU activity: this LibTorch's profiler records none (no Kineto or CUPTI)\n";
      }
    }
    if (step == warmup + measured - 1) {
      Synchronize(device);
      window_end = std::chrono::steady_clock::now();
      host_wait_after = data.host_wait_seconds();
      if (engine) engine->FinishTiming();
#if defined(DDPLAB_CUDA)
      if (cuda) cudaProfilerStop();
#endif
    }
  }
  Synchronize(device);

  v1::RunResult r;
  r.set_suite(options.suite);
  r.set_experiment(e.name());
  r.set_date(absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()));
  DeviceReport report = CollectDeviceReport();
  r.set_device(cuda && static_cast<size_t>(device.index()) < report.gpus.size()
                   ? report.gpus[device.index()].name
                   : "cpu");
  r.set_world_size(world);
  r.set_torch_version(report.torch_version);
  r.set_cuda_runtime(report.cuda_runtime);
  r.set_nccl_version(report.nccl_version);
  r.set_model(e.model().has_vit() ? "custom" : v1::Model::Preset_Name(e.model().preset()));
  r.set_parameters(parameters);
  r.set_batch_size(e.data().batch_size());
  r.set_measured_steps(measured);
  double seconds = std::chrono::duration<double>(window_end - window_start).count();
  r.set_measured_seconds(seconds);
  r.set_steps_per_s(measured / seconds);
  const double samples_per_step = static_cast<double>(e.data().batch_size()) * e.steps().accumulation();
  r.set_samples_per_s(measured * samples_per_step * world / seconds);
  r.set_tflops_per_gpu(VitTrainingFlopsPerSample(*config) * samples_per_step * measured / seconds / 1e12);
#if defined(DDPLAB_CUDA)
  if (cuda) {
    r.set_peak_memory_gib(static_cast<double>(c10::cuda::CUDACachingAllocator::getDeviceStats(
                                                  device.index())
                                                  .allocated_bytes[0]
                                                  .peak) /
                          (1 << 30));
  }
#endif
  double sums[kNumPoints] = {};
  for (int m = 0; m < measured; ++m) {
    sums[kBatch] += timer.Ms(m, kStart, kBatch);
    sums[kForward] += timer.Ms(m, kBatch, kForward);
    sums[kBackward] += timer.Ms(m, kForward, kBackward);
    sums[kOptimizer] += timer.Ms(m, kBackward, kOptimizer);
    sums[kStart] += timer.Ms(m, kStart, kOptimizer);
  }
  if (!options.trace_path.empty()) {
    // This rank's timeline: each measured step and its phases, as Chrome trace events
    // (microseconds from the first measured step), on the track of this rank.
    std::string events;
    auto event = [&](const std::string& name, double from_ms, double to_ms) {
      absl::StrAppendFormat(&events, "%s{\"name\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": 0, "
                            "\"ts\": %.3f, \"dur\": %.3f}",
                            events.empty() ? "" : ",\n", name, rank, from_ms * 1e3, (to_ms - from_ms) * 1e3);
    };
    absl::StrAppendFormat(&events, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
                          "\"args\": {\"name\": \"rank %d\"}}", rank, rank);
    for (int m = 0; m < measured; ++m) {
      event(absl::StrCat("Batch ", warmup + m), timer.Since(m, kStart), timer.Since(m, kOptimizer));
      event("get batch", timer.Since(m, kStart), timer.Since(m, kBatch));
      event("forward", timer.Since(m, kBatch), timer.Since(m, kForward));
      event("backward", timer.Since(m, kForward), timer.Since(m, kBackward));
      event("optimizer step", timer.Since(m, kBackward), timer.Since(m, kOptimizer));
    }
    std::ofstream out(options.trace_path, std::ios::trunc);
    out << "[\n" << events << "\n]\n";
  }
  v1::PhaseTimes* phases = r.mutable_phases();
  phases->set_get_batch_ms(sums[kBatch] / measured);
  phases->set_forward_ms(sums[kForward] / measured);
  phases->set_backward_ms(sums[kBackward] / measured);
  phases->set_optimizer_ms(sums[kOptimizer] / measured);
  // Step time from the wall clock: the events miss the gaps between steps.
  phases->set_step_ms(seconds * 1e3 / measured);
  r.set_data_wait_fraction(phases->get_batch_ms() / phases->step_ms());
  r.set_host_data_wait_ms((host_wait_after - host_wait_before) * 1e3 / measured);
  for (const at::Tensor& loss : losses) r.add_loss(loss.item<float>());
  if (engine) {
    const EngineStats& stats = engine->stats();
    r.set_engine(true);
    r.set_engine_options(engine->Describe());
    for (int64_t bytes : stats.bucket_bytes) r.add_bucket_bytes(bytes);
    if (stats.timed_steps > 0) r.set_exposed_comm_ms(stats.exposed_comm_ms / stats.timed_steps);
    for (double ms : stats.bucket_allreduce_ms) r.add_bucket_allreduce_ms(ms);
    for (double gbps : stats.bucket_busbw_gbps) r.add_bucket_busbw_gbps(gbps);
    if (stats.gradient_error_samples > 0) {
      r.set_gradient_error(stats.gradient_error_sum / stats.gradient_error_samples);
      r.set_gradient_error_samples(stats.gradient_error_samples);
    }
    r.set_wire_bytes(stats.wire_bytes);
    r.set_wire_dtype(stats.wire_dtype);
    for (const auto& [name, value] : engine->hook_stats()) (*r.mutable_hook_stats())[name] = value;
    // The run is measured and kept whatever this says.
    if (absl::Status s = engine->ShutDown(); !s.ok()) std::cerr << "ddplab: rank " << rank << ": " << s << "\n";
  }
  r.set_transport(v1::Distributed::Transport_Name(e.distributed().transport()));
  if (options.plugins) {
    for (const LoadedPlugin* p : options.plugins->plugins()) r.add_plugins(p->name);
    r.set_diagnostic(options.plugins->diagnostic());
  }
  return r;
}


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
  if (r.gradient_error_samples() > 0) {
    absl::StrAppendFormat(&out, "; gradient error %.2e (%d sampled steps)", r.gradient_error(),
                          r.gradient_error_samples());
  }
  if (auto it = r.hook_stats().find("compression_ratio"); it != r.hook_stats().end()) {
    absl::StrAppendFormat(&out, "; compression %.1fx", it->second);
  }
  return out + "\n";
}

}  // namespace

absl::StatusOr<v1::RunResult> Train(const v1::Experiment& e, const TrainOptions& options) {
  // LibTorch and c10d report failures as exceptions: a collective that timed out because
  // another rank stalled, a peer that went away, a device out of memory. They end this
  // run with an error that says what happened, not with std::terminate.
  try {
    return TrainOrThrow(e, options);
  } catch (const std::exception& ex) {
    return absl::AbortedError(absl::StrCat("rank ", options.worker ? options.worker->rank : 0,
                                           ": training failed: ", compat::WhatWithoutBacktrace(ex)));
  }
}

std::string FormatRunSummary(const v1::RunResult& r) {
  const v1::PhaseTimes& p = r.phases();
  return absl::StrFormat(
      "%s: %.3f steps/s, %.1f samples/s, %.1f TFLOP/s per GPU, peak %.2f GiB (%s, %d process%s)\n"
      "  per step %.2f ms: get batch %.2f, forward %.2f, backward %.2f, optimizer %.2f\n"
      "  waiting for data: %.2f%% of the step on the device, %.3f ms per step on the host\n"
      "  loss %.4f -> %.4f over %d steps\n%s",
      r.experiment(), r.steps_per_s(), r.samples_per_s(), r.tflops_per_gpu(), r.peak_memory_gib(),
      r.device(), r.world_size(), r.world_size() == 1 ? "" : "es", p.step_ms(), p.get_batch_ms(),
      p.forward_ms(), p.backward_ms(), p.optimizer_ms(), 100 * r.data_wait_fraction(),
      r.host_data_wait_ms(), r.loss_size() ? r.loss(0) : 0.0f,
      r.loss_size() ? r.loss(r.loss_size() - 1) : 0.0f, r.loss_size(),
      EngineSummary(r));
}

absl::Status MergeTraces(const std::vector<std::string>& parts, const std::string& path) {
  std::string events;
  for (const std::string& part : parts) {
    std::ifstream in(part);
    std::stringstream text;
    text << in.rdbuf();
    std::string body = text.str();
    size_t open = body.find('['), close = body.rfind(']');
    if (!in || open == std::string::npos || close == std::string::npos || close < open) {
      return absl::DataLossError(absl::StrCat("trace part ", part, " is missing or not a JSON array"));
    }
    std::string inner(absl::StripAsciiWhitespace(body.substr(open + 1, close - open - 1)));
    if (inner.empty()) continue;
    absl::StrAppend(&events, events.empty() ? "" : ",\n", inner);
  }
  {
    std::ofstream out(path + ".tmp", std::ios::trunc);
    out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n" << events << "\n]}\n";
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  }
  if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  }
  for (const std::string& part : parts) std::remove(part.c_str());
  return absl::OkStatus();
}

absl::StatusOr<std::string> WriteRunResult(const v1::RunResult& result, const std::string& directory) {
  std::string dir = result.suite().empty() ? directory : absl::StrCat(directory, "/", result.suite());
  if (absl::Status s = MakeDirectories(dir); !s.ok()) return s;
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.add_whitespace = true;
  print.preserve_proto_field_names = true;
  print.always_print_primitive_fields = true;
  if (auto s = google::protobuf::util::MessageToJsonString(result, &json, print); !s.ok()) {
    return absl::InternalError(absl::StrCat("cannot encode result: ", s.ToString()));
  }
  std::string path = absl::StrCat(dir, "/", result.experiment(), ".json");
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json;
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot rename ", tmp, " to ", path, ": ",
                                               std::strerror(errno)));
  }
  return path;
}

}  // namespace ddplab
