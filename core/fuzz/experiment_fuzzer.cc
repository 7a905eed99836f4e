// libFuzzer target: any text given to experiment loading, validation and the expansion
// of sweeps gives a result or an error, never a crash, a hang or undefined behaviour.
//
//   bazel build --config=fuzz //core/fuzz:experiment_fuzzer
//   bazel-bin/core/fuzz/experiment_fuzzer -max_total_time=60 NEW_CORPUS core/fuzz/corpus
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/config/experiment.h"
#include "plugins/testing/shipped_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  const ddplab::ExperimentSchema& schema = ddplab::testing::ShippedSchema();
  absl::StatusOr<ddplab::v1::Suite> suite = ddplab::ParseExperimentText(text, "fuzz.textproto", schema);
  if (suite.ok()) {
    for (const ddplab::v1::Experiment& e : suite->experiment()) {
      for (const ddplab::v1::Plugin& p : e.plugin()) (void)schema.Print(p);
    }
    (void)ddplab::ExpandSweeps(*suite, schema);
  } else {
    // Every error names where it is.
    if (suite.status().message().rfind("fuzz.textproto", 0) != 0) __builtin_trap();
  }
  return 0;
}
