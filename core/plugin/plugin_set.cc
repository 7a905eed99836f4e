// What the plugins of one experiment registered, judged: whether they compose, and the
// step runner's verdict on a run (PluginSet, plugin_host.h).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/plugin/plugin_host.h"

namespace ddplab {
namespace {

std::string PointName(ExtensionPoint point) {
  switch (point) {
    case ExtensionPoint::kBucketPlanner:
      return "bucket planning";
    case ExtensionPoint::kMissingGradients:
      return "unused parameters";
    case ExtensionPoint::kGradientLayout:
      return "the gradient layout";
    case ExtensionPoint::kCommHook:
      return "the communication hook";
    case ExtensionPoint::kCodec:
      return "a wire codec";
    case ExtensionPoint::kHookWrapper:
      return "a hook wrapper";
    case ExtensionPoint::kStepRunner:
      return "the training step";
  }
  return "an extension point";
}

}  // namespace

absl::Status PluginSet::CheckComposition() const {
  auto refuse = [](const std::string& plugin, const std::string& other, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("plugin \"", plugin, "\" does not compose with plugin \"",
                                                   other, "\": ", why, "; list one of them"));
  };
  for (const auto& [point, takers] : takers_) {
    // Codecs and wrappers stack, any number of them; every other point is one plugin's.
    const bool stacks = point == ExtensionPoint::kCodec || point == ExtensionPoint::kHookWrapper;
    if (stacks || takers.size() < 2) continue;
    return refuse(takers[1], takers[0],
                  absl::StrCat("both take ", PointName(point)));
  }
  for (const Refusal& r : refusals_) {
    auto it = takers_.find(r.point);
    if (it == takers_.end()) continue;
    for (const std::string& other : it->second) {
      if (other != r.plugin) return refuse(r.plugin, other, r.why);
    }
  }
  return absl::OkStatus();
}

std::string PluginSet::StepRunnerRefusal(const v1::Experiment& e, std::optional<bool> optimizer_capturable) const {
  if (!step_runner_) return "";
  RunFacts run;
  run.cuda = e.distributed().device() != v1::Distributed::CPU;
  run.warmup_steps = static_cast<int>(e.steps().warmup());
  run.accumulation = static_cast<int>(std::max<uint32_t>(e.steps().accumulation(), 1));
  // As core/optim/optimizer.h decides: AdamW's foreach form computes its bias
  // corrections on the host. The file asks for that form or not; whether this LibTorch
  // has the fused one, the optimizer built says (VetStepRunner).
  run.optimizer_capturable =
      optimizer_capturable.value_or(!e.optimizer().has_adamw() || !e.optimizer().foreach());
  run.sampling_plugins = sampling_plugins_;
  return step_runner_->Refusal(run);
}

absl::Status PluginSet::VetStepRunner(const v1::Experiment& experiment, bool optimizer_capturable) const {
  const std::string why = StepRunnerRefusal(experiment, optimizer_capturable);
  if (why.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("plugin \"", takers_.at(ExtensionPoint::kStepRunner).front(), "\" refuses this run: ", why));
}

bool PluginSet::diagnostic() const {
  for (const LoadedPlugin* p : plugins_) {
    if (p->info.status == static_cast<int32_t>(PluginStatus::kDiagnostic)) return true;
  }
  return false;
}

}  // namespace ddplab
