#include "core/training/trainer.h"

#include <csignal>
#include <cstring>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/build_flags.h"
#include "core/record/device_report.h"
#include "core/record/gpu_peak.h"
#include "core/engine/engine.h"
#include "core/fidelity/error_sampler.h"
#include "core/fidelity/fidelity_result.h"
#include "core/training/device.h"
#include "core/training/nvtx.h"
#include "core/training/progress.h"
#include "core/plugin/pytorch_form.h"
#include "core/training/run_trace.h"
#include "core/optim/optimizer.h"
#include "core/training/precision.h"
#include "core/training/step_runner.h"
#include "core/training/step_timer.h"
#include "core/training/step_work.h"
#include "core/training/torch_profile.h"
#include "core/model/trained_model.h"

#if defined(DDPLAB_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#endif

namespace ddplab {

namespace {
volatile sig_atomic_t g_stop_signal = 0;  // RequestStop's
}  // namespace

void RequestStop(int signal) { g_stop_signal = signal; }
int StopRequested() { return g_stop_signal; }
namespace {

// One process's run of an experiment: Setup, then every step, then the Result.
class Training {
 public:
  Training(const v1::Experiment& e, const TrainOptions& options, at::Device device)
      : e_(e),
        options_(options),
        device_(device),
        cuda_(device.is_cuda()),
        nvtx_(e.profiling().nvtx()),
        rank_(options.worker ? options.worker->rank : 0),
        world_(options.worker ? options.worker->world_size : 1),
        warmup_(static_cast<int>(e.steps().warmup())),
        measured_(static_cast<int>(e.steps().measured())),
        // Profiled steps (TrainOptions::torch_profile_path) follow the measured ones.
        profiled_(options.torch_profile_path.empty() ? 0 : std::max(options.torch_profile_steps, 0)),
        timer_(cuda_, measured_),
        progress_(options.progress_label, static_cast<int>(e.steps().warmup())) {}

  absl::Status Setup();
  absl::Status Steps();
  absl::StatusOr<v1::RunResult> Result();

 private:
  absl::Status StartEngine();
  absl::Status BeforeStep(int step);
  absl::Status Step(int step);
  absl::Status AfterStep(int step);
  absl::Status Barrier(bool opening);
  absl::Status FillPhases(v1::RunResult& r);
  void FillEngine(v1::RunResult& r);

