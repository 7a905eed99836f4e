// no_communication: a diagnostic. Each bucket goes through the engine (grouping, the
// hook call, the wait before the optimizer) but nothing is exchanged: every rank keeps
// its own gradient. Against the same configuration with communication, the difference
// is what communicating costs this step; against one process, what running several
// processes and the engine costs without it. Its runs are never recommended (its status).
#include "core/plugin/plugin_api.h"
#include "plugins/no_communication/no_communication.pb.h"

namespace {

class KeepLocalHook : public ddplab::CommHook {
 public:
  c10::intrusive_ptr<c10::ivalue::Future> Run(ddplab::GradBucket& bucket) override {
    auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
    future->markCompleted(c10::IValue(bucket.buffer));
    return future;
  }
};

void Register(const ddplab::plugins::no_communication::v1::Config&, ddplab::PluginRegistrar& registrar) {
  registrar.WrapCommHook(ddplab::ExtensionPoint::kCommHook,
                         [](std::unique_ptr<ddplab::CommHook>, const ddplab::CommContext&) -> std::unique_ptr<ddplab::CommHook> {
                           return std::make_unique<KeepLocalHook>();
                         });
}

}  // namespace

DDPLAB_PLUGIN("no_communication", "2.0.0", ddplab::plugins::no_communication::v1::Config, ddplab::PluginStatus::kDiagnostic, Register)
