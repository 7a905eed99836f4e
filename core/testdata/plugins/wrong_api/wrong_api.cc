// A test plugin built against a future plugin API.
#include "core/plugin/plugin_api.h"
#include "core/testdata/plugins/wrong_api/wrong_api.pb.h"

namespace {
void Register(ddplab::PluginRegistrar&) {}
}  // namespace

extern "C" __attribute__((visibility("default"))) DdplabPluginInfo ddplabGetPluginInfo() {
  return DdplabPluginInfo{DDPLAB_PLUGIN_API_VERSION + 1, "wrong_api", "1.0.0", TORCH_VERSION,
                          _GLIBCXX_USE_CXX11_ABI, GOOGLE_PROTOBUF_VERSION, DDPLAB_CUDA_BUILD,
                          &ddplab::testdata::wrong_api::v1::Config::descriptor, 0, Register, DDPLAB_SDK_DIGEST};
}