  const v1::Experiment& e_;
  const TrainOptions& options_;
  const at::Device device_;
  const bool cuda_, nvtx_;
  const int rank_, world_, warmup_, measured_, profiled_;
#if defined(DDPLAB_CUDA)
  std::optional<c10::cuda::CUDAGuard> guard_;
  std::optional<c10::cuda::CUDAStreamGuard> stream_guard_;
#endif
  std::unique_ptr<TrainedModel> model_;
  int64_t parameters_ = 0;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<DataParallelEngine> engine_;
  std::shared_ptr<ErrorSampler> sampler_;  // a lossy plugin's error, where it asks
  ProcessGroupPtr group_;  // the engine's
  std::unique_ptr<BatchSource> data_;
  std::unique_ptr<TorchProfile> profile_;
  StepTimer timer_;
  Progress progress_;
  // What runs each step: a plugin's runner, or none (the step's work, eagerly).
  std::unique_ptr<StepRunner> runner_;
  std::unique_ptr<StepWork> work_;
  std::vector<at::Tensor> losses_;
  double host_wait_before_ = 0, host_wait_after_ = 0;  // around the measured steps
  std::chrono::steady_clock::time_point window_start_, window_end_, trace_origin_;
  // The barrier after the measured window, as this rank entered and left it.
  std::chrono::steady_clock::time_point closing_enter_, closing_exit_;
};

absl::Status Training::Setup() {
  if (options_.plugins && options_.plugins->step_runner()) runner_ = options_.plugins->step_runner()->Make();
#if defined(DDPLAB_CUDA)
  if (cuda_) guard_.emplace(device_);
  // Everything below is queued on the current stream: a high-priority one if asked, one of
  // its own where the step runner asks.
  const bool high_priority = e_.distributed().high_priority_compute();
  if (cuda_ && (high_priority || (runner_ && runner_->OwnStream()))) {
    stream_guard_.emplace(c10::cuda::getStreamFromPool(high_priority, device_.index()));
  }
#endif
  // A ViT with the same weights on every run with the same seed, made on the host as
  // PyTorch does (once per process: Note [Initial weights kept], initial_weights.h), or
  // the module the experiment names.
  absl::StatusOr<std::unique_ptr<TrainedModel>> model = MakeTrainedModel(e_, device_);
  if (!model.ok()) return model.status();
  model_ = *std::move(model);
  for (const at::Tensor& p : model_->parameters()) parameters_ += p.numel();
  optimizer_ = MakeOptimizer(e_.optimizer(), model_->parameters());
  if (runner_) {
    if (absl::Status s = options_.plugins->VetStepRunner(e_, optimizer_->capturable()); !s.ok()) return s;
  }
  if (absl::Status s = SetMatmulPrecision(e_.precision(), device_); !s.ok()) return s;
  // The data-parallel engine, for runs of several processes or when asked for.
  if (world_ > 1 || e_.distributed().force_engine()) {
    if (absl::Status s = StartEngine(); !s.ok()) return s;
  }
  data_ = model_->MakeData(e_, rank_, device_);
  work_ = std::make_unique<StepWork>(
      StepWork::Parts{e_, *model_, *optimizer_, engine_.get(), *data_, timer_, nvtx_, rank_, device_});
  return absl::OkStatus();
}

absl::Status Training::StartEngine() {
  // One process alone (no worker environment) meets no one: its store is in memory.
  WorkerEnv env;
  if (options_.worker) env = *options_.worker;
  // NCCL reads its environment when the communicator is created.
  EnvironmentList nccl_variables = cuda_ ? NcclEnvironment(e_.distributed()) : EnvironmentList();
  // Per-bucket timing on NCCL's stream, when asked for (it costs a little of the step).
  if (cuda_ && e_.profiling().bucket_timing()) nccl_variables.emplace_back("TORCH_NCCL_ENABLE_TIMING", "1");
  ScopedEnvironment nccl_env(nccl_variables);
  GroupOptions group_options;
  group_options.nccl_channels = static_cast<int>(e_.distributed().nccl_channels());
  const std::chrono::seconds timeout(e_.distributed().timeout_seconds());
  // The ranks meet at the store once: the process group, then the hooks that meet their
  // peers outside it (CommContext::store).
  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store =
      options_.store ? absl::StatusOr<c10::intrusive_ptr<c10d::Store>>(options_.store) : OpenRendezvousStore(env, timeout);
  if (!store.ok()) return store.status();
  absl::StatusOr<std::vector<ProcessGroupPtr>> group = CreateProcessGroups(env, cuda_, timeout, {group_options}, *store);
  if (!group.ok()) return group.status();
  group_ = group->front();
  EngineParts parts = options_.plugins ? options_.plugins->engine_parts() : EngineParts();
  if (options_.plugins) sampler_ = AddErrorSampler(model_->parameters(), options_.plugins->sample_error_every(), parts);
  engine_ = std::make_unique<DataParallelEngine>(model_->parameters(), group_, parts, *store);
  engine_->SetParameterNames(model_->parameter_names());
  engine_->BroadcastParameters();
  Optimizer* optimizer = optimizer_.get();
  engine_->SetParameterStep([optimizer](const std::vector<size_t>& indices, const std::vector<at::Tensor>& grads) {
    optimizer->StepParameters(indices, grads);
  });
  engine_->SetOptimizerMaker(OptimizersOf(e_.optimizer()));
  return absl::OkStatus();
}

// Waits for every rank (nothing for one process: Note [One process issues no
// collective], engine.cc). `opening` the measured window: its end is the trace's time 0
// (Note [One clock for all ranks], run_trace.h).
absl::Status Training::Barrier(bool opening) {
  if (!group_ || world_ == 1) return absl::OkStatus();
  try {
    group_->barrier()->wait();
    const bool one_host = !options_.worker || !SeveralNodes(*options_.worker);
    if (opening) trace_origin_ = RunTrace::AgreeOnOrigin(*group_, device_, one_host, std::chrono::steady_clock::now());
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("rank ", rank_, ": the barrier around the measured steps failed: ",
                                               compat::WhatWithoutBacktrace(e)));
  }
  return absl::OkStatus();
}

absl::Status Training::Steps() {
  const int total = warmup_ + measured_ + profiled_ + static_cast<int>(e_.steps().cooldown());
  for (int step = 0; step < total; ++step) {
    progress_.Update(step, total);
    if (const int sig = StopRequested(); sig != 0 && world_ == 1) {
      return absl::CancelledError(absl::StrCat("stopped by signal ", sig, " (", strsignal(sig), ") at step ",
                                               step + 1, " of ", total));
    }
    if (absl::Status s = BeforeStep(step); !s.ok()) return s;
    if (options_.plugins) {
      for (const auto& callbacks : options_.plugins->step_callbacks()) callbacks->OnStepBegin(step);
    }
    if (absl::Status s = Step(step); !s.ok()) return s;
    if (options_.plugins) {
      for (const auto& callbacks : options_.plugins->step_callbacks()) callbacks->OnStepEnd(step);
    }
    if (absl::Status s = AfterStep(step); !s.ok()) return s;
  }
  Synchronize(device_);
  if (options_.trained_state) {
    for (const at::Tensor& p : model_->parameters()) options_.trained_state->push_back(p.detach().cpu().clone());
    for (const at::Tensor& b : model_->buffers()) options_.trained_state->push_back(b.detach().cpu().clone());
  }
  return absl::OkStatus();
}

// The measured window starts, or the profiled steps.
absl::Status Training::BeforeStep(int step) {
  if (engine_ && step == warmup_ - 1) engine_->RecordReadyTimes();  // for the tuner
  if (step == warmup_) {
    Synchronize(device_);
    // First: it frees what sampling the warm-up held, before the peak is reset.
    if (sampler_) sampler_->DropWindow();
    if (engine_) engine_->StartTiming(/*bucket_times=*/e_.profiling().bucket_timing());
#if defined(DDPLAB_CUDA)
    if (cuda_) {
      c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index());
      cudaProfilerStart();
    }
#endif
    host_wait_before_ = data_->host_wait_seconds();
    trace_origin_ = std::chrono::steady_clock::now();
    if (absl::Status s = Barrier(/*opening=*/true); !s.ok()) return s;
    window_start_ = std::chrono::steady_clock::now();
  }
  if (profiled_ > 0 && step == warmup_ + measured_) {
    if (sampler_) sampler_->Pause(true);
    Synchronize(device_);
    absl::StatusOr<std::unique_ptr<TorchProfile>> started = TorchProfile::Start(cuda_);
    if (!started.ok()) return started.status();
    profile_ = std::move(*started);
  }
  return absl::OkStatus();
}

