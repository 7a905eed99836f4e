// The tuner's last question (Note [The tuner's last question], step_graph.h): the answer
// with its step as one CUDA graph, taken where it pays beyond the noise, not taken where
// it does not, and said where the plugin refuses it; and the answer that is one bucket
// (DDP's first bucket, then the rest)
// says that overlap does not pay.
#include "tune/step_graph.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/config/experiment.h"
#include "gtest/gtest.h"
#include "plugins/testing/shipped_schema.h"
#include "tune/bucket_caps.h"
#include "tune/tuner.h"
#include "tune/tuner_testing.h"

namespace ddplab::tune {
namespace {

using tuner_testing::Dir;
using tuner_testing::ExpectOneAnswer;
using tuner_testing::FakeRunner;
using tuner_testing::Machine;
using tuner_testing::Request;
using tuner_testing::TrueBest;

TEST(StepGraph, TheAnswerTakesTheGraphWhereItPaysBeyondTheNoise) {
  Machine m;
  m.graph_saves_ms = 40;  // the host's launches, a third of the step
  FakeRunner runner(m);
  TuneRequest req = Request(Dir("graph_pays"));
  req.settings.try_step_graph = true;
  absl::StatusOr<v1::Tuning> t = Tune(req, runner);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->chosen_cap_mb(), TrueBest(m, req.settings.caps_mib));
  // Probe, the experiment as given, 2 verified, then the answer as a graph.
  ASSERT_EQ(runner.names.size(), 5u);
  EXPECT_EQ(runner.names.back(), CapRunName("vit", t->chosen_cap_mb(), "_graph"));
  EXPECT_TRUE(t->graph_chosen());
  EXPECT_TRUE(t->graph_note().empty()) << t->graph_note();
  EXPECT_EQ(t->graph_step_ms().count(), 3u);
  EXPECT_NEAR(t->answer_step_ms().median() - t->graph_step_ms().median(), 40, 1);
  EXPECT_GT(t->graph_gain(), t->graph_gain_noise());
  // The file runs the graph with the chosen cap; the text says why.
  absl::StatusOr<v1::Suite> file = ParseExperimentText(t->textproto(), req.answer_path, testing::ShippedSchema());
  ASSERT_TRUE(file.ok()) << file.status() << "\n" << t->textproto();
  EXPECT_TRUE(HasPlugin(file->experiment(0), kStepGraph)) << t->textproto();
  EXPECT_NE(t->textproto().find("its step as one CUDA graph"), std::string::npos) << t->textproto();
  EXPECT_NE(t->text().find("With its step as one CUDA graph (plugin { cuda_graph {} }): "), std::string::npos)
      << t->text();
  EXPECT_NE(t->text().find("The answer takes it: the host's launches, not the collectives, bound this step"),
            std::string::npos)
      << t->text();
  ExpectOneAnswer(*t, req);
}

TEST(StepGraph, AGraphNoFasterBeyondTheNoiseIsNotTaken) {
  Machine m;  // a replay saves nothing here
  FakeRunner runner(m);
  TuneRequest req = Request(Dir("graph_same"));
  req.settings.try_step_graph = true;
  absl::StatusOr<v1::Tuning> t = Tune(req, runner);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(runner.names.size(), 5u);
  EXPECT_FALSE(t->graph_chosen());
  EXPECT_FALSE(t->graph_experiment().empty());
  EXPECT_LE(t->graph_gain(), t->graph_gain_noise());
  absl::StatusOr<v1::Suite> file = ParseExperimentText(t->textproto(), req.answer_path, testing::ShippedSchema());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_FALSE(HasPlugin(file->experiment(0), kStepGraph)) << t->textproto();
  EXPECT_NE(t->text().find("no faster beyond the noise: the answer runs eagerly."), std::string::npos) << t->text();
  ExpectOneAnswer(*t, req);
}

TEST(StepGraph, ARefusalIsTheNoteAndNothingMoreRuns) {
  Machine m;
  m.graph_saves_ms = 40;
  FakeRunner runner(m);
  runner.refuse_graph = "it captures GPU work, and the experiment runs on the CPU";
  TuneRequest req = Request(Dir("graph_refused"));
  req.settings.try_step_graph = true;
  absl::StatusOr<v1::Tuning> t = Tune(req, runner);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(runner.names.size(), 4u);  // probe, as given, 2 verified
  EXPECT_FALSE(t->graph_chosen());
  EXPECT_NE(t->text().find("The step as one CUDA graph (cuda_graph) was not tried: it captures GPU work, and the "
                           "experiment runs on the CPU."),
            std::string::npos)
      << t->text();
}

TEST(StepGraph, AnExperimentAlreadyAGraphIsNotAskedAgain) {
  Machine m;
  FakeRunner runner(m);
  TuneRequest req = Request(Dir("graph_already"));
  req.settings.try_step_graph = true;
  *req.base.add_plugin() = *testing::ShippedSchema().Entry(kStepGraph);
  absl::StatusOr<v1::Tuning> t = Tune(req, runner);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(runner.names.size(), 4u);
  EXPECT_EQ(t->graph_note(), "the experiment runs its step as one CUDA graph already");
}

TEST(StepGraph, SkippedItIsNeitherRunNorSaid) {
  Machine m;
  m.graph_saves_ms = 40;
  FakeRunner runner(m);
  absl::StatusOr<v1::Tuning> t = Tune(Request(Dir("graph_skipped")), runner);  // try_step_graph false
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(runner.names.size(), 4u);
  EXPECT_EQ(t->text().find("CUDA graph"), std::string::npos) << t->text();
}

TEST(StepGraph, OneBucketAfterBackwardSaysOverlapDoesNotPay) {
  // Fast links (200 GB/s), backward twice as slow beside any collective, and a cost per
  // bucket the model learns: one bucket after backward is fastest.
  Machine m;
  m.beta_us_per_byte = 1e6 / 200e9;
  m.slowdown = 1.0;
  m.per_bucket_ms = 3;
  FakeRunner runner(m);
  TuneRequest req = Request(Dir("one_bucket"));
  absl::StatusOr<v1::Tuning> t = Tune(req, runner);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_GE(t->chosen_cap_mb(), 400) << t->text();  // 400 and 2000: the first gradient, then the rest
  EXPECT_NE(t->text().find("Overlap does not pay here: the fewest buckets tried (2 buckets), reduced once backward "
                           "is done, are fastest."),
            std::string::npos)
      << t->text();
}

}  // namespace
}  // namespace ddplab::tune
