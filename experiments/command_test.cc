// What vit_ddp answers before it runs anything (help, version, torchrun's spellings,
// refusals of what cannot run), asked in this process (command.h): one process for all of
// them. What needs a process of its own (exit codes through main, signals, workers, files
// a run writes) is cli_test.sh's.
#include "experiments/command.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "experiments/cli.h"
#include "experiments/run_paths.h"
#include "core/build_flags.h"
#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace ddplab {
namespace {

using bazel::tools::cpp::runfiles::Runfiles;

struct Answer {
  int code = -1;
  std::string out, err;
  std::string both() const { return out + err; }
};

// vit_ddp with `args`: its exit code and what it printed. Its flags are as they were after.
Answer Vit(const std::vector<std::string>& args) {
  absl::FlagSaver saved;
  // This test's binary: its runfiles hold the plugins and experiment files, as vit_ddp's do.
  std::vector<std::string> strings{SelfPath("vit_ddp")};
  strings.insert(strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::ostringstream out, err;
  std::streambuf* const cout = std::cout.rdbuf(out.rdbuf());
  std::streambuf* const cerr = std::cerr.rdbuf(err.rdbuf());
  Answer answer;
  answer.code = RunVitDdp(static_cast<int>(strings.size()), argv.data());
  std::cout.rdbuf(cout);
  std::cerr.rdbuf(cerr);
  answer.out = out.str();
  answer.err = err.str();
  return answer;
}

class CommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
    ASSERT_NE(runfiles, nullptr) << error;
    smoke_ = runfiles->Rlocation("ddplab/experiments/cpu_smoke.textproto");
    tune_ = runfiles->Rlocation("ddplab/experiments/e2e/testdata/tune_suite.textproto");
    unknown_plugin_ = runfiles->Rlocation("ddplab/core/testdata/bad/unknown_plugin.textproto");
    tmp_ = std::getenv("TEST_TMPDIR");
  }

  // The CPU suite (or `file`) with `from` replaced by `to`, written to a file of the test's.
  std::string Edited(const std::string& name, const std::string& from, const std::string& to,
                     const std::string& file = "") {
    std::ifstream in(file.empty() ? smoke_ : file);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_TRUE(absl::StrContains(text.str(), from)) << from;
    return Write(name, absl::StrReplaceAll(text.str(), {{from, to}}));
  }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = absl::StrCat(tmp_, "/", name);
    std::ofstream(path) << text;
    return path;
  }

  bool Exists(const std::string& name) {
    struct stat st;
    return stat(absl::StrCat(tmp_, "/", name).c_str(), &st) == 0;
  }

  // --print_experiments of the CPU suite with `args`.
  Answer Plan(std::vector<std::string> args) {
    args.insert(args.begin(), {"--experiment=" + smoke_, "--print_experiments"});
    return Vit(args);
  }

  std::string smoke_, tune_, unknown_plugin_, tmp_;
};

