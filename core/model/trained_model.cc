#include "core/model/trained_model.h"

#include <ATen/CPUGeneratorImpl.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/data/synthetic_data.h"
#include "core/model/initial_weights.h"
#include "core/model/torchscript/scripted_model.h"
#include "core/model/vit.h"
#include "core/model/vit_config.h"

namespace ddplab {
namespace {

class VitModel : public TrainedModel {
 public:
  VitModel(const VitConfig& config, const v1::Model& model, uint64_t seed, at::Device device)
      : config_(config),
        name_(model.has_vit() ? "custom" : v1::Model::Preset_Name(model.preset())),
        vit_(MakeVit(config, seed, device)) {
    vit_->train();
  }

  std::vector<at::Tensor> parameters() const override { return vit_->parameters(); }
  std::vector<std::string> parameter_names() const override { return vit_->named_parameters().keys(); }
  std::vector<at::Tensor> buffers() const override { return vit_->buffers(); }
  at::Tensor Loss(const Batch& batch) override {
    return at::cross_entropy_loss(vit_->forward(batch.images), batch.labels);
  }
  std::unique_ptr<BatchSource> MakeData(const v1::Experiment& e, int rank, at::Device device) const override {
    SyntheticData::Options data;
    data.batch_size = e.data().batch_size();
    data.image_size = e.data().image_size();
    data.num_classes = config_.num_classes;
    data.num_workers = static_cast<int>(e.data().num_workers());
    data.pin_memory = e.data().pin_memory();
    data.prefetch = static_cast<int>(e.data().prefetch());
    data.task = e.data().task();
    data.seed = e.data().seed();
    data.rank = rank;
    data.device = device;
    return std::make_unique<SyntheticData>(data);
  }
  double training_flops_per_sample() const override { return VitTrainingFlopsPerSample(config_); }
  std::string name() const override { return name_; }
  std::string digest() const override { return ""; }

 private:
  VitConfig config_;
  std::string name_;
  Vit vit_;
};

// The batches a module is fed: a few drawn once per run (CycledBatches), since drawing a
// ResNet's images on the host each step would cost more than its step on a GPU.
constexpr int kScriptedBatches = 4;

class ScriptedTrainedModel : public TrainedModel {
 public:
  explicit ScriptedTrainedModel(ScriptedModel model) : model_(std::move(model)) { model_.Train(true); }

  std::vector<at::Tensor> parameters() const override { return model_.parameters(); }
  std::vector<std::string> parameter_names() const override {
    std::vector<std::string> names;
    for (const auto& [name, tensor] : model_.named_parameters()) names.push_back(name);
    return names;
  }
  std::vector<at::Tensor> buffers() const override { return model_.buffers(); }
  at::Tensor Loss(const Batch& batch) override { return model_.Loss(ScriptedBatch{{batch.images}, batch.labels}); }
  std::unique_ptr<BatchSource> MakeData(const v1::Experiment& e, int rank, at::Device device) const override {
    (void)device;  // the module's: MakeBatch puts them there
    // Each rank its own stream of samples, the same for a seed on every run.
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(e.data().seed() * 1000003 + rank);
    std::vector<Batch> batches;
    for (int i = 0; i < kScriptedBatches; ++i) {
      ScriptedBatch b = model_.MakeBatch(e.data().batch_size(), generator);
      batches.push_back(Batch{std::move(b.inputs.front()), std::move(b.target)});
    }
    return std::make_unique<CycledBatches>(std::move(batches));
  }
  double training_flops_per_sample() const override { return 0; }
  std::string name() const override {
    const std::string& path = model_.path();
    return absl::StrCat("torchscript ", path.substr(path.find_last_of('/') + 1));
  }
  std::string digest() const override { return model_.digest(); }

 private:
  ScriptedModel model_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TrainedModel>> MakeTrainedModel(const v1::Experiment& e, at::Device device) {
  if (e.model().has_torchscript()) {
    // One input (Note [One input for now]): validate.cc refused others where the file said.
    absl::StatusOr<ScriptedModel> model = ScriptedModel::Load(e.model().torchscript(), "", device);
    if (!model.ok()) return model.status();
    return std::unique_ptr<TrainedModel>(std::make_unique<ScriptedTrainedModel>(*std::move(model)));
  }
  absl::StatusOr<VitConfig> config = VitConfigForModel(e.model(), e.data().image_size());
  if (!config.ok()) return config.status();
  return std::unique_ptr<TrainedModel>(std::make_unique<VitModel>(*config, e.model(), e.data().seed(), device));
}

}  // namespace ddplab
