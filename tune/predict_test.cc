#include "tune/predict.h"

#include "absl/strings/match.h"
#include "core/config/experiment.h"
#include "gtest/gtest.h"
#include "plugins/testing/shipped_schema.h"
#include "tune/model/nccl_tests.h"

namespace ddplab::tune {
namespace {

// A run of 8 gradients of 8 MiB, ready every 5 ms of a 40 ms backward.
v1::RunResult ProbeRun() {
  v1::RunResult r;
  r.set_experiment("probe");
  absl::StatusOr<v1::Suite> ran = ParseExperimentText(R"pb(
    name: "probe"
    model { preset: VIT_TINY_TEST }
    data { batch_size: 4 }
    steps { measured: 2 }
    optimizer { sgd { learning_rate: 0.1 } }
    distributed { device: CPU gpus_per_node: 2 }
    output { directory: "results/from/the/probe" }
    plugin { bucket_sizing { bucket_cap_mb: 2000 } }
    plugin { static_graph {} }
    plugin { no_communication {} }
  )pb", "probe.textproto", testing::ShippedSchema());
  EXPECT_TRUE(ran.ok()) << ran.status();
  *r.mutable_resolved() = ran->experiment(0);
  r.mutable_phases()->set_forward_ms(20);
  r.mutable_phases()->set_backward_ms(40);
  r.mutable_phases()->set_optimizer_ms(2);
  for (int i = 0; i < 8; ++i) {
    v1::GradientReady* g = r.add_gradient_ready();
    g->set_parameter(7 - i);
    g->set_bytes(int64_t{8} << 20);
    g->set_ready_ms(5.0 * (i + 1));
  }
  return r;
}

// All-reduces cost 10 us + 1 ms per MiB (nccl-tests' table of them). With 8 MiB caps each
// gradient is a bucket of 8.01 ms, ready every 5 ms: they queue, and the last ends at
// 5 + 8 * 8.01 = 69.08 ms, 29.08 ms after backward. With 2000 MiB, DDP's 1 MiB first
// bucket takes the first gradient and the other seven go at 40 ms: 56.01 ms exposed.
CostCurve Curve() {
  std::vector<NcclTestsRow> rows;
  for (int64_t bytes = 1024; bytes <= (int64_t{1} << 30); bytes *= 4) {
    rows.push_back(MakeAllReduceRow(bytes, 4, "float", 10 + 1000.0 * bytes / (1 << 20), 2, 0));
  }
  absl::StatusOr<CostCurve> curve = CurveFromNcclTests(rows);
  EXPECT_TRUE(curve.ok()) << curve.status();
  return *curve;
}

TEST(PredictTest, TheFastestCapAndItsTwoForms) {
  PredictOptions options;
  options.caps_mib = {8, 2000};
  options.schema = &testing::ShippedSchema();
  absl::StatusOr<Prediction> p = Predict(ProbeRun(), Curve(), options);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->caps.size(), 2u);
  EXPECT_EQ(p->caps[0].partition.buckets(), 8u);
  EXPECT_EQ(p->caps[1].partition.buckets(), 2u);  // DDP's first bucket (1 MiB cap) holds one
  EXPECT_EQ(p->fastest, 0u);
  EXPECT_NEAR(p->caps[0].prediction.exposed_ms, 29.08, 1e-6);
  EXPECT_NEAR(p->caps[0].prediction.step_ms, 20 + 40 + 29.08 + 2, 1e-6);
  EXPECT_NEAR(p->caps[1].prediction.exposed_ms, 56.01, 1e-6);
  EXPECT_EQ(p->experiment_lines, "plugin { bucket_sizing { bucket_cap_mb: 8 } }");
  EXPECT_EQ(p->pytorch, "model = DDP(model, device_ids=[local_rank], bucket_cap_mb=8)");
  const std::string text = FormatPrediction(*p);
  EXPECT_TRUE(absl::StrContains(text, "| 8 (fastest) | 8 |")) << text;
  EXPECT_TRUE(absl::StrContains(text, "Bandwidth-bound")) << text;
}

// The answer as a file: the probe's experiment, renamed, with the cap chosen, its other
// levers, without the probe's no_communication; it loads as it is.
TEST(PredictTest, TheTunedExperimentLoadsAsWritten) {
  PredictOptions options;
  options.caps_mib = {8, 2000};
  options.schema = &testing::ShippedSchema();
  absl::StatusOr<Prediction> p = Predict(ProbeRun(), Curve(), options);
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<v1::Suite> tuned = ParseExperimentText(p->experiment_textproto, "tuned.textproto", testing::ShippedSchema());
  ASSERT_TRUE(tuned.ok()) << tuned.status() << "\n" << p->experiment_textproto;
  const v1::Experiment& e = tuned->experiment(0);
  EXPECT_EQ(e.name(), "probe_tuned");
  ASSERT_EQ(e.plugin_size(), 2);
  EXPECT_EQ(CapsOf(e, testing::ShippedSchema()).cap_mb, 8);
  EXPECT_EQ(e.plugin(0).name(), "bucket_sizing");
  EXPECT_EQ(e.plugin(1).name(), "static_graph");
  EXPECT_NE(e.output().directory(), "results/from/the/probe");
}

TEST(PredictTest, ARunWithoutReadyTimesSaysWhy) {
  v1::RunResult r = ProbeRun();
  r.clear_gradient_ready();
  absl::StatusOr<Prediction> p = Predict(r, Curve(), {});
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(absl::StrContains(p.status().message(), "has no gradient ready times")) << p.status();
}

}  // namespace
}  // namespace ddplab::tune
