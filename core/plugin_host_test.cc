#include "core/plugin_host.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace ddplab {
namespace {

using bazel::tools::cpp::runfiles::Runfiles;

class PluginHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    runfiles_.reset(Runfiles::CreateForTest(&error));
    ASSERT_NE(runfiles_, nullptr) << error;
    dir_ = runfiles_->Rlocation("ddplab/core/testdata/plugins");
  }

  std::string Lib(const std::string& name) const {
    return absl::StrCat(dir_, "/", name, "/lib", name, ".so");
  }

  std::unique_ptr<Runfiles> runfiles_;
  std::string dir_;
};

TEST_F(PluginHostTest, LoadsAWellFormedPlugin) {
  PluginHost host({dir_});
  absl::StatusOr<const LoadedPlugin*> plugin = host.Load("good");
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  EXPECT_EQ((*plugin)->name, "good");
  EXPECT_EQ((*plugin)->path, Lib("good"));
  EXPECT_EQ((*plugin)->info.api_version, static_cast<uint32_t>(DDPLAB_PLUGIN_API_VERSION));
  EXPECT_STREQ((*plugin)->info.plugin_version, "1.2.3");
  EXPECT_STREQ((*plugin)->info.torch_version, TORCH_VERSION);
  EXPECT_STREQ((*plugin)->info.config_type, "ddplab.plugins.bucket_view.v1.Config");

  // Loading again returns the same library.
  absl::StatusOr<const LoadedPlugin*> again = host.Load("good");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *plugin);
}

TEST_F(PluginHostTest, LoadsFromAnExplicitPath) {
  PluginHost host({});
  absl::StatusOr<const LoadedPlugin*> plugin = host.Load("good", Lib("good"));
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  EXPECT_EQ((*plugin)->path, Lib("good"));
}

TEST_F(PluginHostTest, RefusesAnExplicitPathWithNoFile) {
  PluginHost host({dir_});
  absl::StatusOr<const LoadedPlugin*> plugin = host.Load("good", "/nonexistent/libgood.so");
  EXPECT_EQ(plugin.status().message(),
            "plugin \"good\": no file at the path given: /nonexistent/libgood.so");
}

TEST_F(PluginHostTest, RefusesAWrongApiVersion) {
  PluginHost host({dir_});
  absl::StatusOr<const LoadedPlugin*> plugin = host.Load("wrong_api");
  EXPECT_EQ(plugin.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(plugin.status().message(),
            absl::StrCat("plugin \"wrong_api\": ", Lib("wrong_api"), " uses plugin API version ",
                         DDPLAB_PLUGIN_API_VERSION + 1, ", this binary uses version ",
                         DDPLAB_PLUGIN_API_VERSION,
                         ". Rebuild the plugin against this binary's core/plugin_api.h."));
}

TEST_F(PluginHostTest, RefusesALibraryWithoutTheEntrySymbol) {
  PluginHost host({dir_});
  absl::StatusOr<const LoadedPlugin*> plugin = host.Load("no_entry");
  EXPECT_EQ(plugin.status().message(),
            absl::StrCat("plugin \"no_entry\": ", Lib("no_entry"),
                         " exports no ddplabGetPluginInfo(): not a ddplab plugin (define its "
                         "entry with DDPLAB_PLUGIN)"));
}

TEST_F(PluginHostTest, RefusesAMismatchedBuildIdentity) {
  PluginHost host({dir_});
  absl::StatusOr<const LoadedPlugin*> plugin = host.Load("bad_identity");
  BuildIdentity id = HostBuildIdentity();
  EXPECT_EQ(plugin.status().message(),
            absl::StrCat("plugin ", Lib("bad_identity"),
                         " was built against LibTorch 0.0.1 (host: ", id.torch_version,
                         "), _GLIBCXX_USE_CXX11_ABI=", 1 - id.cxx11_abi, " (host: ", id.cxx11_abi,
                         "); this binary is LibTorch ", id.torch_version,
                         ", _GLIBCXX_USE_CXX11_ABI=", id.cxx11_abi, ", protobuf ",
                         id.protobuf_version, ", ", id.cuda_build ? "CUDA" : "CPU",
                         " build. Rebuild the plugin with this binary's build."));
}

TEST_F(PluginHostTest, RefusesAnUnknownNameAndListsTheAvailablePlugins) {
  PluginHost host({dir_});
  absl::StatusOr<const LoadedPlugin*> plugin = host.Load("nope");
  EXPECT_EQ(plugin.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(plugin.status().message(),
            absl::StrCat("unknown plugin \"nope\": no libnope.so in ", dir_,
                         ". Available: bad_identity, good, no_entry, wrong_api"));
}

TEST_F(PluginHostTest, RefusesALibraryNamedOtherThanItsPlugin) {
  PluginHost host({});
  v1::Experiment experiment;
  experiment.set_name("e");
  v1::Plugin* entry = experiment.add_plugin();
  entry->set_path(Lib("good"));
  entry->mutable_bucket_view();
  absl::StatusOr<PluginSet> set = host.Configure(experiment);
  EXPECT_EQ(set.status().message(),
            absl::StrCat("plugin[0]: plugin \"bucket_view\": ", Lib("good"),
                         " calls itself \"good\"; a plugin's library must be named after it"));
}

TEST(PluginHostIdentity, IsThisBuilds) {
  BuildIdentity id = HostBuildIdentity();
  EXPECT_EQ(id.torch_version, TORCH_VERSION);
  EXPECT_EQ(id.cxx11_abi, _GLIBCXX_USE_CXX11_ABI);
  EXPECT_EQ(id.protobuf_version, GOOGLE_PROTOBUF_VERSION);
}

TEST(PluginSetTest, StartsFromPyTorchDdpDefaults) {
  PluginSet set;
  EXPECT_EQ(DescribeEngine(set.engine_parts()),
            "buckets of 25 MiB, the first 1 MiB, gradients copied into flat buckets, averaged by all-reduce");
  EXPECT_TRUE(set.engine_parts().hooks.empty());
  EXPECT_FALSE(set.diagnostic());
}

}  // namespace
}  // namespace ddplab
