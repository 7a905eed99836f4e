// The plugin API: what a ddplab plugin implements and what the host offers it.
//
// A plugin is a shared library, lib<name>.so, built with ddplab_plugin_library()
// (sdk/plugin.bzl): ddplab's own in their packages under plugins/ (ddplab_plugin(),
// tools/build_defs/cc.bzl), a user's in a workspace of its own (examples/fp16_plugin),
// found through --plugin_dir as <dir>/lib<name>.so or <dir>/<name>/lib<name>.so. It
// exports one symbol, ddplabGetPluginInfo(), returning a DdplabPluginInfo. The host loads
// the library (only where an experiment names it),
// checks the API version and the build identity (LibTorch version, C++ ABI, protobuf
// version, CUDA or CPU build) against its own and refuses any mismatch, because plugin
// and host share C++ types (torch::Tensor, the protobuf runtime). Then, once per
// experiment a process runs, it hands the plugin its configuration and a PluginRegistrar,
// and the plugin registers its behaviour at the engine's extension points
// (core/engine/extension_points.h). Plugins are never unloaded.
//
//   // plugins/static_graph/static_graph.cc
//   namespace {
//   class StayUnused : public ddplab::MissingGradients {
//    public:
//     std::string Accept(const std::vector<size_t>&, bool first_step) const override {
//       return first_step ? "" : "a parameter used in the first step received no gradient";
//     }
//   };
//   void Register(const ddplab::plugins::static_graph::v1::Config&, ddplab::PluginRegistrar& registrar) {
//     registrar.SetMissingGradients(std::make_unique<StayUnused>());
//   }
//   }  // namespace
//   DDPLAB_PLUGIN("static_graph", "3.0.0", ddplab::plugins::static_graph::v1::Config,
//                 ddplab::PluginStatus::kStable, Register)
//
// The configuration message is the plugin's own (plugins/static_graph/static_graph.proto),
// compiled into its library; the host reads `plugin { static_graph {} }` with its schema
// and hands Register the message typed (Note [Plugin configs by name],
// core/config/plugin_schema.h).
//
// docs/writing_a_plugin.md walks through a new plugin.

#ifndef DDPLAB_CORE_PLUGIN_PLUGIN_API_H_
#define DDPLAB_CORE_PLUGIN_PLUGIN_API_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/version.h>

#include "core/build_flags.h"
#include "core/engine/extension_points.h"
#include "core/training/step_runner.h"
#include "core/torch_compat.h"
#include "sdk/sdk_digest.h"  // DDPLAB_SDK_DIGEST
#include "google/protobuf/stubs/common.h"

// Plugins are compiled with hidden visibility; the host's types they use must stay
// visible so that the dynamic linker resolves them against the host binary.
#pragma GCC visibility push(default)
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#pragma GCC visibility pop

// Bumped whenever DdplabPluginInfo or an interface a plugin implements or calls changes
// incompatibly. 5: the engine's extension points replace EngineOptions. 6: a plugin's
// PyTorch form (PluginRegistrar::DescribeInPyTorch). 7: GradBucket::sampled. 8: the
// hook chain (WrapCommHook, BucketFormat) replaces collectives wrappers, a single
// communication hook and parameter updates; Lossy replaces SampleGradientError. 9: the
// plugin carries its configuration's schema (config_descriptor) and receives it typed.
// 10: the trainer's step runner (SetStepRunner, core/training/step_runner.h);
// PyTorchForm::only_on_gpus. 11: DdplabPluginInfo::sdk_digest. From 11 on, whether a
// plugin fits the host is its SDK digest's question (Note [The SDK's digest],
// sdk/BUILD.bazel): this number changes only with DdplabPluginInfo's own layout, read
// before the digest is.
#define DDPLAB_PLUGIN_API_VERSION 11

