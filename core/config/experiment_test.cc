#include "core/config/experiment.h"

#include <unistd.h>

#include <memory>
#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/config/validate.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "plugins/testing/shipped_schema.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace ddplab {
namespace {

using bazel::tools::cpp::runfiles::Runfiles;

std::string BadFile(const std::string& name) {
  return absl::StrCat("core/testdata/bad/", name, ".textproto");
}

// Each malformed or invalid file and the exact error it must give.
struct BadCase {
  const char* file;
  std::string error;  // after "core/testdata/bad/<file>.textproto"
};

// The plugins the test's schema has (plugins/plugins.bzl), sorted.
std::string PluginNames() { return absl::StrJoin(testing::ShippedSchema().plugins(), ", "); }

class BadExperimentTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadExperimentTest, GivesItsExactError) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  // Load through a path relative to the runfiles root, as a user names a file relative
  // to the working directory, so that the message shows that path.
  std::string dir = runfiles->Rlocation("ddplab");
  ASSERT_EQ(chdir(dir.c_str()), 0) << dir;
  absl::StatusOr<v1::Suite> suite = LoadExperimentFile(BadFile(GetParam().file), testing::ShippedSchema());
  ASSERT_FALSE(suite.ok()) << GetParam().file << " loaded";
  EXPECT_EQ(std::string(suite.status().message()), absl::StrCat(BadFile(GetParam().file), GetParam().error));
}

