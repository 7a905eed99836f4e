// cuda_graph: the training step as one CUDA graph. After a few eager steps it captures
// one whole step (forward, backward with the engine's bucket collectives, the optimizer
// step) and replays it every step after, the step's inputs copied into the graph's own.
// A replay launches the step's thousands of kernels and collectives with one call, so the
// GPU no longer waits for the host between them: what a short step (bf16 autocast)
// loses to launches and to the engine's host work in backward. It takes the trainer's
// step runner (core/training/step_runner.h), and refuses what a replay cannot repeat: a
// plugin that decides on the host from step to step, sampled gradient errors, foreach
// AdamW, several micro-batches, a CPU. PyTorch's form is torch.cuda.graph around a step of
// a DDP model (docs: "Usage with DistributedDataParallel"), which the report cannot write
// as a DDP argument.
#include <memory>
#include <string>

#include "core/plugin/plugin_api.h"
#include "plugins/cuda_graph/cuda_graph.pb.h"

#if defined(DDPLAB_CUDA)
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace {

using Config = ddplab::plugins::cuda_graph::v1::Config;

// Note [A graph's stream from the first step]
// A CUDA graph is captured from a stream other than the device's default one. Autograd
// keeps, in each parameter's gradient accumulator, the stream its first backward ran on,
// and accumulates there in every later backward (pytorch/pytorch#137483): had the eager
// steps run on the default stream, the captured backward would accumulate outside the
// capture. So the run's compute goes on one stream of its own from its first step
// (StepRunner::OwnStream), and the step is captured from that same stream, as Megatron-LM
// captures its full-iteration graphs from the stream its DDP was built on.

#if defined(DDPLAB_CUDA)
cudaStreamCaptureMode CaptureMode(Config::CaptureMode mode) {
  switch (mode) {
    case Config::GLOBAL:
      return cudaStreamCaptureModeGlobal;
    case Config::RELAXED:
      return cudaStreamCaptureModeRelaxed;
    default:
      return cudaStreamCaptureModeThreadLocal;
  }
}
#endif

class GraphRunner : public ddplab::StepRunner {
 public:
  GraphRunner(int eager_steps, Config::CaptureMode mode) : eager_steps_(eager_steps), mode_(mode) {}

  std::string Run(ddplab::TrainingStep& step) override {
    if (step.index() < eager_steps_) return step.Compute(step.NextInputs());
    if (!step.device().is_cuda()) return "cuda_graph: the step runs on " + step.device().str() + ", not a GPU";
#if defined(DDPLAB_CUDA)
    ddplab::StepInputs inputs = step.NextInputs();
    if (!graph_) {
      if (std::string error = Capture(step, inputs); !error.empty()) return error;
    } else {
      images_.copy_(inputs.images, /*non_blocking=*/true);
      labels_.copy_(inputs.labels, /*non_blocking=*/true);
    }
    // The capture queued nothing: its step runs as the replays do.
    step.Launch([this] { graph_->replay(); });
    return "";
#else
    return "cuda_graph: this is a CPU build";
#endif
  }

  bool OwnStream() const override { return true; }

  std::string Describe() const override {
    return "the step as one CUDA graph, captured after " + std::to_string(eager_steps_) + " eager step(s)";
  }

 private:
#if defined(DDPLAB_CUDA)
  // Captures one step of `inputs`, copied into the graph's own inputs, from the current
  // stream (Note [A graph's stream from the first step]). Every earlier step's work is
  // finished first, so that nothing outside the capture runs beside it.
  std::string Capture(ddplab::TrainingStep& step, const ddplab::StepInputs& inputs) {
    images_ = inputs.images.clone();
    labels_ = inputs.labels.clone();
    c10::cuda::device_synchronize();
    graph_ = std::make_unique<at::cuda::CUDAGraph>();
    std::string error;
    try {
      graph_->capture_begin({0, 0}, CaptureMode(mode_));
      error = step.Compute(ddplab::StepInputs{images_, labels_});
      graph_->capture_end();
    } catch (const std::exception& e) {
      error = e.what();
      error.resize(std::min(error.find("\nException raised from"), error.size()));
      Abandon();
    }
    if (!error.empty()) {
      graph_.reset();
      return "cuda_graph: capturing step " + std::to_string(step.index()) + " failed: " + error;
    }
    return "";
  }

  // Ends a capture that failed midway, if the stream still captures, so that the error
  // reaches the run instead of every later launch failing.
  static void Abandon() {
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
      cudaGraph_t partial = nullptr;
      if (cudaStreamEndCapture(stream, &partial) == cudaSuccess && partial) cudaGraphDestroy(partial);
    }
    (void)cudaGetLastError();
  }

  std::unique_ptr<at::cuda::CUDAGraph> graph_;
  at::Tensor images_, labels_;
#endif
  const int eager_steps_;
  [[maybe_unused]] const Config::CaptureMode mode_;  // read only in the CUDA build
};

class GraphRunnerFactory : public ddplab::StepRunnerFactory {
 public:
  GraphRunnerFactory(int eager_steps, Config::CaptureMode mode) : eager_steps_(eager_steps), mode_(mode) {}

  std::string Refusal(const ddplab::RunFacts& run) const override {
    if (!run.cuda) return "it captures GPU work, and the experiment runs on the CPU";
    if (run.accumulation > 1) {
      return "a step of " + std::to_string(run.accumulation) +
             " micro-batches (steps.accumulation) is not captured; leave accumulation at 1";
    }
    if (!run.optimizer_capturable) {
      return "AdamW's foreach form computes its bias corrections on the host each step, and a replay would "
             "repeat the captured ones: leave optimizer.foreach false, on a LibTorch with fused AdamW (2.3 or later)";
    }
    if (!run.sampling_plugins.empty()) {
      return "plugin \"" + run.sampling_plugins.front() +
             "\" samples its gradient error on some steps, which the host decides and a replay would not; set its "
             "sample_error_every to 0";
    }
    if (run.warmup_steps < eager_steps_ + 2) {
      return "the capture and at least one replay after it must be warm-up steps: steps.warmup must be at least " +
             std::to_string(eager_steps_ + 2) + " (eager_steps + 2), got " + std::to_string(run.warmup_steps);
    }
    return "";
  }

  std::unique_ptr<ddplab::StepRunner> Make() const override {
    return std::make_unique<GraphRunner>(eager_steps_, mode_);
  }

 private:
  const int eager_steps_;
  const Config::CaptureMode mode_;
};

void Register(const Config& config, ddplab::PluginRegistrar& registrar) {
  const int eager_steps = config.has_eager_steps() ? static_cast<int>(config.eager_steps()) : 3;
  if (eager_steps < 2) {
    registrar.RejectField("eager_steps",
                          "must be at least 2: the engine regroups its buckets at the start of the second step "
                          "(a broadcast and a copy to the host), which a captured step cannot do");
    return;
  }
  registrar.SetStepRunner(std::make_shared<GraphRunnerFactory>(eager_steps, config.capture_mode()));
  ddplab::PyTorchForm form;
  form.not_in_pytorch = {"cuda_graph (PyTorch: torch.cuda.graph around the step, no DDP argument)"};
  registrar.DescribeInPyTorch(form);
}

}  // namespace

DDPLAB_PLUGIN("cuda_graph", "1.0.1", Config, ddplab::PluginStatus::kExperimental, Register)
