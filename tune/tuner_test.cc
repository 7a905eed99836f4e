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
#include "tune/bucket_caps.h"
#include "tune/model/curve_testing.h"
#include "tune/model/cost_curve.h"
#include "tune/model/partition.h"
#include "tune/model/step_model.h"

namespace ddplab::tune {
namespace {

using test_curves::kMiB;
using test_curves::Line;

// A machine: 60 gradients of 4 MiB over a 120 ms backward, all-reduces of 2 ms + 2 GB/s.
struct Machine {
  double forward = 40, backward = 120, optimizer = 8, other = 2;
  double alpha_us = 2000, beta_us_per_byte = 1e6 / 2e9;
  double slowdown = 0.15;
  double per_bucket_ms = 0;  // unknown to the model
  bool bf16 = false;         // bfloat16 on the wire, whose all-reduces cost 3 times float32's
  std::vector<Gradient> gradients;

  Machine() {
    for (int i = 0; i < 60; ++i) gradients.push_back({backward * (i + 1) / 60, 4 * kMiB});
  }
  StepInputs Inputs() const { return {forward, backward, optimizer, gradients}; }
  double StepMs(double cap, double first, int repetition) const {
    CostCurve curve = Line(alpha_us * (bf16 ? 3 : 1), beta_us_per_byte * (bf16 ? 3 : 1));
    Levers levers;
    levers.overlap_slowdown = slowdown;
    levers.wire_factor = bf16 ? 0.5 : 1;
    const Partition p = BucketsByCap(gradients, static_cast<int64_t>(first * kMiB), static_cast<int64_t>(cap * kMiB));
    const double noise = 1 + 0.002 * (repetition % 3 == 2 ? -1 : repetition % 3);  // 0, +, -
    return (PredictStep(Inputs(), curve, levers, p)->step_ms + other + per_bucket_ms * p.buckets()) * noise;
  }
};

class FakeRunner : public Runner {
 public:
  explicit FakeRunner(const Machine& m) : m_(m) {}

  const ExperimentSchema& schema() override { return testing::ShippedSchema(); }

  absl::Status Check(const v1::Experiment& e) override {
    bool probe = false, hook = false;
    for (const v1::Plugin& p : e.plugin()) {
      probe |= p.name() == "no_communication";
      hook |= p.name() == "powersgd";
    }
    bool buckets = false, zero_copy = false;
    for (const v1::Plugin& p : e.plugin()) {
      buckets |= p.name() == "bucket_sizing";
      zero_copy |= p.name() == "zero_copy";
    }
    if (buckets && zero_copy) return absl::InvalidArgumentError("zero_copy makes no buckets");
    return probe && hook ? absl::InvalidArgumentError("one communication hook only") : absl::OkStatus();
  }

  // The run's code, with bf16 (lossy here) left out as the host leaves lossy levers out.
  absl::StatusOr<std::string> TrainingCode(const v1::Experiment& e) override {
    bool bf16 = false;
    for (const v1::Plugin& p : e.plugin()) bf16 |= p.name() == "bf16";
    return absl::StrCat(bf16 ? "# left out: bf16\n" : "", "model = DDP(model, device_ids=[local_rank], bucket_cap_mb=",
                        CapsOf(e, testing::ShippedSchema()).cap_mb, ")");
  }

  absl::StatusOr<std::vector<absl::StatusOr<v1::RunResult>>> Run(const std::vector<v1::Experiment>& es,
                                                                 int repetitions) override {
    std::vector<absl::StatusOr<v1::RunResult>> out;
    for (const v1::Experiment& e : es) {
      names.push_back(e.name());
      if (!fail.empty() && e.name() == fail) {
        out.push_back(absl::InternalError("rank 1 exited with 1"));
        continue;
      }
      out.push_back(e.profiling().allreduce_sweep() ? Probe(e) : Timed(e, repetitions));
    }
    return out;
  }

  std::vector<std::string> names;  // every experiment run, in order
  std::string fail;                // the name of one that fails