INSTANTIATE_TEST_SUITE_P(
    AllBadFiles, BadExperimentTest,
    ::testing::Values(
        BadCase{"syntax_extra_brace", ":2:24: Expected identifier, got: }"},
        BadCase{"unknown_field",
                ":2:8: Message type \"ddplab.v1.Data\" has no field named \"batchsize\". Did you mean "
                "\"batch_size\"?"},
        BadCase{"wrong_type", ":2:20: Expected integer, got: \"big\""},
        BadCase{"suite_without_header",
                ":3:1: Message type \"ddplab.v1.Experiment\" has no field named \"defaults\": \"defaults\" is a "
                "suite's field, and a file is read as one experiment unless it begins with the line \"# "
                "proto-message: ddplab.v1.Suite\""},
        BadCase{"negative_unsigned",
                ":2:20: batch_size: must be 0 or more (it counts or sizes something), got a negative number"},
        BadCase{"unknown_preset",
                ":2:17: Unknown enumeration value of \"VIT_H_14\" for field \"preset\". Did you mean VIT_B_16? Accepted: "
                "PRESET_UNSPECIFIED, VIT_L_32, VIT_B_16, VIT_B_32, VIT_L_16, VIT_TINY_TEST."},
        BadCase{"unknown_plugin", ":7:10: unknown plugin \"fancy_hook\": no libfancy_hook.so in (no plugin "
                                  "directory). Available: " + PluginNames()},
        BadCase{"two_plugins_in_one_entry",
                ":7:26: Field \"bucket_view\" is specified along with field \"static_graph\", "
                "another member of oneof \"plugin\"."},
        BadCase{"duplicate_plugin",
                ":9:10: plugin[2].static_graph: plugin \"static_graph\" is listed twice (first as "
                "plugin[0])"},
        BadCase{"plugin_name_mismatch",
                ":7:10: plugin[0].name: names plugin \"bf16\", but the entry configures plugin \"static_graph\""},
        BadCase{"plugin_without_name",
                ":7:1: plugin[0]: names no plugin: write one of " + PluginNames() + ", e.g. plugin { bf16 {} }"},
        BadCase{"field_twice", ":2:1: Non-repeated field \"name\" is specified multiple times."},
        BadCase{"missing_batch_size",
                ": data.batch_size: is required: samples per GPU per step, > 0"},
        BadCase{"zero_measured_steps", ":6:3: steps.measured: is required: steps to time, > 0"},
        BadCase{"missing_model", ": model: is required: set model.preset, model.vit or model.torchscript"},
        BadCase{"bad_name",
                ":1:1: name: must be letters, digits, '_' and '-', got \"my experiment\""},
        BadCase{"nccl_on_cpu",
                ":6:27: distributed.backend: NCCL runs on GPUs only, but distributed.device is "
                "CPU: use GLOO or leave backend out"},
        BadCase{"transport_with_gloo",
                ":6:29: distributed.transport: selects NCCL's transport, but this experiment "
                "uses Gloo: leave transport out or use the NCCL backend on GPUs"},
        BadCase{"nccl_env_bad_name",
                ":9:14: distributed.nccl_env[1].name: must be an NCCL variable (NCCL_ and "
                "capitals, digits, _), got \"nccl_proto\""},
        BadCase{"nccl_env_twice",
                ":9:14: distributed.nccl_env[1].name: NCCL_MAX_NCHANNELS is set twice (first as "
                "distributed.nccl_env[0])"},
        BadCase{"nccl_env_with_gloo",
                ":6:44: distributed.nccl_env[0]: sets NCCL's environment, but this experiment "
                "uses Gloo"},
        BadCase{"nccl_channels_with_gloo",
                ":6:44: distributed.nccl_channels: sets NCCL's channels, but this experiment uses "
                "Gloo"},
        BadCase{"sweep_transport_repeats",
                ":6:32: distributed.sweep_transport[2]: repeats NVLINK (sweep_transport[0])"},
        BadCase{"pin_memory_on_cpu",
                ":3:22: data.pin_memory: pins host memory for copies to a GPU, but "
                "distributed.device is CPU"},
        BadCase{"heads_do_not_divide_hidden",
                ":3:23: model.vit.hidden_dim: must be a multiple of num_heads (4), got 30"},
        BadCase{"image_not_multiple_of_patch",
                ":3:23: data.image_size: must be a multiple of the patch size (32), got 200"},
        BadCase{"zero_learning_rate", ":5:19: optimizer.sgd.learning_rate: must be > 0, got 0"},
        BadCase{"momentum_out_of_range",
                ":5:38: optimizer.sgd.momentum: must be in [0, 1), got 1.5"},
        BadCase{"adamw_beta_out_of_range",
                ":5:42: optimizer.adamw.beta2: must be in [0, 1), got 1"},
        BadCase{"tf32_on_cpu",
                ":6:1: precision: TF32 is a mode of GPUs' matrix units, and distributed.device is CPU: "
                "use FLOAT32 or BF16_AUTOCAST on CPUs"},
        BadCase{"sweep_and_cap",
                ":9:5: plugin[0].bucket_sizing.bucket_cap_mb: contradicts sweep_cap_mb: a sweep "
                "sets the bucket_cap_mb of each run; leave bucket_cap_mb out"},
        BadCase{"sweep_repeats",
                ":7:26: plugin[0].bucket_sizing.sweep_cap_mb[2]: repeats 25 (sweep_cap_mb[0])"},
        BadCase{"unknown_proto_message",
                ":2:3: proto-message: expected ddplab.v1.Experiment or ddplab.v1.Suite, got "
                "\"ddplab.v1.Experiments\""},
        BadCase{"suite_duplicate_names",
                ":12:14: name: \"a\" is used twice (first by experiment[0])"},
        BadCase{"suite_without_experiments",
                ": experiment: is required: a suite runs at least one"},
        BadCase{"suite_experiment_missing_field",
                ":12:1: experiment \"no_batch\": data.batch_size: is required: samples per GPU "
                "per step, > 0"},
        BadCase{"suite_error_in_defaults",
                ":7:21: optimizer.sgd.learning_rate: must be > 0, got -0.5"},
        BadCase{"convergence_unknown_exact",
                ":10:15: convergence.exact: \"naive\" is no experiment of the suite"},
        BadCase{"convergence_one_seed",
                ":12:3: convergence.seeds: must be from 2 to 20, got 1"},
        // protobuf's text parser would skip a reserved name silently (#64).
        BadCase{"plugin_path",
                ":7:10: plugin { path: ... } is gone: a plugin is found by its name in the plugin directories "
                "(--plugin_dir): plugin { <name> {} }"},
        // A plugin's enum is open (proto3): 7 would run as E4M3 (#64).
        BadCase{"plugin_enum_number",
                ":7:16: plugin[0].fp8.format: has no value 7; accepted: E4M3, E5M2"},
        BadCase{"convergence_walk_too_far",
                ":12:3: convergence.max_lossy_checked: must be from 1 to 20, got 21"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.file); });

