// A test lever that says it is lossy and degrades the averaged gradient by a factor,
// `keep` (a smaller step, the same on every rank): the convergence check must call
// keep 0.5 worse and keep 1 (exact) within (Note [The convergence check]). `delay_ms`
// makes it slower by design (in the first `delayed_calls` calls when set), `exact` says it
// is lossless. Where DDPLAB_TEST_CONFIGURATIONS names a file, each configuration appends
// "<process id> <delay_ms>" to it, for the suite's test of how often a process configures
// a run's plugins (Note [Configured once], experiments/suite_runner.h).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/plugin/plugin_api.h"
#include "core/testdata/plugins/shrink/shrink.pb.h"

namespace {

class ShrinkHook : public ddplab::HookWrapperBase {
 public:
  ShrinkHook(std::unique_ptr<ddplab::CommHook> inner, double keep, uint32_t delay_ms,
             uint32_t delayed_calls)
      : HookWrapperBase(std::move(inner)), keep_(keep), delay_ms_(delay_ms), delayed_calls_(delayed_calls) {}

  c10::intrusive_ptr<c10::ivalue::Future> Run(ddplab::GradBucket& bucket) override {
    const bool delayed = delayed_calls_ == 0 || calls_ < delayed_calls_;
    ++calls_;
    if (delay_ms_ > 0 && delayed) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    const double keep = keep_;
    return inner_->Run(bucket)->then(
        [keep](c10::ivalue::Future& reduced) {
          const c10::IValue value = reduced.value();
          at::Tensor t = value.isTensor() ? value.toTensor() : value.toTensorVector().at(0);
          if (keep != 1) t.mul_(keep);
          return c10::IValue(t);
        },
        c10::TensorType::get());
  }

 private:
  double keep_;
  uint32_t delay_ms_;
  uint32_t delayed_calls_;
  uint64_t calls_ = 0;
};

void Register(const ddplab::testdata::shrink::v1::Config& config, ddplab::PluginRegistrar& registrar) {
  if (!(config.keep() > 0 && config.keep() <= 1)) {
    registrar.RejectField("keep", "must be in (0, 1]");
    return;
  }
  if (const char* log = std::getenv("DDPLAB_TEST_CONFIGURATIONS"); log != nullptr && *log != '\0') {
    if (FILE* f = std::fopen(log, "a")) {
      std::fprintf(f, "%d %u\n", static_cast<int>(getpid()), config.delay_ms());
      std::fclose(f);
    }
  }
  const double keep = config.keep();
  const uint32_t delay_ms = config.delay_ms();
  const uint32_t delayed_calls = config.delayed_calls();
  registrar.WrapCommHook(ddplab::ExtensionPoint::kCodec,
                         [keep, delay_ms, delayed_calls](std::unique_ptr<ddplab::CommHook> inner,
                                                         const ddplab::CommContext&)
                             -> std::unique_ptr<ddplab::CommHook> {
                           return std::make_unique<ShrinkHook>(std::move(inner), keep, delay_ms,
                                                               delayed_calls);
                         });
  if (!config.exact()) registrar.Lossy(0);
}

}  // namespace

DDPLAB_PLUGIN("shrink", "1.0.0", ddplab::testdata::shrink::v1::Config, ddplab::PluginStatus::kExperimental, Register)
