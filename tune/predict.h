// The tuner's prediction from measurements already taken (issue #29's steps 1, 2 and 4;
// verification against measured runs is the caller's): a run's gradient ready times and
// phases (its result, RunResult.gradient_ready: best a run with the engine and
// plugin { no_communication {} }, so that backward is measured alone) and an all-reduce
// cost curve (SweepAllReduce, or nccl-tests' all_reduce_perf on the same machine). It
// predicts the step for each DDP bucket_cap_mb, names the fastest, judges what bounds the
// step, and says the answer as an experiment's plugin lines and as PyTorch code.
//
//   absl::StatusOr<ddplab::tune::Prediction> p = ddplab::tune::Predict(result, curve, {});
//   if (p.ok()) std::cout << ddplab::tune::FormatPrediction(*p);
#ifndef DDPLAB_TUNE_PREDICT_H_
#define DDPLAB_TUNE_PREDICT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/config/plugin_schema.h"
#include "ddplab/v1/result.pb.h"
#include "tune/bucket_caps.h"
#include "tune/model/cost_curve.h"
#include "tune/model/partition.h"
#include "tune/model/step_model.h"
#include "tune/model/verdict.h"

namespace ddplab::tune {

// The model's inputs from a run's result: its mean forward, backward and optimizer times
// and its gradient ready times (backward taken as the later of its mean and the last
// gradient's time). An error where the run recorded no ready times (no engine).
absl::StatusOr<StepInputs> InputsFromResult(const v1::RunResult& r);

struct PredictOptions {
  std::vector<double> caps_mib = {1, 5, 10, 25, 50, 100, 200, 2000};
  Levers levers;
  // The plugins found (PluginHost::schema()): the answer sets bucket_sizing's cap.
  const ExperimentSchema* schema = nullptr;
};

struct Prediction {
  std::vector<CapPrediction> caps;
  size_t fastest = 0;  // index into caps
  Verdict verdict;
  std::string experiment_lines;  // "plugin { bucket_sizing { bucket_cap_mb: 25 } }"
  // The run's experiment as it ran (RunResult.resolved), named "<name>_tuned", with that
  // cap and without no_communication (the probe's): a file vit_ddp runs as it is. Empty
  // where PredictOptions::schema has no bucket_sizing.
  std::string experiment_textproto;
  std::string pytorch;           // "model = DDP(model, device_ids=[local_rank], bucket_cap_mb=25)"
};

absl::StatusOr<Prediction> Predict(const v1::RunResult& r, const CostCurve& curve, const PredictOptions& options);

// `e` named `name`, with bucket_sizing { bucket_cap_mb: cap } first in place of its own
// bucket sizing, and without no_communication (a probe's).
v1::Experiment WithCap(const v1::Experiment& e, double cap, const std::string& name, const ExperimentSchema& schema);

// `ran` (a run's experiment, RunResult.resolved) as a file vit_ddp runs as it is: named
// "<name>_tuned", with bucket_cap_mb `cap` (WithCap), without its output directory
// (the command line's), `why` its description.
std::string TunedExperimentText(const v1::Experiment& ran, double cap, const std::string& why,
                                const ExperimentSchema& schema);

// The cost curve of a run's all-reduce sweep (RunResult.allreduce_sweep), of the rows of
// nccl-tests' `type` ("float", "bfloat16").
absl::StatusOr<CostCurve> CurveFromResult(const v1::RunResult& r, const std::string& type = "float");

// A table of the caps' predicted steps (step, exposed, buckets), the verdict, and the
// answer in both forms (the whole experiment file is experiment_textproto).
std::string FormatPrediction(const Prediction& p);

}  // namespace ddplab::tune

#endif  // DDPLAB_TUNE_PREDICT_H_