namespace ddplab {

// The engine's extension points a plugin can take (for the host's composition check).
// The hook chain is one point with three roles, which set a hook's place in it (inside
// out: the one that reduces, the codecs, the other wrappers, each kind in listing order).
enum class ExtensionPoint {
  kBucketPlanner,
  kMissingGradients,
  kGradientLayout,
  kCommHook,     // reduces the bucket itself (PowerSGD): at most one plugin
  // Changes what travels (bf16): wraps whatever reduces. What it may hand the hook below
  // (Note [What a codec hands below], core/engine/extension_points.h): a GradBucket of the
  // same index, parameters, offsets and sizes, its `buffer` any flat tensor of as many
  // elements (another dtype, scaled values), which the hook below reduces and completes
  // with; the codec then turns that result back into the bucket's own.
  kCodec,
  kHookWrapper,  // acts around the reduction, the bucket as it is (optimizer overlap)
  kStepRunner,   // runs each training step (core/training/step_runner.h): at most one plugin
};

// How far a plugin is to be trusted: stable (measured, tested), experimental (works,
// measured no gain yet), diagnostic (measures something, never a way to train: its
// runs are never recommended).
enum class PluginStatus : int32_t { kStable = 0, kExperimental = 1, kDiagnostic = 2 };

// Called around every training step (warm-up, measured and cool-down).
class StepCallbacks {
 public:
  virtual ~StepCallbacks() = default;
  // `step` counts from 0 over the whole run.
  virtual void OnStepBegin(int64_t step) { (void)step; }
  virtual void OnStepEnd(int64_t step) { (void)step; }
};

// How a plugin's lever reads in PyTorch, for the report's code (Python):
//
//   model = DDP(model, device_ids=[local_rank], <ddp_arguments...>)
//   state = <hook_state>
//   model.register_comm_hook(state, <hook_wrapper>(<hook>))
//
// `default_hooks` and `powerSGD` name torch.distributed.algorithms.ddp_comm_hooks'
// default_hooks and powerSGD_hook modules. A plugin that describes nothing has no form in
// PyTorch: the report says its gain needs ddplab's engine.
struct PyTorchForm {
  std::vector<std::string> ddp_arguments;  // e.g. "static_graph=True"
  std::string hook;        // e.g. "powerSGD.powerSGD_hook"
  std::string hook_state;  // e.g. "powerSGD.PowerSGDState(process_group=None, ...)"; "" for None
  // Wraps whatever hook is registered ("default_hooks.bf16_compress_wrapper"); alone, the
  // plugin's `hook` stands for it.
  std::string hook_wrapper;
  // What of its configuration PyTorch has no form of, e.g. "powersgd.bf16_state".
  std::vector<std::string> not_in_pytorch;
  // Why PyTorch's form runs only on GPUs, where it does (bf16_compress_hook: "needs CUDA
  // and NCCL"); on CPUs the report then says PyTorch has no form of the lever.
  std::string only_on_gpus;
};

// What a plugin's register_callbacks receives: its configuration and the extension
// points it may register with. Only virtual functions, so that plugins need no symbols
// from the host to call them.
class PluginRegistrar {
 public:
  virtual ~PluginRegistrar() = default;

  // The plugin's configuration in its wire format; DDPLAB_PLUGIN parses it into the
  // plugin's own message and hands that to the plugin's Register.
  virtual const std::string& config_bytes() const = 0;

  // Refuses the configuration; the host reports `message` with the plugin's name and
  // does not run the experiment. RejectField names the field of the configuration at
  // fault ("first_bucket_cap_mb"), so that the message points at its file:line:column.
  virtual void Reject(const std::string& message) = 0;
  virtual void RejectField(const std::string& field, const std::string& message) = 0;

  // The extension points (core/engine/extension_points.h). Each Set takes the point for
  // this plugin alone: a second plugin setting it is refused, naming both.
  virtual void SetBucketPlanner(std::shared_ptr<const BucketPlanner> planner) = 0;
  virtual void SetMissingGradients(std::shared_ptr<const MissingGradients> policy) = 0;
  virtual void SetGradientLayout(LayoutFactory factory) = 0;
  // Puts a hook in the chain (extension_points.h), made by `wrapper` around the hook
  // below it, in the role `point` (kCommHook, kCodec or kHookWrapper) gives.
  virtual void WrapCommHook(ExtensionPoint point, HookWrapper wrapper) = 0;
  // Runs the training steps (core/training/step_runner.h); the factory's Refusal vets
  // each experiment before anything runs.
  virtual void SetStepRunner(std::shared_ptr<const StepRunnerFactory> factory) = 0;
  // This plugin does not compose with whatever plugin takes `point`; `why` is said when
  // both are listed.
  virtual void Refuse(ExtensionPoint point, const std::string& why) = 0;

