// Predicts the step for each DDP bucket_cap_mb from a run's result and an all-reduce
// sweep, and says the fastest as experiment lines and PyTorch code (tune/predict.h).
//
//   bazel run //tune:predict -- --result=ddplab_results/s/probe.json --sweep=all_reduce_perf.txt
//
// --sweep is nccl-tests' table (all_reduce_perf's output, or SweepAllReduce's rows written
// by FormatNcclTestsTable) for the run's ranks and dtype. Exit codes: 0 the prediction,
// 2 bad input (which file, and what is wrong).
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"
#include "core/plugin/plugin_host.h"
#include "tools/cpp/runfiles/runfiles.h"
#include "tune/model/nccl_tests.h"
#include "tune/predict.h"

ABSL_FLAG(std::string, result, "", "a run's result JSON (<output_dir>/<suite>/<experiment>.json)");
ABSL_FLAG(std::string, sweep, "", "nccl-tests' all-reduce table for the run's ranks");
ABSL_FLAG(std::string, caps_mb, "1,5,10,25,50,100,200,2000", "bucket_cap_mb values to predict");
ABSL_FLAG(double, wire_factor, 1.0, "bytes on the wire per gradient byte (0.5: bf16)");
ABSL_FLAG(std::string, write_experiment, "", "where to write the tuned experiment file (vit_ddp --experiment)");

namespace {

bool Read(const std::string& path, std::string* text) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  *text = s.str();
  return static_cast<bool>(in);
}

int Fail(const std::string& what) {
  std::cerr << "predict: " << what << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string result_path = absl::GetFlag(FLAGS_result), sweep_path = absl::GetFlag(FLAGS_sweep);
  std::string json, table;
  if (!Read(result_path, &json)) return Fail(result_path + ": cannot read the result (--result)");
  if (!Read(sweep_path, &table)) return Fail(sweep_path + ": cannot read the sweep (--sweep)");
  ddplab::v1::RunResult result;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (auto s = google::protobuf::util::JsonStringToMessage(json, &result, options); !s.ok()) {
    return Fail(result_path + ": not a run's result: " + s.ToString());
  }
  absl::StatusOr<std::vector<ddplab::tune::NcclTestsRow>> rows = ddplab::tune::ParseNcclTestsTable(table);
  if (!rows.ok()) return Fail(sweep_path + ": " + std::string(rows.status().message()));
  absl::StatusOr<ddplab::tune::CostCurve> curve = ddplab::tune::CurveFromNcclTests(*rows);
  if (!curve.ok()) return Fail(sweep_path + ": " + std::string(curve.status().message()));
  ddplab::tune::PredictOptions predict;
  predict.caps_mib.clear();
  for (absl::string_view cap : absl::StrSplit(absl::GetFlag(FLAGS_caps_mb), ',')) {
    double mib = 0;
    if (!absl::SimpleAtod(cap, &mib) || mib <= 0) return Fail("--caps_mb: \"" + std::string(cap) + "\" is not a size > 0");
    predict.caps_mib.push_back(mib);
  }
  predict.levers.wire_factor = absl::GetFlag(FLAGS_wire_factor);
  // The plugins built beside this binary: the answer sets bucket_sizing's cap.
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(bazel::tools::cpp::runfiles::Runfiles::Create(argv[0]));
  ddplab::PluginHost host({runfiles ? runfiles->Rlocation("ddplab/plugins") : ""});
  predict.schema = &host.schema();
  absl::StatusOr<ddplab::tune::Prediction> p = ddplab::tune::Predict(result, *curve, predict);
  if (!p.ok()) return Fail(result_path + ": " + std::string(p.status().message()));
  std::cout << ddplab::tune::FormatPrediction(*p);
  if (const std::string out = absl::GetFlag(FLAGS_write_experiment); !out.empty()) {
    if (absl::Status s = ddplab::tune::CanSetCaps(host.schema()); !s.ok()) return Fail("--write_experiment: " + s.ToString());
    std::ofstream file(out);
    file << p->experiment_textproto;
    if (!file.flush()) return Fail(out + ": cannot write the experiment (--write_experiment)");
    std::cout << "\nThe experiment: " << out << " (vit_ddp --experiment=" << out << ")\n";
  }
  return 0;
}
