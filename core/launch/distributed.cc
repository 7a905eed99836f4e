#include "core/launch/distributed.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

bool IsLoopback(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr) >> 24) == 127;
  }
  if (addr->sa_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
  }
  return false;
}

std::string Numeric(const addrinfo& a) {
  char host[NI_MAXHOST];
  if (getnameinfo(a.ai_addr, a.ai_addrlen, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) {
    return "?";
  }
  return host;
}

}  // namespace

bool SeveralNodes(const WorkerEnv& env) { return env.world_size > env.local_world_size; }

namespace {

bool IsSet(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0';
}

// The variables of the launcher that started this process, in the order they are read:
// world size, rank, local rank, local world size; none when no launcher did. Slurm's
// count only inside a job step (srun sets SLURM_STEP_ID): an allocation shell (salloc,
// an sbatch script) exports SLURM_NTASKS and SLURM_PROCID too, for a job it has not
// started yet.
struct LauncherVariables {
  const char* launcher;
  const char* world;
  const char* rank;
  const char* local_rank;
  const char* local_world;
};

std::optional<LauncherVariables> FindLauncher() {
  if (IsSet("WORLD_SIZE")) {
    return LauncherVariables{"torchrun", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
  }
  if (IsSet("SLURM_NTASKS") && (IsSet("SLURM_STEP_ID") || IsSet("SLURM_STEPID"))) {
    return LauncherVariables{"srun", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"};
  }
  if (IsSet("OMPI_COMM_WORLD_SIZE")) {
    return LauncherVariables{"mpirun", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                             "OMPI_COMM_WORLD_LOCAL_SIZE"};
  }
  return std::nullopt;
}

// torchrun sets WORLD_SIZE with RANK, MASTER_ADDR and MASTER_PORT (ddplab's launcher
// with RANK and a rendezvous file); WORLD_SIZE without them is left over from another job.
absl::Status CheckTorchrunVariables() {
  std::vector<std::string> missing;
  if (!IsSet("RANK")) missing.push_back("RANK");
  if (!IsSet("DDPLAB_RENDEZVOUS_FILE")) {
    for (const char* name : {"MASTER_ADDR", "MASTER_PORT"}) {
      if (!IsSet(name)) missing.push_back(name);
    }
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "WORLD_SIZE=", std::getenv("WORLD_SIZE"), " is set but ", absl::StrJoin(missing, ", "),
      missing.size() == 1 ? " is" : " are",
      " not: that is not a job a launcher started (torchrun sets all four). Unset WORLD_SIZE to run "
      "here, or start the job with torchrun"));
}

}  // namespace

absl::StatusOr<std::optional<WorkerEnv>> WorkerEnvFromEnvironment() {
  std::optional<LauncherVariables> names = FindLauncher();
  if (!names) return std::optional<WorkerEnv>();
  if (std::string(names->launcher) == "torchrun") {
    if (absl::Status s = CheckTorchrunVariables(); !s.ok()) return s;
  }
  WorkerEnv env;
  env.launcher = names->launcher;
  absl::StatusOr<int> world = IntFromEnv({names->world}, 1, nullptr);
  absl::StatusOr<int> rank = IntFromEnv({names->rank}, 0, nullptr);
  if (!world.ok()) return world.status();
  if (!rank.ok()) return rank.status();
  absl::StatusOr<int> local_rank = IntFromEnv({names->local_rank}, *rank, nullptr);
  absl::StatusOr<int> local_world = IntFromEnv({names->local_world}, *world, nullptr);
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
    return absl::InvalidArgumentError(absl::StrCat(names->rank, " ", env.rank, " is not below ", names->world, " ",
                                                   env.world_size));
  }
  // A job of one process has no one to meet: this is a plain run.
  if (env.world_size == 1) return std::optional<WorkerEnv>();
  if (env.master_port < 1 || env.master_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("MASTER_PORT ", env.master_port,
                                                   " is not a TCP port"));
  }
  if (const char* file = std::getenv("DDPLAB_RENDEZVOUS_FILE"); file != nullptr) env.store_file = file;
  // Exactly Python's str(True), as torch.distributed compares it.
  if (const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
      agent != nullptr && std::string(agent) == "True") {
    absl::StatusOr<int> restart = IntFromEnv({"TORCHELASTIC_RESTART_COUNT"}, 0, nullptr);
    if (!restart.ok()) return restart.status();
    env.agent_store = true;
    env.restart_count = *restart;
  }
  return std::optional<WorkerEnv>(env);
}

