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
  v1::RunResult r = Row(absl::StrCat(of, "-convergence"), 2, 1.0, false);
  r.mutable_convergence()->set_of(of);
  r.mutable_convergence()->set_exact(exact);
  r.mutable_convergence()->set_seed(seed);
  r.mutable_convergence()->set_final_steps(4);
  for (int i = 0; i < 20; ++i) r.add_loss(i < 16 ? 2.3 - 0.1 * i : final);
  return r;
}

// naive_ddp's three seeds end at 1.00, 1.10 and 1.04 (spread 0.10); bf16, from seed 7 (whose
// exact run ends at 1.00), at `bf16_final`; bf16 is the fastest.
std::vector<v1::RunResult> Suite(double bf16_final) {
  return {Row("single_gpu", 1, 12.5, false), Row("naive_ddp", 2, 11.0, false), Row("bf16", 2, 11.8, true),
          Check("naive_ddp", true, 7, 1.00),   Check("naive_ddp", true, 8, 1.10), Check("naive_ddp", true, 9, 1.04),
          Check("bf16", false, 7, bf16_final)};
}

TEST(ConvergenceReportTest, ChecksAreNotRowsAndGiveTheLossyRowItsVerdict) {
  const v1::SuiteReport report = MakeReport(Suite(1.05));
  ASSERT_EQ(report.rows_size(), 3);
  EXPECT_FALSE(report.rows(1).has_convergence());  // exact: no verdict
  const v1::ConvergenceVerdict& v = report.rows(2).convergence();
  EXPECT_EQ(v.exact(), "naive_ddp");
  EXPECT_NEAR(v.final_loss(), 1.05, 1e-6);  // losses are float32
  EXPECT_NEAR(v.exact_final_same_seed(), 1.00, 1e-6);
  EXPECT_NEAR(v.exact_final().min(), 1.00, 1e-6);
  EXPECT_NEAR(v.exact_final().max(), 1.10, 1e-6);
  EXPECT_EQ(v.exact_final().count(), 3u);
  EXPECT_NEAR(v.first_loss(), 2.3, 1e-6);
  EXPECT_TRUE(v.within());  // 0.05 above its seed's, within the seeds' 0.10
  EXPECT_TRUE(absl::StartsWith(v.text(), "within the exact runs' spread")) << v.text();
  // Trusted: the recommendation is the lossy fastest, with its PyTorch code.
  EXPECT_EQ(report.recommendations(0).recommended(), "bf16");
  EXPECT_TRUE(absl::StrContains(report.recommendations(0).text(), "trains as the exact reference does"));
  EXPECT_TRUE(absl::StrContains(FormatMarkdown(report), "- bf16: within the exact runs' spread"));
}

TEST(ConvergenceReportTest, WorseBeyondTheSeedsSpreadIsNotRecommended) {
  const v1::SuiteReport report = MakeReport(Suite(1.25));
  const v1::ConvergenceVerdict& v = report.rows(2).convergence();
  EXPECT_FALSE(v.within());
  EXPECT_NEAR(v.worse_by(), 0.25, 1e-6);  // against its own seed's 1.00
  EXPECT_TRUE(absl::StartsWith(v.text(), "worse by 25.0%")) << v.text();
  EXPECT_EQ(report.recommendations(0).fastest(), "bf16");
  EXPECT_EQ(report.recommendations(0).recommended(), "naive_ddp");
  EXPECT_TRUE(absl::StrContains(report.recommendations(0).text(), "it is not the recommendation"));
}

TEST(ConvergenceReportTest, ALossyFastestWithoutTheCheckIsNotRecommended) {
  std::vector<v1::RunResult> runs = Suite(1.0);
  runs.resize(3);  // no check ran
  const v1::SuiteReport report = MakeReport(runs);
  EXPECT_FALSE(report.rows(2).has_convergence());
  EXPECT_EQ(report.recommendations(0).recommended(), "naive_ddp");
  EXPECT_TRUE(absl::StrContains(report.recommendations(0).text(), "did not check that it converges"));
  // One exact seed gives no spread: no verdict either.
  runs = Suite(1.0);
  runs.erase(runs.begin() + 4, runs.begin() + 6);
  EXPECT_FALSE(MakeReport(runs).rows(2).has_convergence());
}

}  // namespace
}  // namespace ddplab
