// Where this process stands in a data-parallel job, and its c10d process group.
//
// A worker learns its place from the environment, as torchrun, Slurm and mpirun set it:
// RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE (torchrun and ddplab's launcher);
// SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS; OMPI_COMM_WORLD_RANK,
// OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_SIZE. MASTER_ADDR and MASTER_PORT name
// the rendezvous: rank 0 serves a c10d TCPStore there and every rank connects to it.
//
//   absl::StatusOr<ddplab::WorkerEnv> env = ddplab::WorkerEnvFromEnvironment();
//   absl::StatusOr<ddplab::ProcessGroupPtr> group =
//       ddplab::CreateProcessGroup(*env, /*nccl=*/true, std::chrono::seconds(300));

#ifndef DDPLAB_CORE_DISTRIBUTED_H_
#define DDPLAB_CORE_DISTRIBUTED_H_

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/torch_compat.h"
#include "ddplab/v1/experiment.pb.h"

namespace ddplab {

struct WorkerEnv {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};

// The worker's place from the environment; std::nullopt when no launcher set one (a
// plain run); an error when the variables are there but inconsistent.
absl::StatusOr<std::optional<WorkerEnv>> WorkerEnvFromEnvironment();

using ProcessGroupPtr = c10::intrusive_ptr<compat::CollectiveGroup>;

// Rendezvous through a TCPStore at env.master_addr:master_port and create the NCCL
// (GPU) or Gloo (CPU) process group. Collectives that wait longer than `timeout` fail.
absl::StatusOr<ProcessGroupPtr> CreateProcessGroup(const WorkerEnv& env, bool nccl,
                                                   std::chrono::milliseconds timeout);

using EnvironmentList = std::vector<std::pair<std::string, std::string>>;

// NCCL's environment for an experiment: its transport's variables (host memory:
// NCCL_P2P_DISABLE=1; network: also NCCL_SHM_DISABLE=1), then its nccl_env entries.
EnvironmentList NcclEnvironment(const v1::Distributed& distributed);

// Sets variables for its lifetime and restores what was there before (set or not).
class ScopedEnvironment {
 public:
  explicit ScopedEnvironment(const EnvironmentList& variables);
  ~ScopedEnvironment();
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_DISTRIBUTED_H_