TEST(ExperimentFileTest, AnEndlessOrBinaryFileIsRefusedNotReadToTheEnd) {
  absl::StatusOr<v1::Suite> zero = LoadExperimentFile("/dev/zero", testing::ShippedSchema());
  EXPECT_EQ(zero.status().message(), "/dev/zero: more than 16 MiB: not an experiment file (text format)");
  const std::string nul = ::testing::TempDir() + "/nul.textproto";
  std::FILE* f = std::fopen(nul.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite("name: \"a\0b\"\n", 1, 13, f);
  std::fclose(f);
  EXPECT_EQ(LoadExperimentFile(nul, testing::ShippedSchema()).status().message(),
            nul + ": holds NUL bytes: not an experiment file (text format)");
}

TEST(ExperimentFileTest, MissingFileNamesThePath) {
  absl::StatusOr<v1::Suite> suite = LoadExperimentFile("/nonexistent/x.textproto", testing::ShippedSchema());
  EXPECT_EQ(suite.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(suite.status().message(),
            "/nonexistent/x.textproto: cannot open experiment file: No such file or directory");
}

TEST(ExperimentTextTest, SingleExperimentBecomesASuiteOfOneWithDefaults) {
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(R"pb(
    name: "one"
    model { preset: VIT_L_32 }
    data { batch_size: 32 }
    steps { measured: 3 }
    optimizer { sgd { learning_rate: 0.01 } }
  )pb", "inline", testing::ShippedSchema());
  ASSERT_TRUE(suite.ok()) << suite.status();
  EXPECT_EQ(suite->name(), "one");
  ASSERT_EQ(suite->experiment_size(), 1);
  const v1::Experiment& e = suite->experiment(0);
  EXPECT_EQ(e.data().image_size(), kDefaultImageSize);
  EXPECT_EQ(e.data().prefetch(), kDefaultPrefetch);
  EXPECT_EQ(e.data().task(), v1::Data::RANDOM);
  EXPECT_EQ(e.distributed().nodes(), 1u);
  EXPECT_EQ(e.distributed().gpus_per_node(), 0u);  // every local GPU
  EXPECT_EQ(e.distributed().timeout_seconds(), kDefaultTimeoutSeconds);
  EXPECT_EQ(e.output().directory(), kDefaultOutputDirectory);
}

TEST(ExperimentTextTest, SuiteMergesDefaultsAndExperimentPluginsReplaceThem) {
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(R"pb(
    # proto-message: ddplab.v1.Suite
    name: "s"
    defaults {
      model { preset: VIT_TINY_TEST }
      data { batch_size: 4 num_workers: 2 }
      steps { warmup: 1 measured: 2 }
      optimizer { sgd { learning_rate: 0.1 } }
      distributed { device: CPU gpus_per_node: 2 }
      plugin { static_graph {} }
    }
    experiment { name: "inherits" }
    experiment {
      name: "overrides"
      data { batch_size: 8 }
      plugin { bucket_view {} }
      plugin { bucket_sizing { bucket_cap_mb: 50 } }
    }
  )pb", "inline", testing::ShippedSchema());
  ASSERT_TRUE(suite.ok()) << suite.status();
  EXPECT_FALSE(suite->has_defaults());
  ASSERT_EQ(suite->experiment_size(), 2);
  const v1::Experiment& a = suite->experiment(0);
  EXPECT_EQ(a.data().batch_size(), 4u);
  ASSERT_EQ(a.plugin_size(), 1);
  EXPECT_EQ(a.plugin(0).name(), "static_graph");
  const v1::Experiment& b = suite->experiment(1);
  EXPECT_EQ(b.data().batch_size(), 8u);
  EXPECT_EQ(b.data().num_workers(), 2u);  // merged field by field
  ASSERT_EQ(b.plugin_size(), 2);
  EXPECT_EQ(b.plugin(0).name(), "bucket_view");
  EXPECT_EQ(b.plugin(1).name(), "bucket_sizing");
}

TEST(ParseExperimentTextTest, AnUnknownNameSuggestsTheOneMeant) {
  const std::string head = "name: \"x\" model { preset: VIT_TINY_TEST } data { batch_size: 2 } steps { measured: 1 }\n";
  absl::StatusOr<v1::Suite> torchrun =
      ParseExperimentText(head + "distributed { nproc_per_node: 2 }", "x.textproto", testing::ShippedSchema());
  EXPECT_EQ(torchrun.status().message(),
            "x.textproto:2:15: Message type \"ddplab.v1.Distributed\" has no field named \"nproc_per_node\". "
            "Processes per node are gpus_per_node here (torchrun's --nproc_per_node).");
  absl::StatusOr<v1::Suite> plugin = ParseExperimentText(head + "plugin { bf61 {} }", "x.textproto", testing::ShippedSchema());
  EXPECT_TRUE(absl::EndsWith(plugin.status().message(), ". Did you mean \"bf16\"?")) << plugin.status();
  EXPECT_TRUE(absl::StartsWith(plugin.status().message(), "x.textproto:2:10: unknown plugin \"bf61\"")) << plugin.status();
  absl::StatusOr<v1::Suite> far = ParseExperimentText(head + "distributed { qqqqqqq: 1 }", "x.textproto", testing::ShippedSchema());
  EXPECT_TRUE(absl::StrContains(far.status().message(), "no field named \"qqqqqqq\"")) << far.status();
  EXPECT_FALSE(absl::StrContains(far.status().message(), "Did you mean")) << far.status();
  // An enum value: the closest and every value accepted.
  absl::StatusOr<v1::Suite> transport =
      ParseExperimentText(head + "distributed { transport: NVLNK }", "x.textproto", testing::ShippedSchema());
  EXPECT_TRUE(absl::StrContains(transport.status().message(),
                                "Unknown enumeration value of \"NVLNK\" for field \"transport\". Did you mean NVLINK? "
                                "Accepted: "))
      << transport.status();
  EXPECT_TRUE(absl::StrContains(transport.status().message(), "HOST_MEMORY, NETWORK.")) << transport.status();
}

// #64, point 9: a file's errors come together, one a line in file order (Note [A file's
// errors together]): the first of each part of every experiment, an error of the
// defaults once, and the device's own check of each experiment beside the rest.
TEST(ParseExperimentTextTest, AFilesErrorsAreReportedTogether) {
  const std::string text = R"pb(# proto-message: ddplab.v1.Suite
name: "s"
defaults {
  model { preset: VIT_TINY_TEST } data { batch_size: 2 num_workers: 1000 } steps { measured: 1 }
  optimizer { sgd { learning_rate: 0.1 } } distributed { gpus_per_node: 2 }
}
experiment { name: "a" steps { repetitions: 50 } }
experiment { name: "b" optimizer { sgd { learning_rate: -1 } } distributed { nodes: 70000 } }
experiment { name: "a" }
)pb";
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(text, "x.textproto", testing::ShippedSchema());
  ASSERT_FALSE(suite.ok());
  EXPECT_EQ(std::string(suite.status().message()),
            "x.textproto:4:56: data.num_workers: must be at most 256, got 1000\n"
            "x.textproto:7:32: steps.repetitions: must be at most 20, got 50\n"
            "x.textproto:8:42: optimizer.sgd.learning_rate: must be > 0, got -1\n"
            "x.textproto:8:78: distributed.nodes: must be at most 65536, got 70000\n"
            "x.textproto:9:14: name: \"a\" is used twice (first by experiment[0])");

  // The device's check (here: on CPUs, settings only GPUs use) for every experiment at once.
  const std::string gpu_only = R"pb(# proto-message: ddplab.v1.Suite
name: "s"
defaults { model { preset: VIT_TINY_TEST } data { batch_size: 2 } steps { measured: 1 } optimizer { sgd { learning_rate: 0.1 } } }
experiment { name: "a" data { pin_memory: true } }
experiment { name: "b" distributed { high_priority_compute: true } }
)pb";
  absl::StatusOr<v1::Suite> cpu = ParseExperimentText(
      gpu_only, "x.textproto", testing::ShippedSchema(),
      [](const v1::Experiment& e) { return CheckLeftToCpus(e, "a CPU build"); });
  ASSERT_FALSE(cpu.ok());
  const std::vector<std::string> lines = absl::StrSplit(cpu.status().message(), '\n');
  ASSERT_EQ(lines.size(), 2u) << cpu.status();
  EXPECT_TRUE(absl::StartsWith(lines[0], "x.textproto:4:31: data.pin_memory: pins host memory")) << lines[0];
  EXPECT_TRUE(absl::StartsWith(lines[1], "x.textproto:5:38: distributed.high_priority_compute: chooses a CUDA stream"))
      << lines[1];
}

