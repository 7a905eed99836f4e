// A worker for //core:ddp_engine_test, started by the launcher as one of N ranks.
//
// Trains the tiny ViT with the data-parallel engine (Gloo) on its rank's batches and,
// beside it, a reference model in this process on the batches of all ranks concatenated
// (what an exact all-reduce gives). Checks every step that the engine's averaged
// gradients equal the reference's within --grad_tolerance (relative), at the end that
// parameters are identical on all ranks, and, with --loss_tolerance, that the loss on
// held-out samples is at most that fraction above the reference model's. --plugins lists plugin
// entries (text format), loaded through the plugin host from the runfiles.
// Exit codes: 0 pass, 10 gradients differ, 11 parameters differ between ranks,
// 12 engine error, 13 setup error, 14 loss differs, 15 wrong dtype on the wire, 16 a
// gradient is not a bucket view, 17 buckets hold memory with zero_copy, 18 the last step's
// gradient is still held, 19 the optimizer was to be overlapped but was not, 20 the
// tail group (tail_communicator) did not reduce the last buckets, 24 the unused parameter
// (--unused_parameter) was given a gradient other than zero.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "absl/cleanup/cleanup.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "core/ddp_engine.h"
#include "core/experiment.h"
#include "core/plugin_host.h"
#include "tools/cpp/runfiles/runfiles.h"
#include "core/distributed.h"
#include "core/sgd.h"
#include "core/synthetic_data.h"
#include "core/vit.h"

ABSL_FLAG(bool, static_graph, false, "on as well as where --plugins turns it on");
ABSL_FLAG(bool, bucket_view, false, "on as well as where --plugins turns it on");
ABSL_FLAG(bool, unused_parameter, false,
          "the engine also gets a parameter the model never uses (needs static_graph): its gradient "
          "must stay zero, and the others' must not change");
ABSL_FLAG(int64_t, bucket_cap_bytes, 25'000'000, "");
ABSL_FLAG(int64_t, first_bucket_cap_bytes, 1'000'000, "");
ABSL_FLAG(int, steps, 3, "");
ABSL_FLAG(int, timed_from, 1,
          "the step from which the engine times (and so no longer samples the gradient error); < 0: never");
ABSL_FLAG(int, accumulate, 1, "micro-steps per optimizer step");
ABSL_FLAG(std::string, plugins, "", "plugin entries in text format, e.g. 'plugin { bf16 {} }'");
ABSL_FLAG(double, grad_tolerance, 1e-5, "largest relative gradient error; < 0: not checked");
ABSL_FLAG(double, loss_tolerance, -1, "largest relative loss difference at the end; < 0: not checked");
ABSL_FLAG(std::string, wire_dtype, "", "the dtype the engine must send in, if given");
ABSL_FLAG(double, lr, 0.05, "");
ABSL_FLAG(double, momentum, 0, "");
ABSL_FLAG(double, weight_decay, 0, "");
ABSL_FLAG(int, batch, 4, "samples per rank per micro-step");
ABSL_FLAG(bool, cuda, false, "on the GPU of LOCAL_RANK over NCCL instead of the CPU over Gloo");
ABSL_FLAG(bool, drain_next_step, false,
          "forward_overlap: leave each step's updates to the next step's ZeroGrad instead of waiting "
          "for them in a forward; the gradients are then checked at the last step only");
ABSL_FLAG(bool, slow_updates, false, "forward_overlap on a GPU: the engine's updates start late (a test of the waits)");

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

