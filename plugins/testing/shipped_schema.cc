#include "plugins/testing/shipped_schema.h"

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/descriptor.h"

namespace ddplab::testing {

const ExperimentSchema& ShippedSchema() {
  static const std::shared_ptr<const ExperimentSchema> schema = [] {
    std::vector<PluginSchemaEntry> plugins;
    // DDPLAB_SHIPPED_PLUGINS: plugins.bzl's list, whose <name>_config libraries are linked.
    for (absl::string_view name : absl::StrSplit(DDPLAB_SHIPPED_PLUGINS, ',')) {
      const std::string type = absl::StrCat("ddplab.plugins.", name, ".v1.Config");
      const google::protobuf::Descriptor* d = google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(type);
      if (d == nullptr) {
        std::cerr << "ShippedSchema: " << type << " is not linked\n";
        std::abort();
      }
      plugins.push_back({std::string(name), d});
    }
    absl::StatusOr<std::shared_ptr<const ExperimentSchema>> built = ExperimentSchema::Build(plugins);
    if (!built.ok()) {
      std::cerr << "ShippedSchema: " << built.status() << "\n";
      std::abort();
    }
    return *built;
  }();
  return *schema;
}

}  // namespace ddplab::testing
