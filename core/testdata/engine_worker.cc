// A worker for //core:ddp_engine_test, started by the launcher as one of N ranks.
//
// Trains the tiny ViT with the data-parallel engine (Gloo) on its rank's batches and,
// beside it, a reference model in this process on the batches of all ranks concatenated.
// Checks that the engine's averaged gradients equal the reference's (relative error at
// most 1e-5) every step, and that parameters are identical on all ranks at the end.
// Exit codes: 0 pass, 10 gradients differ, 11 parameters differ between ranks,
// 12 engine error, 13 setup error.
#include <iostream>

#include <torch/torch.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "core/ddp_engine.h"
#include "core/distributed.h"
#include "core/sgd.h"
#include "core/synthetic_data.h"
#include "core/vit.h"

ABSL_FLAG(bool, static_graph, false, "");
ABSL_FLAG(bool, bucket_view, false, "");
ABSL_FLAG(int64_t, bucket_cap_bytes, 25'000'000, "");
ABSL_FLAG(int64_t, first_bucket_cap_bytes, 1'000'000, "");
ABSL_FLAG(int, steps, 3, "");
ABSL_FLAG(int, accumulate, 1, "micro-steps per optimizer step");

namespace ddplab {
namespace {

Batch MakeBatch(int rank, int64_t index) {
  SyntheticData::Options o;
  o.batch_size = 4;
  o.image_size = 32;
  o.num_classes = 10;
  o.task = v1::Data::LEARNABLE;
  o.seed = 11;
  o.rank = rank;
  SyntheticData data(o);
  Batch b;
  b.images = at::empty({4, 3, 32, 32});
  b.labels = at::empty({4}, at::kLong);
  data.Generate(index, b.images, b.labels);
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
  auto group = CreateProcessGroup(**env, /*nccl=*/false, std::chrono::seconds(60));
  if (!group.ok()) {
    std::cerr << group.status() << "\n";
    return 13;
  }
  v1::Model preset;
  preset.set_preset(v1::Model::VIT_TINY_TEST);
  VitConfig config = VitConfigForModel(preset, 32).value();
  torch::manual_seed(100 + rank);  // different on each rank: the broadcast must fix it
  Vit model(config);
  torch::manual_seed(100);  // rank 0's weights
  Vit reference(config);

  EngineOptions options;
  options.static_graph = absl::GetFlag(FLAGS_static_graph);
  options.gradient_as_bucket_view = absl::GetFlag(FLAGS_bucket_view);
  options.bucket_cap_bytes = absl::GetFlag(FLAGS_bucket_cap_bytes);
  options.first_bucket_cap_bytes = absl::GetFlag(FLAGS_first_bucket_cap_bytes);
  DataParallelEngine engine(model->parameters(), *group, options);
  engine.BroadcastParameters();
  Sgd sgd(model->parameters(), 0.05), reference_sgd(reference->parameters(), 0.05);
  const int accumulate = absl::GetFlag(FLAGS_accumulate);

  for (int step = 0; step < absl::GetFlag(FLAGS_steps); ++step) {
    engine.ZeroGrad();
    reference_sgd.ZeroGrad();
    for (int micro = 0; micro < accumulate; ++micro) {
      const int64_t index = step * accumulate + micro;
      Batch mine = MakeBatch(rank, index);
      engine.BeginStep(/*sync=*/micro == accumulate - 1);
      (at::cross_entropy_loss(model->forward(mine.images), mine.labels) / accumulate).backward();
      if (absl::Status s = engine.EndBackward(); !s.ok()) {
        std::cerr << "rank " << rank << ": " << s << "\n";
        return 12;
      }
      std::vector<at::Tensor> images, labels;
      for (int r = 0; r < world; ++r) {
        Batch b = MakeBatch(r, index);
        images.push_back(b.images);
        labels.push_back(b.labels);
      }
      (at::cross_entropy_loss(reference->forward(at::cat(images)), at::cat(labels)) / accumulate)
          .backward();
    }
    double error = RelativeError(Grads(model), Grads(reference));
    if (error > 1e-5) {
      std::cerr << "rank " << rank << " step " << step << ": gradient relative error " << error << "\n";
      return 10;
    }
    sgd.Step();
    reference_sgd.Step();
  }
  // Rank 0's parameters, everywhere, bit for bit.
  std::vector<at::Tensor> parts;
  for (const at::Tensor& p : model->parameters()) parts.push_back(p.detach().reshape(-1));
  at::Tensor mine = at::cat(parts);
  std::vector<at::Tensor> theirs{mine.clone()};
  (*group)->broadcast(theirs)->wait();
  if (!at::equal(mine, theirs[0])) {
    std::cerr << "rank " << rank << ": parameters differ from rank 0's\n";
    return 11;
  }
  return 0;
}

}  // namespace
}  // namespace ddplab

int main(int argc, char** argv) { return ddplab::Main(argc, argv); }