std::vector<at::Tensor> Grads(Vit& model) {
  std::vector<at::Tensor> g;
  for (const at::Tensor& p : model->parameters()) g.push_back(p.grad().clone());
  return g;
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto env = WorkerEnvFromEnvironment();
  if (!env.ok() || !env->has_value()) return 13;
  const int rank = (*env)->rank, world = (*env)->world_size;
  const bool cuda = absl::GetFlag(FLAGS_cuda);
  if (cuda) g_device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>((*env)->local_rank));
  v1::Model preset;
  preset.set_preset(v1::Model::VIT_TINY_TEST);
  VitConfig config = VitConfigForModel(preset, 32).value();
  torch::manual_seed(100 + rank);  // different on each rank: the broadcast must fix it
  Vit model(config);
  torch::manual_seed(100);  // rank 0's weights
  Vit reference(config);
  model->to(g_device);
  reference->to(g_device);

  // Plugins, configured through the host as vit_ddp does.
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::Create(argv[0], &error));
  PluginHost host({runfiles ? runfiles->Rlocation("ddplab/plugins") : ""});
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(
      absl::StrCat("name: \"w\" model { preset: VIT_TINY_TEST } data { batch_size: 4 } "
                   "steps { measured: 1 } optimizer { sgd { learning_rate: 0.1 } } "
                   "distributed { device: ", cuda ? "CUDA" : "CPU", " gpus_per_node: 2 } ",
                   absl::GetFlag(FLAGS_plugins)),
      "plugins");
  if (!suite.ok()) {
    std::cerr << suite.status() << "\n";
    return 13;
  }
  absl::StatusOr<PluginSet> plugins = host.Configure(suite->experiment(0));
  if (!plugins.ok()) {
    std::cerr << plugins.status() << "\n";
    return 13;
  }
  EngineOptions options = plugins->ResolveEngineOptions();
  options.static_graph = options.static_graph || absl::GetFlag(FLAGS_static_graph);
  options.gradient_as_bucket_view = options.gradient_as_bucket_view || absl::GetFlag(FLAGS_bucket_view);
  options.bucket_cap_bytes = absl::GetFlag(FLAGS_bucket_cap_bytes);
  options.first_bucket_cap_bytes = absl::GetFlag(FLAGS_first_bucket_cap_bytes);
  // A second group for the tail_communicator plugin, as the trainer makes it.
  std::vector<GroupOptions> groups(options.tail_buckets > 0 ? 2 : 1);
  auto group = CreateProcessGroups(**env, /*nccl=*/cuda, std::chrono::seconds(60), groups);
  if (!group.ok()) {
    std::cerr << group.status() << "\n";
    return 13;
  }
  if (absl::GetFlag(FLAGS_slow_updates)) setenv("DDPLAB_TEST_SLOW_UPDATES", "1", 1);
  // The engine's parameters: the model's, and with --unused_parameter one more at the end,
  // which shares a bucket with the model's (its share of the bucket must be zeros).
  std::vector<at::Tensor> params = model->parameters();
  if (absl::GetFlag(FLAGS_unused_parameter)) {
    params.push_back(at::full({7}, 1.5, at::TensorOptions().device(g_device)).requires_grad_());
  }
  DataParallelEngine engine(params, group->front(), options, plugins->comm_hook_factory());
  if (group->size() > 1) {
    if (absl::Status s = engine.SetTailGroup(group->back()); !s.ok()) {
      std::cerr << s << "\n";
      return 13;
    }
  }
  engine.BroadcastParameters();
  const double lr = absl::GetFlag(FLAGS_lr);
  const double momentum = absl::GetFlag(FLAGS_momentum), weight_decay = absl::GetFlag(FLAGS_weight_decay);
  Sgd sgd(params, lr, momentum, weight_decay);
  Sgd reference_sgd(reference->parameters(), lr, momentum, weight_decay);
  // With optimizer_overlap the engine updates each bucket's parameters itself; the
  // gradients checked below are still the averaged ones, and the next step's gradients
  // (checked against the reference's, which steps after backward) show the update.
  engine.SetParameterUpdate([&sgd](const std::vector<size_t>& indices) { sgd.StepParameters(indices); });
  // forward_overlap: the updates end in the next forward, which waits stage by stage, as
  // the trainer's does.
  if (engine.defers_updates()) {
    model->SetBeforeStage([&engine, stages = model->StageParameterIndices()](int64_t stage) {
      engine.WaitForParameters(stages[stage]);
    });
  } else if (options.updates_beside_forward) {
    std::cerr << "rank " << rank << ": forward_overlap asked for, but the engine does not defer its updates\n";
    return 21;
  }
  // A stage callback left behind would call the engine after it is gone.
  absl::Cleanup no_stage_callback = [&model] { model->SetBeforeStage({}); };
  const int accumulate = absl::GetFlag(FLAGS_accumulate);
  const bool drain_next_step = absl::GetFlag(FLAGS_drain_next_step);
  int error_samples = 0;  // the engine's sampled steps so far
  const double grad_tolerance = absl::GetFlag(FLAGS_grad_tolerance);
  std::vector<double> losses;

  // A gradient of the last step: once the next step has begun, nothing else may hold it
  // (timed steps keep their collectives, which hold the gradients reduced in place).
  at::Tensor last_grad;
  for (int step = 0; step < absl::GetFlag(FLAGS_steps); ++step) {
    if (step == absl::GetFlag(FLAGS_timed_from)) engine.StartTiming(/*bucket_times=*/true);
    engine.ZeroGrad();
    reference_sgd.ZeroGrad();
    for (int micro = 0; micro < accumulate; ++micro) {
      const int64_t index = step * accumulate + micro;
      Batch mine = MakeBatch(rank, index);
      engine.BeginStep(/*sync=*/micro == accumulate - 1);
      // (Not on GPUs: c10d's NCCL watchdog keeps each collective, and its tensors, until it
      // has seen it finish, on a thread of its own.)
      if (micro == 0 && last_grad.defined() && !options.gradient_as_bucket_view && !cuda &&
          (last_grad.use_count() != 1 || last_grad.storage().use_count() != 1)) {
        std::cerr << "rank " << rank << " step " << step << ": the last step's gradient is still held ("
                  << last_grad.use_count() << " references, " << last_grad.storage().use_count()
                  << " to its storage)\n";
        return 18;
      }
      last_grad = at::Tensor();
      at::Tensor loss = at::cross_entropy_loss(model->forward(mine.images), mine.labels) / accumulate;
      loss.backward();
      if (absl::Status s = engine.EndBackward(); !s.ok()) {
        std::cerr << "rank " << rank << ": " << s << "\n";
        return 12;
      }
      const bool last_step = step + 1 == absl::GetFlag(FLAGS_steps);
      const bool sampled = engine.stats().gradient_error_samples != error_samples;
      error_samples = engine.stats().gradient_error_samples;
      if (engine.defers_updates() && micro == accumulate - 1 && !sampled && drain_next_step && last_step) {
        engine.WaitForUpdates();
      } else if (engine.defers_updates() && micro == accumulate - 1 && !sampled && !drain_next_step) {
        // The step ended with its updates outstanding; a forward (of the next batch, as
        // the trainer's next step would run it) waits for every one of them, stage by
        // stage, before the gradients and parameters are checked below.
        if (engine.outstanding_updates() == 0) {
          std::cerr << "rank " << rank << " step " << step << ": no update was left to the next forward\n";
          return 21;
        }
        // The first stage waits only for the buckets that hold its parameters.
        const std::vector<size_t> first = model->StageParameterIndices()[0];
        const std::vector<std::vector<size_t>> buckets = engine.buckets();
        int holding = 0;
        for (const std::vector<size_t>& bucket : buckets) {
          bool holds = false;
          for (size_t i : bucket) holds = holds || std::find(first.begin(), first.end(), i) != first.end();
          holding += holds ? 1 : 0;
        }
        engine.WaitForParameters(first);
        if (engine.outstanding_updates() != static_cast<int>(buckets.size()) - holding) {
          std::cerr << "rank " << rank << " step " << step << ": after the first stage's wait "
                    << engine.outstanding_updates() << " of " << buckets.size() << " bucket(s) outstanding, want "
                    << buckets.size() - holding << "\n";
          return 23;
        }
        {
          at::NoGradGuard no_grad;
          model->forward(MakeBatch(rank, index + 1).images);
        }
        if (const int left = engine.outstanding_updates(); left != 0) {
          std::cerr << "rank " << rank << " step " << step << ": " << left
                    << " bucket(s) not waited for by the forward's stages\n";
          return 21;
        }
        // The last reversed_buckets buckets went last-first.
        std::vector<size_t> want;
        const size_t n = engine.buckets().size();
        const size_t reversed = n - std::min(n, static_cast<size_t>(std::max(0, options.reversed_buckets)));
        for (size_t i = 0; i < reversed; ++i) want.push_back(i);
        for (size_t i = n; i-- > reversed;) want.push_back(i);
        if (engine.launch_order() != want) {
          std::cerr << "rank " << rank << " step " << step << ": launch order is not the buckets' order "
                    << "with the last " << options.reversed_buckets << " reversed\n";
          return 22;
        }
      }
      if (options.gradient_as_bucket_view && micro == accumulate - 1) {
        // After the synced micro-step every gradient is its bucket's view again.
        for (const at::Tensor& p : model->parameters()) {
          if (!p.grad().defined() || !p.grad().is_view()) {
            std::cerr << "rank " << rank << " step " << step << ": a gradient is not a bucket view\n";
            return 16;
          }
        }
      }
      std::vector<at::Tensor> images, labels;
      for (int r = 0; r < world; ++r) {
        Batch b = MakeBatch(r, index);
        images.push_back(b.images);
        labels.push_back(b.labels);
      }
      at::Tensor reference_loss =
          at::cross_entropy_loss(reference->forward(at::cat(images)), at::cat(labels)) / accumulate;
      reference_loss.backward();
      losses.push_back(loss.item<double>() * accumulate);
    }
    if (options.reduce_in_place && engine.stats().bucket_memory_bytes != 0) {
      std::cerr << "rank " << rank << ": gradients reduced in place, but buckets hold "
                << engine.stats().bucket_memory_bytes << " bytes\n";
      return 17;
    }
    const std::string wire = absl::GetFlag(FLAGS_wire_dtype);
    if (!wire.empty() && engine.stats().wire_dtype != wire) {
      std::cerr << "rank " << rank << ": sent " << engine.stats().wire_dtype << ", want " << wire << "\n";
      return 15;
    }
    // Left to the next step, the gradients are not final yet (checked at the last step).
    const bool unchecked = drain_next_step && engine.defers_updates() && step + 1 < absl::GetFlag(FLAGS_steps);
    double error = unchecked ? 0 : RelativeError(Grads(model), Grads(reference));
    if (grad_tolerance >= 0 && error > grad_tolerance) {
      std::cerr << "rank " << rank << " step " << step << ": gradient relative error " << error << "\n";
      return 10;
    }
    if (options.overlap_optimizer != engine.updated_parameters()) {
      std::cerr << "rank " << rank << " step " << step << ": optimizer_overlap is "
                << (options.overlap_optimizer ? "on" : "off") << " but the engine "
                << (engine.updated_parameters() ? "did" : "did not") << " update the parameters\n";
      return 19;
    }
    // The tail group reduced the last tail_buckets buckets (all of them, if fewer).
    const int buckets = static_cast<int>(engine.buckets().size());
    const int tail = std::min(options.tail_buckets, buckets);
    if (engine.stats().tail_buckets != tail) {
      std::cerr << "rank " << rank << " step " << step << ": " << engine.stats().tail_buckets
                << " bucket(s) of " << buckets << " went over the tail group, want " << tail << "\n";
      return 20;
    }
    if (absl::GetFlag(FLAGS_unused_parameter)) {
      const at::Tensor& grad = params.back().grad();
      if (grad.defined() && !at::equal(grad, at::zeros_like(grad))) {
        std::cerr << "rank " << rank << " step " << step << ": the unused parameter's gradient is not zero\n";
        return 24;
      }
    }
    if (!engine.updated_parameters()) sgd.Step();
    reference_sgd.Step();
    last_grad = model->parameters()[0].grad();
  }
  engine.FinishTiming();
  const double loss_tolerance = absl::GetFlag(FLAGS_loss_tolerance);
  if (loss_tolerance >= 0) {
    // Both models on the same held-out samples (256 from a stream no step used): the
    // model's quality, without the noise of one rank's last few batches.
    at::NoGradGuard no_grad;
    double ours = 0, exact = 0;
    for (int64_t k = 0; k < 16; ++k) {
      Batch held_out = MakeBatch(/*rank=*/1000, k);
      ours += at::cross_entropy_loss(model->forward(held_out.images), held_out.labels).item<double>() / 16;
      exact += at::cross_entropy_loss(reference->forward(held_out.images), held_out.labels).item<double>() / 16;
    }
    std::cerr << "rank " << rank << ": held-out loss " << ours << ", exact all-reduce " << exact
              << " (training loss " << losses.front() << " -> " << losses.back() << ")\n";
    // The accuracy cost of compression: no more than the tolerance above exact's. (Lower
    // is no cost: PowerSGD with error feedback ends lower here, its delayed residuals
    // acting like momentum on plain SGD.)
    if (ours > exact * (1 + loss_tolerance)) return 14;
  }
  // Rank 0's parameters, everywhere, bit for bit.
  std::vector<at::Tensor> parts;
  for (const at::Tensor& p : model->parameters()) parts.push_back(p.detach().reshape(-1));
  at::Tensor mine = at::cat(parts);
  std::vector<at::Tensor> theirs{mine.clone()};
  group->front()->broadcast(theirs)->wait();
  if (!at::equal(mine, theirs[0])) {
    std::cerr << "rank " << rank << ": parameters differ from rank 0's\n";
    return 11;
  }
  // As the trainer ends: every group's communicators, after the last collective.
  if (absl::Status s = engine.ShutDown(); !s.ok()) {
    std::cerr << "rank " << rank << ": " << s << "\n";
    return 13;
  }
  return 0;
}

}  // namespace
}  // namespace ddplab

int main(int argc, char** argv) { return ddplab::Main(argc, argv); }
