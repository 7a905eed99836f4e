// The plugin API: what a ddplab plugin implements and what the engine calls.
//
// A plugin is a shared library in its own package under plugins/, built with
// ddplab_plugin() (tools/build_defs/cc.bzl), that exports one symbol,
// ddplabGetPluginInfo(), returning a DdplabPluginInfo. The host loads the library,
// checks the API version and the build identity (LibTorch version, C++ ABI, protobuf
// version, CUDA or CPU build) against its own and refuses any mismatch, because plugin
// and host share C++ types (torch::Tensor, protobuf messages). Then it calls
// `register_callbacks` once with a PluginRegistrar holding the plugin's configuration.
// Plugins are never unloaded.
//
//   // plugins/bucket_view/bucket_view.cc
//   namespace {
//   void Register(ddplab::PluginRegistrar& registrar) {
//     registrar.AddEngineOptions([](ddplab::EngineOptions& options) {
//       options.gradient_as_bucket_view = true;
//     });
//   }
//   }  // namespace
//   DDPLAB_PLUGIN("bucket_view", "1.0.0", "ddplab.v1.BucketViewConfig", Register)
//
// The extension points, in the order the engine uses them:
//   1. engine options (AddEngineOptions): bucket caps, static graph, gradient views;
//      called once before the engine is built, in the order plugins are listed.
//   2. a communication hook (SetCommHook): takes a bucket of gradients and returns a
//      future of the reduced bucket, as c10d's comm hooks; at most one plugin sets it.
//   3. step callbacks (AddStepCallbacks): called at the start and end of every step.

#ifndef DDPLAB_CORE_PLUGIN_API_H_
#define DDPLAB_CORE_PLUGIN_API_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>
#include <ATen/core/Tensor.h>
#include <torch/version.h>

#include "core/build_flags.h"
#include "core/torch_compat.h"
#include "google/protobuf/stubs/common.h"

// Plugins are compiled with hidden visibility; the host's types they use must stay
// visible so that the dynamic linker resolves them against the host binary.
#pragma GCC visibility push(default)
#include "ddplab/v1/plugins.pb.h"
#include "google/protobuf/message.h"
#pragma GCC visibility pop

// Bumped whenever DdplabPluginInfo or an interface below changes incompatibly (a field
// added to EngineOptions changes its layout). 2: EngineOptions::tail_buckets.
// 3: EngineOptions::updates_beside_forward and reversed_buckets.
// 4: CommHook::ReadsGradientsWhereTheyLie and GradBucket::gradients.
#define DDPLAB_PLUGIN_API_VERSION 4