// Settings that were accepted and then ignored, or that ran with nonsense figures, are
// refused at their place (#39, red team).
TEST(ParseExperimentTextTest, IgnoredOrUnboundedSettingsAreRefusedAtTheirPlace) {
  const std::string head = "name: \"x\" model { preset: VIT_TINY_TEST } optimizer { sgd { learning_rate: 0.1 } }\n";
  const std::pair<std::string, std::string> cases[] = {
      {"data { batch_size: 2 task: 99 } steps { measured: 1 }",
       "x.textproto:2:22: data.task: has no value 99; accepted: TASK_UNSPECIFIED, RANDOM, LEARNABLE"},
      {"data { batch_size: 2 } steps { measured: 1 } profiling { profiler: NSYS }",
       "x.textproto:2:58: profiling.profiler: NSYS is asked for on the command line, not in a file: --profile=nsys"},
      {"data { batch_size: 2 } steps { measured: 1 warmup: 4294967295 }",
       "x.textproto:2:44: steps.warmup: must be at most 100000, got 4294967295"},
      {"data { batch_size: 2 } steps { measured: 1 cooldown: 4294967295 }",
       "x.textproto:2:44: steps.cooldown: must be at most 100000, got 4294967295"},
      {"data { batch_size: 2 } steps { measured: 1000000000 }",
       "x.textproto:2:32: steps.measured: must be at most 1000000, got 1000000000"},
  };
  for (const auto& [text, message] : cases) {
    absl::StatusOr<v1::Suite> s = ParseExperimentText(head + text, "x.textproto", testing::ShippedSchema());
    EXPECT_TRUE(absl::StartsWith(s.status().message(), message)) << text << "\n" << s.status();
  }
}

