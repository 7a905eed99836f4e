// A test plugin built against another plugin SDK (Note [The SDK's digest],
// sdk/BUILD.bazel): this API version, another SDK digest.
#include "core/plugin/plugin_api.h"
#include "core/testdata/plugins/other_sdk/other_sdk.pb.h"

namespace {
void Register(ddplab::PluginRegistrar&) {}
}  // namespace

extern "C" __attribute__((visibility("default"))) DdplabPluginInfo ddplabGetPluginInfo() {
  return DdplabPluginInfo{DDPLAB_PLUGIN_API_VERSION, "other_sdk", "1.0.0", TORCH_VERSION,
                          _GLIBCXX_USE_CXX11_ABI, GOOGLE_PROTOBUF_VERSION, DDPLAB_CUDA_BUILD,
                          &ddplab::testdata::other_sdk::v1::Config::descriptor, 0, Register, "0123456789abcdef"};
}
