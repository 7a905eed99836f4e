// A worker for the plugins' multi-process tests (plugins/testing/plugin_testutil.h),
// started by the launcher as one of N ranks.
//
// Trains the tiny ViT with the data-parallel engine (Gloo, or NCCL with --cuda) and the
// plugins of --plugins (text format, loaded through the plugin host from the runfiles)
// on its rank's batches and, beside it, a reference model in this process on the batches
// of all ranks concatenated (what an exact all-reduce gives). Checks every step that the
// engine's averaged gradients equal the reference's within --grad_tolerance (relative),
// at the end that parameters are identical on all ranks, and, with --loss_tolerance, that
// the loss on held-out samples is at most that fraction above the reference model's. The
// --expect_* flags add what a plugin promises. (A run that checks no gradient,
// --grad_tolerance < 0, trains the reference on rank 0 alone, which checks the loss: the
// parameters are the same on every rank, checked bit for bit.)
//
// Started by a pool (core/launch/worker_pool.h; plugin_testutil's TrainAndCompare keeps
// one of 3 ranks), it takes its flags task by task instead: each task is one run with
// the flags the line gives (EncodeWorkerFlags), every other flag at its default, meeting
// the other ranks under a store prefix of the task's own; with --world, on the job's
// first ranks only (a pool of 3 serves runs of 2). A failed run ends the worker with its
// code.
//
// Exit codes: 0 pass, 10 gradients differ, 11 parameters differ between ranks,
// 12 engine error, 13 setup error, 14 loss differs, 15 wrong dtype on the wire, 16 a
// gradient is not a bucket view, 17 buckets hold memory, 18 the last step's gradient is
// still held, 19 the engine did (not) update the parameters against --expect_updated,
// 24 the unused parameter (--unused_parameter) was given a gradient other than zero,
// 25 the result (--result_dir) could not be written, 26 --precision=bf16's forward did
// not compute in bfloat16, 27 the gradients' targets were not as --expect_targets says.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include <torch/utils.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "core/engine/engine.h"
#include "core/gradient_targets/gradient_targets.h"
#include "core/config/experiment.h"
#include "core/fidelity/error_sampler.h"
#include "core/fidelity/fidelity_result.h"
#include "core/record/run_files.h"
#include "core/plugin/plugin_host.h"
#include "tools/cpp/runfiles/runfiles.h"
#include "core/launch/distributed.h"
#include "core/launch/worker_pool.h"
#include "core/testing/worker_flags.h"
#include "core/optim/optimizer.h"
#include "core/training/precision.h"
#include "core/data/synthetic_data.h"
#include "core/model/vit.h"

ABSL_FLAG(bool, unused_parameter, false,
          "the engine also gets a parameter the model never uses (needs static_graph): its gradient "
          "must stay zero, and the others' must not change");
ABSL_FLAG(int, steps, 3, "");
ABSL_FLAG(int, timed_from, 1,
          "the step from which the engine times (and so no longer samples the gradient error); < 0: never");
ABSL_FLAG(int, accumulate, 1, "micro-steps per optimizer step");
ABSL_FLAG(std::string, plugins, "", "plugin entries in text format, e.g. 'plugin { bf16 {} }'");
ABSL_FLAG(double, grad_tolerance, 1e-5, "largest relative gradient error; < 0: not checked");
ABSL_FLAG(double, loss_tolerance, -1, "largest relative loss difference at the end; < 0: not checked");
ABSL_FLAG(double, param_tolerance, -1,
          "largest relative error of the parameters against the reference's after each step; < 0: not checked");
ABSL_FLAG(std::string, wire_dtype, "", "the dtype the engine must send in, if given");
ABSL_FLAG(double, lr, 0.05, "");
ABSL_FLAG(double, momentum, 0, "");
ABSL_FLAG(double, weight_decay, 0, "");
ABSL_FLAG(std::string, optimizer, "sgd", "sgd (--lr, --momentum, --weight_decay) or adamw (--lr, PyTorch's defaults)");
ABSL_FLAG(std::string, precision, "float32", "float32, or bf16: autocast around both sides' forward and loss");
ABSL_FLAG(int, batch, 4, "samples per rank per micro-step");
ABSL_FLAG(bool, cuda, false, "on the GPU of LOCAL_RANK over NCCL instead of the CPU over Gloo");
ABSL_FLAG(bool, expect_views, false, "every gradient is a view into a bucket after a synced step");
ABSL_FLAG(bool, expect_no_bucket_memory, false, "the buckets hold no memory");
ABSL_FLAG(std::string, expect_targets, "",
          "all: every parameter has a target for its gradient when a step begins (Note [Gradients written "
          "where they go]), and the encoder blocks' backward takes some (their casts under bf16, their "
          "products in float32); none: no parameter has one; empty: not checked");
