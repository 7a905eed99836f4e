// Where this process stands in a data-parallel job, and its c10d process group.
//
// A worker learns its place from the environment, as torchrun, Slurm and mpirun set it:
// RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE with MASTER_ADDR and MASTER_PORT
// (torchrun and ddplab's launcher; WORLD_SIZE without the others is an error, not a job);
// SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS inside a job step only (SLURM_STEP_ID set:
// an allocation shell is not a job); OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_LOCAL_RANK,
// OMPI_COMM_WORLD_SIZE. A world of one process is a plain run.
//
// The rendezvous (the c10d store through which the ranks find each other) listens on no
// more than it must:
// - ddplab's launcher, on one node, sets DDPLAB_RENDEZVOUS_FILE to a file in a private
//   directory (mode 0700) it removes when the job ends: the ranks meet through a
//   c10d::FileStore there, and nothing listens.
// - under torchrun (TORCHELASTIC_USE_AGENT_STORE=True) the agent already serves a
//   TCPStore at MASTER_ADDR:MASTER_PORT: every rank is its client, under the prefix
//   /worker/attempt_<TORCHELASTIC_RESTART_COUNT>, as torch.distributed's env:// does.
// - otherwise (several nodes, Slurm, mpirun) rank 0 serves a TCPStore at
//   MASTER_ADDR:MASTER_PORT. Where LibTorch's TCPStoreOptions has masterListenFd (2.x)
//   rank 0 binds that address itself, so the store listens there only (across nodes, a
//   MASTER_ADDR that is loopback on rank 0's host is an error); an older LibTorch's
//   store listens on every interface (said once, on several nodes).
// The first that applies wins. A world of one process meets no one: its store is in
// memory.
//
//   absl::StatusOr<ddplab::WorkerEnv> env = ddplab::WorkerEnvFromEnvironment();
//   absl::StatusOr<ddplab::ProcessGroupPtr> group =
//       ddplab::CreateProcessGroup(*env, /*nccl=*/true, std::chrono::seconds(300));

#ifndef DDPLAB_CORE_LAUNCH_DISTRIBUTED_H_
#define DDPLAB_CORE_LAUNCH_DISTRIBUTED_H_

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/engine/process_group.h"  // ProcessGroupPtr, ShutDownProcessGroup
#include "core/torch_compat.h"
#include "ddplab/v1/experiment.pb.h"

namespace ddplab {

struct WorkerEnv {
  std::string launcher = "torchrun";  // what set the variables: torchrun, srun or mpirun
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // DDPLAB_RENDEZVOUS_FILE: meet through a FileStore at this path instead of a TCPStore.
  std::string store_file;
  // TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent serves the TCPStore; meet there
  // as clients, under the prefix of this restart (TORCHELASTIC_RESTART_COUNT).
  bool agent_store = false;
  int restart_count = 0;
};

// The worker's place from the environment; std::nullopt when no launcher set one, or set
// a world of one (a plain run); an error when the variables are there but incomplete or
// inconsistent.
absl::StatusOr<std::optional<WorkerEnv>> WorkerEnvFromEnvironment();

// Whether the ranks span several hosts, as far as the environment tells (Slurm without
// LOCAL_WORLD_SIZE looks like one node).
bool SeveralNodes(const WorkerEnv& env);

// The rendezvous store of `env` (see the top of this file), connected; a rank that
// serves a TCPStore returns once every rank has joined, or fails after `timeout`.
absl::StatusOr<c10::intrusive_ptr<c10d::Store>> OpenRendezvousStore(
    const WorkerEnv& env, std::chrono::milliseconds timeout);

// A TCP socket bound to `address` (a name, an IPv4 or IPv6 address) and `port`, listening,
// close-on-exec; the caller owns it. With `reachable_from_other_hosts`, loopback addresses
// are passed over, and an address that resolves only to loopback is an error.
absl::StatusOr<int> ListenSocket(const std::string& address, int port,
                                 bool reachable_from_other_hosts);

// What distinguishes one process group of a worker from another.
struct GroupOptions {
  // NCCL channels (CTAs) per collective of the group's communicator (ncclConfig_t.maxCTAs);
  // 0: NCCL's choice. Nothing for Gloo.
  int nccl_channels = 0;
};

// Rendezvous (OpenRendezvousStore) and create the NCCL (GPU) or Gloo (CPU) process group.
// Collectives that wait longer than `timeout` fail.
absl::StatusOr<ProcessGroupPtr> CreateProcessGroup(const WorkerEnv& env, bool nccl,
                                                   std::chrono::milliseconds timeout,
                                                   const GroupOptions& options = {});

// As CreateProcessGroup for several groups of the same ranks, one per entry of `groups`,
// through one rendezvous (each group after the first meets under a prefix of its own in
// the store), each with its own communicator. With `store`, the groups meet there (a
// rendezvous already open, e.g. one prefix of it per run of a suite) instead.
absl::StatusOr<std::vector<ProcessGroupPtr>> CreateProcessGroups(
    const WorkerEnv& env, bool nccl, std::chrono::milliseconds timeout,
    const std::vector<GroupOptions>& groups, c10::intrusive_ptr<c10d::Store> store = {});

// `store` under `prefix` (e.g. one per run of a suite, so that each run's process groups
// meet on keys of their own).
c10::intrusive_ptr<c10d::Store> PrefixedStore(const std::string& prefix, c10::intrusive_ptr<c10d::Store> store);

// Returns once all `world` ranks have called it with the same `name` on `store` (each
// once), or fails after `timeout`.
absl::Status StoreBarrier(c10d::Store& store, const std::string& name, int world, std::chrono::milliseconds timeout);


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

#endif  // DDPLAB_CORE_LAUNCH_DISTRIBUTED_H_