// Sets the environment variables of `values` for its lifetime; as they were after.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::vector<std::pair<std::string, std::string>>& values) {
    for (const auto& [name, value] : values) {
      const char* before = std::getenv(name.c_str());
      before_.push_back({name, before ? std::optional<std::string>(before) : std::nullopt});
      setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, before] : before_) {
      before ? setenv(name.c_str(), before->c_str(), 1) : unsetenv(name.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> before_;
};

int Lines(const std::string& text) { return static_cast<int>(std::count(text.begin(), text.end(), '\n')); }

TEST_F(CommandTest, HelpAndVersionAreAnswers) {
  for (const char* flag : {"--help", "-h", "--helpfull"}) {
    const Answer a = Vit({flag});
    EXPECT_EQ(a.code, 0) << flag << ": " << a.err;
    EXPECT_TRUE(absl::StrContains(a.out, "--nproc_per_node")) << flag << " lists no --nproc_per_node";
    EXPECT_FALSE(absl::StrContains(a.out, "progress_label") || absl::StrContains(a.out, "flagfile"))
        << flag << " shows internal flags";
  }
  const Answer version = Vit({"--version"});
  EXPECT_EQ(version.code, 0);
  EXPECT_TRUE(std::regex_search(version.out, std::regex(R"(^vit_ddp \(ddplab\) [0-9]+\.[0-9]+\.[0-9]+; LibTorch )")))
      << version.out;
  // The version is the change log's newest: its first entry, "- 0.12 (in progress): ...".
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  std::ifstream changes(runfiles->Rlocation("ddplab/docs/changes.md"));
  std::string line;
  while (std::getline(changes, line) && !absl::StartsWith(line, "- ")) {
  }
  const std::string newest = line.substr(2, line.find_first_of(" :", 2) - 2);
  EXPECT_TRUE(absl::StartsWith(absl::StrCat(kVersion, "."), absl::StrCat(newest, ".")))
      << kVersion << " against docs/changes.md's " << line;
}

// A suite this machine cannot run (the GPU suites on a CPU build) is still listed, each
// run with why it cannot run here.
TEST_F(CommandTest, PrintExperimentsListsWhatThisMachineCannotRunSayingWhy) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  const std::string seed = runfiles->Rlocation("ddplab/experiments/seed_study.textproto");
  const Answer a = Vit({"--experiment=" + seed, "--print_experiments", "--only=single_gpu,bucket_caps"});
  EXPECT_EQ(a.code, 0) << a.err;
  EXPECT_TRUE(std::regex_search(a.out, std::regex(R"((^|\n)Suite "seed_study": 9 run\(s\) would run)"))) << a.out;
  EXPECT_TRUE(absl::StrContains(a.out, "] bucket_caps_200mb_host_memory (")) << a.out;
  if (!DDPLAB_CUDA_BUILD) {
    EXPECT_TRUE(absl::StrContains(a.out, "on a machine that can (9 cannot here)")) << a.out;
    EXPECT_TRUE(absl::StrContains(a.out, "# cannot run on this machine: experiment \"single_gpu\": asks for "
                                         "distributed.device CUDA, but this is a CPU build"))
        << a.out;
  }
  // Asked to run, the same file is refused, as before.
  if (!DDPLAB_CUDA_BUILD) EXPECT_EQ(Vit({"--experiment=" + seed, "--only=single_gpu"}).code, 2);
}

TEST_F(CommandTest, PrintExperimentsListsTheResolvedRunsAndWritesNothing) {
  const Answer a = Plan({"--output_dir=" + tmp_ + "/dry"});
  EXPECT_EQ(a.code, 0) << a.err;
  EXPECT_TRUE(absl::StrContains(a.out, "\n== [2/5] naive_ddp (2 processes)")) << "no naive_ddp in " << a.out;
  EXPECT_TRUE(absl::StrContains(a.out, "batch_size: 8")) << "no resolved experiment in " << a.out;
  EXPECT_FALSE(Exists("dry")) << "--print_experiments wrote into the output directory";
}

// torchrun's values: accepted where vit_ddp has their meaning, else refused naming what works.
TEST_F(CommandTest, TorchrunsSpellings) {
  struct Case {
    int code;
    std::string said;
    std::vector<std::string> args;
  };
  const Answer on_this_machine = Plan({});
  const bool gpus = absl::StrContains(on_this_machine.out, "NVIDIA");
  std::vector<Case> cases{
      {0, "stays one process", {"--nproc_per_node=cpu"}},
      // One process for experiments of several: DDP of one process, as torchrun's (#64).
      {0,
       "--nproc_per_node=1: naive_ddp, static_graph_bucket_view, bf16, powersgd_rank4 run as data-parallel training of "
       "one process, the engine on",
       {"--nproc_per_node=1"}},
      {0, "would run", {"--nproc-per-node=auto"}},
      {0, "would run", {"--nnodes=1:1", "--standalone"}},
      {2,
       "--nproc_per_node=x: expected a number of processes per node, or auto, gpu or cpu (as torchrun's)",
       {"--nproc_per_node=x"}},
      {2,
       "--nnodes=1:2: an elastic range of nodes is torchrun's; vit_ddp runs a fixed number: --nnodes=N",
       {"--nnodes=1:2"}},
      {2,
       "--standalone is one node (as torchrun's), and --nnodes=2 asks for more",
       {"--standalone", "--nnodes=2", "--master_port=29500"}},
      {2, "unknown flag --outptu_dir=x; did you mean --output_dir? (see --help)", {"--outptu_dir=x"}},
      {2, "unknown flag --nproc=2; did you mean --nproc_per_node? (see --help)", {"--nproc=2"}},
  };
  if (!gpus) {
    cases.push_back(
        {2, "--nproc_per_node=gpu: this machine has no GPU (cpu or a number work here)", {"--nproc_per_node=gpu"}});
  }
  for (const Case& c : cases) {
    const Answer a = Plan(c.args);
    EXPECT_EQ(a.code, c.code) << c.args[0] << ": " << a.err;
    EXPECT_TRUE(absl::StrContains(a.both(), c.said)) << c.args[0] << ": no \"" << c.said << "\" in " << a.both();
  }
}

