#include "core/plugin/plugin_host.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/config/experiment.h"
#include "core/config/plugin_names.h"
#include "core/plugin/pytorch_form.h"
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
  EXPECT_EQ((*plugin)->config->full_name(), "ddplab.testdata.good.v1.Config");

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
                         ". Rebuild the plugin against this binary's core/plugin/plugin_api.h."));
}

TEST_F(PluginHostTest, RefusesALibraryWithoutTheEntrySymbol) {
  PluginHost host({dir_});
  absl::StatusOr<const LoadedPlugin*> plugin = host.Load("no_entry");
  EXPECT_EQ(plugin.status().message(),
            absl::StrCat("plugin \"no_entry\": ", Lib("no_entry"),
                         " exports no ddplabGetPluginInfo(): not a ddplab plugin (define its "
                         "entry with DDPLAB_PLUGIN)"));
}

// Not well-formed plugins: an error, where loading or calling them would crash the host.
TEST_F(PluginHostTest, RefusesATruncatedLibraryBeforeMappingIt) {
  const std::string dir = ::testing::TempDir() + "/truncated";
  ASSERT_EQ(std::system(absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "/good' && head -c 20000 '", Lib("good"),
                                     "' > '", dir, "/good/libgood.so'")
                            .c_str()),
            0);
  PluginHost host({dir});
  absl::StatusOr<const LoadedPlugin*> plugin = host.Load("good");
  ASSERT_FALSE(plugin.ok());
  EXPECT_TRUE(absl::StartsWith(plugin.status().message(),
                               absl::StrCat("plugin \"good\": ", dir, "/good/libgood.so: not a whole ELF shared "
                                            "library (truncated: ")))
      << plugin.status();
  // Not ELF at all.
  ASSERT_EQ(std::system(absl::StrCat("echo 'not a library' > '", dir, "/good/libgood.so'").c_str()), 0);
  EXPECT_TRUE(absl::StrContains(PluginHost({dir}).Load("good").status().message(), "shorter than an ELF header"));
}

// #64, point 16: a library rewritten or truncated on disk while loaded (a new build
// copied over it mid-suite) once killed the process with SIGBUS at its next call into the
// plugin. It runs from a private copy now, and records the digest of what it loaded.
TEST_F(PluginHostTest, ALoadedPluginSurvivesItsFileBeingRewritten) {
  const std::string dir = ::testing::TempDir() + "/rewritten";
  const std::string lib = dir + "/good/libgood.so";
  ASSERT_EQ(std::system(absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "/good' && cp '", Lib("good"), "' '",
                                     lib, "'")
                            .c_str()),
            0);
  // In a process of its own: this one has libgood.so loaded from elsewhere, and a second
  // library with the same .proto would end it.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        PluginHost host({dir});
        absl::StatusOr<const LoadedPlugin*> plugin = host.Load("good");
        if (!plugin.ok() || (*plugin)->path != lib || !absl::StartsWith((*plugin)->digest, "fnv1a64:")) std::exit(3);
        const std::string digest = (*plugin)->digest;
        // Truncated in place, then rewritten with other bytes: the pages a mapping of the
        // file had are gone.
        if (std::system(absl::StrCat(": > '", lib, "' && head -c 100000 /dev/zero > '", lib, "'").c_str()) != 0) {
          std::exit(4);
        }
        const bool same = (*plugin)->info.config_descriptor()->full_name() == "ddplab.testdata.good.v1.Config" &&
                          std::string((*plugin)->info.plugin_version) == "1.2.3" && (*plugin)->digest == digest;
        // Loading it again in this process gets the build it has.
        if (!same) std::exit(5);
        PluginHost second({dir});
        absl::StatusOr<const LoadedPlugin*> again = second.Load("good");
        std::exit(again.ok() && (*again)->digest == digest ? 0 : 6);
      },
      ::testing::ExitedWithCode(0), "");
}

