// A run's result as the report's tests need one: a suite's run of `name` over `world`
// processes at `steps_per_s`, through ddplab's engine or not, over NVLink. Tests set
// whatever else they judge on it.
//
//   std::vector<v1::RunResult> runs{testing::RunOf("single_gpu", 1, 12.5, false),
//                                   testing::RunOf("naive_ddp", 2, 11.0, true)};
#ifndef DDPLAB_CORE_REPORT_REPORT_TESTING_H_
#define DDPLAB_CORE_REPORT_REPORT_TESTING_H_

#include <string>

#include "ddplab/v1/result.pb.h"

namespace ddplab::testing {

inline v1::RunResult RunOf(const std::string& name, int world, double steps_per_s, bool engine) {
  v1::RunResult r;
  r.set_suite("s");
  r.set_experiment(name);
  r.set_world_size(world);
  r.set_steps_per_s(steps_per_s);
  r.set_engine(engine);
  r.set_transport("NVLINK");
  return r;
}

}  // namespace ddplab::testing

#endif  // DDPLAB_CORE_REPORT_REPORT_TESTING_H_