TEST(ParseExperimentTextTest, NamesDdplabDerivesAreRefused) {
  const std::string e = "model { preset: VIT_TINY_TEST } data { batch_size: 2 } steps { measured: 1 } "
                        "optimizer { sgd { learning_rate: 0.1 } }";
  absl::StatusOr<v1::Suite> tune = ParseExperimentText(
      "# proto-message: ddplab.v1.Suite\nname: \"tn_tune\" experiment { name: \"a\" " + e + " }", "x.textproto",
      testing::ShippedSchema());
  EXPECT_EQ(tune.status().message(),
            "x.textproto:2:1: name: \"tn_tune\" ends in _tune, where --tune files the tuning of \"tn\": name it otherwise");
  // The tuner's cache is <output>/tune_cache/ (#64).
  absl::StatusOr<v1::Suite> cache = ParseExperimentText(
      "# proto-message: ddplab.v1.Suite\nname: \"tune_cache\" experiment { name: \"a\" " + e + " }", "x.textproto",
      testing::ShippedSchema());
  EXPECT_EQ(cache.status().message(),
            "x.textproto:2:1: name: \"tune_cache\" is where --tune keeps its measurements (<output>/tune_cache/): name "
            "it otherwise");
  absl::StatusOr<v1::Suite> check = ParseExperimentText(
      "# proto-message: ddplab.v1.Suite\nname: \"s\" convergence { exact: \"a\" } experiment { name: \"a\" " + e + " } experiment { name: "
      "\"a-convergence-1\" " + e + " }",
      "x.textproto", testing::ShippedSchema());
  EXPECT_TRUE(absl::StrContains(check.status().message(),
                                "name: \"a-convergence-1\": names with -convergence- are the convergence check's runs"))
      << check.status();
}

TEST(ExpandSweepsTest, CapsThenTransportsOneProcessRunsOnce) {
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(R"pb(
    # proto-message: ddplab.v1.Suite
    name: "s"
    defaults {
      model { preset: VIT_TINY_TEST }
      data { batch_size: 4 }
      steps { measured: 2 }
      optimizer { sgd { learning_rate: 0.1 } }
      distributed { gpus_per_node: 2 sweep_transport: [NVLINK, HOST_MEMORY] }
    }
    experiment { name: "single" distributed { gpus_per_node: 1 } }
    experiment {
      name: "caps"
      plugin { bucket_sizing { sweep_cap_mb: [25, 50] } }
    }
    experiment { name: "pinned" distributed { transport: NETWORK } }
    experiment {
      name: "tuned"
      distributed {
        sweep_transport: [HOST_MEMORY]
        nccl_env { name: "NCCL_MAX_NCHANNELS" value: "4" }
      }
    }
  )pb", "inline", testing::ShippedSchema());
  ASSERT_TRUE(suite.ok()) << suite.status();
  std::vector<SuiteRun> runs = ExpandSweeps(*suite, testing::ShippedSchema());
  std::vector<std::string> names, sweeps, transports;
  for (const SuiteRun& run : runs) {
    names.push_back(run.experiment.name());
    sweeps.push_back(run.sweep);
    transports.push_back(v1::Distributed::Transport_Name(run.experiment.distributed().transport()));
    EXPECT_EQ(run.experiment.distributed().sweep_transport_size(), 0) << run.experiment.name();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"single", "caps_25mb_nvlink", "caps_50mb_nvlink",
                                             "pinned", "caps_25mb_host_memory",
                                             "caps_50mb_host_memory", "tuned_host_memory"}));
  EXPECT_EQ(sweeps, (std::vector<std::string>{"", "caps_nvlink", "caps_nvlink", "", "caps_host_memory",
                                              "caps_host_memory", ""}));
  EXPECT_EQ(transports,
            (std::vector<std::string>{"TRANSPORT_UNSPECIFIED", "NVLINK", "NVLINK", "NETWORK",
                                      "HOST_MEMORY", "HOST_MEMORY", "HOST_MEMORY"}));
  EXPECT_EQ(runs.back().experiment.distributed().nccl_env_size(), 1);
}