absl::Status Training::Step(int step) {
  const int m = step - warmup_;  // index among measured steps
  const bool timed = m >= 0 && m < measured_;
  // The step's name is only built when NVTX is on: nothing on the hot path otherwise.
  NvtxRange batch_range(nvtx_, nvtx_ ? absl::StrCat("Batch ", step).c_str() : "");
  if (timed) timer_.Mark(m, kStart);
  work_->Begin(step, timed ? m : -1);
  if (absl::Status s = runner_ ? work_->Ran(runner_->Run(*work_)) : work_->RunEagerly(); !s.ok()) return s;
  losses_.push_back(work_->loss());
  return absl::OkStatus();
}

// The profiled steps or the measured window end.
absl::Status Training::AfterStep(int step) {
  if (profile_ && step == warmup_ + measured_ + profiled_ - 1) {
    if (sampler_) sampler_->Pause(false);
    Synchronize(device_);
    absl::StatusOr<TorchProfile::Summary> written = profile_->StopAndWrite(
        options_.torch_profile_path, TorchProfile::Job{rank_, world_, cuda_ ? "nccl" : "gloo"});
    profile_.reset();
    if (!written.ok()) return written.status();
    if (cuda_ && written->gpu_events == 0) {
      std::cerr << "rank " << rank_ << ": the profile " << options_.torch_profile_path
                << " has no GPU activity: this LibTorch's profiler records none (no Kineto or CUPTI)\n";
    }
  }
  if (step == warmup_ + measured_ - 1) {
    Synchronize(device_);
    window_end_ = std::chrono::steady_clock::now();
    host_wait_after_ = data_->host_wait_seconds();
    if (engine_) engine_->FinishTiming();
#if defined(DDPLAB_CUDA)
    if (cuda_) cudaProfilerStop();
#endif
    closing_enter_ = std::chrono::steady_clock::now();
    if (absl::Status s = Barrier(/*opening=*/false); !s.ok()) return s;
    closing_exit_ = std::chrono::steady_clock::now();
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::RunResult> Training::Result() {
  v1::RunResult r;
  r.set_suite(options_.suite);
  r.set_experiment(e_.name());
  *r.mutable_resolved() = e_;
  r.set_schema(kResultSchema);
  r.set_date(absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()));
  // Once per process: it asks nvidia-smi, and a worker's device does not change.
  static const DeviceReport report = CollectDeviceReport();
  r.set_device(cuda_ && static_cast<size_t>(device_.index()) < report.gpus.size() ? report.gpus[device_.index()].name
                                                                                   : "cpu");
  r.set_world_size(world_);
  r.set_torch_version(report.torch_version);
  r.set_cuda_runtime(report.cuda_runtime);
  r.set_nccl_version(report.nccl_version);
  r.set_model(model_->name());
  r.set_model_digest(model_->digest());
  r.set_parameters(parameters_);
  r.set_batch_size(e_.data().batch_size());
  r.set_measured_steps(measured_);
  const double seconds = std::chrono::duration<double>(window_end_ - window_start_).count();
  r.set_measured_seconds(seconds);
  r.set_steps_per_s(measured_ / seconds);
  const double samples_per_step = static_cast<double>(e_.data().batch_size()) * e_.steps().accumulation();
  r.set_samples_per_s(measured_ * samples_per_step * world_ / seconds);
  if (const double flops = model_->training_flops_per_sample(); flops > 0) {
    r.set_tflops_per_gpu(flops * samples_per_step * measured_ / seconds / 1e12);
  }
  r.set_precision(PrecisionWord(e_.precision()));
  r.set_optimizer_kernels(optimizer_->fused() ? "fused" : "foreach");
  if (runner_) r.set_step_runner(runner_->Describe());
  if (std::optional<double> peak = PeakTflops(r.device(), e_.precision()); peak && cuda_) {
    r.set_peak_fraction(r.tflops_per_gpu() / *peak);
  }
#if defined(DDPLAB_CUDA)
  if (cuda_) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index());
    r.set_peak_memory_gib(static_cast<double>(stats.allocated_bytes[0].peak) / (1 << 30));
  }