absl::StatusOr<int> ListenSocket(const std::string& address, int port,
                                 bool reachable_from_other_hosts) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;  // IPv4 or IPv6, as the address says
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(address.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve \"", address, "\": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owner(found, &freeaddrinfo);
  std::string error;
  std::vector<std::string> loopback;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    // A name of this host can resolve to loopback here (Debian's /etc/hosts maps the
    // hostname to 127.0.1.1) while the other nodes resolve it to the real address: a
    // store bound there would never see them.
    if (reachable_from_other_hosts && IsLoopback(a->ai_addr)) {
      loopback.push_back(Numeric(*a));
      continue;
    }
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = absl::StrCat("socket: ", std::strerror(errno));
      continue;
    }
    // A restarted job can bind the port while connections of the last one linger.
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0) return fd;
    error = absl::StrCat("cannot listen at ", Numeric(*a), " port ", port, ": ", std::strerror(errno));
    close(fd);
  }
  if (error.empty() && !loopback.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "\"", address, "\" is a loopback address on this host (", absl::StrJoin(loopback, ", "),
        "), which other hosts cannot reach: give an address of this host that they can"));
  }
  return absl::UnavailableError(error.empty() ? absl::StrCat("\"", address, "\" has no address") : error);
}

absl::StatusOr<c10::intrusive_ptr<c10d::Store>> OpenRendezvousStore(
    const WorkerEnv& env, std::chrono::milliseconds timeout) {
  const std::string where = env.store_file.empty()
                                ? absl::StrCat(env.master_addr, ":", env.master_port)
                                : env.store_file;
  try {
    if (env.world_size == 1) {
      // No one to meet: nothing to listen on.
      c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::HashStore>();
      store->setTimeout(timeout);
      return store;
    }
    if (!env.store_file.empty()) {
      c10::intrusive_ptr<c10d::Store> store =
          c10::make_intrusive<c10d::FileStore>(env.store_file, env.world_size);
      store->setTimeout(timeout);
      return store;
    }
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(env.master_port);
    // Under torchrun's agent store rank 0 serving too would find the port taken.
    options.isServer = env.rank == 0 && !env.agent_store;
    options.numWorkers = static_cast<std::size_t>(env.world_size);
    options.timeout = timeout;
    if (options.isServer) {
      if (compat::kTcpStoreTakesListenFd) {
        absl::StatusOr<int> fd = ListenSocket(env.master_addr, env.master_port, SeveralNodes(env));
        if (!fd.ok()) {
          return absl::Status(fd.status().code(),
                              absl::StrCat("rank ", env.rank, ": cannot serve the rendezvous at ", where,
                                           " (MASTER_ADDR:MASTER_PORT): ", fd.status().message()));
        }
        compat::SetMasterListenFd(options, *fd);  // the store owns it from here
      } else if (SeveralNodes(env)) {
        static std::once_flag said;
        std::call_once(said, [&] {
          std::cerr << "ddplab: rank 0: this LibTorch's TCPStore listens on every interface, not only on "
                    << env.master_addr << " (LibTorch 2.x, whose TCPStoreOptions has masterListenFd, "
                    << "listens on MASTER_ADDR only)\n";
        });
      }
    }
    auto tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
    if (env.agent_store) {
      // As torch.distributed's env:// rendezvous: each restart of the workers meets under
      // its own prefix of the agent's long-lived store.
      return c10::intrusive_ptr<c10d::Store>(c10::make_intrusive<c10d::PrefixStore>(
          absl::StrCat("/worker/attempt_", env.restart_count), tcp));
    }
    return c10::intrusive_ptr<c10d::Store>(tcp);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("rank ", env.rank, ": rendezvous at ", where,
                                               " failed: ", compat::WhatWithoutBacktrace(e)));
  }
}