// #64, point 16: a library with bytes appended, or with its version string edited in
// place, once loaded and ran; the digest its build wrote beside it refuses both now
// (Note [A plugin's recorded digest]), before anything is mapped.
TEST_F(PluginHostTest, RefusesBytesThatAreNotThoseItsBuildRecorded) {
  const std::string dir = ::testing::TempDir() + "/tampered";
  const std::string lib = dir + "/good/libgood.so";
  const auto copy_both = [&] {
    return std::system(absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "/good' && cp '", Lib("good"), "' '",
                                     Lib("good"), ".digest' '", dir, "/good/'")
                           .c_str());
  };
  ASSERT_EQ(copy_both(), 0);
  ASSERT_EQ(std::system(absl::StrCat("printf 'garbage' >> '", lib, "'").c_str()), 0);
  absl::StatusOr<const LoadedPlugin*> appended = PluginHost({dir}).Load("good");
  ASSERT_FALSE(appended.ok());
  EXPECT_TRUE(absl::StrContains(appended.status().message(),
                                absl::StrCat("plugin \"good\": ", lib, ": its bytes are not the build's: they digest to "
                                             "fnv1a64:")))
      << appended.status();
  EXPECT_TRUE(absl::StrContains(appended.status().message(), absl::StrCat("in ", lib, ".digest"))) << appended.status();
  // The version string "1.2.3" edited in place to "9.2.3": same length, still whole ELF.
  ASSERT_EQ(copy_both(), 0);
  ASSERT_EQ(std::system(absl::StrCat("sed -i 's/1\\.2\\.3/9.2.3/' '", lib, "' && grep -q '9\\.2\\.3' '", lib, "'")
                            .c_str()),
            0);
  absl::StatusOr<const LoadedPlugin*> edited = PluginHost({dir}).Load("good");
  ASSERT_FALSE(edited.ok());
  EXPECT_TRUE(absl::StrContains(edited.status().message(), "its bytes are not the build's")) << edited.status();
}

// #64, point 16: a run whose workers loaded another build of a plugin than the suite's
// launcher (the file rewritten mid-suite) is told apart by the digests.
TEST_F(PluginHostTest, ARunOfAnotherBuildThanTheSuitesIsNamed) {
  PluginHost host({dir_});
  absl::StatusOr<const LoadedPlugin*> good = host.Load("good");
  ASSERT_TRUE(good.ok()) << good.status();
  v1::RunResult run;
  *run.add_plugin_builds() = BuildRecord(**good);
  EXPECT_EQ(RanAnotherBuild(run, host), "");
  run.mutable_plugin_builds(0)->set_digest("fnv1a64:0000000000000001");
  EXPECT_EQ(RanAnotherBuild(run, host),
            absl::StrCat("plugin good: its workers ran ", Lib("good"), " as fnv1a64:0000000000000001, but the suite "
                         "loaded ", (*good)->digest, " at its start: the library changed while the suite ran; run it "
                         "again once it is built"));
}

TEST_F(PluginHostTest, RefusesAnEntrySymbolThatIsData) {
  PluginHost host({dir_});
  absl::StatusOr<const LoadedPlugin*> plugin = host.Load("data_entry");
  EXPECT_EQ(plugin.status().message(),
            absl::StrCat("plugin \"data_entry\": ", Lib("data_entry"),
                         ": its ddplabGetPluginInfo is not a function: not a ddplab plugin (define its entry with "
                         "DDPLAB_PLUGIN)"));
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
                         ". Available: bad_identity, data_entry, good, no_entry, other_sdk, wrong_api"));
}

TEST_F(PluginHostTest, RefusesALibraryNamedOtherThanItsPlugin) {
  PluginHost host({});
  absl::StatusOr<const LoadedPlugin*> plugin = host.Load("bucket_view", Lib("good"));
  EXPECT_EQ(plugin.status().message(),
            absl::StrCat("plugin \"bucket_view\": ", Lib("good"),
                         " calls itself \"good\"; a plugin's library must be named after it"));
}

TEST_F(PluginHostTest, RefusesASecondLibraryOfAPluginAlreadyLoaded) {
  PluginHost host({dir_});
  ASSERT_TRUE(host.Load("good").ok());
  absl::StatusOr<const LoadedPlugin*> again = host.Load("good", "/elsewhere/libgood.so");
  EXPECT_EQ(again.status().message(),
            absl::StrCat("plugin \"good\": no file at the path given: /elsewhere/libgood.so"));
  const std::string copy = absl::StrCat(::testing::TempDir(), "/libgood_copy.so");
  ASSERT_EQ(std::system(absl::StrCat("cp ", Lib("good"), " ", copy).c_str()), 0);
  again = host.Load("good", copy);
  EXPECT_EQ(again.status().message(),
            absl::StrCat("plugin \"good\": ", copy, ": plugin \"good\" is loaded already, from ", Lib("good"),
                         "; a process loads one library per plugin"));
}

TEST_F(PluginHostTest, FindsALibraryStandingInThePluginDirectoryItself) {
  const std::string flat = absl::StrCat(::testing::TempDir(), "/flat_plugins");
  // A link: the library already loaded in this process, which one process loads once.
  ASSERT_EQ(std::system(absl::StrCat("mkdir -p ", flat, " && ln -sf ", Lib("good"), " ", flat, "/").c_str()), 0);
  PluginHost host({flat});
  EXPECT_EQ(host.Available(), std::vector<std::string>{"good"});
  absl::StatusOr<const LoadedPlugin*> plugin = host.Load("good");
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  EXPECT_EQ((*plugin)->path, flat + "/libgood.so");
}