// Processes and nodes: a refusal names what asked for them; a file's nodes are the job's.
TEST_F(CommandTest, ProcessesAndNodesBeyondTheJobAreRefusedNamingTheirSource) {
  const Answer many = Plan({"--nproc_per_node=512"});
  EXPECT_EQ(many.code, 2);
  EXPECT_TRUE(absl::StrContains(many.err, "(--nproc_per_node=512 asked for them)")) << many.err;
  const Answer nodes =
      Vit({"--experiment=" + Edited("four_nodes.textproto", "gpus_per_node: 2\n", "gpus_per_node: 2 nodes: 4\n"),
           "--print_experiments"});
  EXPECT_EQ(nodes.code, 2);
  EXPECT_TRUE(absl::StrContains(nodes.err, "asks for distributed.nodes 4, but this job runs on 1 node (--nnodes=1)"))
      << nodes.err;
}

// Control characters from input are not echoed raw to the terminal.
TEST_F(CommandTest, EscapesFromInputAreShownAsHex) {
  const std::string file = Write("ansi.textproto", std::string("name: \"a\033[31mb") + '\0' + "\"\n");
  const Answer bad_file = Vit({"--experiment=" + file});
  EXPECT_EQ(bad_file.code, 2);
  const Answer bad_flag = Vit({"--experi\033ment=x"});
  for (const Answer* a : {&bad_file, &bad_flag}) {
    EXPECT_FALSE(absl::StrContains(a->err, "\033")) << "an escape from input was echoed raw: " << a->err;
  }
  EXPECT_TRUE(absl::StrContains(bad_flag.err, "experi\\x1bment")) << bad_flag.err;
}

TEST_F(CommandTest, ALargeModelOnCpusIsSaidToBeSlow) {
  const Answer a =
      Vit({"--experiment=" + Edited("large_on_cpu.textproto", "preset: VIT_TINY_TEST", "preset: VIT_L_32"),
           "--print_experiments", "--only=single_process"});
  EXPECT_EQ(a.code, 0) << a.err;
  if (!absl::StrContains(a.out, "NVIDIA")) {
    EXPECT_TRUE(absl::StrContains(a.out, "\nsingle_process: a model of 306.5M parameters on CPUs takes minutes per step"))
        << a.out;
  }
}

// Checks before anything runs: refused in one line, and no output directory made.
// #64: where distributed.device is left out on a CPU build, a setting only GPUs use is
// reported where the file has it, naming the others, before anything runs.
TEST_F(CommandTest, GpuSettingsOfAnExperimentLeftToCpusAreReportedTogether) {
  if (DDPLAB_CUDA_BUILD) GTEST_SKIP() << "a CUDA build: the device left out may be a GPU";
  const Answer a = Vit({"--experiment=" + Write("gpu_only.textproto",
                                                "name: \"gpu_only\"\n"
                                                "model { preset: VIT_TINY_TEST }\n"
                                                "data { batch_size: 4 image_size: 32 pin_memory: true }\n"
                                                "steps { warmup: 1 measured: 1 }\n"
                                                "optimizer { sgd { learning_rate: 0.01 } }\n"
                                                "distributed { gpus_per_node: 2 high_priority_compute: true }\n"),
                        "--output_dir=" + tmp_ + "/gpu_only"});
  EXPECT_EQ(a.code, 2);
  EXPECT_TRUE(absl::StrContains(a.err, "gpu_only.textproto:3:37: data.pin_memory: pins host memory for copies to a "
                                       "GPU, but this experiment runs on CPUs (distributed.device is left out, and "
                                       "this is a CPU build); so do distributed.high_priority_compute: remove them"))
      << a.err;
  EXPECT_FALSE(Exists("gpu_only"));
}

