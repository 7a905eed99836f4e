// Which runs of a transport a further repetition still decides something for.
//
//   // steps/s of each run's repetitions so far (none: the run failed)
//   std::vector<std::vector<double>> rates = {{11.30, 11.41}, {8.80}, {11.35}};
//   std::vector<bool> more = ddplab::Undecided(rates);   // {true, false, true}
//
// Note [Repetitions that decide]
// A suite repeats its runs to tell apart those that are close. Every run is run once;
// a further repetition, up to its steps.repetitions, goes only to the runs whose spread
// overlaps the leader's among the runs of their transport and process count (whichever
// pool of workers ran them: an NCCL setting starts workers of its own, not a race of its
// own): the leader itself (the highest median steps/s) and those that could still be it
// or tie with it; and the same among the exact runs alone (no lossy plugin), where a lossy
// run leads: the recommendation is raced among the exact runs until the convergence
// check has judged a lossy one (core/report/recommend.cc), and a race whose runs ran once
// each names no winner. A spread is
// [min, max] of a run's repetitions, widened by kDrift each way: the drift from run to
// run over a suite on one machine, which a run's own one or two repetitions cannot
// show. A run clear of the leader keeps the repetitions it has: its place and its ratio
// to the leader hold whatever the noise. Repetitions stay interleaved (every undecided
// run, then again), and the report says how many each run got.
#ifndef DDPLAB_STUDIES_REPETITIONS_REPETITIONS_H_
#define DDPLAB_STUDIES_REPETITIONS_REPETITIONS_H_

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace ddplab {

// Run-to-run drift over a suite, relative: 1%. On 2 H200 (bench/NOTES.md, "The default
// command in minutes") 15 of 19 runs' three repetitions lay within 0.2% of each other;
// the other four had one slow repetition each, which lowers a run, never raises it.
// Two runs within about 2% of each other are still told apart by further repetitions.
inline constexpr double kDrift = 0.01;

// Per run (in the order of `steps_per_s`), whether its spread overlaps the leader's; with
// `exact` (per run, no lossy plugin), also whether an exact run's overlaps the fastest
// exact run's.
std::vector<bool> Undecided(const std::vector<std::vector<double>>& steps_per_s, double drift = kDrift);
std::vector<bool> Undecided(const std::vector<std::vector<double>>& steps_per_s, const std::vector<bool>& exact,
                            double drift = kDrift);

// The rounds of one transport's runs (Note [Repetitions that decide]): every run once,
// then further repetitions, interleaved, for those a repetition still decides. The
// study decides each round; the suite trains the runs it is handed and hands back what
// they measured.
//
//   ddplab::RepetitionRounds rounds({3, 3, 1}, /*spare=*/true);   // steps.repetitions
//   for (std::vector<size_t> round = rounds.Next({}, {}); !round.empty();
//        round = rounds.Next(steps_per_s, kept)) {
//     for (size_t i : round) Train(i, rounds.repetition());
//   }
class RepetitionRounds {
 public:
  // `wanted[i]`: run i's repetitions (at least 1). `spare`: further repetitions only where
  // they decide (Undecided); false: every run gets all of its own (--all_repetitions, a
  // job, several nodes).
  RepetitionRounds(std::vector<int> wanted, bool spare);
  // The runs of the next round (indices into `wanted`), in order; empty when done.
  // `steps_per_s`: per run, its repetitions so far (empty: none, or it failed or is a
  // diagnostic run, which leads nothing); entries after the runs' own are the rest of
  // their field (runs of the same race that other pools ran), compared with them but
  // never handed out. `kept[i]`: run i's repetitions kept from before (--skip_completed),
  // known once its first repetition ran. `exact[i]`: entry i of `steps_per_s` has no lossy
  // plugin (empty: not known, the leader's race alone decides).
  std::vector<size_t> Next(const std::vector<std::vector<double>>& steps_per_s, const std::vector<int>& kept,
                           const std::vector<bool>& exact = {});
  // The repetition the runs of the last round run (from 1).
  int repetition() const { return repetition_; }
  // Repetitions wanted that no round will run: their run was found clear of the leader.
  int spared() const { return spared_; }

 private:
  std::vector<int> wanted_;
  bool spare_;
  int most_ = 1;
  int repetition_ = 0;
  std::vector<bool> settled_;  // clear of the leader: no more rounds
  int spared_ = 0;
};

// Note [Checks that decide]
// The convergence check (core/config/convergence.h) trains each configuration it checks
// from every seed, for many steps: on 2 GPUs, ViT-L/32's check of five lossy
// configurations took longer than the rest of the seed study. Its verdict decides one
// thing, whether a lossy configuration may be the recommendation; one that is not faster
// than the fastest exact configuration of its transport (beyond kDrift) cannot be. So by
// default the check trains, for each transport and process count, the fastest lossy
// configuration where it is faster than every exact one: the one the recommendation would
// be. Where it is judged worse the recommendation is the fastest exact configuration; the
// slower lossy ones are said to be left out, not checked one after another (each costs
// about a minute on 2 GPUs, and the default study must answer in minutes), and
// `convergence { every_lossy: true }` checks each.
struct RacedRun {
  std::string race;    // the runs compared: transport and process count
  std::string origin;  // the experiment it comes from
  bool lossy = false;
  std::vector<double> steps_per_s;  // its repetitions (none: it failed)
};
// By race, the experiments (origins) with a lossy run faster than every exact run there
// beyond `drift` (medians), fastest first.
std::map<std::string, std::vector<std::string>> LossyContenders(const std::vector<RacedRun>& runs,
                                                                double drift = kDrift);

}  // namespace ddplab

#endif  // DDPLAB_STUDIES_REPETITIONS_REPETITIONS_H_