// An experiment of two processes on the CPU with `plugins`, as a file names them.
std::string ExperimentWith(const std::string& plugins) {
  return absl::StrCat("name: \"e\"\nmodel { preset: VIT_TINY_TEST }\ndata { batch_size: 2 }\nsteps { measured: 1 }\n"
                      "optimizer { sgd { learning_rate: 0.1 } }\ndistributed { device: CPU gpus_per_node: 2 }\n",
                      plugins, "\n");
}

TEST_F(PluginHostTest, ReadsAPluginsOwnConfigurationByItsName) {
  PluginHost host({dir_});
  absl::StatusOr<v1::Suite> suite =
      ParseExperimentText(ExperimentWith("plugin { good { number: 7 } }"), "x.textproto", host.schema());
  ASSERT_TRUE(suite.ok()) << suite.status();
  const v1::Plugin& entry = suite->experiment(0).plugin(0);
  EXPECT_EQ(entry.name(), "good");
  std::unique_ptr<google::protobuf::Message> config = host.schema().Config(entry);
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->ShortDebugString(), "number: 7");
  EXPECT_EQ(host.schema().Print(entry, /*single_line=*/true), "good { number: 7 } ");
  absl::StatusOr<PluginSet> set = host.Configure(suite->experiment(0));
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->plugins().size(), 1u);
}

TEST_F(PluginHostTest, ReportsThePluginsOwnCheckAtItsFileLineColumn) {
  PluginHost host({dir_});
  absl::StatusOr<v1::Suite> suite =
      ParseExperimentText(ExperimentWith("plugin { good { number: 13 } }"), "x.textproto", host.schema(),
                          [&host](const v1::Experiment& e) { return host.Configure(e).status(); });
  EXPECT_EQ(suite.status().message(),
            "x.textproto:7:17: plugin[0].good.number: plugin \"good\" rejected its configuration: must not be 13");
}

