#include "core/report/report.h"
#include "core/report/report_html.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "core/report/report_testing.h"
#include "gtest/gtest.h"

namespace ddplab {
namespace {

v1::RunResult Run(const std::string& name, int world, double steps_per_s, bool engine) {
  v1::RunResult r = testing::RunOf(name, world, steps_per_s, engine);
  r.set_peak_memory_gib(4.82);
  r.set_tflops_per_gpu(37.2);
  return r;
}

std::vector<v1::RunResult> Runs() {
  std::vector<v1::RunResult> runs{Run("single_gpu", 1, 12.5, false), Run("naive_ddp", 4, 11.0, true),
                                   Run("bf16", 4, 11.8, true)};
  runs[1].set_exposed_comm_ms(7.0);
  runs[2].set_exposed_comm_ms(0.1);
  runs[2].set_gradient_error(3e-3);
  runs[2].set_gradient_error_samples(4);
  runs[2].add_bucket_bytes(100);
  runs[2].add_bucket_bytes(400);
  runs[2].add_bucket_busbw_gbps(80);
  runs[2].add_bucket_busbw_gbps(300);
  runs[2].set_nccl_transport("P2P");
  return runs;
}

TEST(ReportTest, RatiosAgainstTheSingleProcessRunAndNaive) {
  v1::SuiteReport report = MakeReport(Runs());
  ASSERT_EQ(report.rows_size(), 3);
  EXPECT_EQ(report.suite(), "s");
  EXPECT_DOUBLE_EQ(report.rows(1).vs_single().median(), 11.0 / 12.5);
  EXPECT_FALSE(report.rows(0).has_vs_naive());  // the single run has no engine
  EXPECT_DOUBLE_EQ(report.rows(2).vs_naive(), 11.8 / 11.0);
  EXPECT_DOUBLE_EQ(report.rows(2).busbw_gbps(), 300);  // the largest bucket's
  EXPECT_EQ(report.rows(0).transport(), "");
  EXPECT_EQ(report.repetitions(), 1u);
}

// A row whose step a plugin ran whole (RunResult.step_runner: one CUDA graph) is measured
// against one GPU's step run the same way, and against naive run the same way; the rows
// run eagerly keep the eager ones. Where no one-GPU run ran so, the first one stands.
TEST(ReportTest, ARowRunAsAGraphAgainstOneGpusGraph) {
  const std::string graph = "the step as one CUDA graph, captured after 3 eager step(s)";
  std::vector<v1::RunResult> runs{::ddplab::Run("single_gpu", 1, 25.0, false),
                                  ::ddplab::Run("single_gpu_graph", 1, 64.0, false),
                                  ::ddplab::Run("naive_ddp", 4, 20.0, true),
                                  ::ddplab::Run("naive_ddp_graph", 4, 50.0, true),
                                  ::ddplab::Run("cap25", 4, 16.0, true),
                                  ::ddplab::Run("sharded_graph", 4, 57.0, true)};
  for (int i : {1, 3, 5}) runs[i].set_step_runner(graph);
  v1::SuiteReport report = MakeReport(runs);
  ASSERT_EQ(report.rows_size(), 6);
  EXPECT_DOUBLE_EQ(report.rows(1).vs_single().median(), 1.0);
  EXPECT_DOUBLE_EQ(report.rows(2).vs_single().median(), 20.0 / 25.0);
  EXPECT_DOUBLE_EQ(report.rows(3).vs_single().median(), 50.0 / 64.0);
  EXPECT_DOUBLE_EQ(report.rows(4).vs_naive(), 16.0 / 20.0);
  EXPECT_DOUBLE_EQ(report.rows(5).vs_single().median(), 57.0 / 64.0);
  EXPECT_DOUBLE_EQ(report.rows(5).vs_naive(), 57.0 / 50.0);
  runs.erase(runs.begin() + 1);  // no one GPU as a graph: the eager one stands
  report = MakeReport(runs);
  EXPECT_DOUBLE_EQ(report.rows(4).vs_single().median(), 57.0 / 25.0);
}

// A row whose steps a plugin ran as one graph has its phases timed as one: no exposed wait
// is shown for it (the table's "-", the CSV's empty cell), and the recommendation says what
// it costs beyond one GPU's graph without splitting it into waiting and slowed compute.
TEST(ReportTest, AGraphRowsCostBeyondOneGpusGraphIsNotSplit) {
  const std::string graph = "one CUDA graph";
  std::vector<v1::RunResult> runs{::ddplab::Run("single_gpu_graph", 1, 64.5, false),
                                  ::ddplab::Run("sharded_graph", 4, 57.1, true)};
  for (v1::RunResult& r : runs) r.set_step_runner(graph);
  runs[0].mutable_phases()->set_step_ms(15.5);
  runs[0].mutable_phases()->set_backward_ms(15.5);
  runs[1].mutable_phases()->set_step_ms(17.5);
  runs[1].mutable_phases()->set_backward_ms(17.5);
  const v1::SuiteReport report = MakeReport(runs);
  ASSERT_EQ(report.rows_size(), 2);
  EXPECT_EQ(report.rows(1).step_runner(), graph);
  const std::vector<std::string> csv = absl::StrSplit(FormatCsv(report), '\n');
  ASSERT_GE(csv.size(), 3u);
  const std::vector<std::string> cells = absl::StrSplit(csv[2], ',');
  ASSERT_GT(cells.size(), 12u);
  EXPECT_EQ(cells[11], "") << csv[2];  // exposed_comm_ms: not measured in a replay
  EXPECT_EQ(cells[12], "") << csv[2];  // compute_slowdown_ms: nor apart from it
  const std::string md = FormatMarkdown(report);
  EXPECT_NE(md.find("| 0.885 | - | - |"), std::string::npos) << md;  // vs 1 GPU, vs naive, exposed
  ASSERT_EQ(report.recommendations_size(), 1);
  EXPECT_NE(report.recommendations(0).text().find(
                "Its steps ran as one CUDA graph, whose phases are timed as one: of its 17.5 ms step, 2.00 ms are "
                "beyond one GPU's run the same way"),
            std::string::npos)
      << report.recommendations(0).text();
  EXPECT_EQ(report.recommendations(0).text().find("exposed wait"), std::string::npos);
}

// Repetitions: medians and spread; the recommendation names a winner only when its
// slowest repetition beats the runner-up's fastest, and says "within noise" otherwise.
TEST(ReportTest, RepetitionsGiveMedianAndSpreadAndNoWinnerWithinNoise) {
  std::vector<v1::RunResult> runs = Runs();
  runs[2].clear_gradient_error_samples();  // exact here: a row that may be recommended races
  runs[2].clear_gradient_error();
  const auto repeat = [](v1::RunResult& r, std::vector<double> rates) {
    for (double rate : rates) r.add_repetitions()->set_steps_per_s(rate);
  };
  repeat(runs[0], {12.4, 12.5, 12.6});
  repeat(runs[1], {11.70, 11.75, 11.9});
  repeat(runs[2], {11.78, 11.80, 11.85});
  v1::SuiteReport report = MakeReport(runs);
  EXPECT_EQ(report.repetitions(), 3u);
  EXPECT_DOUBLE_EQ(report.rows(2).steps_per_s().median(), 11.80);
  EXPECT_DOUBLE_EQ(report.rows(2).steps_per_s().min(), 11.78);
  EXPECT_EQ(report.rows(2).steps_per_s().count(), 3u);
  EXPECT_DOUBLE_EQ(report.rows(1).vs_single().max(), 11.9 / 12.5);
  ASSERT_EQ(report.recommendations_size(), 1);
  EXPECT_TRUE(report.recommendations(0).within_noise());
  EXPECT_NE(report.recommendations(0).text().find("bf16 and naive_ddp are within noise"), std::string::npos)
      << report.recommendations(0).text();
  EXPECT_NE(FormatMarkdown(report).find("| 11.800 [11.780-11.850] ×3 |"), std::string::npos) << FormatMarkdown(report);
  EXPECT_NE(FormatMarkdown(report).find("Repetitions: up to 3 (steps/s as median [min-max] ×repetitions;"),
            std::string::npos);
  // Apart: a winner.
  runs[1].clear_repetitions();
  repeat(runs[1], {11.0, 11.1, 11.2});
  report = MakeReport(runs);
  EXPECT_FALSE(report.recommendations(0).within_noise());
  EXPECT_EQ(report.recommendations(0).fastest(), "bf16");
}

// #64: a row that ran once has no spread to judge by: neither it nor its rival wins.
TEST(ReportTest, NoWinnerWithoutRepetitionsOnBothSides) {
  std::vector<v1::RunResult> runs = Runs();
  runs[2].clear_gradient_error_samples();
  runs[2].clear_gradient_error();
  v1::SuiteReport report = MakeReport(runs);  // one run each
  EXPECT_TRUE(report.recommendations(0).within_noise());
  EXPECT_EQ(report.recommendations(0).runner_up(), "naive_ddp");
  EXPECT_NE(report.recommendations(0).text().find("bf16 and naive_ddp: 11.800 steps/s against 11.000 steps/s on 4 "
                                                  "processes, but each ran once: with no spread to judge by, neither "
                                                  "wins."),
            std::string::npos)
      << report.recommendations(0).text();
  EXPECT_EQ(report.recommendations(0).text().find("is the fastest"), std::string::npos);
  for (double rate : {11.7, 11.8, 11.9}) runs[2].add_repetitions()->set_steps_per_s(rate);
  report = MakeReport(runs);
  EXPECT_NE(report.recommendations(0).text().find("but naive_ddp ran once: with no spread to judge by, neither wins. "
                                                  "A suite repeats only the runs close to their transport's fastest; "
                                                  "--all_repetitions repeats every run"),
            std::string::npos)
      << report.recommendations(0).text();
  // Where neither repeated, how to repeat them is not the point: each ran once.
  runs[2].clear_repetitions();
  report = MakeReport(runs);
  EXPECT_EQ(report.recommendations(0).text().find("--all_repetitions"), std::string::npos)
      << report.recommendations(0).text();
}

// #64: the report says where each plugin came from, its version and status; two runs of
// one build list it once.
TEST(ReportTest, SaysWhereEachPluginCameFrom) {
  std::vector<v1::RunResult> runs = Runs();
  const auto build = [](const std::string& name, const std::string& path, const std::string& status) {
    v1::PluginBuild b;
    b.set_name(name);
    b.set_version("1.0.0");
    b.set_status(status);
    b.set_path(path);
    b.set_digest("fnv1a64:0123456789abcdef");
    return b;
  };
  *runs[1].add_plugin_builds() = build("bucket_sizing", "/x/plugins/bucket_sizing/libbucket_sizing.so", "stable");
  *runs[2].add_plugin_builds() = build("bucket_sizing", "/x/plugins/bucket_sizing/libbucket_sizing.so", "stable");
  *runs[2].add_plugin_builds() = build("fp16", "/tmp/my_plugins/libfp16.so", "experimental");
  const v1::SuiteReport report = MakeReport(runs);
  EXPECT_EQ(report.plugins_size(), 2);
  EXPECT_NE(FormatMarkdown(report).find("Plugins:\n- from /tmp/my_plugins: fp16 1.0.0 (experimental)\n- from "
                                        "/x/plugins: bucket_sizing 1.0.0 (stable)\n"),
            std::string::npos)
      << FormatMarkdown(report);
}

// Where the step goes: the single-process run's forward and backward, the rest of this
// run's compute as slowed by communication, the exposed wait.
// A run's TFLOP/s beside its share of the GPU's peak for its precision, where known.
TEST(ReportTest, TflopsWithTheShareOfThePeak) {
  std::vector<v1::RunResult> runs = Runs();
  runs[1].set_precision("bfloat16");
  runs[1].set_peak_fraction(0.0376);
  const v1::SuiteReport report = MakeReport(runs);
  EXPECT_EQ(report.rows(1).precision(), "bfloat16");
  EXPECT_NE(FormatMarkdown(report).find("| 37.2 (3.8%) |"), std::string::npos) << FormatMarkdown(report);
  EXPECT_NE(FormatMarkdown(report).find("| 37.2 |"), std::string::npos) << "a row without a known peak";
  EXPECT_NE(FormatCsv(report).find(",bfloat16,0.0376\n"), std::string::npos) << FormatCsv(report);
}

TEST(ReportTest, SplitsTheStepAgainstOneGpus) {
  std::vector<v1::RunResult> runs = Runs();
  const auto phases = [](v1::RunResult& r, double forward, double backward, double optimizer, double step) {
    r.mutable_phases()->set_forward_ms(forward);
    r.mutable_phases()->set_backward_ms(backward);
    r.mutable_phases()->set_optimizer_ms(optimizer);
    r.mutable_phases()->set_step_ms(step);
  };
  phases(runs[0], 28, 50, 1, 80);
  phases(runs[1], 28.5, 63, 1, 93);  // exposed 7.0: backward's compute 56, 6 over one GPU's
  const v1::SuiteReport report = MakeReport(runs);
  const v1::StepParts& p = report.rows(1).parts();
  EXPECT_DOUBLE_EQ(p.forward_ms(), 28);
  EXPECT_DOUBLE_EQ(p.backward_single_ms(), 50);
  EXPECT_DOUBLE_EQ(p.compute_slowdown_ms(), 0.5 + 6);
  EXPECT_DOUBLE_EQ(p.exposed_comm_ms(), 7);
  EXPECT_DOUBLE_EQ(p.other_ms(), 93 - 28.5 - 56 - 7 - 1);
}

// The no_communication diagnostic exchanges nothing: however fast, it is never the
// recommendation.
TEST(ReportTest, NeverRecommendsARunThatExchangedNothing) {
  std::vector<v1::RunResult> runs = Runs();
  runs.push_back(::ddplab::Run("no_communication", 4, 12.4, true));
  runs.back().set_diagnostic(true);
  v1::SuiteReport report = MakeReport(runs);
  ASSERT_EQ(report.rows_size(), 4);
  EXPECT_TRUE(report.rows(3).diagnostic());
  const std::string text = FormatRecommendations(report);
  EXPECT_EQ(text.find("no_communication"), std::string::npos) << text;
  EXPECT_NE(text.find("bf16 is the fastest"), std::string::npos) << text;
}

// The recommendation of a lossy winner gives the fastest exact one's PyTorch form, and
// says what of it needs ddplab's engine.
TEST(ReportTest, RecommendsInPyTorchsWords) {
  std::vector<v1::RunResult> runs = Runs();
  runs[1].set_pytorch("model = DDP(model, device_ids=[local_rank], bucket_cap_mb=2000)\n");
  runs[1].add_ddplab_only("zero_copy");
  v1::SuiteReport report = MakeReport(runs);
  const v1::Recommendation& r = report.recommendations(0);
  EXPECT_EQ(r.fastest(), "bf16");
  EXPECT_EQ(r.fastest_exact(), "naive_ddp");
  EXPECT_EQ(r.pytorch(), runs[1].pytorch());
  EXPECT_NE(r.text().find("PyTorch's DDP has no form of zero_copy"), std::string::npos) << r.text();
  EXPECT_NE(FormatMarkdown(report).find("```python\nmodel = DDP(model, device_ids=[local_rank], bucket_cap_mb=2000)\n```"),
            std::string::npos);
}

// A lossy run's effective error over its longest window of steps stands beside its
// per-step error, in the row, the table and the recommendation; its cosine in the row.
TEST(ReportTest, LossyRowsShowTheErrorOverTheLongestWindow) {
  std::vector<v1::RunResult> runs = Runs();
  runs[2].set_gradient_cosine(0.99);
  for (const auto& [steps, error] : {std::pair<int, double>{1, 3e-3}, {2, 2e-3}, {8, 1e-3}}) {
    v1::EffectiveError* e = runs[2].add_effective_error();
    e->set_steps(steps);
    e->set_error(error);
  }
  const v1::SuiteReport report = MakeReport(runs);
  const v1::ReportRow& bf16 = report.rows(2);
  EXPECT_DOUBLE_EQ(bf16.gradient_cosine(), 0.99);
  EXPECT_DOUBLE_EQ(bf16.effective_error(), 1e-3);
  EXPECT_EQ(bf16.effective_error_steps(), 8u);
  EXPECT_FALSE(report.rows(1).has_effective_error());
  EXPECT_FALSE(report.rows(1).has_gradient_cosine());
  EXPECT_NE(FormatMarkdown(report).find("| 3.00e-03 (8-step 1.00e-03) |"), std::string::npos) << FormatMarkdown(report);
  EXPECT_NE(report.recommendations(0).text().find(
                "differ from exact all-reduce by 3.0e-03 (relative), summed over 8 steps by 1.0e-03."),
            std::string::npos)
      << report.recommendations(0).text();
  // A result from before windows (no effective_error) has no cosine either.
  runs[2].clear_effective_error();
  EXPECT_FALSE(MakeReport(runs).rows(2).has_gradient_cosine());
}

// report.json is protobuf's JSON: valid JSON with a NaN in a row; the table's figures
// are the JSON's.
TEST(ReportTest, JsonIsValidWithANanAndAgreesWithTheTable) {
  std::vector<v1::RunResult> runs = Runs();
  runs[2].set_gradient_error(std::nan(""));
  v1::SuiteReport report = MakeReport(runs);
  const std::string json = FormatJson(report);
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok()) << json;
  v1::SuiteReport back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &back).ok());
  EXPECT_TRUE(std::isnan(back.rows(2).gradient_error()));
  const auto& rows = parsed.fields().at("rows").list_value().values();
  ASSERT_EQ(rows.size(), 3);
  EXPECT_EQ(rows[1].struct_value().fields().count("gradient_error"), 0u);  // missing: left out
  std::vector<std::string> lines = absl::StrSplit(FormatMarkdown(report), '\n', absl::SkipEmpty());
  const auto table = std::find_if(lines.begin(), lines.end(), [](const std::string& l) {
    return absl::StartsWith(l, "| naive_ddp |");
  });
  ASSERT_NE(table, lines.end());
  const auto& f = rows[1].struct_value().fields();
  EXPECT_NE(table->find(absl::StrFormat(" %.3f ", f.at("steps_per_s").struct_value().fields().at("median").number_value())),
            std::string::npos);
}

