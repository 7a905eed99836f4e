#include "studies/repetitions/repetitions.h"

#include <map>
#include <string>
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

// A lossy run leads (PowerSGD, say, 12.31); the two exact runs 1% apart are the
// recommendation's race until the convergence check has judged: they stay undecided, and
// the exact run far behind them does not.
TEST(UndecidedTest, TheExactRunsRaceAmongThemselvesWhereALossyRunLeads) {
  const std::vector<std::vector<double>> rates = {{12.31}, {11.10}, {10.99}, {8.01}};
  EXPECT_EQ(Undecided(rates), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(Undecided(rates, {false, true, true, true}), (std::vector<bool>{true, true, true, false}));
  // An exact leader: the exact runs' race is the whole one.
  EXPECT_EQ(Undecided(rates, {true, true, true, true}), Undecided(rates));
  // No exact run: the leader's race alone.
  EXPECT_EQ(Undecided(rates, {false, false, false, false}), Undecided(rates));
  // The rounds hand the exact pair their repetitions.
  RepetitionRounds rounds({3, 3, 3, 3}, /*spare=*/true);
  EXPECT_EQ(rounds.Next({}, {}), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(rounds.Next(rates, {}, {false, true, true, true}), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(rounds.spared(), 2);
}

TEST(UndecidedTest, FailedRunsGetNoMore) {
  EXPECT_EQ(Undecided({{}, {5.0}}), (std::vector<bool>{false, true}));
  EXPECT_EQ(Undecided({{}, {}}), (std::vector<bool>{false, false}));
  EXPECT_TRUE(Undecided({}).empty());
}

TEST(LossyContendersTest, LossyRunsFasterThanEveryExactOneBeyondTheDriftFastestFirst) {
  const std::vector<RacedRun> runs = {
      // NVLink: the exact 12.09 leads; no lossy run is faster.
      {"nvlink", "zero_copy", false, {12.08, 12.09, 12.10}},
      {"nvlink", "powersgd_rank1", true, {11.97}},
      {"nvlink", "bf16", true, {11.78}},
      // Host memory: three lossy experiments beat the exact 11.24, fastest first.
      {"host", "zero_copy", false, {11.24}},
      {"host", "bf16", true, {11.30}},  // within the 1% drift: not faster
      {"host", "fp8", true, {11.40}},
      {"host", "powersgd_rank4", true, {11.94}},
      {"host", "powersgd_rank1", true, {11.95, 11.97, 11.96}},
      {"host", "powersgd_rank1", true, {11.50}},  // another run of it (a sweep): its fastest counts
      // A failed run decides nothing.
      {"sockets", "fp8", true, {}},
  };
  const auto contenders = LossyContenders(runs);
  ASSERT_EQ(contenders.size(), 1u);
  EXPECT_EQ(contenders.at("host"), (std::vector<std::string>{"powersgd_rank1", "powersgd_rank4", "fp8"}));
  // Without an exact run in its race, every lossy run contends.
  EXPECT_EQ(LossyContenders({{"sockets", "fp8", true, {3.0}}}).at("sockets"), (std::vector<std::string>{"fp8"}));
  EXPECT_TRUE(LossyContenders({{"host", "bf16", true, {11.30}}, {"host", "exact", false, {11.24}}}).empty());
}

// Every run once; then, round by round, only the runs still undecided against the
// leader, each up to its own count; one found clear is spared the rest of its own.
TEST(RepetitionRoundsTest, EveryRunOnceThenOnlyWhereARepetitionDecides) {
  RepetitionRounds rounds({3, 3, 3, 1}, /*spare=*/true);
  EXPECT_EQ(rounds.Next({}, {}), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(rounds.repetition(), 1);
  // Run 2 is clear of the leader (run 0) beyond the drift; run 3 wanted one repetition.
  EXPECT_EQ(rounds.Next({{12.0}, {11.9}, {10.0}, {11.95}}, {0, 0, 0, 0}), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(rounds.repetition(), 2);
  EXPECT_EQ(rounds.spared(), 2);  // run 2's second and third
  // Now run 1 is clear too: only the leader has a third.
  EXPECT_EQ(rounds.Next({{12.0, 12.1}, {11.5, 11.6}, {10.0}, {11.95}}, {0, 0, 0, 0}), (std::vector<size_t>{0}));
  EXPECT_EQ(rounds.repetition(), 3);
  EXPECT_EQ(rounds.spared(), 3);
  EXPECT_TRUE(rounds.Next({{12.0, 12.1, 12.0}, {11.5, 11.6}, {10.0}, {11.95}}, {0, 0, 0, 0}).empty());
  EXPECT_EQ(rounds.spared(), 3);
}

// Without sparing (--all_repetitions, a job, several nodes) every run gets all of its
// own, interleaved, whatever they measured.
TEST(RepetitionRoundsTest, WithoutSparingEveryRunGetsAllOfItsOwn) {
  RepetitionRounds rounds({2, 3}, /*spare=*/false);
  const std::vector<std::vector<double>> far = {{1.0}, {100.0}};
  EXPECT_EQ(rounds.Next({}, {}), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(rounds.Next(far, {0, 0}), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(rounds.Next(far, {0, 0}), (std::vector<size_t>{1}));
  EXPECT_EQ(rounds.repetition(), 3);
  EXPECT_TRUE(rounds.Next(far, {0, 0}).empty());
  EXPECT_EQ(rounds.spared(), 0);
}

// Repetitions kept from before (--skip_completed) are not run again, and a run whose
// repetitions are all kept is in no further round.
TEST(RepetitionRoundsTest, KeptRepetitionsAreNotRunAgain) {
  RepetitionRounds rounds({3, 3}, /*spare=*/true);
  EXPECT_EQ(rounds.Next({}, {}), (std::vector<size_t>{0, 1}));
  const std::vector<std::vector<double>> close = {{12.0, 12.0}, {12.0, 12.0, 12.0}};
  // Run 0 kept 2 of its 3, run 1 all 3: round 2 has nothing to run, round 3 run 0's third.
  EXPECT_EQ(rounds.Next(close, {2, 3}), (std::vector<size_t>{0}));
  EXPECT_EQ(rounds.repetition(), 3);
  EXPECT_TRUE(rounds.Next(close, {2, 3}).empty());
  EXPECT_EQ(rounds.spared(), 0);
}

// The field: a run of the same race that another pool ran leads, and the pool's own are
// compared with it; a run that failed (nothing measured) gets no more.
TEST(RepetitionRoundsTest, TheFieldLeadsAndAFailedRunGetsNoMore) {
  RepetitionRounds rounds({2, 2}, /*spare=*/true);
  EXPECT_EQ(rounds.Next({}, {}), (std::vector<size_t>{0, 1}));
  // Run 0 at 11.0 is clear of the field's 12.0; run 1 failed.
  EXPECT_TRUE(rounds.Next({{11.0}, {}, {12.0, 12.0}}, {0, 0}).empty());
  EXPECT_EQ(rounds.spared(), 2);
}

}  // namespace
}  // namespace ddplab
