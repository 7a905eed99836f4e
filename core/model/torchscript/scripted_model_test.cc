#include "core/model/torchscript/scripted_model.h"

#include <memory>
#include <string>

#include <ATen/CPUGeneratorImpl.h>

#include "absl/strings/match.h"
#include "core/config/experiment.h"
#include "core/config/text_location.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace ddplab {
namespace {

using bazel::tools::cpp::runfiles::Runfiles;

// The test modules' directory (tools/torchscript/export_models.py --test_files).
std::string Dir() {
  std::string error;
  static std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  return runfiles->Rlocation("ddplab/core/model/torchscript/testdata");
}

v1::ScriptedModel Spec(const std::string& text) {
  v1::ScriptedModel spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec)) << text;
  return spec;
}

absl::StatusOr<ScriptedModel> Load(const std::string& text, int64_t memory_bytes = 0) {
  return ScriptedModel::Load(Spec(text), Dir(), at::kCPU, memory_bytes);
}

// Loads, and trains a few steps of SGD: the loss falls on a fixed batch.
void ExpectTrains(ScriptedModel& model) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(1);
  const ScriptedBatch batch = model.MakeBatch(8, generator);
  model.Train(true);
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    for (at::Tensor& p : model.parameters()) p.mutable_grad() = at::Tensor();
    at::Tensor loss = model.Loss(batch);
    ASSERT_EQ(loss.dim(), 0);
    loss.backward();
    at::NoGradGuard no_grad;
    for (at::Tensor& p : model.parameters()) p.sub_(p.grad(), 0.05);
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, first) << model.path();
}

TEST(ScriptedModelTest, ClassifiersRegressorsAndOwnLossesTrain) {
  for (const std::string text : {
           "file: \"mlp.pt\" input { shape: [3, 8, 8] } classes: 10",
           "file: \"regressor.pt\" input { shape: [3, 8, 8] } regression { shape: [4] }",
           "file: \"with_loss.pt\" input { shape: [3, 8, 8] } regression { shape: [4] } loss: MODULE_RETURNS_LOSS",
           "file: \"encoder.pt\" input { shape: [16] dtype: INT64 high: 100 } classes: 3",
       }) {
    absl::StatusOr<ScriptedModel> model = Load(text);
    ASSERT_TRUE(model.ok()) << text << ": " << model.status();
    EXPECT_GT(model->parameter_bytes(), 0);
    EXPECT_EQ(model->named_parameters().size(), model->parameters().size());
    ExpectTrains(*model);
  }
  // The parameters are the module's, by their Python names.
  absl::StatusOr<ScriptedModel> mlp = Load("file: \"mlp.pt\" input { shape: [3, 8, 8] } classes: 10");
  ASSERT_TRUE(mlp.ok());
  EXPECT_EQ(mlp->named_parameters().front().first, "net.1.weight");
}

// #65's bad inputs: each refused with what is wrong and the field it is about, for the
// loader to report at its place in the file.
TEST(ScriptedModelTest, BadInputsAreRefusedNamingTheField) {
  struct Case {
    std::string spec, field, says;
  };
  const Case cases[] = {
      {"file: \"missing.pt\" input { shape: [3, 8, 8] } classes: 10", "model.torchscript.file",
       "missing.pt: No such file or directory"},
      {"file: \"not_torchscript.pt\" input { shape: [3, 8, 8] } classes: 10", "model.torchscript.file",
       "not_torchscript.pt is not a TorchScript module (a file written by torch.jit.script(model).save(...) or "
       "torch.jit.trace(...).save(...)): "},
      {"file: \"two_inputs.pt\" input { shape: [3, 8, 8] } classes: 10", "model.torchscript.input",
       "forward takes (x: Tensor, scale: Tensor): 2 argument(s), but the file declares 1 input(s)"},
      {"file: \"mlp.pt\" input { shape: [3, 8, 8] } regression { shape: [4] } loss: MODULE_RETURNS_LOSS",
       "model.torchscript.input",
       "forward takes (x: Tensor): 1 argument(s), but the file declares 1 input(s) and the target "
       "(MODULE_RETURNS_LOSS)"},
      {"file: \"mlp.pt\" input { shape: [3, 16, 16] } classes: 10", "model.torchscript.input",
       "forward failed on a first batch of 2 samples of the shapes declared ([2, 3, 16, 16] Float): RuntimeError: "
       "mat1 and mat2 shapes cannot be multiplied"},
      {"file: \"mlp.pt\" input { shape: [3, 8, 8] } classes: 7", "model.torchscript.classes",
       "forward returns [2, 10] for 2 samples, not [2, 7]: a classifier of 7 classes returns its logits, [batch, 7]"},
      {"file: \"regressor.pt\" input { shape: [3, 8, 8] } regression { shape: [5] }",
       "model.torchscript.regression.shape", "forward returns [2, 4] for 2 samples, not [2, 5]"},
      // A module that returns its own loss, declared as one that does not.
      {"file: \"with_loss.pt\" input { shape: [3, 8, 8] } input { shape: [4] } regression { shape: [4] }",
       "model.torchscript.regression.shape", "forward returns [] for 2 samples, not [2, 4]"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ScriptedModel> model = Load(c.spec);
    ASSERT_FALSE(model.ok()) << c.spec;
    EXPECT_EQ(FieldOf(model.status()), c.field) << c.spec << ": " << model.status();
    EXPECT_TRUE(absl::StrContains(model.status().message(), c.says)) << c.spec << ": " << model.status();
  }
  // Too large for the device: refused before it runs.
  absl::StatusOr<ScriptedModel> big = Load("file: \"encoder.pt\" input { shape: [16] dtype: INT64 high: 100 } classes: 3",
                                           /*memory_bytes=*/4096);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(FieldOf(big.status()), "model.torchscript.file");
  EXPECT_TRUE(absl::StrContains(big.status().message(), "more than the device's 0 MiB")) << big.status();
}

// Through the loader, as vit_ddp reads a file (its check loads the module): the refusal
// at the field's file:line:column.
TEST(ScriptedModelTest, ARefusalIsReportedAtItsPlaceInTheFile) {
  const std::string text =
      "name: \"mine\"\n"
      "model { torchscript { file: \"two_inputs.pt\"\n"
      "  input { shape: [3, 8, 8] } classes: 10 } }\n"
      "data { batch_size: 2 } steps { measured: 1 } optimizer { sgd { learning_rate: 0.1 } }\n";
  absl::StatusOr<v1::Suite> suite =
      ParseExperimentText(text, "mine.textproto", *ExperimentSchema::WithoutPlugins(), [](const v1::Experiment& e) {
        return ScriptedModel::Load(e.model().torchscript(), Dir(), at::kCPU).status();
      });
  ASSERT_FALSE(suite.ok());
  EXPECT_TRUE(absl::StartsWith(suite.status().message(),
                               "mine.textproto:3:3: model.torchscript.input: forward takes (x: Tensor, scale: Tensor)"))
      << suite.status();
  // What the file declares is checked before any module is loaded.
  absl::StatusOr<v1::Suite> no_high = ParseExperimentText(
      "name: \"mine\" model { torchscript { file: \"encoder.pt\" input { shape: [16] dtype: INT64 } classes: 3 } }\n"
      "data { batch_size: 2 } steps { measured: 1 } optimizer { sgd { learning_rate: 0.1 } }\n",
      "mine.textproto", *ExperimentSchema::WithoutPlugins());
  EXPECT_EQ(no_high.status().message(),
            "mine.textproto:1:55: model.torchscript.input[0].high: is required for INT64: values are drawn in [0, high)");
}

}  // namespace
}  // namespace ddplab
