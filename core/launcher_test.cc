#include "core/launcher.h"

#include <stdlib.h>

#include <chrono>
#include <memory>

#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace ddplab {
namespace {

std::string Worker() {
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::CreateForTest(&error));
  return runfiles->Rlocation("ddplab/core/testdata/launch_worker");
}

TEST(LauncherTest, AllWorkersSucceed) {
  unsetenv("FAIL_RANK");
  unsetenv("HANG");
  LaunchOptions options;
  options.nproc_per_node = 3;
  LaunchResult r = Launch({Worker()}, options);
  EXPECT_EQ(r.exit_code, 0) << r.message;
}

// A worker that exits with code 3 ends the job: the others are stopped, the launcher
// returns non-zero within 10 s and names the rank and its code.
TEST(LauncherTest, AFailingWorkerEndsTheOthers) {
  setenv("FAIL_RANK", "1", 1);
  setenv("FAIL_CODE", "3", 1);
  setenv("HANG", "1", 1);
  LaunchOptions options;
  options.nproc_per_node = 3;
  auto start = std::chrono::steady_clock::now();
  LaunchResult r = Launch({Worker()}, options);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.message, "rank 1 exited with code 3");
  EXPECT_LT(seconds, 10.0);
}

TEST(LauncherTest, AMissingProgramFails) {
  unsetenv("FAIL_RANK");
  LaunchOptions options;
  options.nproc_per_node = 2;
  LaunchResult r = Launch({"/nonexistent/worker"}, options);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(r.message.rfind("rank ", 0), 0u) << r.message;
}

}  // namespace
}  // namespace ddplab
