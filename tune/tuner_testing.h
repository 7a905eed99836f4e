// A synthetic machine for the tuner's tests: its steps come from the step model with a
// known slowdown (and, where asked, a cost per bucket the model does not know, or what a
// CUDA graph or the optimizer sharded over the ranks saves), and a Runner that runs
// experiments on it.
//
//   Machine m;
//   FakeRunner runner(m);
//   absl::StatusOr<v1::Tuning> t = Tune(Request(Dir("case")), runner);
#ifndef DDPLAB_TUNE_TUNER_TESTING_H_
#define DDPLAB_TUNE_TUNER_TESTING_H_

#include <cmath>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/config/experiment.h"
#include "gtest/gtest.h"
#include "plugins/testing/shipped_schema.h"
#include "tune/bucket_caps.h"
#include "tune/model/cost_curve.h"
#include "tune/model/curve_testing.h"
#include "tune/model/partition.h"
#include "tune/model/step_model.h"
#include "tune/tuner.h"

namespace ddplab::tune::tuner_testing {

using test_curves::kMiB;
using test_curves::Line;

// A machine: 60 gradients of 4 MiB over a 120 ms backward, all-reduces of 2 ms + 2 GB/s.
struct Machine {
  double forward = 40, backward = 120, optimizer = 8, other = 2;
  double alpha_us = 2000, beta_us_per_byte = 1e6 / 2e9;
  double slowdown = 0.15;
  double per_bucket_ms = 0;  // unknown to the model
  bool bf16 = false;         // bfloat16 on the wire, whose all-reduces cost 3 times float32's
  double graph_saves_ms = 0; // what running the step as one CUDA graph saves per step
  double sharded_saves_ms = 0;  // what the optimizer sharded over the ranks saves per step
  double exposed_ms = 0;     // the wait for communication after backward its runs report
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

// Runs experiments on a Machine: a probe's measurements, or a candidate's steps from the
// step model (cuda_graph's less graph_saves_ms, sharded_optimizer's less sharded_saves_ms).
// Check refuses what the host would.
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
    if (HasPlugin(e, "cuda_graph") && !refuse_graph.empty()) return absl::InvalidArgumentError(refuse_graph);
    if (HasPlugin(e, "sharded_optimizer") && !refuse_sharded.empty()) return absl::InvalidArgumentError(refuse_sharded);
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
  std::string refuse_graph;        // Check's refusal of cuda_graph, where set
  std::string refuse_sharded;      // Check's refusal of sharded_optimizer, where set

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
    r.set_exposed_comm_ms(m_.exposed_ms);
    const double saved = (HasPlugin(e, "cuda_graph") ? m_.graph_saves_ms : 0) +
                         (HasPlugin(e, "sharded_optimizer") ? m_.sharded_saves_ms : 0);
    for (int k = 0; k < repetitions; ++k) r.add_repetitions()->set_steps_per_s(1e3 / (m_.StepMs(cap, first, k) - saved));
    r.set_steps_per_s(r.repetitions(0).steps_per_s());
    return r;
  }
  const Machine& m_;
};

// An experiment as the loader resolves it.
inline v1::Experiment Base() {
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

inline TuneRequest Request(const std::string& dir) {
  TuneRequest req;
  req.base = Base();
  req.settings.caps_mib = {1, 2, 5, 10, 25, 50, 100, 200, 400, 2000};
  req.machine.set_device("NVIDIA H200");
  req.machine.set_device_count(2);
  req.machine.set_driver("580.1");
  req.cache_path = absl::StrCat(dir, "/tune_cache/vit.json");
  req.answer_path = absl::StrCat(dir, "/vit_tuned.textproto");
  // The lossless levers are questions of their own (lossless_levers_test.cc): off here,
  // so that these tests see the runs they count.
  req.settings.try_step_graph = false;
  req.settings.try_sharded_optimizer = false;
  return req;
}

inline std::string Dir(const std::string& name) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/", name);
  std::system(absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "'").c_str());
  return dir;
}

// The cap with the fastest true median step.
inline double TrueBest(const Machine& m, const std::vector<double>& caps) {
  double best = caps[0];
  for (double cap : caps) {
    if (m.StepMs(cap, std::min(1.0, cap), 1) < m.StepMs(best, std::min(1.0, best), 1)) best = cap;
  }
  return best;
}

// The answer's text, file and code say one cap, and the verdict's step is the table's.
inline void ExpectOneAnswer(const v1::Tuning& t, const TuneRequest& req) {
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

}  // namespace ddplab::tune::tuner_testing

#endif  // DDPLAB_TUNE_TUNER_TESTING_H_
