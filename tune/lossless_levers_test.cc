// The tuner's last questions (Note [The tuner's last questions], lossless_levers.h): the
// answer with its step as one CUDA graph, and with its optimizer sharded over the ranks,
// each taken where it pays beyond the noise, not taken where it does not, and said where
// the plugin refuses it; the graph tried on the sharded answer; and the answer that is
// one bucket (DDP's first bucket, then the rest) says that overlap does not pay.
#include "tune/lossless_levers.h"

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

// The trial of `plugin` in `t`, or an empty one.
v1::LeverTrial Trial(const v1::Tuning& t, const std::string& plugin) {
  for (const v1::LeverTrial& trial : t.levers_tried()) {
    if (trial.plugin() == plugin) return trial;
  }
  return v1::LeverTrial();
}

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
  const v1::LeverTrial graph = Trial(*t, kStepGraph);
  EXPECT_TRUE(graph.chosen());
  EXPECT_TRUE(graph.note().empty()) << graph.note();
  EXPECT_EQ(graph.step_ms().count(), 3u);
  EXPECT_NEAR(graph.answer_step_ms().median() - graph.step_ms().median(), 40, 1);
  EXPECT_GT(graph.gain(), graph.gain_noise());
  EXPECT_EQ(t->levers_tried_size(), 1);
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
  const v1::LeverTrial graph = Trial(*t, kStepGraph);
  EXPECT_FALSE(graph.chosen());
  EXPECT_FALSE(graph.experiment().empty());
  EXPECT_LE(graph.gain(), graph.gain_noise());
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
  EXPECT_FALSE(Trial(*t, kStepGraph).chosen());
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
  EXPECT_EQ(Trial(*t, kStepGraph).note(), "the experiment runs its step as one CUDA graph already");
}

TEST(StepGraph, SkippedItIsNeitherRunNorSaid) {
  Machine m;
  m.graph_saves_ms = 40;
  FakeRunner runner(m);
  absl::StatusOr<v1::Tuning> t = Tune(Request(Dir("graph_skipped")), runner);  // try_step_graph false
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(runner.names.size(), 4u);
  EXPECT_EQ(t->text().find("CUDA graph"), std::string::npos) << t->text();
  EXPECT_EQ(t->levers_tried_size(), 0);
}

TEST(ShardedOptimizer, TheAnswerTakesItWhereItPaysAndTheGraphIsTriedOnTopOfIt) {
  Machine m;
  m.sharded_saves_ms = 6;  // the optimizer's 8 ms, mostly
  m.graph_saves_ms = 40;
  FakeRunner runner(m);
  TuneRequest req = Request(Dir("sharded_pays"));
  req.settings.try_sharded_optimizer = true;
  req.settings.try_step_graph = true;
  absl::StatusOr<v1::Tuning> t = Tune(req, runner);
  ASSERT_TRUE(t.ok()) << t.status();
  // Probe, the experiment as given, 2 verified, the answer sharded, then sharded as a graph.
  ASSERT_EQ(runner.names.size(), 6u);
  const double cap = t->chosen_cap_mb();
  EXPECT_EQ(runner.names[4], CapRunName("vit", cap, "_sharded"));
  EXPECT_EQ(runner.names[5], CapRunName("vit", cap, "_sharded_graph"));
  ASSERT_EQ(t->levers_tried_size(), 2);
  EXPECT_EQ(t->levers_tried(0).plugin(), kShardedOptimizer);  // tried first
  const v1::LeverTrial sharded = Trial(*t, kShardedOptimizer);
  const v1::LeverTrial graph = Trial(*t, kStepGraph);
  EXPECT_TRUE(sharded.chosen());
  EXPECT_NEAR(sharded.answer_step_ms().median() - sharded.step_ms().median(), 6, 0.5);
  // The graph is measured against the sharded answer, not the first one.
  EXPECT_TRUE(graph.chosen());
  EXPECT_DOUBLE_EQ(graph.answer_step_ms().median(), sharded.step_ms().median());
  EXPECT_NEAR(graph.answer_step_ms().median() - graph.step_ms().median(), 40, 1);
  // The file has both; the text says both, in turn.
  absl::StatusOr<v1::Suite> file = ParseExperimentText(t->textproto(), req.answer_path, testing::ShippedSchema());
  ASSERT_TRUE(file.ok()) << file.status() << "\n" << t->textproto();
  EXPECT_TRUE(HasPlugin(file->experiment(0), kShardedOptimizer)) << t->textproto();
  EXPECT_TRUE(HasPlugin(file->experiment(0), kStepGraph)) << t->textproto();
  const size_t said = t->text().find("With its optimizer sharded over the ranks (plugin { sharded_optimizer {} }): ");
  EXPECT_NE(said, std::string::npos) << t->text();
  EXPECT_NE(t->text().find("The answer takes it: each rank steps its share of the parameters beside backward"),
            std::string::npos)
      << t->text();
  EXPECT_GT(t->text().find("With its step as one CUDA graph (plugin { cuda_graph {} }): "), said) << t->text();
  ExpectOneAnswer(*t, req);
}

TEST(ShardedOptimizer, NoFasterBeyondTheNoiseTheGraphIsTriedOnTheAnswerAlone) {
  Machine m;  // sharding saves nothing here
  m.graph_saves_ms = 40;
  FakeRunner runner(m);
  TuneRequest req = Request(Dir("sharded_same"));
  req.settings.try_sharded_optimizer = true;
  req.settings.try_step_graph = true;
  absl::StatusOr<v1::Tuning> t = Tune(req, runner);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(runner.names.size(), 6u);
  EXPECT_EQ(runner.names[5], CapRunName("vit", t->chosen_cap_mb(), "_graph"));
  const v1::LeverTrial sharded = Trial(*t, kShardedOptimizer);
  EXPECT_FALSE(sharded.chosen());
  EXPECT_FALSE(sharded.experiment().empty());
  EXPECT_TRUE(Trial(*t, kStepGraph).chosen());
  absl::StatusOr<v1::Suite> file = ParseExperimentText(t->textproto(), req.answer_path, testing::ShippedSchema());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_FALSE(HasPlugin(file->experiment(0), kShardedOptimizer)) << t->textproto();
  EXPECT_TRUE(HasPlugin(file->experiment(0), kStepGraph)) << t->textproto();
  EXPECT_NE(t->text().find("no faster beyond the noise: the answer keeps its all-reduce and whole optimizer."),
            std::string::npos)
      << t->text();
}

TEST(ShardedOptimizer, ARefusalIsTheNote) {
  Machine m;
  m.sharded_saves_ms = 6;
  FakeRunner runner(m);
  runner.refuse_sharded = "sharded_optimizer: a codec (bf16) hands the hook below it a bucket to reduce";
  TuneRequest req = Request(Dir("sharded_refused"));
  req.settings.try_sharded_optimizer = true;
  absl::StatusOr<v1::Tuning> t = Tune(req, runner);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(runner.names.size(), 4u);  // probe, as given, 2 verified
  EXPECT_FALSE(Trial(*t, kShardedOptimizer).chosen());
  EXPECT_NE(t->text().find("The optimizer sharded over the ranks (sharded_optimizer) was not tried: "
                           "sharded_optimizer: a codec (bf16) hands the hook below it a bucket to reduce."),
            std::string::npos)
      << t->text();
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