namespace ddplab {

// The data-parallel engine's settings. The engine starts from these defaults (PyTorch
// DDP's) and lets each plugin change them in turn.
struct EngineOptions {
  // Bytes per gradient bucket (DDP's bucket_cap_mb, in bytes: MB are 10^6 bytes).
  int64_t bucket_cap_bytes = 25 * 1000 * 1000;
  // Bytes of the first bucket, the last gradients that backward produces.
  int64_t first_bucket_cap_bytes = 1000 * 1000;
  // Bucket caps to sweep, one run each; empty for a single run.
  std::vector<int64_t> sweep_bucket_cap_bytes;
  // The graph is the same every step (DDP's static_graph).
  bool static_graph = false;
  // Gradients are views into bucket buffers (DDP's gradient_as_bucket_view).
  bool gradient_as_bucket_view = false;
  // Gradients are averaged where autograd left them, each bucket's in one grouped
  // all-reduce: no bucket buffers and no copy (the zero_copy plugin). Only with the
  // engine's own all-reduce in the gradients' dtype: not with gradient_as_bucket_view,
  // a communication hook or another comm_dtype (the plugin host refuses those).
  bool reduce_in_place = false;
  // The engine's collectives are launched from a thread of its own, on a stream ordered
  // after the bucket's gradients, instead of from autograd's thread inside backward (the
  // launch_thread plugin). A hook's work is the hook's own affair.
  bool launch_thread = false;
  // Each bucket's parameters are updated by the optimizer as soon as the bucket's
  // average is in place (the optimizer_overlap plugin), in bucket order after backward's
  // compute, while the last buckets are still being reduced; the step then has no
  // optimizer pass of its own after the last reduction.
  bool overlap_optimizer = false;
  // With overlap_optimizer: the updates start during backward, each as its bucket's
  // reduction is launched, on a stream of their own beside backward's compute. Only with
  // the engine's own all-reduce started from autograd's thread: not with a communication
  // hook or launch_thread (the plugin host refuses those).
  bool optimizer_during_backward = false;
  // The last this many buckets of each step are reduced over a second process group (the
  // tail_communicator plugin), whose NCCL communicator has `tail_channels` channels (0:
  // NCCL's choice), each after the first group's last all-reduce of the step. Only with
  // the engine's own all-reduce: not with a communication hook (the plugin host refuses).
  int tail_buckets = 0;
  int tail_channels = 0;
  // With overlap_optimizer after backward: the step does not wait for the last reductions
  // and updates; they run on a stream of the engine's own beside the next step's forward,
  // which waits for each bucket's update just before it first reads the bucket's
  // parameters (DataParallelEngine::WaitForParameters; the forward_overlap plugin). Only
  // with the engine's own all-reduce: not with a communication hook, the optimizer during
  // backward or the tail communicator (the plugin host refuses those).
  bool updates_beside_forward = false;
  // With updates_beside_forward: the last this many buckets of each step (the first
  // layers' gradients, which the next forward needs first) are reduced in reverse order,
  // once all of them are complete, instead of in the order they became complete.
  int reversed_buckets = 0;
  // The dtype gradients travel in (e.g. at::kBFloat16); Undefined: their own. A
  // communication hook reads it for what it sends.
  at::ScalarType comm_dtype = at::ScalarType::Undefined;
  // Every this many synced steps, also reduce the buckets exactly and report the
  // relative error of the (lossy) result against it; 0: never. Measured steps are never
  // sampled: the error comes from warm-up and cool-down steps.
  int gradient_error_every = 0;
};

// A bucket of gradients ready for reduction (c10d's GradBucket).
struct GradBucket {
  // Position in the engine's bucket order: bucket 0 (the last layers' gradients) is
  // complete first.
  size_t index = 0;
  // The flattened gradients, contiguous. A hook may reduce it in place. Where
  // `gradients` is not empty, only the parts that alias one of them hold their gradient
  // yet, and the hook writes the bucket's result into all of it.
  at::Tensor buffer;
  // Empty unless the hook reads gradients where they lie (CommHook::
  // ReadsGradientsWhereTheyLie), and then per parameter, shaped like it: where its
  // gradient is, autograd's own tensor or its part of `buffer` (where autograd added into
  // a bucket view, or an unused parameter's zeros); the engine copies none of them into
  // `buffer`. On a GPU, a hook that
  // reads them on a stream other than the one current in Run records that stream on
  // them (Tensor::record_stream) before dropping them, as for any tensor the caching
  // allocator could hand out again.
  std::vector<at::Tensor> gradients;
  // Where each parameter's gradient starts in `buffer`, and its shape.
  std::vector<int64_t> offsets;
  std::vector<std::vector<int64_t>> sizes;
  // The last bucket of the step.
  bool is_last = false;
  // Synced steps before this one (0 on the first).
  int64_t step = 0;
  // Each gradient's parameter: its index in the model's parameters (stable when the
  // engine regroups buckets, so per-parameter state can be keyed by it).
  std::vector<size_t> parameters;
};

// What a communication hook works with.
struct CommContext {
  // c10d's process group (NCCL on GPUs, Gloo on CPUs): allreduce, broadcast, ...
  compat::CollectiveGroup* process_group = nullptr;
  int rank = 0;
  int world_size = 1;
  bool nccl = false;  // the group is NCCL's (GPU tensors), else Gloo's
  // The engine's resolved options (comm_dtype, ...), valid while the engine lives.
  const EngineOptions* options = nullptr;
};

// The CommHook::Stats key of a hook that exchanges nothing (the no_communication
// diagnostic): its runs are marked so (RunResult.no_communication) and never recommended.
inline constexpr char kStatNoCommunication[] = "no_communication";

// Reduces buckets across ranks (c10d's comm hook). The engine calls Run for each bucket
// as soon as its gradients are ready and waits on the future before the optimizer step.
class CommHook {
 public:
  virtual ~CommHook() = default;
  // Starts reducing `bucket` and returns a future that completes with the averaged
  // buffer (a Tensor of the bucket's shape and dtype).
  virtual c10::intrusive_ptr<c10::ivalue::Future> Run(GradBucket& bucket) = 0;
  // Figures for the run's result (e.g. "compression_ratio"), read after the run.
  virtual std::map<std::string, double> Stats() const { return {}; }
  // True if Run reads each gradient from GradBucket::gradients and writes the whole
  // result into GradBucket::buffer: the engine then hands gradients over where autograd
  // left them instead of copying them into the bucket first (a read and a write of every
  // gradient saved where the hook overwrites the bucket anyway, as PowerSGD's projection
  // does). Steps that sample the gradient error still fill the bucket.
  virtual bool ReadsGradientsWhereTheyLie() const { return false; }
};

// Called around every training step (warm-up, measured and cool-down).
class StepCallbacks {
 public:
  virtual ~StepCallbacks() = default;
  // `step` counts from 0 over the whole run.
  virtual void OnStepBegin(int64_t step) { (void)step; }
  virtual void OnStepEnd(int64_t step) { (void)step; }
};

// What a plugin's register_callbacks receives: its configuration and the extension
// points it may register with. Only virtual functions, so that plugins need no symbols
// from the host to call them.
class PluginRegistrar {
 public:
  virtual ~PluginRegistrar() = default;

