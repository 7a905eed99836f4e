// Helpers for plugin tests: configure plugins through the real host, from the test's
// runfiles, as the vit_ddp binary does; and train with them over several processes.
//
//   // plugins/bf16/bf16_test.cc
//   EXPECT_EQ(testing::TrainAndCompare(2, "plugin { bf16 {} }",
//                                      {"--grad_tolerance=0.004", "--wire_dtype=BFloat16"}), "");
#ifndef DDPLAB_PLUGINS_TESTING_PLUGIN_TESTUTIL_H_
#define DDPLAB_PLUGINS_TESTING_PLUGIN_TESTUTIL_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/launch/distributed.h"
#include "core/plugin/plugin_host.h"
#include "ddplab/v1/result.pb.h"

namespace ddplab::testing {

// The experiment's `distributed` fields the helpers below use unless told otherwise.
inline constexpr char kCpuProcesses[] = "device: CPU gpus_per_node: 2";

// Parses `plugins_text` (plugin entries in text format, e.g. "plugin { static_graph {} }")
// into a valid two-process experiment (its distributed fields `distributed`), loads the
// plugins from the test's runfiles and returns what they registered.
absl::StatusOr<PluginSet> ConfigureWithPlugins(const std::string& plugins_text,
                                               const std::string& distributed = kCpuProcesses);

// The PyTorch code the report gives for `plugins_text` on two GPUs (core/plugin/pytorch_form.h),
// then "ddplab only: " and the levers PyTorch has no form of; or the configuration's error.
// `plugins_text` may also set the experiment's precision and optimizer (SGD otherwise).
// `distributed`: the experiment's distributed fields instead (two CPU processes, say).
std::string PyTorchCodeFor(const std::string& plugins_text,
                           const std::string& distributed = "device: CUDA gpus_per_node: 2");

// Loads `text` (an experiment file's text, named "test.textproto") as vit_ddp does, with
// the plugins configured from the runfiles: the loader's error, e.g.
// "test.textproto:7:35: plugin[0].bucket_sizing.first_bucket_cap_mb: must be ...".
absl::Status LoadWithPlugins(const std::string& text);

// Loads `text` as LoadWithPlugins does, and configures its first experiment: what its
// plugins registered, and the experiment as loaded in `experiment`.
absl::StatusOr<PluginSet> ConfigureText(const std::string& text, v1::Experiment* experiment);

// Whether the plugin entries `mine` and `theirs` (each e.g. "zero_copy {}") are refused
// together when loaded, in either order, each time with a message that names both plugins
// and says to list one of them: "" if so, else what went otherwise.
std::string RefusedTogether(const std::string& mine, const std::string& theirs);

// A communication hook from `set` over a one-process Gloo group of its own, as the engine
// would make it (the group lives as long as the process).
std::unique_ptr<CommHook> MakeHook(const PluginSet& set);

// What `hook`'s codec (Note [A codec's bytes]) does with one float32 gradient, as the
// layout calls it: the dtype of the buffer it makes, and whether it packs the gradient
// into it (its values there, handed over as the buffer's view) or packs nothing (the
// buffer untouched, the gradient itself handed over).
struct Packing {
  at::ScalarType buffer_dtype = at::ScalarType::Undefined;
  bool packed = false;
  bool handed_as_is = false;
};
Packing PackOneGradient(const CommHook& hook);

// A bucket of one gradient of `sizes`, holding `values`.
GradBucket OneGradientBucket(const at::Tensor& values, int64_t step);

// The step's only bucket, of `gradients` (parameters 0, 1, ... in order) handed over where
// they lie (GradBucket::gradients), its flat buffer filled with `fill` (NaN: a hook that
// reads the gradients must write the whole result).
GradBucket BucketOfGradients(const std::vector<at::Tensor>& gradients, int64_t step, double fill);

// Trains the tiny ViT on `ranks` processes over Gloo with the plugins of `plugins_text`
// (//core/testing:engine_worker, whose flags `flags` adds to) against one process over
// the concatenated batch: "" if every check held, else the worker's exit and output. The
// processes (3, or as many as a run asks for beyond that) stay for the test binary's later
// runs, a run of fewer ranks taking the first ones (until a run fails).
std::string TrainAndCompare(int ranks, const std::string& plugins_text, const std::vector<std::string>& flags = {});

// As TrainAndCompare, and what the engine measured on rank 0, as a run's result records
// it: gradient_error, gradient_cosine, effective_error, parameter_fidelity, hook_stats.
// An error where a check failed.
absl::StatusOr<v1::RunResult> TrainAndMeasure(int ranks, const std::string& plugins_text,
                                              const std::vector<std::string>& flags = {});

// As TrainAndCompare on two GPUs over NCCL (the worker's --cuda; tolerances allow for
// cuDNN choosing other algorithms for the reference's larger batch). Callers skip where
// there are none: REQUIRE_TWO_GPUS().
std::string TrainAndCompareOnGpus(const std::string& plugins_text, const std::vector<std::string>& flags = {});
bool HasTwoGpus();

// What a plugin's own check over several processes found, by world size: `worker` (a
// runfiles path, e.g. "ddplab/plugins/fp8/fp8_worker") started as one job of the largest
// of `worlds` Gloo processes with --worlds and --out=FILE, which checks at each world
// (each_world.h) and into whose FILE.<world> its rank 0 writes "name value" lines.
// `failure` is "" where every rank exited 0 and rank 0 wrote the world's values (a failed
// job fails every world). Each worker and list of worlds runs once per test binary.
//
//   const RanksRun& r = RunOnRanks("ddplab/plugins/fp8/fp8_worker", {2, 3, 5}).at(3);
struct RanksRun {
  std::string failure;
  std::map<std::string, double> values;
};
const std::map<int, RanksRun>& RunOnRanks(const std::string& worker, const std::vector<int>& worlds);

// Small buckets for the tiny ViT (several buckets, and a rebuild that changes them).
inline constexpr char kSmallBuckets[] = "plugin { bucket_sizing { bucket_cap_mb: 0.02 first_bucket_cap_mb: 0.004 } }";

}  // namespace ddplab::testing

// Multi-process tests over Gloo skip where LibTorch has no Gloo (core/testing/gloo.h);
// GPU tests where this build or machine has fewer than two GPUs.
#include "core/testing/gloo.h"
#define REQUIRE_TWO_GPUS() \
  if (!::ddplab::testing::HasTwoGpus()) GTEST_SKIP() << "needs a CUDA build and two GPUs"

#endif  // DDPLAB_PLUGINS_TESTING_PLUGIN_TESTUTIL_H_
