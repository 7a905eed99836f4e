// The bound study through the report, as vit_ddp runs it: registered by its package alone.
#include <string>
#include <vector>

#include "core/report/report.h"
#include "core/report/report_testing.h"
#include "gtest/gtest.h"
#include "suite/study.h"

namespace ddplab {
namespace {

// One GPU's 80 ms step; naive (one bucket) and 25 MiB buckets over host memory at 23 GB/s.
std::vector<v1::RunResult> HostMemoryRuns() {
  std::vector<v1::RunResult> runs{testing::RunOf("single_gpu", 1, 12.5, false), testing::RunOf("naive_ddp", 4, 6.0, true),
                                  testing::RunOf("cap25", 4, 9.4, true)};
  v1::PhaseTimes* one = runs[0].mutable_phases();
  one->set_forward_ms(20);
  one->set_backward_ms(55);
  one->set_optimizer_ms(5);
  one->set_step_ms(80);
  for (int i : {1, 2}) runs[i].set_transport("HOST_MEMORY");
  runs[1].add_bucket_bytes(1224000000);
  runs[1].set_wire_bytes(1224000000);
  for (int b = 0; b < 48; ++b) runs[2].add_bucket_bytes(25500000);
  runs[2].set_wire_bytes(1224000000);
  runs[2].add_bucket_busbw_gbps(23);  // on its largest bucket: the transport's
  for (int b = 1; b < 48; ++b) runs[2].add_bucket_busbw_gbps(20);
  return runs;
}

TEST(BoundStudyTest, RegisteredByItsPackage) {
  EXPECT_EQ(RegisteredStudyNames(), std::vector<std::string>{"bound"});
}

// A row's bound (Note [A row's bound]) from the single-process run's phases, the row's
// bytes and the transport's best bus bandwidth: set by bandwidth over host memory, named
// in report.md's section, and said in the recommendation when the row is within 5% of it.
TEST(BoundStudyTest, EachRowBesideItsBound) {
  const v1::SuiteReport report = MakeReport(HostMemoryRuns(), {}, RegisteredStudies());
  ASSERT_EQ(report.rows_size(), 3);
  EXPECT_FALSE(report.rows(0).has_bound());  // one process sends nothing
  const v1::RowBound& naive = report.rows(1).bound();
  const double comm = 1224000000 * 1.5 / 23e9 * 1e3;
  EXPECT_NEAR(naive.comm_ms(), comm, 1e-9);
  EXPECT_NEAR(naive.steps_per_s(), 1e3 / (80 + comm), 1e-9);  // one bucket: all after backward
  EXPECT_EQ(naive.binds(), "the step's tail");
  const v1::RowBound& cap25 = report.rows(2).bound();
  EXPECT_EQ(cap25.binds(), "bandwidth");
  EXPECT_NEAR(cap25.steps_per_s(), 1e3 / (20 + comm + 5), 1e-9);
  EXPECT_NEAR(cap25.share(), 9.4 / cap25.steps_per_s(), 1e-12);
  ASSERT_EQ(report.sections_size(), 1);
  EXPECT_EQ(report.sections(0).study(), "bound");
  EXPECT_EQ(report.sections(0).lines_size(), 2);
  const std::string md = FormatMarkdown(report);
  EXPECT_NE(md.find("What this machine allows each row"), std::string::npos) << md;
  EXPECT_NE(md.find("- cap25: bound 9.54 steps/s, set by bandwidth"), std::string::npos) << md;
  ASSERT_EQ(report.recommendations_size(), 1);
  EXPECT_NE(report.recommendations(0).text().find("cap25 reaches 0.985 of the 9.54 steps/s this machine allows it "
                                                  "(set by bandwidth): no setting of the same bytes does much better"),
            std::string::npos)
      << report.recommendations(0).text();
}

// The recommendation's words keep their order: the bound's sentence, then what has no
// PyTorch form, last.
TEST(BoundStudyTest, WhatHasNoPyTorchFormIsSaidLast) {
  std::vector<v1::RunResult> runs = HostMemoryRuns();
  runs[2].add_ddplab_only("fp8");
  const v1::SuiteReport report = MakeReport(runs, {}, RegisteredStudies());
  ASSERT_EQ(report.recommendations_size(), 1);
  const std::string& text = report.recommendations(0).text();
  const size_t bound = text.find("this machine allows it");
  const size_t pytorch = text.find(" PyTorch's DDP has no form of fp8: that part of the gain needs ddplab's engine.");
  ASSERT_NE(bound, std::string::npos) << text;
  ASSERT_NE(pytorch, std::string::npos) << text;
  EXPECT_LT(bound, pytorch) << text;
  EXPECT_EQ(pytorch + std::string(" PyTorch's DDP has no form of fp8: that part of the gain needs ddplab's engine.").size(),
            text.size())
      << text;
}

// Without the study the report has no bound, no section and no word of it: the report
// knows no study by name.
TEST(BoundStudyTest, TheReportAloneSaysNothingOfBounds) {
  const v1::SuiteReport report = MakeReport(HostMemoryRuns());
  for (const v1::ReportRow& row : report.rows()) EXPECT_FALSE(row.has_bound()) << row.experiment();
  EXPECT_EQ(report.sections_size(), 0);
  EXPECT_EQ(FormatMarkdown(report).find("allows"), std::string::npos);
  ASSERT_EQ(report.recommendations_size(), 1);
  EXPECT_EQ(report.recommendations(0).text().find("allows it"), std::string::npos);
}

// A row run as one CUDA graph has its phases timed as one, and so has one GPU's graph:
// no backward to hide its bytes behind, so no bound; the eager rows keep theirs, from
// the eager one GPU's phases.
TEST(BoundStudyTest, NoBoundForARowRunAsAGraph) {
  const std::string graph = "the step as one CUDA graph, captured after 3 eager step(s)";
  std::vector<v1::RunResult> runs = HostMemoryRuns();
  runs.insert(runs.begin() + 1, testing::RunOf("single_gpu_graph", 1, 30.0, false));
  runs[1].set_step_runner(graph);
  runs[1].mutable_phases()->set_backward_ms(33);
  runs.push_back(runs[3]);
  runs.back().set_experiment("cap25_graph");
  runs.back().set_step_runner(graph);
  const v1::SuiteReport report = MakeReport(runs, {}, RegisteredStudies());
  ASSERT_EQ(report.rows_size(), 5);
  EXPECT_FALSE(report.rows(4).has_bound());
  ASSERT_TRUE(report.rows(3).has_bound());
  const double comm = 1224000000 * 1.5 / 23e9 * 1e3;
  EXPECT_NEAR(report.rows(3).bound().steps_per_s(), 1e3 / (20 + comm + 5), 1e-9);  // the eager one GPU's phases
  EXPECT_EQ(report.sections(0).lines_size(), 2);
}

// No single-process run: no bound to compute, nothing said.
TEST(BoundStudyTest, NoOneGpuRunNoBound) {
  std::vector<v1::RunResult> runs = HostMemoryRuns();
  runs.erase(runs.begin());
  const v1::SuiteReport report = MakeReport(runs, {}, RegisteredStudies());
  for (const v1::ReportRow& row : report.rows()) EXPECT_FALSE(row.has_bound()) << row.experiment();
  EXPECT_EQ(report.sections_size(), 0);
}

}  // namespace
}  // namespace ddplab
