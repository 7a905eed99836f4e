// Step times over a run's repetitions (tune/spread.h).
#include "tune/spread.h"

#include <algorithm>
#include <vector>

namespace ddplab::tune {

v1::Spread StepSpread(const v1::RunResult& r) {
  std::vector<double> ms;
  for (const v1::Repetition& rep : r.repetitions()) {
    if (rep.steps_per_s() > 0) ms.push_back(1e3 / rep.steps_per_s());
  }
  if (ms.empty() && r.steps_per_s() > 0) ms.push_back(1e3 / r.steps_per_s());
  v1::Spread s;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  s.set_median(n % 2 == 1 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2);
  s.set_min(ms.front());
  s.set_max(ms.back());
  s.set_count(static_cast<uint32_t>(n));
  return s;
}

}  // namespace ddplab::tune
