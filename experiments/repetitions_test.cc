#include "experiments/repetitions.h"

#include <vector>

#include "gtest/gtest.h"

namespace ddplab {
namespace {

TEST(UndecidedTest, TheLeaderAndThoseWithinTheDriftOfIt) {
  // Widened by 2%: the leader 11.4 [11.172, 11.628]; 11.0 reaches 11.22 (overlaps);
  // 10.9 reaches 11.118 (clear); 8.8 is far.
  EXPECT_EQ(Undecided({{11.0}, {11.4}, {10.9}, {8.8}}, 0.02), (std::vector<bool>{true, true, false, false}));
}

TEST(UndecidedTest, ARunsOwnSpreadCounts) {
  // 10.0-11.0 reaches 11.22, into the leader's 11.172: a wide run stays undecided.
  EXPECT_EQ(Undecided({{10.0, 11.0}, {11.4, 11.4}}, 0.02), (std::vector<bool>{true, true}));
  EXPECT_EQ(Undecided({{10.0, 10.5}, {11.4, 11.4}}, 0.02), (std::vector<bool>{false, true}));
}

TEST(UndecidedTest, TheDriftIsOnePercentEachWay) {
  // 12.0 widened: [11.88, 12.12]. 11.8 reaches 11.918 (overlaps); 11.7 reaches 11.817 (clear).
  EXPECT_EQ(Undecided({{12.0}, {11.8}, {11.7}}), (std::vector<bool>{true, true, false}));
}

TEST(UndecidedTest, TheLeaderIsTheHighestMedianNotTheHighestRepetition) {
  // Medians 11.0 and 10.5: the first leads; the second's one fast repetition overlaps it.
  EXPECT_EQ(Undecided({{11.0, 11.0, 11.0}, {10.0, 10.5, 12.0}}, 0), (std::vector<bool>{true, true}));
  EXPECT_EQ(Undecided({{11.0, 11.0, 11.0}, {10.0, 10.5, 10.6}}, 0), (std::vector<bool>{true, false}));
}

TEST(UndecidedTest, FailedRunsGetNoMore) {
  EXPECT_EQ(Undecided({{}, {5.0}}), (std::vector<bool>{false, true}));
  EXPECT_EQ(Undecided({{}, {}}), (std::vector<bool>{false, false}));
  EXPECT_TRUE(Undecided({}).empty());
}

}  // namespace
}  // namespace ddplab