TEST_F(PluginHostTest, SaysWhyAPluginAFileNamesCouldNotBeLoaded) {
  PluginHost host({dir_});
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(ExperimentWith("plugin { wrong_api {} }"), "x.textproto", host.schema());
  EXPECT_EQ(suite.status().message(),
            absl::StrCat("x.textproto:7:10: plugin \"wrong_api\": ", Lib("wrong_api"), " uses plugin API version ",
                         DDPLAB_PLUGIN_API_VERSION + 1, ", this binary uses version ", DDPLAB_PLUGIN_API_VERSION,
                         ". Rebuild the plugin against this binary's core/plugin/plugin_api.h."));
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

// An experiment that leaves gpus_per_node to the machine (0: every GPU) runs on several
// processes all the same: its PyTorch code is the run's, not that of one process.
TEST(PyTorchCodeTest, FollowsTheRunsProcessesNotTheExperimentsGpusPerNode) {
  v1::Experiment e;
  e.mutable_distributed()->set_device(v1::Distributed::CUDA);
  const std::map<std::string, PyTorchForm> forms = {{"static_graph", {{"static_graph=True"}, "", "", "", {}, ""}}};
  std::vector<std::string> ddplab_only;
  const std::string code = PyTorchCode(e, /*processes=*/2, {"static_graph", "zero_copy"}, forms, &ddplab_only);
  EXPECT_TRUE(absl::StrContains(code, "DDP(model, device_ids=[local_rank], static_graph=True)")) << code;
  EXPECT_EQ(ddplab_only, std::vector<std::string>{"zero_copy"});
  EXPECT_EQ(PyTorchCode(e, /*processes=*/1, {"static_graph"}, forms, &ddplab_only), "");
  e.mutable_distributed()->set_force_engine(true);
  EXPECT_NE(PyTorchCode(e, /*processes=*/1, {"static_graph"}, forms, &ddplab_only), "");
}

// Note [Only the plugins named]: a library the host is not asked for is never loaded,
// so its constructor never runs; asked for later, it is.
TEST_F(PluginHostTest, LoadsOnlyThePluginsWanted) {
  unsetenv("DDPLAB_TESTDATA_CONSTRUCTOR_RAN");
  const std::string stray = runfiles_->Rlocation("ddplab/core/testdata/stray");
  PluginHost host({dir_, stray});
  host.Want(PluginNamesIn("name: \"x\" plugin { good { number: 7 } }"));
  const ExperimentSchema& first = host.schema();
  EXPECT_EQ(first.plugins(), std::vector<std::string>{"good"});
  EXPECT_EQ(std::getenv("DDPLAB_TESTDATA_CONSTRUCTOR_RAN"), nullptr) << "a stray library was loaded";
  // Found, not loaded: named in suggestions and errors all the same.
  const std::vector<std::string> found = first.found();
  EXPECT_NE(std::find(found.begin(), found.end(), "constructor"), found.end());
  EXPECT_NE(first.Missing("nope").find("Available: bad_identity, constructor, data_entry, good"), std::string::npos)
      << first.Missing("nope");
  absl::StatusOr<v1::Suite> suite =
      ParseExperimentText(ExperimentWith("plugin { good { number: 7 } }"), "x.textproto", host.schema());
  EXPECT_TRUE(suite.ok()) << suite.status();

  // Asked for later: loaded then (here it is no plugin, and says so), and the schema
  // held before stays readable.
  host.Want({"constructor"});
  EXPECT_STREQ(std::getenv("DDPLAB_TESTDATA_CONSTRUCTOR_RAN"), nullptr);
  const ExperimentSchema& second = host.schema();
  EXPECT_STREQ(std::getenv("DDPLAB_TESTDATA_CONSTRUCTOR_RAN"), "1");
  EXPECT_NE(second.Missing("constructor").find("not a ddplab plugin"), std::string::npos)
      << second.Missing("constructor");
  EXPECT_EQ(first.plugins(), std::vector<std::string>{"good"});
}

// A result records each plugin's build; another version, another library or a result
// with no record is told apart from the plugins loaded now.
TEST_F(PluginHostTest, AResultsPluginBuildsAreComparedWithTheLoadedOnes) {
  PluginHost host({dir_});
  absl::StatusOr<const LoadedPlugin*> good = host.Load("good");
  ASSERT_TRUE(good.ok()) << good.status();
  const v1::PluginBuild build = BuildRecord(**good);
  EXPECT_EQ(build.name(), "good");
  EXPECT_EQ(build.version(), "1.2.3");
  EXPECT_EQ(build.path(), Lib("good"));
  ASSERT_EQ(build.digest().size(), std::string("fnv1a64:").size() + 16) << build.digest();
  EXPECT_TRUE(absl::StartsWith(build.digest(), "fnv1a64:")) << build.digest();
  EXPECT_EQ(BuildRecord(**host.Load("good")).digest(), build.digest());  // the same bytes, the same digest

  v1::RunResult same;
  same.add_plugins("good");
  *same.add_plugin_builds() = build;
  EXPECT_EQ(ChangedPluginBuild(same, host), "");
  v1::RunResult older = same;
  older.mutable_plugin_builds(0)->set_version("1.2.2");
  EXPECT_EQ(ChangedPluginBuild(older, host), "plugin good is version 1.2.3 now, 1.2.2 then");
  v1::RunResult rebuilt = same;
  rebuilt.mutable_plugin_builds(0)->set_digest("fnv1a64:0000000000000000");
  EXPECT_TRUE(absl::StartsWith(ChangedPluginBuild(rebuilt, host), "plugin good's library is another build now"))
      << ChangedPluginBuild(rebuilt, host);
  v1::RunResult unrecorded;
  unrecorded.add_plugins("good");
  EXPECT_EQ(ChangedPluginBuild(unrecorded, host), "it records no plugin builds (an older ddplab wrote it)");
  v1::RunResult gone = same;
  gone.mutable_plugin_builds(0)->set_name("vanished");
  EXPECT_TRUE(absl::StartsWith(ChangedPluginBuild(gone, host), "plugin vanished no longer loads: unknown plugin"))
      << ChangedPluginBuild(gone, host);
  EXPECT_EQ(ChangedPluginBuild(v1::RunResult(), host), "");  // no plugins, nothing to compare
}

// Note [The SDK's digest]: a plugin of this API version built against another SDK is
// refused at load, naming both digests.
TEST_F(PluginHostTest, RefusesAPluginBuiltAgainstAnotherSdk) {
  PluginHost host({dir_});
  absl::StatusOr<const LoadedPlugin*> plugin = host.Load("other_sdk");
  ASSERT_FALSE(plugin.ok());
  EXPECT_EQ(plugin.status().message(),
            absl::StrCat("plugin \"other_sdk\": ", Lib("other_sdk"), " was built against plugin SDK 0123456789abcdef, "
                         "and this binary's SDK is ", DDPLAB_SDK_DIGEST,
                         " (a digest of sdk/'s headers): rebuild the plugin against this binary's checkout"));
  EXPECT_EQ(std::string(DDPLAB_SDK_DIGEST).size(), 16u);
  absl::StatusOr<const LoadedPlugin*> good = host.Load("good");
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_STREQ((*good)->info.sdk_digest, DDPLAB_SDK_DIGEST);
}

}  // namespace
}  // namespace ddplab
