// A test plugin that reports another LibTorch and the other C++ ABI, as one built
// against a different LibTorch would.
#include "core/plugin/plugin_api.h"
#include "core/testdata/plugins/bad_identity/bad_identity.pb.h"

namespace {
void Register(ddplab::PluginRegistrar&) {}
}  // namespace

extern "C" __attribute__((visibility("default"))) DdplabPluginInfo ddplabGetPluginInfo() {
  return DdplabPluginInfo{DDPLAB_PLUGIN_API_VERSION, "bad_identity", "1.0.0", "0.0.1",
                          1 - _GLIBCXX_USE_CXX11_ABI, GOOGLE_PROTOBUF_VERSION, DDPLAB_CUDA_BUILD,
                          &ddplab::testdata::bad_identity::v1::Config::descriptor, 0, Register, DDPLAB_SDK_DIGEST};
}
