// One rank of ddplab's side of the hook parity test (hooks_parity_test.py), started as
// one of N ranks over Gloo (RANK, WORLD_SIZE, ... and DDPLAB_RENDEZVOUS_FILE, as ddplab's
// launcher sets them).
//
// It reads the case pytorch_reference.py wrote (--dir: the manifest of tensors, and this
// rank's gradient of every step) and does each run of --runs in turn, one a line
// "NAME ORDER PLUGINS" (PLUGINS: the rest of the line, plugin entries in text format). A
// run loads its plugins through the plugin host as vit_ddp does, and reduces the
// gradients step after step in one bucket whose tensors are in the order of PyTorch's DDP
// bucket at that step (--dir/ORDER.order, written by the reference run): through the
// experiment's hook chain, core's all-reduce wrapped by the plugins' hooks, as the engine
// hands a bucket over (in the dtype the chain asks for; the gradients where they lie if
// it reads them there, else in the bucket). It writes the reduced gradients as
// --dir/NAME_r<rank>_s<step>.f32, in the manifest's order.
//
// Exit codes: 0 done, 13 setup error, 22 the reduction failed, 23 a file could not be
// read or written.
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/launch/distributed.h"
#include "core/engine/allreduce_hook.h"
#include "core/config/experiment.h"
#include "core/plugin/plugin_host.h"
#include "tools/cpp/runfiles/runfiles.h"

ABSL_FLAG(std::string, dir, "", "the case's directory (manifest, gradients); the results go there");
ABSL_FLAG(std::string, runs, "", "the runs, one a line: NAME ORDER PLUGINS (see the top of hook_worker.cc)");

namespace ddplab {
namespace {

struct Case {
  std::vector<std::vector<int64_t>> shapes;  // the manifest's tensors
  int64_t steps = 0;
};

// One line of --runs.
struct Run {
  std::string name;
  std::vector<std::vector<size_t>> orders;  // per step, the tensors in bucket order
  std::string plugins;
};

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<Case> ReadCase(const std::string& dir) {
  Case c;
  std::ifstream manifest(dir + "/manifest");
  std::string line;
  while (std::getline(manifest, line)) {
    std::istringstream words(line);
    std::string key;
    words >> key;
    if (key == "steps") words >> c.steps;
    if (key != "tensor") continue;
    std::string name;
    size_t dims = 0;
    words >> name >> dims;
    std::vector<int64_t> shape(dims);
    for (int64_t& d : shape) words >> d;
    c.shapes.push_back(shape);
  }
  if (c.shapes.empty() || c.steps <= 0) return absl::InvalidArgumentError(absl::StrCat("no case in ", dir));
  return c;
}

// The bucket's order per step, as the PyTorch run wrote it at `path`.
absl::StatusOr<std::vector<std::vector<size_t>>> ReadOrders(const std::string& path, const Case& c) {
  std::vector<std::vector<size_t>> orders;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    int64_t step = 0;
    words >> step;
    std::vector<size_t> order;
    for (size_t i; words >> i;) order.push_back(i);
    if (step != static_cast<int64_t>(orders.size()) || order.size() != c.shapes.size()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": bad line \"", line, "\""));
    }
    orders.push_back(order);
  }
  if (static_cast<int64_t>(orders.size()) != c.steps) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", orders.size(), " steps, the case has ", c.steps));
  }
  return orders;
}

absl::StatusOr<std::vector<Run>> ReadRuns(const std::string& path, const std::string& dir, const Case& c) {
  std::vector<Run> runs;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    Run run;
    std::string order;
    words >> run.name >> order;
    std::getline(words, run.plugins);
    absl::StatusOr<std::vector<std::vector<size_t>>> orders = ReadOrders(absl::StrCat(dir, "/", order, ".order"), c);
    if (!orders.ok()) return orders.status();
    run.orders = *std::move(orders);
    runs.push_back(std::move(run));
  }
  if (runs.empty()) return absl::InvalidArgumentError(absl::StrCat("no runs in \"", path, "\""));
  return runs;
}

// The tensors of `shapes` one after another in raw float32 at `path`.
absl::StatusOr<std::vector<at::Tensor>> ReadTensors(const std::string& path,
                                                    const std::vector<std::vector<int64_t>>& shapes) {
  std::ifstream in(path, std::ios::binary);
  std::vector<at::Tensor> tensors;
  for (const std::vector<int64_t>& shape : shapes) {
    at::Tensor t = at::empty(shape, at::kFloat);
    in.read(reinterpret_cast<char*>(t.data_ptr<float>()), static_cast<std::streamsize>(t.numel() * sizeof(float)));
    tensors.push_back(t);
  }
  if (!in || in.peek() != std::char_traits<char>::eof()) return absl::DataLossError(absl::StrCat("cannot read ", path));
  return tensors;
}

bool WriteTensors(const std::string& path, const std::vector<at::Tensor>& tensors) {
  std::ofstream out(path, std::ios::binary);
  for (const at::Tensor& t : tensors) {
    const at::Tensor c = t.contiguous();
    out.write(reinterpret_cast<const char*>(c.data_ptr<float>()), static_cast<std::streamsize>(c.numel() * sizeof(float)));
  }
  return static_cast<bool>(out.flush());
}

