#include "core/config/plugin_schema.h"

#include <functional>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/config/text_location.h"
#include "ddplab/v1/result.pb.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/text_format.h"

namespace ddplab {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;
using google::protobuf::Message;

constexpr char kOneof[] = "plugin";
// The added fields' numbers: above ddplab.v1.Plugin's own, never written (the Note).
constexpr int kFirstPluginField = 1000;

// Keeps the first error of building a file into the pool.
class BuildErrors : public google::protobuf::DescriptorPool::ErrorCollector {
 public:
  void AddError(const std::string& file, const std::string& element, const Message*, ErrorLocation,
                const std::string& message) override {
    if (first_.empty()) first_ = absl::StrCat(file, ": ", element, ": ", message);
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

// Calls `fn` on every ddplab.v1.Plugin within `m` (at `path`, e.g. "experiment[1].plugin[0]").
absl::Status ForEachEntry(Message& m, const std::string& path,
                          const std::function<absl::Status(Message&, const std::string&)>& fn) {
  if (m.GetDescriptor()->full_name() == v1::Plugin::descriptor()->full_name()) return fn(m, path);
  const google::protobuf::Reflection* r = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    const std::string here = path.empty() ? f->name() : absl::StrCat(path, ".", f->name());
    if (!f->is_repeated()) {
      if (absl::Status s = ForEachEntry(*r->MutableMessage(&m, f), here, fn); !s.ok()) return s;
      continue;
    }
    for (int i = 0; i < r->FieldSize(m, f); ++i) {
      absl::Status s = ForEachEntry(*r->MutableRepeatedMessage(&m, f, i), absl::StrCat(here, "[", i, "]"), fn);
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

bool IsPluginName(absl::string_view name) {
  if (name.empty() || !absl::ascii_islower(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!absl::ascii_islower(static_cast<unsigned char>(c)) && !absl::ascii_isdigit(static_cast<unsigned char>(c)) &&
        c != '_') {
      return false;
    }
  }
  return true;
}

// Whether `file` is `schema`, or imports it (directly or through other files).
bool Uses(const FileDescriptor* file, const FileDescriptor* schema, std::set<const FileDescriptor*>& seen) {
  if (file == schema) return true;
  if (!seen.insert(file).second) return false;
  for (int i = 0; i < file->dependency_count(); ++i) {
    if (Uses(file->dependency(i), schema, seen)) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const ExperimentSchema>> ExperimentSchema::Build(
    const std::vector<PluginSchemaEntry>& plugins, std::map<std::string, std::string> unavailable,
    std::string searched, std::set<std::string> not_loaded) {
  std::shared_ptr<ExperimentSchema> schema(new ExperimentSchema());
  schema->unavailable_ = std::move(unavailable);
  schema->not_loaded_ = std::move(not_loaded);
  schema->searched_ = std::move(searched);
  std::set<std::string> names;
  for (const PluginSchemaEntry& p : plugins) {
    if (!IsPluginName(p.name) || v1::Plugin::descriptor()->FindFieldByName(p.name) != nullptr || p.name == "path") {
      return absl::InvalidArgumentError(absl::StrCat(
          "plugin \"", p.name, "\": a plugin's name must be lower-case letters, digits and '_', "
          "and not name, config or path"));
    }
    if (p.config == nullptr) return absl::InvalidArgumentError(absl::StrCat("plugin \"", p.name, "\" has no configuration message"));
    // The schema adds each plugin's message to ddplab.v1.Plugin's file: a message in that
    // file, or in one that imports it, would have to exist before itself.
    std::set<const FileDescriptor*> seen;
    if (Uses(p.config->file(), v1::Plugin::descriptor()->file(), seen)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plugin \"", p.name, "\": its configuration message ", p.config->full_name(), " (", p.config->file()->name(),
          ") is, or uses, ddplab's own experiment schema (", v1::Plugin::descriptor()->file()->name(),
          "); a plugin brings a message of its own"));
    }
    if (!names.insert(p.name).second) return absl::InvalidArgumentError(absl::StrCat("plugin \"", p.name, "\" is there twice"));
  }
  for (const FileDescriptor* file : {v1::Plugin::descriptor()->file(), v1::RunResult::descriptor()->file()}) {
    if (absl::Status s = schema->AddFile(file, plugins); !s.ok()) return s;
  }
  for (const PluginSchemaEntry& p : plugins) {
    schema->configs_[p.name] = schema->pool_.FindMessageTypeByName(p.config->full_name());
  }
  return std::shared_ptr<const ExperimentSchema>(std::move(schema));
}

std::shared_ptr<const ExperimentSchema> ExperimentSchema::WithoutPlugins() {
  static const std::shared_ptr<const ExperimentSchema> kEmpty = *Build({});
  return kEmpty;
}

namespace {
void ForgetReservedNames(google::protobuf::DescriptorProto& message) {
  message.clear_reserved_name();
  for (google::protobuf::DescriptorProto& nested : *message.mutable_nested_type()) ForgetReservedNames(nested);
}
}  // namespace

absl::Status ExperimentSchema::AddFile(const FileDescriptor* file, const std::vector<PluginSchemaEntry>& plugins) {
  if (pool_.FindFileByName(file->name()) != nullptr) return absl::OkStatus();
  for (int i = 0; i < file->dependency_count(); ++i) {
    if (absl::Status s = AddFile(file->dependency(i), plugins); !s.ok()) return s;
  }
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  // Protobuf's text parser skips a field whose name is reserved, silently: a file that
  // still writes a retired field (plugin { path: ... }) must hear that it is gone, so the
  // readable schema reserves no name and such a field is unknown at its file:line:column.
  for (google::protobuf::DescriptorProto& message : *proto.mutable_message_type()) ForgetReservedNames(message);
  if (file == v1::Plugin::descriptor()->file() && !plugins.empty()) {  // a oneof has a field
    google::protobuf::DescriptorProto* entry = nullptr;
    for (auto& message : *proto.mutable_message_type()) {
      if (message.name() == v1::Plugin::descriptor()->name()) entry = &message;
    }
    const int oneof = entry->oneof_decl_size();
    entry->add_oneof_decl()->set_name(kOneof);
    std::set<std::string> imported(proto.dependency().begin(), proto.dependency().end());
    for (size_t k = 0; k < plugins.size(); ++k) {
      const FileDescriptor* own = plugins[k].config->file();
      if (absl::Status s = AddFile(own, plugins); !s.ok()) return s;
      if (imported.insert(own->name()).second) proto.add_dependency(own->name());
      google::protobuf::FieldDescriptorProto* field = entry->add_field();
      field->set_name(plugins[k].name);
      field->set_number(kFirstPluginField + static_cast<int>(k));
      field->set_label(google::protobuf::FieldDescriptorProto::LABEL_OPTIONAL);
      field->set_type(google::protobuf::FieldDescriptorProto::TYPE_MESSAGE);
      field->set_type_name(absl::StrCat(".", plugins[k].config->full_name()));
      field->set_oneof_index(oneof);
    }
  }
  BuildErrors errors;
  if (pool_.BuildFileCollectingErrors(proto, &errors) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("the experiment schema with the plugins' own: ", errors.first()));
  }
  return absl::OkStatus();
}

std::unique_ptr<Message> ExperimentSchema::NewReadable(absl::string_view type) const {
  const Descriptor* d = pool_.FindMessageTypeByName(std::string(type));
  return d == nullptr ? nullptr : std::unique_ptr<Message>(factory_.GetPrototype(d)->New());
}

absl::Status ExperimentSchema::ToStored(const Message& readable, Message& stored) const {
  std::unique_ptr<Message> copy(readable.New());
  copy->CopyFrom(readable);
  absl::Status s = ForEachEntry(*copy, "", [](Message& entry, const std::string& path) {
    const Descriptor* d = entry.GetDescriptor();
    const google::protobuf::Reflection* r = entry.GetReflection();
    const google::protobuf::OneofDescriptor* oneof = d->FindOneofByName(kOneof);
    const FieldDescriptor* set = oneof == nullptr ? nullptr : r->GetOneofFieldDescriptor(entry, oneof);
    if (set == nullptr) return absl::OkStatus();
    const FieldDescriptor* name = d->FindFieldByName("name");
    const FieldDescriptor* config = d->FindFieldByName("config");
    const std::string given = r->GetString(entry, name);
    if (!given.empty() && given != set->name()) {
      return FieldError(absl::StatusCode::kInvalidArgument, absl::StrCat(path, ".name"),
                        absl::StrCat("names plugin \"", given, "\", but the entry configures plugin \"", set->name(),
                                     "\""));
    }
    std::string bytes;
    r->GetMessage(entry, set).SerializeToString(&bytes);
    r->ClearField(&entry, set);
    r->SetString(&entry, name, set->name());
    r->SetString(&entry, config, std::move(bytes));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  if (!stored.ParseFromString(copy->SerializeAsString())) {
    return absl::InternalError(absl::StrCat("cannot store a ", readable.GetDescriptor()->full_name()));
  }
  return absl::OkStatus();
}

std::unique_ptr<Message> ExperimentSchema::ToReadable(const Message& stored) const {
  std::unique_ptr<Message> readable = NewReadable(stored.GetDescriptor()->full_name());
  if (readable == nullptr || !readable->ParseFromString(stored.SerializeAsString())) return nullptr;
  (void)ForEachEntry(*readable, "", [this](Message& entry, const std::string&) {
    const Descriptor* d = entry.GetDescriptor();
    const google::protobuf::Reflection* r = entry.GetReflection();
    const FieldDescriptor* name = d->FindFieldByName("name");
    const FieldDescriptor* own = d->FindFieldByName(r->GetString(entry, name));
    if (own == nullptr || own->containing_oneof() == nullptr) return absl::OkStatus();
    const FieldDescriptor* config = d->FindFieldByName("config");
    if (!r->MutableMessage(&entry, own, &factory_)->ParseFromString(r->GetString(entry, config))) {
      r->ClearField(&entry, own);
      return absl::OkStatus();
    }
    r->ClearField(&entry, name);
    r->ClearField(&entry, config);
    return absl::OkStatus();
  });
  return readable;
}

std::string ExperimentSchema::Print(const Message& stored, bool single_line) const {
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(single_line);
  std::unique_ptr<Message> readable = ToReadable(stored);
  std::string text;
  printer.PrintToString(readable != nullptr ? *readable : stored, &text);
  return text;
}

std::unique_ptr<Message> ExperimentSchema::Config(const v1::Plugin& entry) const {
  const Descriptor* type = ConfigType(entry.name());
  if (type == nullptr) return nullptr;
  std::unique_ptr<Message> config(factory_.GetPrototype(type)->New());
  if (!config->ParseFromString(entry.config())) return nullptr;
  return config;
}

absl::StatusOr<v1::Plugin> ExperimentSchema::Entry(absl::string_view name, absl::string_view config_text) const {
  v1::Plugin entry;
  entry.set_name(std::string(name));
  std::unique_ptr<Message> config = Config(entry);
  if (config == nullptr) return absl::NotFoundError(Missing(name));
  if (!google::protobuf::TextFormat::ParseFromString(std::string(config_text), config.get())) {
    return absl::InvalidArgumentError(absl::StrCat("plugin \"", name, "\": not a ", config->GetDescriptor()->full_name(),
                                                   ": ", config_text));
  }
  entry.set_config(config->SerializeAsString());
  return entry;
}

const Descriptor* ExperimentSchema::ConfigType(absl::string_view name) const {
  auto it = configs_.find(std::string(name));
  return it == configs_.end() ? nullptr : it->second;
}

std::vector<std::string> ExperimentSchema::plugins() const {
  std::vector<std::string> names;
  for (const auto& [name, type] : configs_) names.push_back(name);
  return names;
}

std::vector<std::string> ExperimentSchema::found() const {
  std::set<std::string> names = not_loaded_;
  for (const auto& [name, type] : configs_) names.insert(name);
  for (const auto& [name, why] : unavailable_) names.insert(name);
  return {names.begin(), names.end()};
}

std::string ExperimentSchema::Missing(absl::string_view name) const {
  if (auto it = unavailable_.find(std::string(name)); it != unavailable_.end()) return it->second;
  if (not_loaded_.count(std::string(name)) > 0) {
    return absl::StrCat("plugin \"", name, "\" was found but not loaded: only the plugins a file names are loaded");
  }
  std::vector<std::string> names = found();
  return absl::StrCat("unknown plugin \"", name, "\": no lib", name, ".so in ",
                      searched_.empty() ? "(no plugin directory)" : searched_, ". Available: ",
                      names.empty() ? "none" : absl::StrJoin(names, ", "));
}

}  // namespace ddplab