#endif
  if (absl::Status s = FillPhases(r); !s.ok()) return s;
  r.set_host_data_wait_ms((host_wait_after_ - host_wait_before_) * 1e3 / measured_);
  for (const at::Tensor& loss : losses_) r.add_loss(loss.item<float>());
  if (engine_) FillEngine(r);
  if (options_.after_steps && group_ && world_ > 1) {
    if (absl::Status s = options_.after_steps(*group_, device_, r); !s.ok()) return s;
  }
  // First what the runner holds: NCCL ends a communicator only once no CUDA graph that
  // uses it is left (2.26 and later; ncclCommDestroy waits for them, for ever).
  work_.reset();
  runner_.reset();
  // The run is measured and kept whatever this says.
  if (absl::Status s = engine_ ? engine_->ShutDown() : absl::OkStatus(); !s.ok()) {
    std::cerr << "ddplab: rank " << rank_ << ": " << s << "\n";
  }
  r.set_transport(v1::Distributed::Transport_Name(e_.distributed().transport()));
  if (options_.plugins) {
    for (const LoadedPlugin* p : options_.plugins->plugins()) {
      r.add_plugins(p->name);
      *r.add_plugin_builds() = BuildRecord(*p);
    }
    r.set_diagnostic(options_.plugins->diagnostic());
    r.set_lossy(options_.plugins->lossy());
    std::vector<std::string> ddplab_only;
    r.set_pytorch(PyTorchCode(e_, world_, {r.plugins().begin(), r.plugins().end()},
                              options_.plugins->pytorch_forms(), &ddplab_only));
    for (const std::string& lever : ddplab_only) r.add_ddplab_only(lever);
  }
  // A run whose loss stopped being a number trained nothing: it fails, named, and never
  // wins a comparison.
  for (int i = 0; i < r.loss_size(); ++i) {
    if (std::isfinite(r.loss(i))) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", rank_, ": training diverged: the loss is ", r.loss(i), " at step ", i + 1, " of ", r.loss_size(),
        " (the learning rate, AdamW's eps in float32 or the weight decay may be out of range): not measured"));
  }
  return r;
}

