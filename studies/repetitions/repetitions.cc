#include "studies/repetitions/repetitions.h"

#include <algorithm>
#include <map>
#include <utility>

namespace ddplab {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Undecided over the runs `in` takes (all where it is empty): the rest are never marked.
std::vector<bool> Overlapping(const std::vector<std::vector<double>>& steps_per_s, const std::vector<bool>& in,
                              double drift) {
  std::vector<bool> more(steps_per_s.size(), false);
  const auto taken = [&](size_t i) { return !steps_per_s[i].empty() && (in.empty() || (i < in.size() && in[i])); };
  int leader = -1;
  double best = 0;
  for (size_t i = 0; i < steps_per_s.size(); ++i) {
    if (!taken(i)) continue;
    if (const double m = Median(steps_per_s[i]); leader < 0 || m > best) {
      leader = static_cast<int>(i);
      best = m;
    }
  }
  if (leader < 0) return more;
  const std::vector<double>& lead = steps_per_s[leader];
  const double lead_low = *std::min_element(lead.begin(), lead.end()) * (1 - drift);
  const double lead_high = *std::max_element(lead.begin(), lead.end()) * (1 + drift);
  for (size_t i = 0; i < steps_per_s.size(); ++i) {
    if (!taken(i)) continue;
    const std::vector<double>& r = steps_per_s[i];
    const double low = *std::min_element(r.begin(), r.end()) * (1 - drift);
    const double high = *std::max_element(r.begin(), r.end()) * (1 + drift);
    more[i] = low <= lead_high && high >= lead_low;
  }
  return more;
}

}  // namespace

std::vector<bool> Undecided(const std::vector<std::vector<double>>& steps_per_s, double drift) {
  return Overlapping(steps_per_s, {}, drift);
}

std::vector<bool> Undecided(const std::vector<std::vector<double>>& steps_per_s, const std::vector<bool>& exact,
                            double drift) {
  std::vector<bool> more = Overlapping(steps_per_s, {}, drift);
  if (std::find(exact.begin(), exact.end(), true) == exact.end()) return more;
  const std::vector<bool> among_exact = Overlapping(steps_per_s, exact, drift);
  for (size_t i = 0; i < more.size(); ++i) more[i] = more[i] || among_exact[i];
  return more;
}

RepetitionRounds::RepetitionRounds(std::vector<int> wanted, bool spare)
    : wanted_(std::move(wanted)), spare_(spare), settled_(wanted_.size(), false) {
  for (int w : wanted_) most_ = std::max(most_, w);
}

std::vector<size_t> RepetitionRounds::Next(const std::vector<std::vector<double>>& steps_per_s,
                                           const std::vector<int>& kept, const std::vector<bool>& exact) {
  while (++repetition_ <= most_) {
    std::vector<bool> more =
        repetition_ > 1 && spare_ ? Undecided(steps_per_s, exact) : std::vector<bool>(wanted_.size(), true);
    more.resize(wanted_.size(), false);  // the runs' own; one never measured decides nothing
    std::vector<size_t> round;
    for (size_t i = 0; i < wanted_.size(); ++i) {
      const int before = i < kept.size() ? kept[i] : 0;
      if (repetition_ > wanted_[i] || repetition_ <= before || settled_[i]) continue;
      if (!more[i]) {
        settled_[i] = true;
        spared_ += wanted_[i] - std::max(repetition_ - 1, before);
        continue;
      }
      round.push_back(i);
    }
    if (!round.empty()) return round;
  }
  return {};
}

std::map<std::string, std::vector<std::string>> LossyContenders(const std::vector<RacedRun>& runs, double drift) {
  std::map<std::string, double> exact;                                    // the fastest exact median, by race
  std::map<std::string, std::map<std::string, double>> lossy;            // each origin's fastest, by race
  for (const RacedRun& r : runs) {
    if (r.steps_per_s.empty()) continue;
    const double m = Median(r.steps_per_s);
    double& best = r.lossy ? lossy[r.race][r.origin] : exact[r.race];
    best = std::max(best, m);
  }
  std::map<std::string, std::vector<std::string>> contenders;
  for (const auto& [race, origins] : lossy) {
    std::vector<std::pair<double, std::string>> faster;
    for (const auto& [origin, m] : origins) {
      if (m > exact[race] * (1 + drift)) faster.emplace_back(m, origin);
    }
    std::sort(faster.rbegin(), faster.rend());
    for (const auto& f : faster) contenders[race].push_back(f.second);
  }
  return contenders;
}

}  // namespace ddplab
