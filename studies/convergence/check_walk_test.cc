#include "studies/convergence/check_walk.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ddplab {
namespace {

std::vector<CheckCandidate> Candidates() {
  return {{"exact", true}, {"psgd", false}, {"bf16", false}, {"fp8", false}};
}

// Note [Down the list]: the would-be recommendation first; the next one of its race only
// where it is judged worse, up to max_lossy_checked of the race.
TEST(CheckWalkTest, GoesDownTheListWhileTheLastIsWorse) {
  CheckWalk walk(Candidates(), {{"nvlink", {"psgd", "bf16", "fp8"}}}, /*every=*/false, /*max_lossy_checked=*/3);
  EXPECT_EQ(walk.First(), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(walk.reachable(), 4);
  EXPECT_EQ(walk.left(), (std::vector<std::string>{"bf16", "fp8"}));
  EXPECT_EQ(walk.Next({{"psgd", true}}), (std::vector<size_t>{2}));
  std::vector<std::string> said = walk.TakeSaid();
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0], "psgd trains worse, and bf16 is the next lossy configuration faster than every exact one there");
  EXPECT_TRUE(walk.TakeSaid().empty());
  EXPECT_EQ(walk.left(), (std::vector<std::string>{"fp8"}));
  // bf16 within: the walk ends, fp8 never checked.
  EXPECT_TRUE(walk.Next({{"psgd", true}, {"bf16", false}}).empty());
  EXPECT_EQ(walk.checked(), 3);
  EXPECT_EQ(walk.left(), (std::vector<std::string>{"fp8"}));
}

TEST(CheckWalkTest, StopsAtTheRacesLimitAndWhereNoVerdictIsGiven) {
  CheckWalk limited(Candidates(), {{"nvlink", {"psgd", "bf16", "fp8"}}}, false, /*max_lossy_checked=*/2);
  limited.First();
  EXPECT_EQ(limited.reachable(), 3);
  EXPECT_EQ(limited.Next({{"psgd", true}}), (std::vector<size_t>{2}));
  EXPECT_TRUE(limited.Next({{"psgd", true}, {"bf16", true}}).empty());  // 2 of the race checked
  CheckWalk unjudged(Candidates(), {{"nvlink", {"psgd", "bf16"}}}, false, 3);
  unjudged.First();
  EXPECT_TRUE(unjudged.Next({}).empty());  // the reference could not judge psgd
}

TEST(CheckWalkTest, EachRaceWalksOnItsOwn) {
  std::vector<CheckCandidate> candidates = Candidates();
  candidates.push_back({"fp8_host", false});
  candidates.push_back({"bf16_host", false});
  CheckWalk walk(candidates, {{"host", {"fp8_host", "bf16_host"}}, {"nvlink", {"psgd", "fp8"}}}, false, 3);
  EXPECT_EQ(walk.First(), (std::vector<size_t>{0, 1, 4}));
  // host's first within, nvlink's worse: nvlink goes on, host stops.
  EXPECT_EQ(walk.Next({{"fp8_host", false}, {"psgd", true}}), (std::vector<size_t>{3}));
  EXPECT_EQ(walk.left(), (std::vector<std::string>{"bf16", "bf16_host"}));
}

TEST(CheckWalkTest, EveryLossyAtOnceOrNothingToCompare) {
  CheckWalk every(Candidates(), {{"nvlink", {"psgd"}}}, /*every=*/true, 3);
  EXPECT_EQ(every.First(), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_TRUE(every.left().empty());
  EXPECT_TRUE(every.Next({{"psgd", true}}).empty());
  // No lossy configuration beats an exact one: the reference alone trains nothing.
  CheckWalk none(Candidates(), {}, false, 3);
  EXPECT_TRUE(none.First().empty());
  EXPECT_EQ(none.reachable(), 0);
  EXPECT_EQ(none.left(), (std::vector<std::string>{"psgd", "bf16", "fp8"}));
}

}  // namespace
}  // namespace ddplab