// Each phase's mean over the measured steps; this rank's timeline of them, where asked.
absl::Status Training::FillPhases(v1::RunResult& r) {
  double sums[kNumPoints] = {};
  for (int m = 0; m < measured_; ++m) {
    sums[kBatch] += timer_.Ms(m, kStart, kBatch);
    sums[kForward] += timer_.Ms(m, kBatch, kForward);
    sums[kBackward] += timer_.Ms(m, kForward, kBackward);
    sums[kOptimizer] += timer_.Ms(m, kBackward, kOptimizer);
  }
  if (!options_.trace_path.empty()) {
    RunTrace trace(rank_, trace_origin_);
    trace.AddSteps(timer_, measured_, warmup_);
    if (engine_) trace.AddBuckets(engine_->stats());
    if (group_ && world_ > 1) trace.AddSpan("barrier", closing_enter_, closing_exit_);
    if (absl::Status written = trace.Write(options_.trace_path); !written.ok()) return written;
  }
  v1::PhaseTimes* phases = r.mutable_phases();
  phases->set_get_batch_ms(sums[kBatch] / measured_);
  phases->set_forward_ms(sums[kForward] / measured_);
  phases->set_backward_ms(sums[kBackward] / measured_);
  phases->set_optimizer_ms(sums[kOptimizer] / measured_);
  // Step time from the wall clock: the events miss the gaps between steps.
  phases->set_step_ms(r.measured_seconds() * 1e3 / measured_);
  r.set_data_wait_fraction(phases->get_batch_ms() / phases->step_ms());
  return absl::OkStatus();
}

void Training::FillEngine(v1::RunResult& r) {
  const EngineStats& stats = engine_->stats();
  r.set_engine(true);
  r.set_engine_options(engine_->Describe());
  for (int64_t bytes : stats.bucket_bytes) r.add_bucket_bytes(bytes);
  if (stats.timed_steps > 0) r.set_exposed_comm_ms(stats.exposed_comm_ms / stats.timed_steps);
  for (double ms : stats.bucket_allreduce_ms) r.add_bucket_allreduce_ms(ms);
  for (double gbps : stats.bucket_busbw_gbps) r.add_bucket_busbw_gbps(gbps);
  const std::vector<std::string> names = model_->parameter_names();
  if (sampler_) FillFidelity(sampler_->stats(), names, r);
  r.set_wire_bytes(stats.sent_bytes);
  r.set_sent_dtype(stats.sent_dtype);
  for (const auto& [name, value] : engine_->hook_stats()) (*r.mutable_hook_stats())[name] = value;
  const std::vector<at::Tensor> parameters = model_->parameters();
  for (const auto& [index, ms] : stats.gradient_ready_ms) {
    v1::GradientReady* g = r.add_gradient_ready();
    g->set_parameter(static_cast<int32_t>(index));
    g->set_ready_ms(ms);
    if (index >= names.size()) continue;
    g->set_name(names[index]);
    g->set_bytes(parameters[index].numel() * parameters[index].element_size());
  }
}

absl::StatusOr<v1::RunResult> TrainOrThrow(const v1::Experiment& e, const TrainOptions& options) {
  absl::StatusOr<at::Device> device = ChooseDevice(e, options.worker ? options.worker->local_rank : 0);
  if (!device.ok()) return device.status();
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  const Clock::time_point start = Clock::now();
  Training training(e, options, *device);
  if (absl::Status s = training.Setup(); !s.ok()) return s;
  const Clock::time_point first_step = Clock::now();
  if (absl::Status s = training.Steps(); !s.ok()) return s;
  const Clock::time_point last_step = Clock::now();
  absl::StatusOr<v1::RunResult> r = training.Result();
  if (r.ok()) {
    r->set_setup_seconds(seconds(start, first_step));
    r->set_all_steps_seconds(seconds(first_step, last_step));
    r->set_finish_seconds(seconds(last_step, Clock::now()));
  }
  return r;
}

}  // namespace

absl::StatusOr<v1::RunResult> Train(const v1::Experiment& e, const TrainOptions& options) {
  // LibTorch and c10d report failures as exceptions: a collective that timed out because
  // another rank stalled, a peer that went away, a device out of memory. They end this
  // run with an error that says what happened, not with std::terminate.
  try {
    absl::StatusOr<v1::RunResult> result = TrainOrThrow(e, options);
    ReleaseCachedMemory();
    return result;
  } catch (const std::exception& ex) {
    ReleaseCachedMemory();
    return absl::AbortedError(absl::StrCat("rank ", options.worker ? options.worker->rank : 0,
                                           ": training failed: ", compat::WhatWithoutBacktrace(ex)));
  }
}

}  // namespace ddplab