// report.csv: one header, numbers as plain numbers, a missing value as an empty cell.
TEST(ReportTest, CsvHoldsNumbersAndEmptyCells) {
  v1::SuiteReport report = MakeReport(Runs());
  std::vector<std::string> csv = absl::StrSplit(FormatCsv(report), '\n', absl::SkipEmpty());
  ASSERT_EQ(csv.size(), 4u);
  std::vector<std::string> header = absl::StrSplit(csv[0], ',');
  std::vector<std::string> bf16 = absl::StrSplit(csv[3], ',');
  std::vector<std::string> single = absl::StrSplit(csv[1], ',');
  ASSERT_EQ(bf16.size(), header.size());
  const auto column = [&](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  EXPECT_EQ(bf16[column("steps_per_s")], "11.8");
  EXPECT_EQ(bf16[column("gradient_error")], "0.003");
  EXPECT_EQ(bf16[column("nccl_transport")], "P2P");
  EXPECT_EQ(single[column("vs_naive")], "");
  EXPECT_EQ(single[column("busbw_gbps")], "");
}

// #64, point 10: on CPUs report.csv's columns speak of processes, and the memory no CPU
// run measures is an empty cell, not 0.
TEST(ReportTest, CsvOnCpusSpeaksOfProcesses) {
  v1::Machine cpu;
  cpu.set_device("cpu");
  cpu.set_cpu("2 cores");
  std::vector<v1::RunResult> runs = Runs();
  for (v1::RunResult& r : runs) r.set_peak_memory_gib(0);
  std::vector<std::string> csv = absl::StrSplit(FormatCsv(MakeReport(runs, cpu)), '\n', absl::SkipEmpty());
  ASSERT_GE(csv.size(), 2u);
  EXPECT_EQ(csv[0],
            "experiment,configuration,processes,transport,nccl_transport,steps_per_s,steps_per_s_min,"
            "steps_per_s_max,repetitions,vs_single_process,vs_naive,exposed_comm_ms,compute_slowdown_ms,busbw_gbps,"
            "peak_memory_gib,gradient_error,tflops_per_process,diagnostic,precision,peak_fraction");
  std::vector<std::string> header = absl::StrSplit(csv[0], ',');
  std::vector<std::string> row = absl::StrSplit(csv[1], ',');
  const size_t memory = std::find(header.begin(), header.end(), "peak_memory_gib") - header.begin();
  EXPECT_EQ(row.at(memory), "");
  // On GPUs, as before.
  EXPECT_TRUE(absl::StartsWith(FormatCsv(MakeReport(Runs())), "experiment,configuration,gpus,"));
}

}  // namespace
}  // namespace ddplab

namespace ddplab {
namespace {

// Runs that failed are in the report, and a suite of failures alone still gets one.
TEST(ReportTest, FailedRunsAreListedEvenWhenNoneCompleted) {
  v1::SuiteReport report = MakeReport({});
  report.set_suite("s");
  v1::FailedRun* f = report.add_failed();
  f->set_experiment("naive_ddp");
  f->set_reason("rank 1 exited with 1 \x1b[31m<b>");
  const std::string md = FormatMarkdown(report);
  EXPECT_NE(md.find("No run completed; every run failed:\n- naive_ddp: rank 1 exited with 1"), std::string::npos) << md;
  const std::string html = FormatHtml(report);
  EXPECT_NE(html.find("<h2>No run completed: every run failed</h2>"), std::string::npos);
  EXPECT_NE(html.find("<li><b>naive_ddp</b>: rank 1 exited with 1"), std::string::npos);
  EXPECT_EQ(html.find("<b>\")"), std::string::npos);
}

}  // namespace
}  // namespace ddplab