// What an experiment writes wins over the suite's defaults, also a false or a zero
// (proto3's merge alone would keep the defaults' value); what it leaves out is inherited.
TEST(ExperimentTextTest, WrittenFieldsWinOverDefaultsEvenWhenFalseOrZero) {
  absl::StatusOr<v1::Suite> suite = ParseExperimentText(R"pb(
    # proto-message: ddplab.v1.Suite
    name: "s"
    defaults {
      model { preset: VIT_TINY_TEST }
      data { batch_size: 4 num_workers: 2 }
      steps { warmup: 3 measured: 2 }
      optimizer { sgd { learning_rate: 0.1 momentum: 0.9 } }
      distributed { gpus_per_node: 2 high_priority_compute: true transport: NVLINK }
      profiling { nvtx: true bucket_timing: true }
    }
    experiment { name: "inherits" }
    experiment {
      name: "overrides"
      data { num_workers: 0 }
      steps { warmup: 0 }
      optimizer { sgd { momentum: 0 } }
      distributed { high_priority_compute: false transport: TRANSPORT_UNSPECIFIED }
      profiling { bucket_timing: false }
    }
  )pb", "inline", testing::ShippedSchema());
  ASSERT_TRUE(suite.ok()) << suite.status();
  ASSERT_EQ(suite->experiment_size(), 2);
  const v1::Experiment& inherits = suite->experiment(0);
  EXPECT_TRUE(inherits.profiling().bucket_timing());
  EXPECT_TRUE(inherits.distributed().high_priority_compute());
  EXPECT_EQ(inherits.distributed().transport(), v1::Distributed::NVLINK);
  EXPECT_EQ(inherits.data().num_workers(), 2u);
  EXPECT_EQ(inherits.steps().warmup(), 3u);
  EXPECT_DOUBLE_EQ(inherits.optimizer().sgd().momentum(), 0.9);
  const v1::Experiment& overrides = suite->experiment(1);
  EXPECT_FALSE(overrides.profiling().bucket_timing());
  EXPECT_TRUE(overrides.profiling().nvtx());  // not written: inherited
  EXPECT_FALSE(overrides.distributed().high_priority_compute());
  EXPECT_EQ(overrides.distributed().transport(), v1::Distributed::TRANSPORT_UNSPECIFIED);
  EXPECT_EQ(overrides.distributed().gpus_per_node(), 2u);
  EXPECT_EQ(overrides.data().num_workers(), 0u);
  EXPECT_EQ(overrides.data().batch_size(), 4u);
  EXPECT_EQ(overrides.steps().warmup(), 0u);
  EXPECT_DOUBLE_EQ(overrides.optimizer().sgd().momentum(), 0);
  EXPECT_DOUBLE_EQ(overrides.optimizer().sgd().learning_rate(), 0.1);
}

}  // namespace
}  // namespace ddplab

namespace ddplab {
namespace {

// #64, point 16: a plugin whose configuration message is one of ddplab's own (or uses
// them) is refused by name; the schema builder once recursed until the stack overflowed.
TEST(ExperimentSchemaTest, APluginWithDdplabsOwnMessageIsRefused) {
  for (const google::protobuf::Descriptor* own : {v1::Experiment::descriptor(), v1::Plugin::descriptor(),
                                                  v1::Suite::descriptor()}) {
    absl::StatusOr<std::shared_ptr<const ExperimentSchema>> schema = ExperimentSchema::Build({{"evil", own}});
    ASSERT_FALSE(schema.ok()) << own->full_name();
    EXPECT_TRUE(absl::StrContains(schema.status().message(),
                                  absl::StrCat("plugin \"evil\": its configuration message ", own->full_name())))
        << schema.status();
    EXPECT_TRUE(absl::StrContains(schema.status().message(), "a plugin brings a message of its own"));
  }
}

}  // namespace
}  // namespace ddplab
