// The experiment schema with the configuration messages of ddplab's own plugins
// (plugins/plugins.bzl) linked into the test, for tests of experiment files that load no
// plugin library. A test that loads plugins uses PluginHost::schema() instead: the two
// would register the same messages twice.
//
//   absl::StatusOr<v1::Suite> s = ParseExperimentText(text, "x.textproto", ddplab::testing::ShippedSchema());
#ifndef DDPLAB_PLUGINS_TESTING_SHIPPED_SCHEMA_H_
#define DDPLAB_PLUGINS_TESTING_SHIPPED_SCHEMA_H_

#include "core/config/plugin_schema.h"

namespace ddplab::testing {

const ExperimentSchema& ShippedSchema();

}  // namespace ddplab::testing

#endif  // DDPLAB_PLUGINS_TESTING_SHIPPED_SCHEMA_H_