namespace {

absl::StatusOr<ProcessGroupPtr> CreateGroupOnStore(const WorkerEnv& env, bool nccl,
                                                   std::chrono::milliseconds timeout,
                                                   const GroupOptions& group,
                                                   const c10::intrusive_ptr<c10d::Store>& store) {
  try {
    if (nccl) {
#if defined(USE_C10D_NCCL)
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = timeout;
      if (group.nccl_channels > 0 && !compat::SetNcclMaxCtas(*nccl_options, group.nccl_channels)) {
        return absl::FailedPreconditionError(
            "this LibTorch's ProcessGroupNCCL takes no NCCL configuration (ncclConfig_t): "
            "it cannot cap one communicator's channels; leave nccl_channels out");
      }
      return ProcessGroupPtr(
          c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.world_size, nccl_options));
#else
      (void)group;
      return absl::FailedPreconditionError("this build has no NCCL (a CPU build)");
#endif
    }
#if defined(USE_C10D_GLOO)
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
    // On one node Gloo talks over loopback; across nodes over the host's own interface.
    // A rendezvous file means ddplab's launcher on one node.
    bool loopback = !env.store_file.empty() || env.master_addr == "127.0.0.1" ||
                    env.master_addr == "localhost";
    gloo_options->devices.push_back(loopback
                                        ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                        : c10d::ProcessGroupGloo::createDefaultDevice());
    return ProcessGroupPtr(
        c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, gloo_options));
#else
    (void)store;
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

}  // namespace

absl::StatusOr<std::vector<ProcessGroupPtr>> CreateProcessGroups(
    const WorkerEnv& env, bool nccl, std::chrono::milliseconds timeout,
    const std::vector<GroupOptions>& groups, c10::intrusive_ptr<c10d::Store> given) {
  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store =
      given ? absl::StatusOr<c10::intrusive_ptr<c10d::Store>>(given) : OpenRendezvousStore(env, timeout);
  if (!store.ok()) return store.status();
  std::vector<ProcessGroupPtr> out;
  for (size_t k = 0; k < groups.size(); ++k) {
    // Each group keys its communicator's rendezvous by a counter of its own: a second
    // group on the same keys would meet the first's.
    c10::intrusive_ptr<c10d::Store> own = *store;
    if (k > 0) own = c10::make_intrusive<c10d::PrefixStore>(absl::StrCat("ddplab_group_", k), *store);
    absl::StatusOr<ProcessGroupPtr> group = CreateGroupOnStore(env, nccl, timeout, groups[k], own);
    if (!group.ok()) return group.status();
    out.push_back(*std::move(group));
  }
  return out;
}

absl::StatusOr<ProcessGroupPtr> CreateProcessGroup(const WorkerEnv& env, bool nccl,
                                                   std::chrono::milliseconds timeout,
                                                   const GroupOptions& options) {
  absl::StatusOr<std::vector<ProcessGroupPtr>> groups =
      CreateProcessGroups(env, nccl, timeout, {options});
  if (!groups.ok()) return groups.status();
  return groups->front();
}

c10::intrusive_ptr<c10d::Store> PrefixedStore(const std::string& prefix, c10::intrusive_ptr<c10d::Store> store) {
  return c10::make_intrusive<c10d::PrefixStore>(prefix, std::move(store));
}

absl::Status StoreBarrier(c10d::Store& store, const std::string& name, int world, std::chrono::milliseconds timeout) {
  try {
    if (store.add(name + "/arrived", 1) == world) store.set(name + "/all", std::vector<uint8_t>{1});
    store.wait({name + "/all"}, timeout);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::DeadlineExceededError(
        absl::StrCat("waiting for every rank at ", name, " failed: ", compat::WhatWithoutBacktrace(e)));
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
