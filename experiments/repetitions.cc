#include "experiments/repetitions.h"

#include <algorithm>

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

}  // namespace ddplab
