#include "tune/bucket_caps.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "ddplab/v1/options.pb.h"

namespace ddplab::tune {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// The field of `type` that declares `role` (ddplab.v1.role), a singular double; null where
// none does.
const FieldDescriptor* FieldWithRole(const Descriptor* type, v1::FieldRole role) {
  if (type == nullptr) return nullptr;
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* f = type->field(i);
    if (f->options().GetExtension(v1::role) == role && f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE &&
        !f->is_repeated()) {
      return f;
    }
  }
  return nullptr;
}

// The value of `config`'s field of `role`, 0 where left out or where none declares it.
double ValueOf(const google::protobuf::Message& config, v1::FieldRole role) {
  const FieldDescriptor* f = FieldWithRole(config.GetDescriptor(), role);
  return f == nullptr ? 0 : config.GetReflection()->GetDouble(config, f);
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
    if (const double cap = ValueOf(*config, v1::BUCKET_CAP_MB); cap > 0) caps.cap_mb = cap;
    const double first = ValueOf(*config, v1::FIRST_BUCKET_CAP_MB);
    caps.first_mb = first > 0 ? first : ddp::FirstCapMiB(caps.cap_mb);
    return caps;
  }
  return Caps{};
}

v1::Plugin CapEntry(double cap_mb, const ExperimentSchema& schema) {
  v1::Plugin entry;
  entry.set_name(kBucketSizing);
  std::unique_ptr<google::protobuf::Message> config = schema.Config(entry);
  const FieldDescriptor* cap = config == nullptr ? nullptr : FieldWithRole(config->GetDescriptor(), v1::BUCKET_CAP_MB);
  if (cap == nullptr) return entry;  // refused where it is configured: CanSetCaps says why
  config->GetReflection()->SetDouble(config.get(), cap, cap_mb);
  entry.set_config(config->SerializeAsString());
  return entry;
}

absl::Status CanSetCaps(const ExperimentSchema& schema) {
  for (const char* name : {kBucketSizing, kNoCommunication}) {
    if (schema.ConfigType(name) == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("the tuner sets plugin \"", name, "\": ", schema.Missing(name)));
    }
  }
  if (FieldWithRole(schema.ConfigType(kBucketSizing), v1::BUCKET_CAP_MB) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the tuner sets the bucket cap of ", kBucketSizing, ", whose configuration declares no double field with "
        "[(ddplab.v1.role) = BUCKET_CAP_MB] (proto/ddplab/v1/options.proto)"));
  }
  return absl::OkStatus();
}

}  // namespace ddplab::tune
