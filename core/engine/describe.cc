// DescribeEngine and DataParallelEngine::Describe: an engine's parts in words.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/engine/copy_layout.h"
#include "core/engine/engine.h"

namespace ddplab {
namespace {

// What the engine sends through when no group is at hand (DescribeEngine).
class NoCollectives : public Collectives {
 public:
  PendingMean StartMean(std::vector<at::Tensor>) override { return {}; }
};

}  // namespace

namespace internal_engine {

std::string Describe(const BucketPlanner& planner, const GradientLayout& layout, const Collectives& collectives,
                     bool hook, bool updates) {
  std::string out = absl::StrCat(planner.Describe(), ", ", layout.Describe());
  if (collectives.wire_dtype() != at::ScalarType::Undefined) {
    absl::StrAppend(&out, ", sent as ", c10::toString(collectives.wire_dtype()));
  }
  absl::StrAppend(&out, hook ? ", reduced by a communication hook" : ", averaged by all-reduce");
  if (updates) absl::StrAppend(&out, ", parameters updated per bucket");
  return out;
}

}  // namespace internal_engine

std::string DescribeEngine(const EngineParts& parts) {
  std::vector<at::Tensor> none;
  std::unique_ptr<GradientLayout> layout = parts.layout ? parts.layout(none) : std::make_unique<CopyLayout>(none);
  std::unique_ptr<Collectives> collectives = std::make_unique<NoCollectives>();
  for (const CollectivesWrapper& wrap : parts.codecs) collectives = wrap(std::move(collectives));
  const CapPlanner default_planner;
  return internal_engine::Describe(parts.planner ? *parts.planner : default_planner, *layout, *collectives,
                  static_cast<bool>(parts.comm_hook), static_cast<bool>(parts.parameter_updates));
}

}  // namespace ddplab
