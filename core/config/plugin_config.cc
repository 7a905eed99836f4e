#include "core/config/plugin_config.h"

#include <set>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
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

std::string Closest(absl::string_view name, const std::vector<std::string>& candidates) {
  // Levenshtein distance, one row at a time.
  auto distance = [](absl::string_view a, absl::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diagonal = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t above = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diagonal = above;
      }
    }
    return row[b.size()];
  };
  std::string best;
  size_t best_distance = std::max<size_t>(2, name.size() / 3) + 1;  // more differs too much
  for (const std::string& c : candidates) {
    if (const size_t d = distance(name, c); d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

namespace {

// The enum type of a field named `field` somewhere under `d` (depth first), or nullptr.
const google::protobuf::EnumDescriptor* EnumOfField(const Descriptor* d, const std::string& field,
                                                    std::set<const Descriptor*>& seen) {
  if (d == nullptr || !seen.insert(d).second) return nullptr;
  for (int f = 0; f < d->field_count(); ++f) {
    const FieldDescriptor* x = d->field(f);
    if (x->name() == field && x->enum_type() != nullptr) return x->enum_type();
    if (x->message_type() != nullptr) {
      if (const google::protobuf::EnumDescriptor* e = EnumOfField(x->message_type(), field, seen)) return e;
    }
  }
  return nullptr;
}

// protobuf's "Unknown enumeration value of "NVLNK" for field "transport"." with the values
// accepted and the closest; any other message as it is.
std::string ExplainUnknownEnum(const std::string& parser_message, const google::protobuf::DescriptorPool& pool) {
  const std::string kValue = "Unknown enumeration value of \"", kField = "\" for field \"";
  const size_t value_at = parser_message.find(kValue), field_at = parser_message.find(kField);
  if (value_at == std::string::npos || field_at == std::string::npos || field_at < value_at) return parser_message;
  const std::string value = parser_message.substr(value_at + kValue.size(), field_at - value_at - kValue.size());
  const size_t name_at = field_at + kField.size();
  const std::string field = parser_message.substr(name_at, parser_message.find('"', name_at) - name_at);
  std::set<const Descriptor*> seen;
  const google::protobuf::EnumDescriptor* e = EnumOfField(pool.FindMessageTypeByName("ddplab.v1.Suite"), field, seen);
  if (e == nullptr) return parser_message;
  std::vector<std::string> values;
  for (int v = 0; v < e->value_count(); ++v) values.push_back(e->value(v)->name());
  const std::string closest = Closest(value, values);
  return absl::StrCat(parser_message, closest.empty() ? "" : absl::StrCat(" Did you mean ", closest, "?"),
                      " Accepted: ", absl::StrJoin(values, ", "), ".");
}

}  // namespace

std::string ExplainUnknownField(const std::string& parser_message, const google::protobuf::DescriptorPool& pool) {
  if (absl::StrContains(parser_message, "Unknown enumeration value of")) return ExplainUnknownEnum(parser_message, pool);
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
  if (d == nullptr || d->full_name() == v1::Plugin::descriptor()->full_name()) return parser_message;
  // torchrun's word for it, or a typo.
  if (old_name == "nproc_per_node" && d->FindFieldByName("gpus_per_node") != nullptr) {
    return absl::StrCat(parser_message, " Processes per node are gpus_per_node here (torchrun's --nproc_per_node).");
  }
  std::vector<std::string> names;
  for (int f = 0; f < d->field_count(); ++f) names.push_back(d->field(f)->name());
  const std::string closest = Closest(old_name, names);
  return closest.empty() ? parser_message : absl::StrCat(parser_message, " Did you mean \"", closest, "\"?");
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
