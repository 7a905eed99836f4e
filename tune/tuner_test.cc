// The tuner against a synthetic machine whose steps come from the step model with a known
// slowdown (and, where asked, a cost per bucket the model does not know): the answer,
// the verification, the cache and the errors.
#include "tune/tuner.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/config/experiment.h"
#include "gtest/gtest.h"
#include "plugins/testing/shipped_schema.h"
#include "tune/tuner_testing.h"
#include "tune/bucket_caps.h"
#include "tune/model/curve_testing.h"
#include "tune/model/cost_curve.h"
#include "tune/model/partition.h"
#include "tune/model/step_model.h"

namespace ddplab::tune {
namespace {

using tuner_testing::Dir;
using tuner_testing::ExpectOneAnswer;
using tuner_testing::FakeRunner;
using tuner_testing::Machine;
using tuner_testing::Request;
using tuner_testing::TrueBest;

TEST(Tuner, ChoosesTheFastestCapFromThePredictionAndVerifiesIt) {
  Machine m;
  FakeRunner runner(m);
  TuneRequest req = Request(Dir("choose"));
  req.settings.exhaustive = true;
  absl::StatusOr<v1::Tuning> t = Tune(req, runner);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->chosen_cap_mb(), TrueBest(m, req.settings.caps_mib)) << t->text();
  EXPECT_NEAR(t->slowdown(), m.slowdown, 0.02);
  EXPECT_EQ(t->exhaustive_best_cap_mb(), t->chosen_cap_mb());
  EXPECT_NEAR(t->vs_exhaustive_best(), 1.0, 1e-9);
  int verified = 0;
  for (const v1::TuneCandidate& c : t->candidates()) {
    if (!c.verified()) continue;
    ++verified;
    EXPECT_EQ(c.measured_step_ms().count(), 3u);
    EXPECT_LT(std::abs(c.error()), 0.01) << c.ShortDebugString();
    EXPECT_FALSE(c.missed());
  }
  EXPECT_EQ(verified, 2);
  EXPECT_EQ(t->base_step_ms().count(), 3u);  // the experiment as given: a spread too, not one run
  // Probe and the experiment as given, 2 verified, then the 10 caps of the sweep.
  ASSERT_EQ(runner.names.size(), 14u);
  EXPECT_EQ(runner.names[0], "vit_probe");
  EXPECT_EQ(runner.names[1], "vit");
  EXPECT_EQ(runner.names[4], "vit_sweep_1mb");
  EXPECT_NE(t->text().find("within 5% of every verified"), std::string::npos) << t->text();
  EXPECT_NE(t->pytorch().find(absl::StrCat("bucket_cap_mb=", t->chosen_cap_mb())), std::string::npos);
  ExpectOneAnswer(*t, req);
}

TEST(Tuner, NothingToTuneIsAnAnswerThatKeepsTheCapAndRunsNothingMore) {
  // Gradients of 0.2 MiB in all: every cap (its first bucket 1 MiB) makes one bucket,
  // as the experiment's own 25 does.
  Machine m;
  for (Gradient& g : m.gradients) g.bytes = 3 * 1024;
  FakeRunner runner(m);
  TuneRequest req = Request(Dir("nothing"));
  req.settings.exhaustive = true;
  absl::StatusOr<v1::Tuning> t = Tune(req, runner);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->nothing_to_tune());
  EXPECT_EQ(runner.names, (std::vector<std::string>{"vit_probe", "vit"}));  // nothing verified, no sweep
  EXPECT_EQ(t->chosen_cap_mb(), 25);
  EXPECT_NE(t->text().find("Nothing to tune in vit: every bucket_cap_mb tried (1 to 2000) makes the buckets it "
                           "makes already (1 bucket), so keep bucket_cap_mb 25."),
            std::string::npos)
      << t->text();
  EXPECT_EQ(t->text().find("faster"), std::string::npos) << t->text();
  EXPECT_NE(t->verdict().find("with bucket_cap_mb 25 (1 bucket)"), std::string::npos) << t->verdict();
  EXPECT_NE(t->verdict().find(absl::StrFormat("of the predicted %.3g ms step", t->base_predicted_step_ms())),
            std::string::npos)
      << t->verdict();
  EXPECT_NE(t->pytorch().find("bucket_cap_mb=25)"), std::string::npos) << t->pytorch();
}

TEST(Tuner, AChosenCapWithTheExperimentsBucketsKeepsTheExperimentsCap) {
  // The experiment's 2500 MiB makes the buckets of 2000 (the first gradient, then the
  // rest), the faster of the caps tried: the answer keeps 2500, in the text, the file and
  // the code alike.
  Machine m;
  FakeRunner runner(m);
  TuneRequest req = Request(Dir("keep"));
  req.settings.caps_mib = {2, 2000};
  *req.base.add_plugin() = CapEntry(2500, testing::ShippedSchema());
  absl::StatusOr<v1::Tuning> t = Tune(req, runner);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->nothing_to_tune());
  EXPECT_EQ(t->chosen_cap_mb(), 2500) << t->text();
  EXPECT_NE(t->text().find("Tuned vit: keep bucket_cap_mb 2500. The fastest verified cap, 2000, makes the buckets it "
                           "makes already (2 buckets)"),
            std::string::npos)
      << t->text();
  ExpectOneAnswer(*t, req);
}

