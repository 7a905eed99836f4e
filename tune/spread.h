// Step times over a run's repetitions, and how far they spread: what the tuner compares
// candidates by (a gain counts only beyond both spreads' half-widths).
//
//   v1::Spread ms = ddplab::tune::StepSpread(result);           // median, min, max, count
//   bool faster = a.median() / b.median() - 1 > HalfWidth(a) + HalfWidth(b);
#ifndef DDPLAB_TUNE_SPREAD_H_
#define DDPLAB_TUNE_SPREAD_H_

#include "ddplab/v1/report.pb.h"
#include "ddplab/v1/result.pb.h"

namespace ddplab::tune {

// Step times in ms over a result's repetitions (its own figure where it records none).
v1::Spread StepSpread(const v1::RunResult& r);

// Half of the spread's range, relative to its median (0 for an empty spread).
inline double HalfWidth(const v1::Spread& s) { return s.median() > 0 ? (s.max() - s.min()) / 2 / s.median() : 0; }

}  // namespace ddplab::tune

#endif  // DDPLAB_TUNE_SPREAD_H_