  // The plugin's configuration: the message whose type DdplabPluginInfo::config_type
  // names, e.g. static_cast<const ddplab::v1::BucketSizingConfig&>(registrar.config()).
  virtual const google::protobuf::Message& config() const = 0;

  // Refuses the configuration; the host reports `message` with the plugin's name and
  // does not run the experiment.
  virtual void Reject(const std::string& message) = 0;

  virtual void AddEngineOptions(std::function<void(EngineOptions&)> callback) = 0;
  virtual void SetCommHook(std::function<std::unique_ptr<CommHook>(const CommContext&)> factory) = 0;
  virtual void AddStepCallbacks(std::unique_ptr<StepCallbacks> callbacks) = 0;
};

}  // namespace ddplab

extern "C" {

// What ddplabGetPluginInfo returns. Strings are static and live as long as the plugin.
struct DdplabPluginInfo {
  // DDPLAB_PLUGIN_API_VERSION the plugin was built with.
  uint32_t api_version;
  // The plugin's name: the field of ddplab.v1.Plugin that configures it.
  const char* name;
  // The plugin's own version.
  const char* plugin_version;
  // Build identity: what the plugin was compiled against.
  const char* torch_version;  // TORCH_VERSION
  int32_t cxx11_abi;          // _GLIBCXX_USE_CXX11_ABI
  int32_t protobuf_version;   // GOOGLE_PROTOBUF_VERSION
  int32_t cuda_build;         // DDPLAB_CUDA_BUILD
  // Full name of the configuration message, e.g. "ddplab.v1.BucketSizingConfig".
  const char* config_type;
  // Registers the plugin's callbacks; may Reject() the configuration.
  void (*register_callbacks)(ddplab::PluginRegistrar& registrar);
};

// The one symbol a plugin exports.
typedef DdplabPluginInfo (*DdplabGetPluginInfoFn)();

}  // extern "C"

#define DDPLAB_PLUGIN_ENTRY_SYMBOL "ddplabGetPluginInfo"

// Defines a plugin's entry point with this build's identity.
#define DDPLAB_PLUGIN(NAME, VERSION, CONFIG_TYPE, REGISTER)                               \
  extern "C" __attribute__((visibility("default"))) DdplabPluginInfo ddplabGetPluginInfo() { \
    return DdplabPluginInfo{DDPLAB_PLUGIN_API_VERSION,                                   \
                            NAME,                                                        \
                            VERSION,                                                     \
                            TORCH_VERSION,                                               \
                            _GLIBCXX_USE_CXX11_ABI,                                      \
                            GOOGLE_PROTOBUF_VERSION,                                     \
                            DDPLAB_CUDA_BUILD,                                           \
                            CONFIG_TYPE,                                                 \
                            REGISTER};                                                   \
  }

#endif  // DDPLAB_CORE_PLUGIN_API_H_
