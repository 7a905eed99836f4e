// DescribeEngine and DataParallelEngine::Describe: an engine's parts in words.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/engine/copy_layout.h"
#include "core/engine/engine.h"

namespace ddplab {
namespace internal_engine {

std::string Describe(const BucketPlanner& planner, const GradientLayout& layout, const BucketCodec* codec,
                     size_t hooks) {
  std::string out = absl::StrCat(planner.Describe(), ", ", layout.Describe());
  if (codec && !codec->Describe().empty()) absl::StrAppend(&out, ", ", codec->Describe());
  if (hooks == 0) return absl::StrCat(out, ", averaged by all-reduce");
  return absl::StrCat(out, ", through ", hooks, hooks == 1 ? " hook" : " hooks", " around all-reduce");
}

}  // namespace internal_engine

std::string DescribeEngine(const EngineParts& parts) {
  std::vector<at::Tensor> none;
  std::unique_ptr<GradientLayout> layout =
      parts.layout ? parts.layout(none, MakeFlatBuckets) : std::make_unique<CopyLayout>(none);
  const CapPlanner default_planner;
  // Without a process group no hook is made: the codec is not known here.
  return internal_engine::Describe(parts.planner ? *parts.planner : default_planner, *layout, nullptr,
                                   parts.hooks.size());
}

}  // namespace ddplab