// A bucket of `gradients` (the manifest's order) laid out in `order`, at `step`, packed
// by the chain's `codec` as the engine's layout packs it (Note [A codec's bytes]). The
// buffer holds NaN before it is packed, so that a codec that packs nothing hands over a
// bucket the hook must write whole.
GradBucket MakeBucket(const std::vector<at::Tensor>& gradients, const std::vector<size_t>& order, int64_t step,
                      const BucketCodec& codec) {
  GradBucket bucket;
  bucket.index = 0;
  bucket.is_last = true;
  bucket.step = step;
  std::vector<at::Tensor> grads;
  int64_t offset = 0;
  for (size_t i : order) {
    bucket.parameters.push_back(i);
    bucket.offsets.push_back(offset);
    bucket.sizes.push_back(gradients[i].sizes().vec());
    offset += gradients[i].numel();
    grads.push_back(gradients[i].clone());
  }
  bucket.buffer = codec.Buffer(offset, gradients[order[0]].options());
  bucket.buffer.fill_(std::nan(""));
  std::vector<at::Tensor> parts;
  for (size_t k = 0; k < order.size(); ++k) {
    parts.push_back(bucket.buffer.narrow(0, bucket.offsets[k], Numel(bucket.sizes[k])).view(bucket.sizes[k]));
  }
  bucket.gradients = codec.Pack(grads, parts);
  return bucket;
}

// The bucket's result split back into the manifest's tensors.
std::vector<at::Tensor> Unpack(const at::Tensor& reduced, const GradBucket& bucket, size_t count) {
  std::vector<at::Tensor> out(count);
  for (size_t k = 0; k < bucket.parameters.size(); ++k) {
    out[bucket.parameters[k]] =
        reduced.narrow(0, bucket.offsets[k], Numel(bucket.sizes[k])).view(bucket.sizes[k]).clone();
  }
  return out;
}

absl::StatusOr<PluginSet> Configure(PluginHost& host, const std::string& plugins) {
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(
      absl::StrCat("name: \"parity\" model { preset: VIT_TINY_TEST } data { batch_size: 4 } steps { measured: 1 } "
                   "optimizer { sgd { learning_rate: 0.1 } } distributed { device: CPU gpus_per_node: 2 } ",
                   plugins),
      "plugins", host.schema());
  if (!suite.ok()) return suite.status();
  return host.Configure(suite->experiment(0));
}

// Every step of the case through the run's hook chain; the results written. Returns the
// exit code.
int ReduceSteps(const Case& c, const Run& run, const PluginSet& set, compat::CollectiveGroup& group, int rank,
                int world) {
  std::unique_ptr<CommHook> hook = MakeHookChain(set.engine_parts().hooks, CommContext{&group, rank, world, false, {}, nullptr, {}, {}});
  const std::shared_ptr<const BucketCodec> codec = hook->Codec();
  const std::string dir = absl::GetFlag(FLAGS_dir);
  for (int64_t step = 0; step < c.steps; ++step) {
    const std::string suffix = absl::StrCat("_r", rank, "_s", step, ".f32");
    absl::StatusOr<std::vector<at::Tensor>> gradients = ReadTensors(absl::StrCat(dir, "/grad", suffix), c.shapes);
    if (!gradients.ok()) {
      std::cerr << gradients.status() << "\n";
      return 23;
    }
    GradBucket bucket = MakeBucket(*gradients, run.orders[static_cast<size_t>(step)], step, *codec);
    c10::intrusive_ptr<c10::ivalue::Future> future = hook->Run(bucket);
    future->wait();
    if (future->hasError()) {
      std::cerr << run.name << ": rank " << rank << " step " << step << ": " << future->tryRetrieveErrorMessage()
                << "\n";
      return 22;
    }
    const c10::IValue value = future->value();
    const at::Tensor reduced = (value.isTensor() ? value.toTensor() : value.toTensorVector().at(0)).to(at::kFloat);
    if (!WriteTensors(absl::StrCat(dir, "/", run.name, suffix), Unpack(reduced, bucket, c.shapes.size()))) {
      return 23;
    }
  }
  return 0;
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  at::set_num_threads(1);
  absl::StatusOr<std::optional<WorkerEnv>> env = WorkerEnvFromEnvironment();
  if (!env.ok() || !env->has_value()) {
    std::cerr << "not started as a rank of a job: " << env.status() << "\n";
    return 13;
  }
  const int rank = (*env)->rank, world = (*env)->world_size;
  const std::string dir = absl::GetFlag(FLAGS_dir);
  absl::StatusOr<Case> c = ReadCase(dir);
  absl::StatusOr<std::vector<Run>> runs =
      c.ok() ? ReadRuns(absl::GetFlag(FLAGS_runs), dir, *c) : absl::StatusOr<std::vector<Run>>(c.status());
  if (!runs.ok()) {
    std::cerr << "rank " << rank << ": " << runs.status() << "\n";
    return 13;
  }
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::Create(argv[0], &error));
  PluginHost host({runfiles ? runfiles->Rlocation("ddplab/plugins") : ""});
  absl::StatusOr<ProcessGroupPtr> group = CreateProcessGroup(**env, /*nccl=*/false, std::chrono::seconds(120));
  if (!group.ok()) {
    std::cerr << "rank " << rank << ": " << group.status() << "\n";
    return 13;
  }
  for (const Run& run : *runs) {
    absl::StatusOr<PluginSet> set = Configure(host, run.plugins);
    if (!set.ok()) {
      std::cerr << run.name << ": rank " << rank << ": " << set.status() << "\n";
      return 13;
    }
    if (const int code = ReduceSteps(*c, run, *set, **group, rank, world); code != 0) return code;
  }
  return 0;
}

}  // namespace
}  // namespace ddplab

int main(int argc, char** argv) { return ddplab::Main(argc, argv); }
