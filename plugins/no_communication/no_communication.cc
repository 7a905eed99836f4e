// no_communication: a diagnostic. Each bucket goes through the engine (grouping, the
// hook call, the wait before the optimizer) but nothing is exchanged: every rank keeps
// its own gradient. Against the same configuration with communication, the difference
// is what communicating costs this step, on the device and on the host; against one
// process, what running several processes and the engine costs without it.
#include "core/plugin_api.h"

namespace {

class KeepLocalHook : public ddplab::CommHook {
 public:
  c10::intrusive_ptr<c10::ivalue::Future> Run(ddplab::GradBucket& bucket) override {
    auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
    future->markCompleted(c10::IValue(bucket.buffer));
    return future;
  }
  std::map<std::string, double> Stats() const override { return {{ddplab::kStatNoCommunication, 1}}; }
};

void Register(ddplab::PluginRegistrar& registrar) {
  registrar.SetCommHook([](const ddplab::CommContext&) -> std::unique_ptr<ddplab::CommHook> {
    return std::make_unique<KeepLocalHook>();
  });
}

}  // namespace

DDPLAB_PLUGIN("no_communication", "1.0.0", "ddplab.v1.NoCommunicationConfig", Register)