TEST(Tuner, TheCodeLeavesOutALossyLever) {
  Machine m;
  m.bf16 = true;
  FakeRunner runner(m);
  TuneRequest req = Request(Dir("lossy"));
  *req.base.add_plugin() = testing::ShippedSchema().Entry("bf16", "").value();
  absl::StatusOr<v1::Tuning> t = Tune(req, runner);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NE(t->pytorch().find("# left out: bf16"), std::string::npos) << t->pytorch();
  EXPECT_EQ(t->pytorch().find("register_comm_hook"), std::string::npos) << t->pytorch();
}

TEST(Tuner, BfloatOnTheWireIsModelledWithItsOwnCurveAtItsBytes) {
  Machine m;
  m.bf16 = true;
  FakeRunner runner(m);
  TuneRequest req = Request(Dir("bf16"));
  req.settings.verify = 3;
  absl::StatusOr<v1::Tuning> t = Tune(req, runner);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->chosen_cap_mb(), TrueBest(m, req.settings.caps_mib)) << t->text();
  for (const v1::TuneCandidate& c : t->candidates()) {
    if (c.verified()) {
      EXPECT_LT(std::abs(c.error()), 0.01) << c.ShortDebugString();
    }
  }
}

TEST(Tuner, TheAnswerFileRunsAsWrittenWithTheChosenCap) {
  Machine m;
  FakeRunner runner(m);
  TuneRequest req = Request(Dir("answer"));
  *req.base.add_plugin() = CapEntry(2, testing::ShippedSchema());
  absl::StatusOr<v1::Tuning> t = Tune(req, runner);
  ASSERT_TRUE(t.ok()) << t.status();
  std::ifstream in(req.answer_path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), t->textproto());
  absl::StatusOr<v1::Suite> loaded = ParseExperimentText(text.str(), req.answer_path, testing::ShippedSchema());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const v1::Experiment& e = loaded->experiment(0);
  EXPECT_EQ(e.name(), "vit_tuned");
  ASSERT_EQ(e.plugin_size(), 2);
  EXPECT_EQ(CapsOf(e, testing::ShippedSchema()).cap_mb, t->chosen_cap_mb());
  EXPECT_EQ(e.plugin(0).name(), "bucket_sizing");
  EXPECT_EQ(e.plugin(1).name(), "static_graph");
  EXPECT_GT(t->gain(), t->gain_noise()) << t->text();  // 2 MiB is far from the best here
  EXPECT_NE(t->text().find("faster (noise"), std::string::npos) << t->text();
}

TEST(Tuner, ASecondTuningReusesTheMeasurementsUntilTheMachineChanges) {
  Machine m;
  const std::string dir = Dir("cache");
  TuneRequest req = Request(dir);
  FakeRunner first(m);
  ASSERT_TRUE(Tune(req, first).ok());
  FakeRunner second(m);
  absl::StatusOr<v1::Tuning> again = Tune(req, second);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->cached());
  EXPECT_EQ(second.names.size(), 2u);  // the verified ones only
  EXPECT_EQ(again->chosen_cap_mb(), TrueBest(m, req.settings.caps_mib));

  req.machine.set_driver("590.2");
  FakeRunner third(m);
  absl::StatusOr<v1::Tuning> changed = Tune(req, third);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(changed->cached());
  EXPECT_NE(changed->cache_note().find("the driver: 580.1 -> 590.2"), std::string::npos) << changed->cache_note();
  EXPECT_EQ(third.names[0], "vit_probe");

  // The experiment's own bucket cap changed (the probe leaves it out): its run, the gain's
  // reference, is measured again.
  FakeRunner capped(m);
  TuneRequest cap_req = req;
  *cap_req.base.add_plugin() = CapEntry(7, testing::ShippedSchema());
  absl::StatusOr<v1::Tuning> recapped = Tune(cap_req, capped);
  ASSERT_TRUE(recapped.ok()) << recapped.status();
  EXPECT_FALSE(recapped->cached());
  EXPECT_NE(recapped->cache_note().find("the experiment as given changed"), std::string::npos) << recapped->cache_note();
  EXPECT_EQ(capped.names[1], "vit");

  req.base.mutable_data()->set_batch_size(64);  // another experiment: measured again
  FakeRunner fourth(m);
  absl::StatusOr<v1::Tuning> other = Tune(req, fourth);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->cache_note().find("the experiment changed"), std::string::npos) << other->cache_note();
}