ABSL_FLAG(bool, expect_updated, false, "the engine updates the parameters itself, per bucket");
ABSL_FLAG(int, world, 0,
          "a pool's task only: the run's ranks, the job's first ones (0: all of them); the others sit it out");
ABSL_FLAG(std::string, result_dir, "",
          "rank 0 writes what the engine measured there, as a run's result records it, to "
          "<result_dir>/engine_worker.json: the gradient error and fidelity, the hook's figures");

namespace ddplab {
namespace {

at::Device g_device = at::kCPU;

Batch MakeBatch(int rank, int64_t index) {
  const int64_t n = absl::GetFlag(FLAGS_batch);
  SyntheticData::Options o;
  o.batch_size = n;
  o.image_size = 32;
  o.num_classes = 10;
  o.task = v1::Data::LEARNABLE;
  o.seed = 11;
  o.rank = rank;
  SyntheticData data(o);
  Batch b;
  b.images = at::empty({n, 3, 32, 32});
  b.labels = at::empty({n}, at::kLong);
  data.Generate(index, b.images, b.labels);
  b.images = b.images.to(g_device);
  b.labels = b.labels.to(g_device);
  return b;
}

double RelativeError(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff += (got[i].to(at::kDouble) - want[i].to(at::kDouble)).pow(2).sum().item<double>();
    norm += want[i].to(at::kDouble).pow(2).sum().item<double>();
  }
  return std::sqrt(diff / norm);
}

// With --result_dir, on rank 0: what the engine measured, as the trainer records it
// (core/fidelity/fidelity_result.h). False if it could not be written.
bool WriteResult(int rank, Vit& model, const DataParallelEngine& engine, const ErrorSampler* sampler) {
  const std::string dir = absl::GetFlag(FLAGS_result_dir);
  if (dir.empty() || rank != 0) return true;
  v1::RunResult result;
  result.set_experiment("engine_worker");
  if (sampler) FillFidelity(sampler->stats(), model->named_parameters().keys(), result);
  for (const auto& [name, value] : engine.hook_stats()) (*result.mutable_hook_stats())[name] = value;
  if (absl::Status s = WriteRunResult(result, dir).status(); !s.ok()) {
    std::cerr << "rank " << rank << ": " << s << "\n";
    return false;
  }
  return true;
}

// Whether anything but `t` itself still holds its tensor or storage after a grace of up to
// 2 s: Gloo's worker thread lets go of a collective's tensors only after the wait on it
// has returned, a moment a busy machine can stretch; a gradient kept by the engine stays.
bool StillHeld(const at::Tensor& t) {
  for (int waited_ms = 0;; ++waited_ms) {
    if (t.use_count() == 1 && t.storage().use_count() == 1) return false;
    if (waited_ms == 2000) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::vector<at::Tensor> Grads(Vit& model) {
  std::vector<at::Tensor> g;
  for (const at::Tensor& p : model->parameters()) g.push_back(p.grad().clone());
  return g;
}

// The optimizer of --optimizer, --lr, --momentum and --weight_decay.
v1::Optimizer OptimizerFromFlags() {
  v1::Optimizer optimizer;
  if (absl::GetFlag(FLAGS_optimizer) == "adamw") {
    v1::AdamW& a = *optimizer.mutable_adamw();
    a.set_learning_rate(absl::GetFlag(FLAGS_lr));
    a.set_beta1(0.9);
    a.set_beta2(0.999);
    a.set_eps(1e-8);
    a.set_weight_decay(0.01);
  } else {
    v1::Sgd& sgd = *optimizer.mutable_sgd();
    sgd.set_learning_rate(absl::GetFlag(FLAGS_lr));
    sgd.set_momentum(absl::GetFlag(FLAGS_momentum));
    sgd.set_weight_decay(absl::GetFlag(FLAGS_weight_decay));
  }
  return optimizer;
}

// One run with the flags as they are now (Run: its exit code): the engine's model on this
// rank's batches, the reference on all ranks' batches, checked step by step.
class WorkerRun {
 public:
  WorkerRun(const WorkerEnv& env, PluginHost& host) : env_(env), host_(host) {}

  // With `store`, the ranks meet there (a pool's task); else through the launcher's
  // rendezvous.
  int Run(c10::intrusive_ptr<c10d::Store> store) {
    if (const int exit = SetUp(std::move(store)); exit != 0) return exit;
    for (int step = 0; step < absl::GetFlag(FLAGS_steps); ++step) {
      if (step == absl::GetFlag(FLAGS_timed_from)) {
        if (sampler_) sampler_->DropWindow();
        engine_->StartTiming(/*bucket_times=*/true);
      }
      engine_->ZeroGrad();
      if (compare_) step_theirs_->ZeroGrad();
      for (int micro = 0; micro < accumulate_; ++micro) {
        if (const int exit = MicroStep(step, micro); exit != 0) return exit;
      }
      if (const int exit = CheckStep(step); exit != 0) return exit;
      if (!engine_->updated_parameters()) step_ours_->Step();
      if (compare_) step_theirs_->Step();
      if (const int exit = CheckParameters(step); exit != 0) return exit;
      last_grad_ = model_->parameters()[0].grad();
    }
    engine_->FinishTiming();
    return Finish();
  }

 private:
  int Fail(int exit, const std::string& what) {
    std::cerr << "rank " << env_.rank << ": " << what << "\n";
    return exit;
  }

  // The models, the plugins configured through the host as vit_ddp does, the group, the
  // engine and both optimizers.
  int SetUp(c10::intrusive_ptr<c10d::Store> store) {
    cuda_ = absl::GetFlag(FLAGS_cuda);
    g_device = cuda_ ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(env_.local_rank)) : at::Device(at::kCPU);
    const std::string precision = absl::GetFlag(FLAGS_precision), optimizer = absl::GetFlag(FLAGS_optimizer);
    if ((precision != "float32" && precision != "bf16") || (optimizer != "sgd" && optimizer != "adamw")) {
      return Fail(13, absl::StrCat("--precision=", precision, " --optimizer=", optimizer,
                                   ": expected float32 or bf16, and sgd or adamw"));
    }
    precision_ = precision == "bf16" ? v1::BF16_AUTOCAST : v1::FLOAT32;
    accumulate_ = absl::GetFlag(FLAGS_accumulate);
    compare_ = env_.rank == 0 || absl::GetFlag(FLAGS_grad_tolerance) >= 0;
    v1::Model preset;
    preset.set_preset(v1::Model::VIT_TINY_TEST);
    const VitConfig config = VitConfigForModel(preset, 32).value();
    torch::manual_seed(100 + env_.rank);  // different on each rank: the broadcast must fix it
    model_ = Vit(config);
    torch::manual_seed(100);  // rank 0's weights
    reference_ = Vit(config);
    model_->to(g_device);
    reference_->to(g_device);
    absl::StatusOr<v1::Suite> suite = ParseExperimentText(
        absl::StrCat("name: \"w\" model { preset: VIT_TINY_TEST } data { batch_size: 4 } "
                     "steps { measured: 1 } optimizer { sgd { learning_rate: 0.1 } } "
                     "distributed { device: ", cuda_ ? "CUDA" : "CPU", " gpus_per_node: 2 } ",
                     absl::GetFlag(FLAGS_plugins)),
        "plugins", host_.schema());
    if (!suite.ok()) return Fail(13, suite.status().ToString());
    absl::StatusOr<PluginSet> plugins = host_.Configure(suite->experiment(0));
    if (!plugins.ok()) return Fail(13, plugins.status().ToString());
    if (!store) {  // the launcher's: met once, for the group and the engine's hooks
      absl::StatusOr<c10::intrusive_ptr<c10d::Store>> opened = OpenRendezvousStore(env_, std::chrono::seconds(60));
      if (!opened.ok()) return Fail(13, opened.status().ToString());
      store = *opened;
    }
    auto groups = CreateProcessGroups(env_, /*nccl=*/cuda_, std::chrono::seconds(60), {GroupOptions()}, store);
    if (!groups.ok()) return Fail(13, groups.status().ToString());
    group_ = groups->front();
    // The engine's parameters: the model's, and with --unused_parameter one more at the end,
    // which shares a bucket with the model's (its share of the bucket must be zeros).
    params_ = model_->parameters();
    if (absl::GetFlag(FLAGS_unused_parameter)) {
      params_.push_back(at::full({7}, 1.5, at::TensorOptions().device(g_device)).requires_grad_());
    }
    EngineParts parts = plugins->engine_parts();
    sampler_ = AddErrorSampler(params_, plugins->sample_error_every(), parts);
    engine_ = std::make_unique<DataParallelEngine>(params_, group_, parts, store);
    engine_->BroadcastParameters();
    step_ours_ = MakeOptimizer(OptimizerFromFlags(), params_);
    step_theirs_ = MakeOptimizer(OptimizerFromFlags(), reference_->parameters());
    // Where a plugin updates each bucket's parameters itself, the gradients checked below
    // are still the averaged ones, and the next step's (checked against the reference's,
    // which steps after backward) show the update.
    engine_->SetParameterStep([this](const std::vector<size_t>& indices, const std::vector<at::Tensor>& grads) {
      step_ours_->StepParameters(indices, grads);
    });
    engine_->SetOptimizerMaker(OptimizersOf(OptimizerFromFlags()));
    return 0;
  }

  // Forward and backward of both sides on the micro-step's batches.
  int MicroStep(int step, int micro) {
    const int64_t index = step * accumulate_ + micro;
    Batch mine = MakeBatch(env_.rank, index);
    engine_->BeginStep(/*sync=*/micro == accumulate_ - 1);
    // Once the next step has begun, nothing else may hold the last step's gradient (timed
    // steps keep their collectives, which hold the gradients reduced in place). Not on
    // GPUs: c10d's NCCL watchdog keeps each collective, and its tensors, until it has seen
    // it finish, on a thread of its own.
    if (micro == 0 && last_grad_.defined() && !last_grad_.is_view() && !cuda_ && StillHeld(last_grad_)) {
      return Fail(18, absl::StrCat("step ", step, ": the last step's gradient is still held (", last_grad_.use_count(),
                                   " references, ", last_grad_.storage().use_count(), " to its storage)"));
    }
    last_grad_ = at::Tensor();
    if (int failed = CheckTargets(step, micro, /*begun=*/true); failed != 0) return failed;
    at::Tensor loss;
    {
      ForwardPrecision scope(precision_, g_device);
      const at::Tensor logits = model_->forward(mine.images);
      if (precision_ == v1::BF16_AUTOCAST && logits.scalar_type() != at::kBFloat16) {
        return Fail(26, absl::StrCat("under bf16 autocast the logits are ", c10::toString(logits.scalar_type())));
      }
      loss = at::cross_entropy_loss(logits, mine.labels) / accumulate_;
    }
    loss.backward();
    if (int failed = CheckTargets(step, micro, /*begun=*/false); failed != 0) return failed;
    if (absl::Status s = engine_->EndBackward(); !s.ok()) return Fail(12, s.ToString());
    if (absl::GetFlag(FLAGS_expect_views) && micro == accumulate_ - 1) {
      // After the synced micro-step every gradient is its bucket's view again.
      for (const at::Tensor& p : model_->parameters()) {
        if (!p.grad().defined() || !p.grad().is_view()) {
          return Fail(16, absl::StrCat("step ", step, ": a gradient is not a bucket view"));
        }
      }
    }
    losses_.push_back(loss.item<double>() * accumulate_);
    if (!compare_) return 0;
    std::vector<at::Tensor> images, labels;
    for (int r = 0; r < env_.world_size; ++r) {
      Batch b = MakeBatch(r, index);
      images.push_back(b.images);
      labels.push_back(b.labels);
    }
    at::Tensor reference_loss;
    {
      ForwardPrecision scope(precision_, g_device);
      reference_loss = at::cross_entropy_loss(reference_->forward(at::cat(images)), at::cat(labels)) / accumulate_;
    }
    reference_loss.backward();
    return 0;
  }

  // Note [Gradients written where they go]: the targets the engine names at a step's
  // beginning, and what the model's backward took of them by its end (the first micro-step).
  int CheckTargets(int step, int micro, bool begun) {
    const std::string expect = absl::GetFlag(FLAGS_expect_targets);
    if (micro != 0 || expect.empty()) return 0;
    const bool expected = expect == "all";
    int with = 0;
    for (const at::Tensor& p : model_->parameters()) with += gradient_targets::Has(p) ? 1 : 0;
    const int all = static_cast<int>(model_->parameters().size());
    if (begun && with != (expected ? all : 0)) {
      return Fail(27, absl::StrCat("step ", step, ": ", with, " of ", all, " parameters have a gradient target, want ",
                                   expected ? all : 0));
    }
    if (!begun && expected && with == all) {
      return Fail(27, absl::StrCat("step ", step, ": the backward took no gradient target"));
    }
    return 0;
  }

  // The parameters after the step against the reference's (--param_tolerance): where the
  // gradients after a step are not their means (a sharded optimizer's), what the step did.
  int CheckParameters(int step) {
    const double tolerance = absl::GetFlag(FLAGS_param_tolerance);
    if (tolerance < 0 || !compare_) return 0;
    std::vector<at::Tensor> ours, theirs;
    for (const at::Tensor& p : model_->parameters()) ours.push_back(p.detach().clone());
    for (const at::Tensor& p : reference_->parameters()) theirs.push_back(p.detach().clone());
    if (const double error = RelativeError(ours, theirs); error > tolerance) {
      return Fail(28, absl::StrCat("step ", step, ": parameter relative error ", error));
    }
    return 0;
  }

  // What the step's averaged gradients and the engine must show, before the optimizers step.
  int CheckStep(int step) {
    if (absl::GetFlag(FLAGS_expect_no_bucket_memory) && engine_->stats().bucket_memory_bytes != 0) {
      return Fail(17, absl::StrCat("buckets hold ", engine_->stats().bucket_memory_bytes, " bytes"));
    }
    const std::string wire = absl::GetFlag(FLAGS_wire_dtype);
    if (!wire.empty() && engine_->stats().sent_dtype != wire) {
      return Fail(15, absl::StrCat("sent ", engine_->stats().sent_dtype, ", want ", wire));
    }
    if (const double tolerance = absl::GetFlag(FLAGS_grad_tolerance); tolerance >= 0) {
      if (const double error = RelativeError(Grads(model_), Grads(reference_)); error > tolerance) {
        return Fail(10, absl::StrCat("step ", step, ": gradient relative error ", error));
      }
    }
    if (absl::GetFlag(FLAGS_expect_updated) != engine_->updated_parameters()) {
      return Fail(19, absl::StrCat("step ", step, ": the engine ", engine_->updated_parameters() ? "updated" : "did not update",
                                   " the parameters itself"));
    }
    if (absl::GetFlag(FLAGS_unused_parameter)) {
      const at::Tensor& grad = params_.back().grad();
      if (grad.defined() && !at::equal(grad, at::zeros_like(grad))) {
        return Fail(24, absl::StrCat("step ", step, ": the unused parameter's gradient is not zero"));
      }
    }
    return 0;
  }

  // The held-out loss (--loss_tolerance), rank 0's parameters everywhere, the result, and
  // the engine's end.
  int Finish() {
    if (const double loss_tolerance = absl::GetFlag(FLAGS_loss_tolerance); loss_tolerance >= 0 && compare_) {
      // Both models on the same held-out samples (256 from a stream no step used): the
      // model's quality, without the noise of one rank's last few batches.
      at::NoGradGuard no_grad;
      double ours = 0, exact = 0;
      for (int64_t k = 0; k < 16; ++k) {
        Batch held_out = MakeBatch(/*rank=*/1000, k);
        ours += at::cross_entropy_loss(model_->forward(held_out.images), held_out.labels).item<double>() / 16;
        exact += at::cross_entropy_loss(reference_->forward(held_out.images), held_out.labels).item<double>() / 16;
      }
      std::cerr << "rank " << env_.rank << ": held-out loss " << ours << ", exact all-reduce " << exact
                << " (training loss " << losses_.front() << " -> " << losses_.back() << ")\n";
      // The accuracy cost of compression: no more than the tolerance above exact's. (Lower
      // is no cost: PowerSGD with error feedback ends lower here, its delayed residuals
      // acting like momentum on plain SGD.)
      if (ours > exact * (1 + loss_tolerance)) return 14;
    }
    // Rank 0's parameters, everywhere, bit for bit.
    std::vector<at::Tensor> parts;
    for (const at::Tensor& p : model_->parameters()) parts.push_back(p.detach().reshape(-1));
    at::Tensor mine = at::cat(parts);
    std::vector<at::Tensor> theirs{mine.clone()};
    group_->broadcast(theirs)->wait();
    if (!at::equal(mine, theirs[0])) return Fail(11, "parameters differ from rank 0's");
    if (!WriteResult(env_.rank, model_, *engine_, sampler_.get())) return 25;
    // As the trainer ends: the group's communicators, after the last collective.
    if (absl::Status s = engine_->ShutDown(); !s.ok()) return Fail(13, s.ToString());
    return 0;
  }

  const WorkerEnv& env_;
  PluginHost& host_;
  bool cuda_ = false;
  v1::Precision precision_ = v1::FLOAT32;
  int accumulate_ = 1;
  bool compare_ = true;  // this rank trains the reference (see the top of this file)
  Vit model_{nullptr}, reference_{nullptr};
  ProcessGroupPtr group_;
  std::vector<at::Tensor> params_;
  std::shared_ptr<ErrorSampler> sampler_;
  std::unique_ptr<DataParallelEngine> engine_;
  std::unique_ptr<Optimizer> step_ours_, step_theirs_;
  std::vector<double> losses_;
  at::Tensor last_grad_;  // a gradient of the last step
};

// Serves a pool's tasks, each one run (see the top of this file), until the pool closes
// the channel or a run fails.
int ServeTasks(const WorkerEnv& env, PluginHost& host, TaskChannel& channel, char* program) {
  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store = OpenRendezvousStore(env, std::chrono::seconds(60));
  if (!store.ok()) {
    std::cerr << store.status() << "\n";
    return 13;
  }
  for (int task = 1;; ++task) {
    absl::StatusOr<std::optional<std::string>> line = channel.Next();
    if (!line.ok() || !line->has_value()) return line.ok() ? 0 : 13;
    absl::StatusOr<std::vector<std::string>> flags = DecodeWorkerFlags(**line);
    if (!flags.ok()) {
      std::cerr << flags.status() << "\n";
      return 13;
    }
    for (const auto& [name, flag] : absl::GetAllFlags()) {  // each task's flags from their defaults
      std::string ignored;
      if (flag->CurrentValue() != flag->DefaultValue()) flag->ParseFrom(flag->DefaultValue(), &ignored);
    }
    std::vector<char*> args{program};
    for (std::string& f : *flags) args.push_back(f.data());
    absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
    WorkerEnv run = env;
    if (const int world = absl::GetFlag(FLAGS_world); world != 0) {
      if (world < 1 || world > env.world_size) {
        std::cerr << "--world=" << world << ": the pool has " << env.world_size << " ranks\n";
        return 13;
      }
      run.world_size = world;
      run.local_world_size = std::min(world, env.local_world_size);
    }
    if (env.rank < run.world_size) {
      if (const int exit = WorkerRun(run, host).Run(PrefixedStore(absl::StrCat("task_", task, "/"), *store)); exit != 0) {
        return exit;
      }
    }
    if (!channel.Done().ok()) return 13;
  }
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto env = WorkerEnvFromEnvironment();
  if (!env.ok() || !env->has_value()) return 13;
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::Create(argv[0], &error));
  PluginHost host({runfiles ? runfiles->Rlocation("ddplab/plugins") : ""});
  absl::StatusOr<std::optional<TaskChannel>> channel = TaskChannel::FromEnvironment();
  if (!channel.ok()) {
    std::cerr << channel.status() << "\n";
    return 13;
  }
  if (channel->has_value()) return ServeTasks(**env, host, **channel, argv[0]);
  return WorkerRun(**env, host).Run({});
}

}  // namespace
}  // namespace ddplab

int main(int argc, char** argv) { return ddplab::Main(argc, argv); }