  // The plugin's reduction is lossy: the suite's convergence check trains with it, and
  // its error is sampled against an exact reduction (core/fidelity/error_sampler.h) in
  // windows of consecutive synced steps (never measured ones), one starting every
  // `sample_error_every` steps; the smallest asked for wins; 0: never sampled.
  virtual void Lossy(int sample_error_every) = 0;
  virtual void AddStepCallbacks(std::unique_ptr<StepCallbacks> callbacks) = 0;
  // The plugin's lever as PyTorch has it (see PyTorchForm).
  virtual void DescribeInPyTorch(const PyTorchForm& form) = 0;
};

}  // namespace ddplab

extern "C" {

// What ddplabGetPluginInfo returns. Strings are static and live as long as the plugin.
struct DdplabPluginInfo {
  // DDPLAB_PLUGIN_API_VERSION the plugin was built with.
  uint32_t api_version;
  // The plugin's name, as experiment files write it: `plugin { <name> { ... } }`.
  const char* name;
  // The plugin's own version.
  const char* plugin_version;
  // Build identity: what the plugin was compiled against.
  const char* torch_version;  // TORCH_VERSION
  int32_t cxx11_abi;          // _GLIBCXX_USE_CXX11_ABI
  int32_t protobuf_version;   // GOOGLE_PROTOBUF_VERSION
  int32_t cuda_build;         // DDPLAB_CUDA_BUILD
  // The configuration message's descriptor, from the plugin's own generated code: its
  // .proto file joins the experiment schema (core/config/plugin_schema.h).
  const google::protobuf::Descriptor* (*config_descriptor)();
  // A ddplab::PluginStatus.
  int32_t status;
  // Parses the configuration and registers the plugin's behaviour; may Reject() it.
  void (*register_callbacks)(ddplab::PluginRegistrar& registrar);
  // DDPLAB_SDK_DIGEST: the SDK the plugin was built against (Note [The SDK's digest]).
  const char* sdk_digest;
};

// The one symbol a plugin exports.
typedef DdplabPluginInfo (*DdplabGetPluginInfoFn)();

}  // extern "C"

#define DDPLAB_PLUGIN_ENTRY_SYMBOL "ddplabGetPluginInfo"

namespace ddplab::internal_plugin_api {

// The plugin's configuration parsed into its own message, then its Register.
template <typename Config, void (*Register)(const Config&, PluginRegistrar&)>
void RegisterTyped(PluginRegistrar& registrar) {
  Config config;
  if (!config.ParseFromString(registrar.config_bytes())) {
    registrar.Reject("its configuration is not a " + Config::descriptor()->full_name() + " message");
    return;
  }
  Register(config, registrar);
}

}  // namespace ddplab::internal_plugin_api

// Defines a plugin's entry point with this build's identity. CONFIG is the plugin's
// configuration message (C++ type); REGISTER a void(const CONFIG&, PluginRegistrar&).
#define DDPLAB_PLUGIN(NAME, VERSION, CONFIG, STATUS, REGISTER)                                        \
  extern "C" __attribute__((visibility("default"))) DdplabPluginInfo ddplabGetPluginInfo() {       \
    return DdplabPluginInfo{DDPLAB_PLUGIN_API_VERSION,                                           \
                            NAME,                                                                \
                            VERSION,                                                             \
                            TORCH_VERSION,                                                       \
                            _GLIBCXX_USE_CXX11_ABI,                                              \
                            GOOGLE_PROTOBUF_VERSION,                                             \
                            DDPLAB_CUDA_BUILD,                                                   \
                            &CONFIG::descriptor,                                                 \
                            static_cast<int32_t>(STATUS),                                        \
                            &::ddplab::internal_plugin_api::RegisterTyped<CONFIG, REGISTER>,     \
                            DDPLAB_SDK_DIGEST};                                                  \
  }

#endif  // DDPLAB_CORE_PLUGIN_PLUGIN_API_H_