// #65: a module's file is found beside the experiment file and handed to the runs as an
// absolute path, whatever the directory vit_ddp starts in; a module of two inputs is
// refused at its place in the file (Note [One input for now]).
TEST_F(CommandTest, AModulesFileIsTheExperimentFilesNeighbourAndTakesOneInput) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  const std::string dir = tmp_ + "/module";
  for (const char* name : {"mlp.pt", "two_inputs.pt"}) {
    const std::string from = runfiles->Rlocation(absl::StrCat("ddplab/core/model/torchscript/testdata/", name));
    ASSERT_EQ(std::system(absl::StrCat("mkdir -p '", dir, "' && cp '", from, "' '", dir, "/'").c_str()), 0);
  }
  const std::string mlp = "model { torchscript { file: \"mlp.pt\" input { shape: [3, 8, 8] } classes: 10 } }";
  const std::string suite = Edited("module/mine.textproto", "model { preset: VIT_TINY_TEST }", mlp);
  const Answer a = Vit({"--experiment=" + suite, "--print_experiments"});
  EXPECT_EQ(a.code, 0) << a.err;
  EXPECT_TRUE(absl::StrContains(a.out, absl::StrCat("file: \"", dir, "/mlp.pt\""))) << a.out;
  const Answer two = Vit({"--experiment=" + Edited("module/two.textproto", "model { preset: VIT_TINY_TEST }",
                                                   "model { torchscript { file: \"two_inputs.pt\"\n"
                                                   "  input { shape: [3, 8, 8] } input { shape: [1] } classes: 10 } }"),
                          "--print_experiments"});
  EXPECT_EQ(two.code, 2);
  EXPECT_TRUE(absl::StrContains(two.err, "two.textproto:10:3: model.torchscript.input: ddplab feeds a module one input "
                                         "for now; this file declares 2"))
      << two.err;
}

// #65: a result is of the module's bytes it trained: --skip_completed keeps it while the
// file is the same, and runs it again once the file holds another module.
TEST_F(CommandTest, AResultOfAnotherModulesBytesIsRunAgain) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  const std::string dir = tmp_ + "/stale_module";
  const auto copy = [&](const char* name) {
    const std::string from = runfiles->Rlocation(absl::StrCat("ddplab/core/model/torchscript/testdata/", name));
    return std::system(absl::StrCat("mkdir -p '", dir, "' && cp '", from, "' '", dir, "/m.pt'").c_str());
  };
  ASSERT_EQ(copy("mlp.pt"), 0);
  const std::string suite = Write("stale_module/suite.textproto",
                                  "# proto-message: ddplab.v1.Suite\n"
                                  "name: \"stale_module\"\n"
                                  "defaults {\n"
                                  "  model { torchscript { file: \"m.pt\" input { shape: [3, 8, 8] } classes: 10 } }\n"
                                  "  data { batch_size: 4 } steps { warmup: 1 measured: 2 }\n"
                                  "  optimizer { sgd { learning_rate: 0.01 } } distributed { device: CPU gpus_per_node: 1 }\n"
                                  "}\n"
                                  "experiment { name: \"one\" }\n");
  const std::vector<std::string> args = {"--experiment=" + suite, "--output_dir=" + dir + "/results", "--skip_completed"};
  const Answer first = Vit(args);
  ASSERT_EQ(first.code, 0) << first.err;
  const Answer same = Vit(args);
  EXPECT_TRUE(absl::StrContains(same.out, "skipped: completed before")) << same.out;
  ASSERT_EQ(copy("with_unused.pt"), 0);  // the same inputs and classes, other bytes
  const Answer other = Vit(args);
  EXPECT_EQ(other.code, 0) << other.err;
  EXPECT_TRUE(absl::StrContains(other.out, "was made from another module (" + dir + "/m.pt is fnv1a64:")) << other.out;
}

