// Checks ddplab's ViT against torchvision's: loads the weights bench/vit_parity.py
// exported, runs the same batch forward, one backward and one SGD step, and reports the
// relative error of the logits and of every weight after the step (fp32, no TF32).
//
//   python3 bench/vit_parity.py --dir D && bazel-bin/bench/vit_parity --dir=D --output=p.json
//
// Exits 1 when an error exceeds --tolerance.

#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include <torch/cuda.h>
#include <torch/serialize.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "core/optim/sgd.h"
#include "core/model/vit.h"

ABSL_FLAG(std::string, dir, "", "Directory written by bench/vit_parity.py.");
ABSL_FLAG(std::string, output, "", "Where to write the result as JSON.");
ABSL_FLAG(double, tolerance, 1e-4, "Largest relative error that passes.");

namespace ddplab {
namespace {

c10::Dict<c10::IValue, c10::IValue> LoadDict(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "vit_parity: cannot open " << path << "\n";
    std::exit(2);
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return torch::pickle_load(bytes).toGenericDict();
}

double RelativeError(const at::Tensor& got, const at::Tensor& want) {
  at::Tensor g = got.detach().to(at::kCPU, at::kDouble), w = want.to(at::kDouble);
  double norm = w.norm().item<double>();
  return (g - w).norm().item<double>() / (norm > 0 ? norm : 1.0);
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string dir = absl::GetFlag(FLAGS_dir);
  if (!torch::cuda::is_available()) {
    std::cerr << "vit_parity: needs a GPU\n";
    return 2;
  }
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
  auto before = LoadDict(dir + "/before.pt");
  auto after = LoadDict(dir + "/after.pt");
  auto io = LoadDict(dir + "/io.pt");

  v1::Model preset;
  preset.set_preset(v1::Model::VIT_L_32);
  Vit model(VitConfigForModel(preset, 224).value());
  auto params = model->named_parameters();
  if (static_cast<size_t>(before.size()) != params.size()) {
    std::cerr << "vit_parity: torchvision has " << before.size() << " tensors, ddplab "
              << params.size() << "\n";
    return 1;
  }
  {
    torch::NoGradGuard no_grad;
    for (auto& item : params) {
      c10::IValue key(item.key());
      if (!before.contains(key)) {
        std::cerr << "vit_parity: torchvision has no " << item.key() << "\n";
        return 1;
      }
      item.value().copy_(before.at(key).toTensor());
    }
  }
  const at::Device gpu(at::kCUDA, 0);
  model->to(gpu);
  model->train();
  at::Tensor images = io.at(c10::IValue("images")).toTensor().to(gpu);
  at::Tensor labels = io.at(c10::IValue("labels")).toTensor().to(gpu);
  double lr = io.at(c10::IValue("lr")).toTensor().item<double>();

  at::Tensor logits = model->forward(images);
  at::Tensor loss = at::cross_entropy_loss(logits, labels);
  double logits_error = RelativeError(logits, io.at(c10::IValue("logits")).toTensor());
  double loss_error = RelativeError(loss, io.at(c10::IValue("loss")).toTensor());
  Sgd sgd(model->parameters(), lr);
  sgd.ZeroGrad();
  loss.backward();
  sgd.Step();
  double worst = 0;
  std::string worst_name;
  for (auto& item : model->named_parameters()) {
    double e = RelativeError(item.value(), after.at(c10::IValue(item.key())).toTensor());
    if (e > worst) {
      worst = e;
      worst_name = item.key();
    }
  }
  const double tolerance = absl::GetFlag(FLAGS_tolerance);
  bool pass = logits_error <= tolerance && loss_error <= tolerance && worst <= tolerance;
  std::string json = absl::StrFormat(
      "{\n \"logits_relative_error\": %.3e,\n \"loss_relative_error\": %.3e,\n"
      " \"max_weight_relative_error_after_sgd_step\": %.3e,\n \"worst_weight\": \"%s\",\n"
      " \"tensors\": %d,\n \"tolerance\": %.1e,\n \"pass\": %s\n}\n",
      logits_error, loss_error, worst, worst_name, static_cast<int>(params.size()), tolerance,
      pass ? "true" : "false");
  std::cout << json;
  if (!absl::GetFlag(FLAGS_output).empty()) std::ofstream(absl::GetFlag(FLAGS_output)) << json;
  return pass ? 0 : 1;
}

}  // namespace
}  // namespace ddplab

int main(int argc, char** argv) { return ddplab::Main(argc, argv); }