TEST(Tuner, ABrokenCacheIsMeasuredAgainSayingWhy) {
  Machine m;
  TuneRequest req = Request(Dir("broken"));
  std::system(absl::StrCat("mkdir -p \"$(dirname '", req.cache_path, "')\" && echo '{\"machine\": 7' > '",
                           req.cache_path, "'").c_str());
  FakeRunner runner(m);
  absl::StatusOr<v1::Tuning> t = Tune(req, runner);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->cached());
  EXPECT_NE(t->cache_note().find("is no tuning cache"), std::string::npos) << t->cache_note();
  EXPECT_EQ(runner.names[0], "vit_probe");
  FakeRunner again(m);  // and the cache written then is whole
  ASSERT_TRUE(Tune(req, again).ok());
  EXPECT_EQ(again.names.size(), 2u);
}

TEST(Tuner, SaysWhereTheModelMissed) {
  Machine m;
  m.per_bucket_ms = 1.5;  // what the sweep does not show: a cost per bucket in the step
  FakeRunner runner(m);
  TuneRequest req = Request(Dir("missed"));
  req.settings.verify = 4;
  absl::StatusOr<v1::Tuning> t = Tune(req, runner);
  ASSERT_TRUE(t.ok()) << t.status();
  bool missed = false;
  for (const v1::TuneCandidate& c : t->candidates()) missed |= c.missed();
  EXPECT_TRUE(missed) << t->text();
  EXPECT_NE(t->text().find("The model missed: cap"), std::string::npos) << t->text();
}

TEST(Tuner, TheProbeLeavesOutAHookThatCannotRunBesideNoCommunication) {
  Machine m;
  FakeRunner runner(m);
  TuneRequest req = Request(Dir("hook"));
  *req.base.add_plugin() = *testing::ShippedSchema().Entry("powersgd", "matrix_approximation_rank: 4");
  std::vector<std::string> said;
  req.say = [&said](const std::string& line) { said.push_back(line); };
  ASSERT_TRUE(Tune(req, runner).ok());
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said[0].find("the probe runs without powersgd"), std::string::npos) << said[0];
}

TEST(Tuner, AFailedMeasurementIsAnErrorAndAFailedCandidateIsSaid) {
  Machine m;
  FakeRunner probe_fails(m);
  probe_fails.fail = "vit_probe";
  absl::StatusOr<v1::Tuning> t = Tune(Request(Dir("fail1")), probe_fails);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("the tuner's measurement failed: rank 1 exited with 1"), std::string::npos)
      << t.status();

  FakeRunner candidate_fails(m);
  TuneRequest req = Request(Dir("fail2"));
  req.settings.verify = 3;
  const double best = TrueBest(m, req.settings.caps_mib);
  candidate_fails.fail = CapRunName("vit", best);
  t = Tune(req, candidate_fails);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NE(t->chosen_experiment(), CapRunName("vit", best));  // the best failed: the next verified is chosen
}

TEST(Tuner, AnExperimentThatTakesNoBucketCapIsRefusedBeforeAnythingRuns) {
  Machine m;
  FakeRunner runner(m);
  TuneRequest req = Request(Dir("zero_copy"));
  req.base.add_plugin()->set_name("zero_copy");
  absl::StatusOr<v1::Tuning> t = Tune(req, runner);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("--tune chooses bucket_cap_mb, and vit cannot take one: zero_copy makes no buckets"),
            std::string::npos)
      << t.status();
  EXPECT_TRUE(runner.names.empty());
}

TEST(Tuner, AnExperimentThatExchangesNothingIsRefusedBeforeAnythingRuns) {
  Machine m;
  FakeRunner runner(m);
  TuneRequest req = Request(Dir("no_communication"));
  req.base.add_plugin()->set_name("no_communication");
  absl::StatusOr<v1::Tuning> t = Tune(req, runner);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("vit exchanges none (plugin no_communication, a diagnostic): tune the "
                                      "experiment without it"),
            std::string::npos)
      << t.status();
  EXPECT_TRUE(runner.names.empty());
}

// #64: the verdict is the model's; where the answer's runs waited far longer for
// communication than the model's whole communication cost, it says so.
TEST(Tuner, AVerdictAgainstItsOwnMeasurementsIsDisputed) {
  Machine m;
  FakeRunner runner(m);
  absl::StatusOr<v1::Tuning> t = Tune(Request(Dir("agrees")), runner);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->verdict_disputed()) << t->verdict();
  m.exposed_ms = 300;  // what the model cannot see
  FakeRunner disagreeing(m);
  t = Tune(Request(Dir("disputed")), disagreeing);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->verdict_disputed());
  EXPECT_NE(t->verdict().find("The runs disagree: after backward they waited 300.0 ms a step for communication "
                              "(measured), where the model puts the whole cost of communication at "),
            std::string::npos)
      << t->verdict();
  EXPECT_NE(t->text().find("Trust the measured steps over this verdict."), std::string::npos) << t->text();
}

TEST(Tuner, CapRunNamesAreNames) {
  EXPECT_EQ(CapRunName("vit", 25), "vit_25mb");
  EXPECT_EQ(CapRunName("vit", 2.5), "vit_2p5mb");
  EXPECT_EQ(CapRunName("vit", 100, "_sweep"), "vit_sweep_100mb");
}

}  // namespace
}  // namespace ddplab::tune
