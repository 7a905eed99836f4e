#include "experiments/repetitions.h"

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

}  // namespace

std::vector<bool> Undecided(const std::vector<std::vector<double>>& steps_per_s, double drift) {
  std::vector<bool> more(steps_per_s.size(), false);
  int leader = -1;
  double best = 0;
  for (size_t i = 0; i < steps_per_s.size(); ++i) {
    if (steps_per_s[i].empty()) continue;
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
    const std::vector<double>& r = steps_per_s[i];
    if (r.empty()) continue;
    const double low = *std::min_element(r.begin(), r.end()) * (1 - drift);
    const double high = *std::max_element(r.begin(), r.end()) * (1 + drift);
    more[i] = low <= lead_high && high >= lead_low;
  }
  return more;
}

std::set<std::string> DecidingLossy(const std::vector<RacedRun>& runs, double drift) {
  std::map<std::string, double> exact;                              // the fastest exact median, by race
  std::map<std::string, std::pair<double, std::string>> lossy;     // the fastest lossy, by race
  for (const RacedRun& r : runs) {
    if (r.steps_per_s.empty()) continue;
    const double m = Median(r.steps_per_s);
    if (!r.lossy) {
      exact[r.race] = std::max(exact[r.race], m);
    } else if (auto it = lossy.find(r.race); it == lossy.end() || m > it->second.first) {
      lossy[r.race] = {m, r.origin};
    }
  }
  std::set<std::string> deciding;
  for (const auto& [race, best] : lossy) {
    if (best.first > exact[race] * (1 + drift)) deciding.insert(best.second);
  }
  return deciding;
}

}  // namespace ddplab
