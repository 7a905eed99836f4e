#include "studies/convergence/check_walk.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ddplab {

CheckWalk::CheckWalk(std::vector<CheckCandidate> candidates, std::map<std::string, std::vector<std::string>> contenders,
                     bool every, int max_lossy_checked)
    : candidates_(std::move(candidates)),
      contenders_(every ? decltype(contenders_)() : std::move(contenders)),
      every_(every),
      max_lossy_checked_(max_lossy_checked) {}

std::vector<size_t> CheckWalk::First() {
  std::set<std::string> chosen;  // the lossy origins to check first: each race's would-be recommendation
  for (const auto& [race, origins] : contenders_) chosen.insert(origins.front());
  std::vector<size_t> batch;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const CheckCandidate& c = candidates_[i];
    if (c.exact || every_ || chosen.count(c.origin) > 0) {
      batch.push_back(i);
    } else {
      left_.push_back(c.origin);
    }
  }
  if (batch.size() == 1 && candidates_[batch.front()].exact) batch.clear();  // nothing to compare with it
  // What may still run down the list stays in the total until the walk ends.
  reachable_ = static_cast<int>(batch.size());
  for (const auto& [race, origins] : contenders_) {
    reachable_ += std::min(static_cast<int>(origins.size()), max_lossy_checked_) - 1;
    taken_[race] = 1;
  }
  if (batch.empty()) reachable_ = 0;
  checked_ = static_cast<int>(batch.size());
  return batch;
}

std::vector<size_t> CheckWalk::Next(const std::map<std::string, bool>& worse) {
  std::vector<size_t> batch;
  if (checked_ == 0) return batch;
  for (const auto& [race, origins] : contenders_) {
    size_t& k = taken_[race];
    auto last = worse.find(origins[k - 1]);
    if (last == worse.end() || !last->second || k >= origins.size() || static_cast<int>(k) >= max_lossy_checked_) {
      continue;
    }
    for (size_t i = 0; i < candidates_.size(); ++i) {
      if (candidates_[i].exact || candidates_[i].origin != origins[k]) continue;
      batch.push_back(i);
      left_.erase(std::remove(left_.begin(), left_.end(), origins[k]), left_.end());
      said_.push_back(absl::StrCat(origins[k - 1], " trains worse, and ", origins[k],
                                   " is the next lossy configuration faster than every exact one there"));
    }
    ++k;
  }
  checked_ += static_cast<int>(batch.size());
  return batch;
}

std::vector<std::string> CheckWalk::TakeSaid() { return std::exchange(said_, {}); }

}  // namespace ddplab
