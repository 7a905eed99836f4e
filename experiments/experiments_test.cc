#include <dirent.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "core/config/experiment.h"
#include "core/plugin/plugin_host.h"
#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace ddplab {
namespace {

using bazel::tools::cpp::runfiles::Runfiles;

TEST(ExperimentFilesTest, EveryFileLoadsAndConfiguresItsPlugins) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  std::string dir = runfiles->Rlocation("ddplab/experiments");
  std::vector<std::string> files;
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  while (struct dirent* entry = readdir(d)) {
    if (absl::EndsWith(entry->d_name, ".textproto")) files.push_back(entry->d_name);
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  // The default suites of both builds are among them.
  EXPECT_NE(std::find(files.begin(), files.end(), "seed_study.textproto"), files.end());
  EXPECT_NE(std::find(files.begin(), files.end(), "cpu_smoke.textproto"), files.end());

  PluginHost host({runfiles->Rlocation("ddplab/plugins")});
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    absl::StatusOr<v1::Suite> suite = LoadExperimentFile(dir + "/" + file, host.schema());
    ASSERT_TRUE(suite.ok()) << suite.status();
    EXPECT_GT(suite->experiment_size(), 0);
    for (const v1::Experiment& experiment : suite->experiment()) {
      absl::StatusOr<PluginSet> plugins = host.Configure(experiment);
      EXPECT_TRUE(plugins.ok()) << experiment.name() << ": " << plugins.status();
    }
  }
}

}  // namespace
}  // namespace ddplab
