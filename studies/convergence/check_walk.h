// Which configurations the convergence check trains, and in which order: the study's
// decision (Note [Checks that decide], studies/repetitions/repetitions.h; Note [Down the
// list] below). The suite trains each batch it is handed and reports the verdicts back.
//
//   ddplab::CheckWalk walk(candidates, contenders, /*every=*/false, /*max_lossy_checked=*/3);
//   for (std::vector<size_t> batch = walk.First(); !batch.empty(); batch = walk.Next(judged_worse())) {
//     for (const std::string& why : walk.TakeSaid()) std::cout << why;
//     Train(batch);   // indices into candidates
//   }
//   walk.left();      // the lossy configurations never checked, to say so
//
// Note [Down the list]
// By default the check trains, per race (transport and process count), the fastest lossy
// configuration that beats every exact one there: the would-be recommendation. Where it
// is judged worse, the next lossy one that still beats every exact one would be the
// recommendation, and the check trains it next, and so on down the list, until one is
// within, none is left, or `max_lossy_checked` of the race are checked. The
// recommendation is then the fastest that is exact or judged within
// (core/report/recommend.cc). A job of several processes checks every lossy configuration
// at once instead: its ranks would each have to agree on the verdicts.
#ifndef DDPLAB_STUDIES_CONVERGENCE_CHECK_WALK_H_
#define DDPLAB_STUDIES_CONVERGENCE_CHECK_WALK_H_

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace ddplab {

// A configuration the check may train: the exact reference, or a lossy one.
struct CheckCandidate {
  std::string origin;  // the experiment it comes from
  bool exact = false;
};

class CheckWalk {
 public:
  // `contenders`: by race, the lossy origins faster than every exact one there, fastest
  // first (LossyContenders). `every`: check each lossy candidate at once.
  CheckWalk(std::vector<CheckCandidate> candidates, std::map<std::string, std::vector<std::string>> contenders,
            bool every, int max_lossy_checked);
  // The first batch: the reference and each race's would-be recommendation (or every
  // lossy candidate); empty when there is nothing to compare with the reference.
  std::vector<size_t> First();
  // After the batches so far were judged (by origin: true where worse, false where
  // within; absent where the reference cannot judge): the next lossy candidate of each
  // race whose last checked one is worse; empty when the walk ends.
  std::vector<size_t> Next(const std::map<std::string, bool>& worse);
  // Why each candidate of the last batch down the list trains, to say; emptied.
  std::vector<std::string> TakeSaid();
  const std::vector<std::string>& left() const { return left_; }  // lossy origins not checked
  // The most candidates the walk may check (the progress line's total), and those it did.
  int reachable() const { return reachable_; }
  int checked() const { return checked_; }

 private:
  std::vector<CheckCandidate> candidates_;
  std::map<std::string, std::vector<std::string>> contenders_;
  bool every_;
  int max_lossy_checked_;
  std::map<std::string, size_t> taken_;  // by race: how many of its contenders checked
  std::vector<std::string> left_, said_;
  int reachable_ = 0, checked_ = 0;
};

}  // namespace ddplab

#endif  // DDPLAB_STUDIES_CONVERGENCE_CHECK_WALK_H_
