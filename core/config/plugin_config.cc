#include "core/config/plugin_config.h"

#include <cmath>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "ddplab/v1/options.pb.h"
#include "google/protobuf/descriptor.h"

namespace ddplab {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

std::string FormatNumber(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

std::string ExplainRenamedField(const std::string& parser_message, const google::protobuf::DescriptorPool& pool) {
  // protobuf's words: Message type "ddplab.plugins.powersgd.v1.Config" has no field named "rank".
  const std::string kType = "Message type \"", kField = "\" has no field named \"";
  const size_t type_at = parser_message.find(kType), field_at = parser_message.find(kField);
  if (type_at == std::string::npos || field_at == std::string::npos || field_at < type_at) return parser_message;
  const size_t name_at = field_at + kField.size(), name_end = parser_message.find('"', name_at);
  if (name_end == std::string::npos) return parser_message;
  const std::string type = parser_message.substr(type_at + kType.size(), field_at - type_at - kType.size());
  const std::string old_name = parser_message.substr(name_at, name_end - name_at);
  const Descriptor* d = pool.FindMessageTypeByName(type);
  for (int f = 0; d != nullptr && f < d->field_count(); ++f) {
    const FieldDescriptor* field = d->field(f);
    if (field->options().GetExtension(v1::formerly) == old_name) {
      return absl::StrCat("\"", old_name, "\" is now \"", field->name(), "\" (PyTorch's name; see ", d->file()->name(),
                          ")");
    }
  }
  return parser_message;
}

std::pair<std::string, std::string> BrokenRule(const google::protobuf::Message& config, const std::string& path) {
  const Descriptor* d = config.GetDescriptor();
  const google::protobuf::Reflection* r = config.GetReflection();
  for (int f = 0; f < d->field_count(); ++f) {
    const FieldDescriptor* field = d->field(f);
    if (!field->options().HasExtension(v1::rules)) continue;
    const v1::FieldRules& rules = field->options().GetExtension(v1::rules);
    auto value_at = [&](int k) {
      const bool rep = field->is_repeated();
      switch (field->cpp_type()) {
        case FieldDescriptor::CPPTYPE_DOUBLE: return rep ? r->GetRepeatedDouble(config, field, k) : r->GetDouble(config, field);
        case FieldDescriptor::CPPTYPE_FLOAT: return double{rep ? r->GetRepeatedFloat(config, field, k) : r->GetFloat(config, field)};
        case FieldDescriptor::CPPTYPE_UINT32: return double(rep ? r->GetRepeatedUInt32(config, field, k) : r->GetUInt32(config, field));
        case FieldDescriptor::CPPTYPE_INT32: return double(rep ? r->GetRepeatedInt32(config, field, k) : r->GetInt32(config, field));
        default: return 0.0;
      }
    };
    const int n = field->is_repeated() ? r->FieldSize(config, field) : 1;
    for (int k = 0; k < n; ++k) {
      const double v = value_at(k);
      const std::string at = field->is_repeated() ? absl::StrCat(path, ".", field->name(), "[", k, "]")
                                                  : absl::StrCat(path, ".", field->name());
      if (!field->is_repeated() && v == 0) continue;  // left out: the plugin's default
      if (!std::isfinite(v) || (rules.has_gt() && !(v > rules.gt()))) {
        return {at, absl::StrCat("must be > ", FormatNumber(rules.gt()), ", got ", FormatNumber(v))};
      }
      if (rules.has_lte() && !(v <= rules.lte())) {
        return {at, absl::StrCat("must be at most ", FormatNumber(rules.lte()), ", got ", FormatNumber(v))};
      }
      for (int t = 0; rules.unique() && t < k; ++t) {
        if (value_at(t) == v) return {at, absl::StrCat("repeats ", FormatNumber(v), " (", field->name(), "[", t, "])")};
      }
    }
  }
  return {};
}

std::pair<std::string, std::string> SweepContradiction(const google::protobuf::Message& config,
                                                       const std::string& path) {
  const Descriptor* d = config.GetDescriptor();
  const google::protobuf::Reflection* r = config.GetReflection();
  for (int f = 0; f < d->field_count(); ++f) {
    const FieldDescriptor* field = d->field(f);
    if (!field->is_repeated() || !field->options().HasExtension(v1::sweep)) continue;
    const FieldDescriptor* of = d->FindFieldByName(field->options().GetExtension(v1::sweep).of());
    if (of == nullptr || r->FieldSize(config, field) == 0 || !r->HasField(config, of)) continue;
    return {absl::StrCat(path, ".", of->name()),
            absl::StrCat("contradicts ", field->name(), ": a sweep sets the ", of->name(),
                         " of each run; leave ", of->name(), " out")};
  }
  return {};
}

std::vector<v1::Experiment> ExpandPluginSweeps(const v1::Experiment& e, const ExperimentSchema& schema) {
  std::vector<v1::Experiment> out;
  for (int i = 0; i < e.plugin_size() && out.empty(); ++i) {
    std::unique_ptr<google::protobuf::Message> own = schema.Config(e.plugin(i));
    if (own == nullptr) continue;
    const google::protobuf::Message& config = *own;
    const Descriptor* d = config.GetDescriptor();
    const google::protobuf::Reflection* r = config.GetReflection();
    for (int f = 0; f < d->field_count() && out.empty(); ++f) {
      const FieldDescriptor* field = d->field(f);
      if (!field->is_repeated() || field->cpp_type() != FieldDescriptor::CPPTYPE_DOUBLE ||
          !field->options().HasExtension(v1::sweep) || r->FieldSize(config, field) == 0) {
        continue;
      }
      const v1::Sweep& sweep = field->options().GetExtension(v1::sweep);
      const FieldDescriptor* of = d->FindFieldByName(sweep.of());
      for (int k = 0; k < r->FieldSize(config, field); ++k) {
        const double value = r->GetRepeatedDouble(config, field, k);
        v1::Experiment one = e;
        one.set_name(absl::StrCat(e.name(), "_", value, sweep.suffix()));
        std::unique_ptr<google::protobuf::Message> swept(config.New());
        swept->CopyFrom(config);
        swept->GetReflection()->ClearField(swept.get(), field);
        swept->GetReflection()->SetDouble(swept.get(), of, value);
        one.mutable_plugin(i)->set_config(swept->SerializeAsString());
        out.push_back(std::move(one));
      }
    }
  }
  return out;
}

}  // namespace ddplab