TEST_F(CommandTest, WhatCannotRunIsRefusedBeforeRunningInOneLine) {
  const Answer many = Vit({"--experiment=" + smoke_, "--nproc_per_node=1000", "--output_dir=" + tmp_ + "/many"});
  EXPECT_EQ(many.code, 2);
  EXPECT_TRUE(absl::StrContains(many.err, "1000 CPU processes per node, but this machine has")) << many.err;
  EXPECT_FALSE(Exists("many")) << "--nproc_per_node=1000 made the output directory";

  const std::string huge_text =
      "name: \"huge\"\n"
      "model { vit { patch_size: 8 hidden_dim: 65536 num_layers: 64 num_heads: 64 mlp_dim: 262144 num_classes: 10 } }\n"
      "data { batch_size: 8 image_size: 32 }\n"
      "steps { warmup: 1 measured: 1 }\n"
      "optimizer { sgd { learning_rate: 0.01 } }\n"
      "distributed { gpus_per_node: 1 device: CPU }\n";
  const Answer huge = Vit({"--experiment=" + Write("huge.textproto", huge_text), "--output_dir=" + tmp_ + "/huge"});
  EXPECT_EQ(huge.code, 2);
  EXPECT_EQ(Lines(huge.err), 1) << huge.err;
  EXPECT_TRUE(absl::StrContains(huge.err, "experiment \"huge\": cannot fit: each process needs at least")) << huge.err;
  EXPECT_FALSE(Exists("huge")) << "a model that cannot fit made the output directory";

  const std::string long_name = absl::StrReplaceAll(huge_text, {{"\"huge\"", "\"" + std::string(10000, 'a') + "\""}});
  const Answer named =
      Vit({"--experiment=" + Write("long_name.textproto", long_name), "--output_dir=" + tmp_ + "/long_name"});
  EXPECT_EQ(named.code, 2);
  EXPECT_EQ(Lines(named.err), 1) << named.err.substr(0, 300);
  EXPECT_TRUE(absl::StrContains(named.err, ":1:1: name: must be at most 200 characters (it names files), got 10000"))
      << named.err.substr(0, 300);
  EXPECT_FALSE(Exists("long_name")) << "a 10,000-character name made the output directory";

  const Answer stale = [&] {
    ScopedEnv env({{"WORLD_SIZE", "2"}});
    return Vit({"--experiment=" + smoke_, "--output_dir=" + tmp_ + "/stale"});
  }();
  EXPECT_EQ(stale.code, 2);
  EXPECT_TRUE(absl::StrContains(stale.err, "WORLD_SIZE=2 is set but RANK, MASTER_ADDR, MASTER_PORT are not"))
      << stale.err;
}

