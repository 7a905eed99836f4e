#include "core/distributed.h"

#include <cstdlib>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#if defined(USE_C10D_GLOO)
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if defined(USE_C10D_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace ddplab {
namespace {

// The first of `names` that is set, as an integer; `fallback` when none is.
absl::StatusOr<int> IntFromEnv(std::initializer_list<const char*> names, int fallback, bool* found) {
  for (const char* name : names) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    int n;
    if (!absl::SimpleAtoi(value, &n) || n < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable ", name, "=\"", value, "\" is not a whole number >= 0"));
    }
    if (found) *found = true;
    return n;
  }
  return fallback;
}

}  // namespace

absl::StatusOr<std::optional<WorkerEnv>> WorkerEnvFromEnvironment() {
  bool has_world = false, has_rank = false;
  WorkerEnv env;
  absl::StatusOr<int> world =
      IntFromEnv({"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"}, 1, &has_world);
  absl::StatusOr<int> rank =
      IntFromEnv({"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"}, 0, &has_rank);
  if (!world.ok()) return world.status();
  if (!rank.ok()) return rank.status();
  if (!has_world) return std::optional<WorkerEnv>();
  absl::StatusOr<int> local_rank =
      IntFromEnv({"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"}, *rank, nullptr);
  absl::StatusOr<int> local_world =
      IntFromEnv({"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}, *world, nullptr);
  absl::StatusOr<int> port = IntFromEnv({"MASTER_PORT"}, 29500, nullptr);
  for (const absl::StatusOr<int>* s : {&local_rank, &local_world, &port}) {
    if (!s->ok()) return s->status();
  }
  env.world_size = *world;
  env.rank = *rank;
  env.local_rank = *local_rank;
  env.local_world_size = *local_world;
  env.master_port = *port;
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0') {
    env.master_addr = addr;
  }
  if (env.world_size < 1 || env.rank >= env.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("RANK ", env.rank, " is not below WORLD_SIZE ",
                                                   env.world_size));
  }
  if (env.master_port < 1 || env.master_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("MASTER_PORT ", env.master_port,
                                                   " is not a TCP port"));
  }
  return std::optional<WorkerEnv>(env);
}

absl::StatusOr<ProcessGroupPtr> CreateProcessGroup(const WorkerEnv& env, bool nccl,
                                                   std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(env.master_port);
  options.isServer = env.rank == 0;
  options.numWorkers = static_cast<std::size_t>(env.world_size);
  options.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("rank ", env.rank, ": rendezvous at ",
                                               env.master_addr, ":", env.master_port,
                                               " failed: ", compat::WhatWithoutBacktrace(e)));
  }
  try {
    if (nccl) {
#if defined(USE_C10D_NCCL)
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = timeout;
      return ProcessGroupPtr(
          c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.world_size, nccl_options));
#else
      return absl::FailedPreconditionError("this build has no NCCL (a CPU build)");
#endif
    }
#if defined(USE_C10D_GLOO)
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
    // On one node Gloo talks over loopback; across nodes over the host's own interface.
    bool loopback = env.master_addr == "127.0.0.1" || env.master_addr == "localhost";
    gloo_options->devices.push_back(loopback
                                        ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                        : c10d::ProcessGroupGloo::createDefaultDevice());
    return ProcessGroupPtr(
        c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, gloo_options));
#else
    return absl::FailedPreconditionError(
        "this build has no Gloo (its LibTorch ships no Gloo headers): CPU runs of several "
        "processes need a LibTorch with Gloo");
#endif
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("rank ", env.rank, ": creating the ", nccl ? "NCCL" : "Gloo",
                     " process group failed: ", compat::WhatWithoutBacktrace(e)));
  }
}

EnvironmentList NcclEnvironment(const v1::Distributed& distributed) {
  EnvironmentList env;
  switch (distributed.transport()) {
    case v1::Distributed::HOST_MEMORY:
      env = {{"NCCL_P2P_DISABLE", "1"}};
      break;
    case v1::Distributed::NETWORK:
      env = {{"NCCL_P2P_DISABLE", "1"}, {"NCCL_SHM_DISABLE", "1"}};
      break;
    default:
      break;
  }
  for (const v1::EnvironmentVariable& var : distributed.nccl_env()) {
    env.emplace_back(var.name(), var.value());
  }
  return env;
}

ScopedEnvironment::ScopedEnvironment(const EnvironmentList& variables) {
  for (const auto& [name, value] : variables) {
    const char* before = std::getenv(name.c_str());
    saved_.emplace_back(name, before ? std::optional<std::string>(before) : std::nullopt);
    setenv(name.c_str(), value.c_str(), /*overwrite=*/1);
  }
}

ScopedEnvironment::~ScopedEnvironment() {
  // In reverse, so that a name set twice ends as it was before the first.
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
    if (it->second) {
      setenv(it->first.c_str(), it->second->c_str(), 1);
    } else {
      unsetenv(it->first.c_str());
    }
  }
}

}  // namespace ddplab