 private:
  v1::RunResult Probe(const v1::Experiment& e) const {
    v1::RunResult r;
    r.set_experiment(e.name());
    r.mutable_phases()->set_forward_ms(m_.forward);
    r.mutable_phases()->set_backward_ms(m_.backward);
    r.mutable_phases()->set_optimizer_ms(m_.optimizer);
    r.mutable_phases()->set_step_ms(m_.forward + m_.backward + m_.optimizer + m_.other);
    r.set_steps_per_s(1e3 / r.phases().step_ms());
    for (size_t i = 0; i < m_.gradients.size(); ++i) {
      v1::GradientReady* g = r.add_gradient_ready();
      g->set_parameter(static_cast<int32_t>(i));
      g->set_ready_ms(m_.gradients[i].ready_ms);
      g->set_bytes(m_.gradients[i].bytes);
    }
    for (const char* type : {"float", "bfloat16"}) {
      const double times = std::string(type) == "bfloat16" ? 3 : 1;
      for (int64_t b = 1024; b <= 512 * kMiB; b *= 2) {
        v1::AllReduceRow* row = r.add_allreduce_sweep();
        row->set_bytes(b);
        row->set_type(type);
        row->set_time_us((m_.alpha_us + m_.beta_us_per_byte * static_cast<double>(b)) * times);
      }
    }
    return r;
  }
  v1::RunResult Timed(const v1::Experiment& e, int repetitions) const {
    const auto [cap, first] = CapsOf(e, testing::ShippedSchema());
    v1::RunResult r;
    r.set_experiment(e.name());
    if (m_.bf16) {
      r.set_sent_dtype("BFloat16");
      r.set_wire_bytes(60 * 2 * kMiB);
    }
    r.set_pytorch(absl::StrCat("model = DDP(model, device_ids=[local_rank], bucket_cap_mb=", cap, ")"));
    for (int k = 0; k < repetitions; ++k) r.add_repetitions()->set_steps_per_s(1e3 / m_.StepMs(cap, first, k));
    r.set_steps_per_s(r.repetitions(0).steps_per_s());
    return r;
  }
  const Machine& m_;
};

// An experiment as the loader resolves it.
v1::Experiment Base() {
  absl::StatusOr<v1::Suite> s = ParseExperimentText(R"(
    name: "vit"
    model { preset: VIT_TINY_TEST }
    data { batch_size: 4 image_size: 32 }
    steps { warmup: 2 measured: 10 }
    optimizer { sgd { learning_rate: 0.01 } }
    plugin { static_graph {} }
  )", "base.textproto", testing::ShippedSchema());
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? s->experiment(0) : v1::Experiment();
}

TuneRequest Request(const std::string& dir) {
  TuneRequest req;
  req.base = Base();
  req.settings.caps_mib = {1, 2, 5, 10, 25, 50, 100, 200, 400, 2000};
  req.machine.set_device("NVIDIA H200");
  req.machine.set_device_count(2);
  req.machine.set_driver("580.1");
  req.cache_path = absl::StrCat(dir, "/tune_cache/vit.json");
  req.answer_path = absl::StrCat(dir, "/vit_tuned.textproto");
  return req;
}

std::string Dir(const std::string& name) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/", name);
  std::system(absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "'").c_str());
  return dir;
}

// The cap with the fastest true median step.
double TrueBest(const Machine& m, const std::vector<double>& caps) {
  double best = caps[0];
  for (double cap : caps) {
    if (m.StepMs(cap, std::min(1.0, cap), 1) < m.StepMs(best, std::min(1.0, best), 1)) best = cap;
  }
  return best;
}

// The answer's text, file and code say one cap, and the verdict's step is the table's.
void ExpectOneAnswer(const v1::Tuning& t, const TuneRequest& req) {
  absl::StatusOr<v1::Suite> file = ParseExperimentText(t.textproto(), req.answer_path, testing::ShippedSchema());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(CapsOf(file->experiment(0), testing::ShippedSchema()).cap_mb, t.chosen_cap_mb());
  EXPECT_NE(t.pytorch().find(absl::StrCat("bucket_cap_mb=", t.chosen_cap_mb(), ")")), std::string::npos) << t.pytorch();
  EXPECT_NE(t.text().find(absl::StrFormat("bucket_cap_mb %g", t.chosen_cap_mb())), std::string::npos) << t.text();
  EXPECT_NE(t.verdict().find(absl::StrFormat("with bucket_cap_mb %g (", t.chosen_cap_mb())), std::string::npos)
      << t.verdict();
  for (const v1::TuneCandidate& c : t.candidates()) {
    if (c.bucket_cap_mb() != t.chosen_cap_mb()) continue;
    EXPECT_NE(t.verdict().find(absl::StrFormat("of the predicted %.3g ms step", c.predicted_step_ms())),
              std::string::npos)
        << t.verdict();
  }
  EXPECT_FALSE(std::regex_search(t.text(), std::regex("-[0-9.]+% less"))) << t.text();
}

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

TEST(Tuner, CapRunNamesAreNames) {
  EXPECT_EQ(CapRunName("vit", 25), "vit_25mb");
  EXPECT_EQ(CapRunName("vit", 2.5), "vit_2p5mb");
  EXPECT_EQ(CapRunName("vit", 100, "_sweep"), "vit_sweep_100mb");
}

}  // namespace
}  // namespace ddplab::tune
