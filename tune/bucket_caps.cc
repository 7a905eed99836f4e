#include "tune/bucket_caps.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace ddplab::tune {
namespace {

// A double field of bucket_sizing's configuration, 0 where left out.
double Field(const google::protobuf::Message& config, const char* name) {
  const google::protobuf::FieldDescriptor* f = config.GetDescriptor()->FindFieldByName(name);
  if (f == nullptr || f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE || f->is_repeated()) return 0;
  return config.GetReflection()->GetDouble(config, f);
}

}  // namespace

bool HasPlugin(const v1::Experiment& e, absl::string_view name) {
  return std::any_of(e.plugin().begin(), e.plugin().end(), [name](const v1::Plugin& p) { return p.name() == name; });
}

Caps CapsOf(const v1::Experiment& e, const ExperimentSchema& schema) {
  for (const v1::Plugin& entry : e.plugin()) {
    if (entry.name() != kBucketSizing) continue;
    std::unique_ptr<google::protobuf::Message> config = schema.Config(entry);
    if (config == nullptr) break;
    Caps caps;
    if (const double cap = Field(*config, "bucket_cap_mb"); cap > 0) caps.cap_mb = cap;
    const double first = Field(*config, "first_bucket_cap_mb");
    caps.first_mb = first > 0 ? first : ddp::FirstCapMiB(caps.cap_mb);
    return caps;
  }
  return Caps{};
}

v1::Plugin CapEntry(double cap_mb, const ExperimentSchema& schema) {
  absl::StatusOr<v1::Plugin> entry = schema.Entry(kBucketSizing, absl::StrFormat("bucket_cap_mb: %.17g", cap_mb));
  if (entry.ok()) return *entry;
  v1::Plugin named;  // refused where it is configured: CanSetCaps says why
  named.set_name(kBucketSizing);
  return named;
}

absl::Status CanSetCaps(const ExperimentSchema& schema) {
  for (const char* name : {kBucketSizing, kNoCommunication}) {
    if (schema.ConfigType(name) == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("the tuner sets plugin \"", name, "\": ", schema.Missing(name)));
    }
  }
  const google::protobuf::FieldDescriptor* cap = schema.ConfigType(kBucketSizing)->FindFieldByName("bucket_cap_mb");
  if (cap == nullptr || cap->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE) {
    return absl::FailedPreconditionError("the tuner sets bucket_sizing's bucket_cap_mb (a double), which this "
                                         "bucket_sizing does not have");
  }
  return absl::OkStatus();
}

}  // namespace ddplab::tune
