// The suite's progress line: a total that stays, times in the unit that reads best.
#include "experiments/suite_progress.h"

#include "gtest/gtest.h"

namespace ddplab {
namespace {

TEST(SuiteProgress, TimesReadInSecondsMinutesOrHours) {
  EXPECT_EQ(Duration(0.2), "0 s");
  EXPECT_EQ(Duration(45), "45 s");
  EXPECT_EQ(Duration(89), "89 s");
  EXPECT_EQ(Duration(150), "3 min");
  EXPECT_EQ(Duration(3 * 3600 + 5 * 60), "3 h 05 min");
}

TEST(SuiteProgress, TheLineSaysTheFixedTotalTheTimeSoFarAndTheTimeLeft) {
  EXPECT_EQ(SuiteProgressLine(0, 19, 0, 0), "  suite:   19 runs planned\n");
  // 4 runs took 40 s: 15 left at 10 s each.
  EXPECT_EQ(SuiteProgressLine(4, 19, 40, 4), "  suite:   4 of 19 runs done, 40 s so far, about 3 min left\n");
  // A short run is not "0 min left".
  EXPECT_EQ(SuiteProgressLine(18, 19, 36, 18), "  suite:   18 of 19 runs done, 36 s so far, about 2 s left\n");
}

// Where repetitions go only to the runs they decide, the total is the most that may run.
TEST(SuiteProgress, AnUpperBoundSaysSo) {
  EXPECT_EQ(SuiteProgressLine(0, 15, 0, 0, /*up_to=*/true), "  suite:   up to 15 runs planned\n");
  EXPECT_EQ(SuiteProgressLine(3, 15, 30, 3, /*up_to=*/true),
            "  suite:   3 of up to 15 runs done, 30 s so far, at most about 2 min left\n");
}

}  // namespace
}  // namespace ddplab
