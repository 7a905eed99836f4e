// A test plugin that reports another LibTorch and the other C++ ABI, as one built
// against a different LibTorch would.
#include "core/plugin_api.h"

namespace {
void Register(ddplab::PluginRegistrar&) {}
}  // namespace

extern "C" __attribute__((visibility("default"))) DdplabPluginInfo ddplabGetPluginInfo() {
  return DdplabPluginInfo{DDPLAB_PLUGIN_API_VERSION, "bad_identity", "1.0.0", "0.0.1",
                          1 - _GLIBCXX_USE_CXX11_ABI, GOOGLE_PROTOBUF_VERSION, DDPLAB_CUDA_BUILD,
                          "ddplab.plugins.bucket_view.v1.Config", 0, Register};
}
