// The experiment schema as files are read and written: ddplab.v1 with a field per plugin.
//
// Note [Plugin configs by name]
// An experiment names a plugin and configures it in one readable entry,
//
//   plugin { bucket_sizing { bucket_cap_mb: 25 } }
//
// yet ddplab.v1.Plugin has no field per plugin: a plugin's configuration message is its
// own, compiled into its library (Envoy's TypedExtensionConfig: a name and the
// extension's message). When the host loads the plugins it finds, each library registers
// its message with the protobuf runtime; ExperimentSchema copies ddplab.v1's files and
// gives ddplab.v1.Plugin one field per plugin, named after it, of its message, in a
// oneof. Files are parsed against that copy, so errors in a plugin's fields keep their
// file:line:column and its rules (ddplab.v1.rules) are read from its own .proto. Each entry
// is then stored as {name, config: the message's bytes}, which passes between processes
// and into result files with no schema at all; printing goes back the same way. The
// added fields' numbers exist only inside this process and are never written.
//
//   absl::StatusOr<std::shared_ptr<const ddplab::ExperimentSchema>> schema =
//       ddplab::ExperimentSchema::Build({{"bucket_sizing", config_descriptor}}, {}, "plugins/");
//   std::unique_ptr<google::protobuf::Message> readable = (*schema)->NewReadable("ddplab.v1.Suite");
//   // ... parse the file's text into *readable ...
//   ddplab::v1::Suite suite;
//   absl::Status stored = (*schema)->ToStored(*readable, suite);
//   std::string text = (*schema)->Print(suite);   // plugin { bucket_sizing { ... } } again
#ifndef DDPLAB_CORE_CONFIG_PLUGIN_SCHEMA_H_
#define DDPLAB_CORE_CONFIG_PLUGIN_SCHEMA_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ddplab/v1/experiment.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/message.h"

namespace ddplab {

// A plugin as the schema knows it: its name and its configuration message's descriptor
// (from its library's generated code).
struct PluginSchemaEntry {
  std::string name;
  const google::protobuf::Descriptor* config;
};

class ExperimentSchema {
 public:
  // The schema with `plugins`. `unavailable` are plugins found but not loadable, with why;
  // `searched` says where plugins were looked for. Both only word the error for a file
  // that names a plugin the schema lacks. Refuses a name that is not a lower-case
  // identifier, is a field of ddplab.v1.Plugin already, or comes twice.
  // `not_loaded` are plugins found but left unloaded (Note [Only the plugins named],
  // plugin_names.h): named in errors and suggestions, not readable.
  static absl::StatusOr<std::shared_ptr<const ExperimentSchema>> Build(
      const std::vector<PluginSchemaEntry>& plugins, std::map<std::string, std::string> unavailable = {},
      std::string searched = "", std::set<std::string> not_loaded = {});
  // The schema with no plugins: a file's plugin entries are all unknown.
  static std::shared_ptr<const ExperimentSchema> WithoutPlugins();

  ExperimentSchema(const ExperimentSchema&) = delete;
  ExperimentSchema& operator=(const ExperimentSchema&) = delete;

  // A new, empty message of ddplab.v1 type `type` ("ddplab.v1.Suite") in its readable form.
  std::unique_ptr<google::protobuf::Message> NewReadable(absl::string_view type) const;
  // The readable message `readable` stored into `stored` (the generated message of the same
  // type). Fails where an entry names its plugin twice, with a FieldError (text_location.h):
  // the entry's field ("plugin[1].name") as the status's payload.
  absl::Status ToStored(const google::protobuf::Message& readable, google::protobuf::Message& stored) const;
  // `stored` in the text format, each plugin entry in its readable form (an entry whose
  // plugin or bytes this schema cannot read stays {name, config}).
  std::string Print(const google::protobuf::Message& stored, bool single_line = false) const;

  // The entry's configuration as a message of its plugin's type; nullptr where this schema
  // has no plugin of that name or the bytes are not that message.
  std::unique_ptr<google::protobuf::Message> Config(const v1::Plugin& entry) const;
  // An entry of plugin `name` configured by `config_text` (its message in the text
  // format, "bucket_cap_mb: 25"); an error where the schema has no such plugin or the text
  // is not its message.
  absl::StatusOr<v1::Plugin> Entry(absl::string_view name, absl::string_view config_text = "") const;
  // The configuration message type of plugin `name`, or nullptr.
  const google::protobuf::Descriptor* ConfigType(absl::string_view name) const;

  // The schema's pool: ddplab.v1 and the plugins' files.
  const google::protobuf::DescriptorPool& pool() const { return pool_; }
  // The plugins' names, sorted.
  std::vector<std::string> plugins() const;
  // Every plugin found, loaded or not (plugins(), and those unavailable or not loaded), sorted.
  std::vector<std::string> found() const;
  // Why no plugin `name` is in the schema: "unknown plugin "x": ..." or its load error.
  std::string Missing(absl::string_view name) const;

  // `stored` (an experiment or suite as results hold it: each plugin's configuration as
  // bytes) as its file would write it, each configuration a message of its plugin's
  // (what Print prints); null where the schema cannot read it.
  std::unique_ptr<google::protobuf::Message> ToReadable(const google::protobuf::Message& stored) const;

 private:
  ExperimentSchema() = default;
  absl::Status AddFile(const google::protobuf::FileDescriptor* file, const std::vector<PluginSchemaEntry>& plugins);

  google::protobuf::DescriptorPool pool_;
  mutable google::protobuf::DynamicMessageFactory factory_{&pool_};
  std::map<std::string, const google::protobuf::Descriptor*> configs_;  // by plugin name, in pool_
  std::map<std::string, std::string> unavailable_;
  std::set<std::string> not_loaded_;
  std::string searched_;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_CONFIG_PLUGIN_SCHEMA_H_