// A bad file stops at its place; a missing one says so; --only names the runs there are.
TEST_F(CommandTest, BadFilesAndRunNamesAreRefusedSayingWhere) {
  const Answer bad = Vit({"--experiment=" + unknown_plugin_});
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(absl::StrContains(bad.err,
                                "unknown_plugin.textproto:7:10: unknown plugin \"fancy_hook\": no libfancy_hook.so in "))
      << bad.err;
  const Answer missing = Vit({"--experiment=/nonexistent.textproto"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_TRUE(absl::StrContains(missing.err, "/nonexistent.textproto: cannot open experiment file")) << missing.err;

  // --only with a name the suite does not have: an error naming the runs it has, not a
  // silent run of nothing.
  const Answer none = Vit({"--experiment=" + smoke_, "--only=no_such_run"});
  EXPECT_EQ(none.code, 2);
  EXPECT_TRUE(absl::StrContains(none.err, "--only=no_such_run: ")) << none.err;
  EXPECT_TRUE(absl::StrContains(none.err, "has no experiment or run named no_such_run; its experiments: single_process, "
                                          "naive_ddp"))
      << none.err;
  EXPECT_TRUE(absl::StrContains(none.err, "; its runs: single_process, naive_ddp")) << none.err;
  // --only with a list: the runs named, and an error naming any that is not a run.
  const Answer two = Plan({"--only=bf16,naive_ddp"});
  EXPECT_EQ(two.code, 0) << two.err;
  EXPECT_TRUE(std::regex_search(two.out, std::regex(R"((^|\n)Suite "cpu_smoke": 2 run\(s\) would run)"))) << two.out;
  EXPECT_TRUE(std::regex_search(two.out, std::regex(R"((^|\n)== \[[0-9]+/[0-9]+\] naive_ddp )")));
  EXPECT_TRUE(std::regex_search(two.out, std::regex(R"((^|\n)== \[[0-9]+/[0-9]+\] bf16 )")));
  // A lossy experiment as the convergence check's reference: refused at its place.
  const Answer lossy_exact =
      Vit({"--experiment=" + Edited("lossy_exact.textproto", "exact: \"naive_ddp\"", "exact: \"bf16\""),
           "--print_experiments"});
  EXPECT_EQ(lossy_exact.code, 2);
  EXPECT_TRUE(std::regex_search(lossy_exact.err, std::regex(R"(lossy_exact\.textproto:30:3: convergence\.exact: "bf16" )"
                                                            R"(is lossy \(bf16\): the check's reference must be exact)")))
      << lossy_exact.err;
  const Answer no_dir = Vit({"--experiment=" + smoke_, "--plugin_dir=" + tmp_ + "/no_such_dir", "--print_experiments"});
  EXPECT_EQ(no_dir.code, 2);
  EXPECT_TRUE(absl::StrContains(no_dir.err, "/no_such_dir: no such directory")) << no_dir.err;
  const Answer nope = Vit({"--experiment=" + smoke_, "--only=bf16,nope"});
  EXPECT_EQ(nope.code, 2);
  EXPECT_TRUE(absl::StrContains(nope.err, "has no experiment or run named nope; its experiments: ")) << nope.err;
  // A sweep that names a run as another experiment is named: one result file for two (#64).
  const std::string clash = tmp_ + "/clash.textproto";
  std::ofstream(clash) << "# proto-message: ddplab.v1.Suite\nname: \"clash\"\n"
                          "defaults { model { preset: VIT_TINY_TEST } data { batch_size: 2 } steps { measured: 1 } "
                          "optimizer { sgd { learning_rate: 0.1 } } distributed { device: CPU gpus_per_node: 2 } }\n"
                          "experiment { name: \"caps\" plugin { bucket_sizing { sweep_cap_mb: [1] } } }\n"
                          "experiment { name: \"caps_1mb\" }\n";
  const Answer clashes = Vit({"--experiment=" + clash, "--print_experiments"});
  EXPECT_EQ(clashes.code, 2) << clashes.out;
  EXPECT_TRUE(absl::StrContains(clashes.err, "experiment \"caps_1mb\" makes a run named \"caps_1mb\", as experiment "
                                             "\"caps\" does: their results would share one file"))
      << clashes.err;
}

// --profile=nsys without nsys: a clear error before any worker starts.
TEST_F(CommandTest, ProfilingWithoutNsysIsRefusedBeforeRunning) {
  struct stat st;
  if (stat("/usr/bin/nsys", &st) == 0 || stat("/bin/nsys", &st) == 0) GTEST_SKIP() << "nsys is installed";
  const Answer a = [&] {
    ScopedEnv env({{"PATH", "/usr/bin:/bin"}});
    return Vit({"--profile=nsys", "--experiment=" + smoke_, "--output_dir=" + tmp_ + "/nsys"});
  }();
  EXPECT_EQ(a.code, 2);
  EXPECT_TRUE(absl::StrContains(a.err, "needs Nsight Systems, and there is no nsys on PATH")) << a.err;
  EXPECT_FALSE(Exists("nsys")) << "started runs without nsys";
}

// What --tune refuses, before anything runs.
TEST_F(CommandTest, WhatTuneRefuses) {
  const std::string out = "--output_dir=" + tmp_ + "/tune";
  const Answer one = Vit({"--experiment=" + tune_, "--tune", "--only=one", out});
  EXPECT_EQ(one.code, 2);
  EXPECT_TRUE(absl::StrContains(one.err, "experiment \"one\": runs one process: --tune needs several")) << one.err;
  const Answer nope = Vit({"--experiment=" + tune_, "--tune", "--only=nope", out});
  EXPECT_EQ(nope.code, 2);
  EXPECT_TRUE(absl::StrContains(nope.err, "the suite has no experiment \"nope\"")) << nope.err;
  const Answer torchrun = [&] {
    ScopedEnv env({{"RANK", "0"},
                   {"LOCAL_RANK", "0"},
                   {"WORLD_SIZE", "2"},
                   {"LOCAL_WORLD_SIZE", "2"},
                   {"MASTER_ADDR", "127.0.0.1"},
                   {"MASTER_PORT", "29500"}});
    return Vit({"--experiment=" + tune_, "--tune", out});
  }();
  EXPECT_EQ(torchrun.code, 2);
  EXPECT_TRUE(absl::StrContains(torchrun.err, "run vit_ddp --tune plainly, not under torchrun")) << torchrun.err;
  const Answer nodes = Vit({"--experiment=" + tune_, "--tune", "--nnodes=2", "--master_port=29500", out});
  EXPECT_EQ(nodes.code, 2);
  EXPECT_TRUE(absl::StrContains(nodes.err, "--tune tunes on one node")) << nodes.err;
  const Answer bad = Vit({"--experiment=" + Edited("bad.textproto", "verify: 2", "verify: 9", tune_), "--tune", out});
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(absl::StrContains(bad.err, "bad.textproto:16:3: tune.verify: must be at most the number of caps (4), got 9"))
      << bad.err;
  EXPECT_FALSE(Exists("tune")) << "a refused --tune wrote its output directory";
}

}  // namespace
}  // namespace ddplab
