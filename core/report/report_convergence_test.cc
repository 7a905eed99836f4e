// The report's convergence verdicts (Note [The convergence check], core/config/convergence.h) and
// the recommendation's use of them.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "core/report/report.h"
#include "gtest/gtest.h"

namespace ddplab {
namespace {

v1::RunResult Row(const std::string& name, int world, double steps_per_s, bool lossy) {
  v1::RunResult r;
  r.set_suite("s");
  r.set_experiment(name);
  r.set_origin(name);
  r.set_world_size(world);
  r.set_steps_per_s(steps_per_s);
  r.set_engine(world > 1);
  r.set_transport("NVLINK");
  if (lossy) {
    r.set_gradient_error(3e-3);
    r.set_gradient_error_samples(4);
  }
  return r;
}

// A run of the check: losses falling from 2.3 to `final` over 20 steps.
v1::RunResult Check(const std::string& of, bool exact, int seed, double final) {
  v1::RunResult r = Row(absl::StrCat(of, "-convergence-", seed - 6), 2, 1.0, false);
  r.mutable_convergence()->set_of(of);
  r.mutable_convergence()->set_exact(exact);
  r.mutable_convergence()->set_seed(seed);
  r.mutable_convergence()->set_final_steps(4);
  r.mutable_convergence()->set_tolerance(0.02);
  for (int i = 0; i < 20; ++i) r.add_loss(i < 16 ? 2.3 - 0.1 * i : final);
  return r;
}

// naive_ddp's three seeds (7, 8, 9) end at 1.00, 1.10 and 1.04 (spread 0.10); bf16 from
// the same seeds at `bf16` times those; bf16 is the fastest.
std::vector<v1::RunResult> Suite(const std::vector<double>& bf16) {
  const double exact[] = {1.00, 1.10, 1.04};
  std::vector<v1::RunResult> runs = {Row("single_gpu", 1, 12.5, false), Row("naive_ddp", 2, 11.0, false),
                                     Row("bf16", 2, 11.8, true)};
  for (int k = 0; k < 3; ++k) runs.push_back(Check("naive_ddp", true, 7 + k, exact[k]));
  for (size_t k = 0; k < bf16.size(); ++k) runs.push_back(Check("bf16", false, 7 + static_cast<int>(k), exact[k] * bf16[k]));
  return runs;
}

TEST(ConvergenceReportTest, ChecksAreNotRowsAndGiveTheLossyRowItsVerdict) {
  const v1::SuiteReport report = MakeReport(Suite({1.01, 1.0, 1.005}));
  ASSERT_EQ(report.rows_size(), 3);
  EXPECT_FALSE(report.rows(1).has_convergence());  // exact: no verdict
  const v1::ConvergenceVerdict& v = report.rows(2).convergence();
  EXPECT_EQ(v.exact(), "naive_ddp");
  EXPECT_NEAR(v.exact_final_same_seed(), (1.00 + 1.10 + 1.04) / 3, 1e-6);  // losses are float32
  EXPECT_NEAR(v.final_loss(), (1.01 + 1.10 + 1.04 * 1.005) / 3, 1e-6);
  ASSERT_EQ(v.paired_difference_size(), 3);
  EXPECT_NEAR(v.paired_difference(0), 0.01, 1e-6);
  EXPECT_NEAR(v.paired_difference(1), 0.0, 1e-6);
  EXPECT_NEAR(v.paired_difference(2), 0.005, 1e-6);
  EXPECT_NEAR(v.exact_final().min(), 1.00, 1e-6);
  EXPECT_NEAR(v.exact_final().max(), 1.10, 1e-6);
  EXPECT_EQ(v.exact_final().count(), 3u);
  EXPECT_NEAR(v.first_loss(), 2.3, 1e-6);
  EXPECT_TRUE(v.within());  // +0.5% on average, within 2%
  EXPECT_TRUE(absl::StartsWith(v.text(), "within 2% of the exact runs (final loss")) << v.text();
  EXPECT_TRUE(absl::StrContains(v.text(), "+0.5% on average over 3 seeds from the same weights and batches: +1.0%, "
                                          "+0.0%, +0.5%"))
      << v.text();
  // Trusted: the recommendation is the lossy fastest, with its PyTorch code.
  EXPECT_EQ(report.recommendations(0).recommended(), "bf16");
  EXPECT_TRUE(absl::StrContains(report.recommendations(0).text(), "trains as the exact reference does"));
  EXPECT_TRUE(absl::StrContains(FormatMarkdown(report), "- bf16: within 2% of the exact runs"));
}

TEST(ConvergenceReportTest, FourPercentWorseFailsThoughTheSeedsSpreadIsWider) {
  // 4% above each seed's exact run: 0.04 above seed 7's 1.00, inside the seeds' spread of
  // 0.10, which the check before the paired one let pass.
  const v1::SuiteReport report = MakeReport(Suite({1.04, 1.04, 1.04}));
  const v1::ConvergenceVerdict& v = report.rows(2).convergence();
  EXPECT_FALSE(v.within());
  EXPECT_NEAR(v.worse_by(), 0.04, 1e-6);
  EXPECT_TRUE(absl::StartsWith(v.text(), "worse by 4.0% (")) << v.text();
  EXPECT_TRUE(absl::StrContains(v.text(), "; the check allows 2%)")) << v.text();
  EXPECT_EQ(report.recommendations(0).fastest(), "bf16");
  EXPECT_EQ(report.recommendations(0).recommended(), "naive_ddp");
  EXPECT_TRUE(absl::StrContains(report.recommendations(0).text(), "it is not the recommendation"));
  // #64: the line opens with the run recommended, not the one it rejects.
  EXPECT_TRUE(absl::StartsWith(FormatRecommendations(report), "Recommendation: naive_ddp. bf16 is the fastest"))
      << FormatRecommendations(report);
}

TEST(ConvergenceReportTest, ASeedWhoseExactRunFailedIsLeftOutOfTheMean) {
  std::vector<v1::RunResult> runs = Suite({1.0, 1.30, 1.0});
  runs.erase(runs.begin() + 4);  // seed 8's exact run
  const v1::SuiteReport report = MakeReport(runs);
  const v1::ConvergenceVerdict& v = report.rows(2).convergence();
  EXPECT_EQ(v.paired_difference_size(), 2);
  EXPECT_TRUE(v.within()) << v.text();
}

TEST(ConvergenceReportTest, AReferenceOfOneProcessOrLossyItselfJudgesNothing) {
  std::vector<v1::RunResult> runs = Suite({1.0, 1.0, 1.0});
  for (int k = 3; k < 6; ++k) runs[k].set_world_size(1);  // the exact reference's checks
  v1::SuiteReport report = MakeReport(runs);
  EXPECT_TRUE(report.rows(2).convergence().not_compared());
  EXPECT_FALSE(report.rows(2).convergence().within());
  EXPECT_EQ(report.rows(2).convergence().text(),
            "not compared: the reference naive_ddp ran 1 process and this 2, so their batches differ; name a "
            "reference of 2 processes");
  EXPECT_EQ(report.recommendations(0).recommended(), "naive_ddp");
  EXPECT_TRUE(absl::StrContains(report.recommendations(0).text(), "The convergence check could not judge it"));
  EXPECT_FALSE(absl::StrContains(FormatMarkdown(report), "from the same weights and batches"));

  runs = Suite({1.0, 1.0, 1.0});
  for (int k = 3; k < 6; ++k) runs[k].set_lossy(true);
  report = MakeReport(runs);
  EXPECT_EQ(report.rows(2).convergence().text(), "not compared: the reference naive_ddp is lossy itself");
  EXPECT_EQ(report.recommendations(0).recommended(), "naive_ddp");
}

// #64: a lossy row the check judged worse is no rival: the exact row is recommended
// without "neither wins", though their spreads overlap; and the other way round.
TEST(ConvergenceReportTest, ARowThatFailedItsCheckIsNoRival) {
  std::vector<v1::RunResult> runs = Suite({3.56, 3.56, 3.56});  // worse by 256%
  const auto repeat = [](v1::RunResult& r, std::vector<double> rates) {
    for (double rate : rates) r.add_repetitions()->set_steps_per_s(rate);
  };
  repeat(runs[1], {11.70, 11.75, 11.90});  // naive_ddp
  repeat(runs[2], {11.72, 11.80, 11.85});  // bf16, faster by median, within noise
  v1::SuiteReport report = MakeReport(runs);
  EXPECT_EQ(report.recommendations(0).fastest(), "bf16");
  EXPECT_EQ(report.recommendations(0).recommended(), "naive_ddp");
  EXPECT_FALSE(absl::StrContains(report.recommendations(0).text(), "neither wins")) << report.recommendations(0).text();
  EXPECT_TRUE(absl::StrContains(report.recommendations(0).text(), "trains worse than the exact reference: worse by "
                                                                  "256.0%"))
      << report.recommendations(0).text();
  EXPECT_TRUE(report.recommendations(0).runner_up().empty());

  // The exact row fastest, the worse lossy one next: no rival either.
  runs[2].clear_repetitions();
  repeat(runs[2], {11.60, 11.70, 11.80});
  report = MakeReport(runs);
  EXPECT_EQ(report.recommendations(0).recommended(), "naive_ddp");
  EXPECT_FALSE(absl::StrContains(report.recommendations(0).text(), "neither wins")) << report.recommendations(0).text();
  EXPECT_TRUE(absl::StrContains(report.recommendations(0).text(), "naive_ddp is the fastest"))
      << report.recommendations(0).text();
}

TEST(ConvergenceReportTest, ALossyFastestWithoutTheCheckIsNotRecommended) {
  std::vector<v1::RunResult> runs = Suite({1.0, 1.0, 1.0});
  runs.resize(3);  // no check ran
  const v1::SuiteReport report = MakeReport(runs);
  EXPECT_FALSE(report.rows(2).has_convergence());
  EXPECT_EQ(report.recommendations(0).recommended(), "naive_ddp");
  EXPECT_TRUE(absl::StrContains(report.recommendations(0).text(), "did not train it"));
}

}  // namespace
}  // namespace ddplab
