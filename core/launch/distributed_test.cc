#include "core/launch/distributed.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "core/launch/launcher.h"
#include "core/testing/gloo.h"
#include "gtest/gtest.h"

namespace ddplab {
namespace {

class WorkerEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                             "MASTER_PORT", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_STEP_ID", "SLURM_STEPID",
                             "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE",
                             "OMPI_COMM_WORLD_LOCAL_SIZE", "DDPLAB_RENDEZVOUS_FILE",
                             "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT"}) {
      unsetenv(name);
    }
  }
};

TEST_F(WorkerEnvTest, NoLauncherMeansAPlainRun) {
  absl::StatusOr<std::optional<WorkerEnv>> env = WorkerEnvFromEnvironment();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_FALSE(env->has_value());
}

TEST_F(WorkerEnvTest, ReadsTorchrunsVariables) {
  setenv("RANK", "5", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("LOCAL_WORLD_SIZE", "4", 1);
  setenv("MASTER_ADDR", "10.0.0.1", 1);
  setenv("MASTER_PORT", "29400", 1);
  absl::StatusOr<std::optional<WorkerEnv>> env = WorkerEnvFromEnvironment();
  ASSERT_TRUE(env.ok() && env->has_value()) << env.status();
  EXPECT_EQ((*env)->rank, 5);
  EXPECT_EQ((*env)->local_rank, 1);
  EXPECT_EQ((*env)->world_size, 8);
  EXPECT_EQ((*env)->local_world_size, 4);
  EXPECT_EQ((*env)->master_addr, "10.0.0.1");
  EXPECT_EQ((*env)->master_port, 29400);
  EXPECT_EQ((*env)->store_file, "");
  EXPECT_FALSE((*env)->agent_store);
}

TEST_F(WorkerEnvTest, ReadsTheRendezvousFileAndTorchrunsAgentStore) {
  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "1", 1);
  setenv("DDPLAB_RENDEZVOUS_FILE", "/tmp/ddplab-rendezvous-abc/store", 1);
  absl::StatusOr<std::optional<WorkerEnv>> env = WorkerEnvFromEnvironment();
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29400", 1);
  ASSERT_TRUE(env.ok() && env->has_value()) << env.status();
  EXPECT_EQ((*env)->store_file, "/tmp/ddplab-rendezvous-abc/store");
  EXPECT_FALSE((*env)->agent_store);

  unsetenv("DDPLAB_RENDEZVOUS_FILE");
  setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  setenv("TORCHELASTIC_RESTART_COUNT", "3", 1);
  env = WorkerEnvFromEnvironment();
  ASSERT_TRUE(env.ok() && env->has_value()) << env.status();
  EXPECT_EQ((*env)->store_file, "");
  EXPECT_TRUE((*env)->agent_store);
  EXPECT_EQ((*env)->restart_count, 3);

  unsetenv("TORCHELASTIC_RESTART_COUNT");
  env = WorkerEnvFromEnvironment();
  ASSERT_TRUE(env.ok() && env->has_value()) << env.status();
  EXPECT_TRUE((*env)->agent_store);
  EXPECT_EQ((*env)->restart_count, 0);

  // Exactly "True", as torch.distributed compares it.
  setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1);
  env = WorkerEnvFromEnvironment();
  ASSERT_TRUE(env.ok() && env->has_value()) << env.status();
  EXPECT_FALSE((*env)->agent_store);

  setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  setenv("TORCHELASTIC_RESTART_COUNT", "two", 1);
  EXPECT_EQ(WorkerEnvFromEnvironment().status().message(),
            "environment variable TORCHELASTIC_RESTART_COUNT=\"two\" is not a whole number >= 0");
}

TEST_F(WorkerEnvTest, ReadsSlurmsAndOpenMpisVariables) {
  setenv("SLURM_PROCID", "3", 1);
  setenv("SLURM_LOCALID", "1", 1);
  setenv("SLURM_NTASKS", "4", 1);
  // Without a job step (an allocation shell): not a worker.
  absl::StatusOr<std::optional<WorkerEnv>> shell = WorkerEnvFromEnvironment();
  ASSERT_TRUE(shell.ok()) << shell.status();
  EXPECT_FALSE(shell->has_value());
  setenv("SLURM_STEP_ID", "0", 1);
  absl::StatusOr<std::optional<WorkerEnv>> slurm = WorkerEnvFromEnvironment();
  ASSERT_TRUE(slurm.ok() && slurm->has_value()) << slurm.status();
  EXPECT_EQ((*slurm)->rank, 3);
  EXPECT_EQ((*slurm)->local_rank, 1);
  EXPECT_EQ((*slurm)->world_size, 4);
  EXPECT_EQ((*slurm)->launcher, "srun");
  SetUp();
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  absl::StatusOr<std::optional<WorkerEnv>> mpi = WorkerEnvFromEnvironment();
  ASSERT_TRUE(mpi.ok() && mpi->has_value()) << mpi.status();
  EXPECT_EQ((*mpi)->rank, 2);
  EXPECT_EQ((*mpi)->local_rank, 0);
  EXPECT_EQ((*mpi)->world_size, 3);
}

TEST_F(WorkerEnvTest, AnAllocationShellOrAWorldOfOneIsAPlainRun) {
  // salloc's shell: SLURM_NTASKS=1, SLURM_PROCID=0, no step.
  setenv("SLURM_NTASKS", "1", 1);
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_JOB_ID", "77", 1);
  absl::StatusOr<std::optional<WorkerEnv>> env = WorkerEnvFromEnvironment();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_FALSE(env->has_value());
  // srun -n1, or torchrun --nproc-per-node=1: a world of one meets no one.
  setenv("SLURM_STEP_ID", "0", 1);
  env = WorkerEnvFromEnvironment();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_FALSE(env->has_value());
  unsetenv("SLURM_JOB_ID");
}

TEST_F(WorkerEnvTest, ALeftOverWorldSizeIsAnErrorNotAJob) {
  setenv("WORLD_SIZE", "2", 1);
  EXPECT_EQ(WorkerEnvFromEnvironment().status().message(),
            "WORLD_SIZE=2 is set but RANK, MASTER_ADDR, MASTER_PORT are not: that is not a job a launcher "
            "started (torchrun sets all four). Unset WORLD_SIZE to run here, or start the job with torchrun");
}

TEST_F(WorkerEnvTest, InconsistentVariablesAreErrors) {
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29400", 1);
  setenv("RANK", "2", 1);
  EXPECT_EQ(WorkerEnvFromEnvironment().status().message(), "RANK 2 is not below WORLD_SIZE 2");
  setenv("RANK", "one", 1);
  EXPECT_EQ(WorkerEnvFromEnvironment().status().message(),
            "environment variable RANK=\"one\" is not a whole number >= 0");
  setenv("RANK", "0", 1);
  setenv("MASTER_PORT", "70000", 1);
  EXPECT_EQ(WorkerEnvFromEnvironment().status().message(), "MASTER_PORT 70000 is not a TCP port");
}

// The addresses of the TCP sockets of this process that listen on `port`, from
// /proc/net/tcp and tcp6 (which print each 32-bit word of an address in host order).
std::set<std::string> ListeningAddresses(int port) {
  std::set<std::string> inodes;
  if (DIR* fds = opendir("/proc/self/fd")) {
    while (const dirent* e = readdir(fds)) {
      char link[64];
      ssize_t n = readlinkat(dirfd(fds), e->d_name, link, sizeof(link) - 1);
      if (n <= 0) continue;
      link[n] = '\0';
      if (std::strncmp(link, "socket:[", 8) == 0) inodes.insert(std::string(link + 8, n - 9));
    }
    closedir(fds);
  }
  std::set<std::string> addresses;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      const size_t colon = local.find(':');
      if (state != "0A" || inodes.count(inode) == 0 ||
          std::stoi(local.substr(colon + 1), nullptr, 16) != port) {
        continue;
      }
      uint32_t words[4];
      const size_t count = colon / 8;
      for (size_t i = 0; i < count; ++i) words[i] = std::stoul(local.substr(8 * i, 8), nullptr, 16);
      char text[INET6_ADDRSTRLEN];
      inet_ntop(count == 1 ? AF_INET : AF_INET6, words, text, sizeof(text));
      addresses.insert(text);
    }
  }
  return addresses;
}

// `ranks` threads, one per rank, each running `body(env)` with its own WorkerEnv.
template <typename Body>
void RunRanks(WorkerEnv env, int ranks, Body body) {
  env.world_size = ranks;
  env.local_world_size = ranks;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank) {
    env.rank = rank;
    env.local_rank = rank;
    threads.emplace_back(body, env);
  }
  for (std::thread& t : threads) t.join();
}

// A path in a fresh directory of the test's.
std::string StoreFile(const std::string& name) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  EXPECT_EQ(mkdir(dir.c_str(), 0700), 0) << dir;
  return dir + "/store";
}

// ddplab's launcher on one node: three ranks meet through a file and all-reduce.
TEST(RendezvousTest, RanksMeetThroughAFileAndAllReduce) {
  REQUIRE_GLOO();
  WorkerEnv env;
  env.store_file = StoreFile("gloo_file");
  env.master_port = FreePort();  // set, as the launcher does, but nothing listens there
  std::vector<float> sums(3, -1);
  RunRanks(env, 3, [&sums](WorkerEnv env) {
    absl::StatusOr<ProcessGroupPtr> group =
        CreateProcessGroup(env, /*nccl=*/false, std::chrono::seconds(30));
    ASSERT_TRUE(group.ok()) << group.status();
    EXPECT_TRUE(ListeningAddresses(env.master_port).empty());
    std::vector<at::Tensor> tensors{at::full({4}, static_cast<float>(env.rank + 1))};
    (*group)->allreduce(tensors)->wait();
    EXPECT_TRUE(tensors[0].eq(tensors[0][0]).all().item<bool>());
    sums[env.rank] = tensors[0][0].item<float>();
    // Gloo has nothing to end: shutting down is a no-op that succeeds.
    EXPECT_TRUE(ShutDownProcessGroup(**group).ok());
  });
  EXPECT_EQ(sums, std::vector<float>(3, 6.0f));
}

// The same without Gloo: the store itself, shared through the file.
TEST(RendezvousTest, TheFileIsTheStore) {
  WorkerEnv env;
  env.store_file = StoreFile("store_file");
  env.master_port = FreePort();
  std::string got;
  RunRanks(env, 2, [&got](WorkerEnv env) {
    absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store =
        OpenRendezvousStore(env, std::chrono::seconds(30));
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_TRUE(ListeningAddresses(env.master_port).empty());
    if (env.rank == 0) (*store)->set("key", std::vector<uint8_t>{'v'});
    if (env.rank == 1) {
      std::vector<uint8_t> value = (*store)->get("key");
      got.assign(value.begin(), value.end());
    }
  });
  EXPECT_EQ(got, "v");
}

// Several nodes, Slurm, mpirun: rank 0 serves a TCPStore at MASTER_ADDR. Where LibTorch
// takes a listening socket (masterListenFd) it listens on that address alone; LibTorch
// 1.13's listens on every interface.
TEST(RendezvousTest, RankZeroServesATcpStoreOnMasterAddr) {
  WorkerEnv env;
  env.master_addr = "127.0.0.1";
  env.master_port = FreePort();
  std::set<std::string> listening;
  std::string got;
  std::atomic<bool> client_closed{false};
  RunRanks(env, 2, [&](WorkerEnv env) {
    absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store =
        OpenRendezvousStore(env, std::chrono::seconds(30));
    if (env.rank == 0) {
      ASSERT_TRUE(store.ok()) << store.status();
      listening = ListeningAddresses(env.master_port);
      (*store)->set("key", std::vector<uint8_t>{'v'});
      // The server outlives its client (1.13's client throws from its destructor, in a
      // thread of its own, when the server is gone).
      while (!client_closed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } else {
      if (store.ok()) {
        std::vector<uint8_t> value = (*store)->get("key");
        got.assign(value.begin(), value.end());
      }
      EXPECT_TRUE(store.ok()) << store.status();
      store = absl::UnknownError("closed");
      client_closed = true;
    }
  });
  EXPECT_EQ(got, "v");
  if (compat::kTcpStoreTakesListenFd) {
    EXPECT_EQ(listening, std::set<std::string>{"127.0.0.1"});
  } else {
    ASSERT_EQ(listening.size(), 1u);
    EXPECT_TRUE(*listening.begin() == "0.0.0.0" || *listening.begin() == "::") << *listening.begin();
  }
}

// Across nodes (here simulated: WORLD_SIZE 2, LOCAL_WORLD_SIZE 1) a store on loopback
// is out of the other nodes' reach. Where rank 0 binds MASTER_ADDR itself that is an error
// at once; LibTorch 1.13's store listens everywhere anyway, and rank 0 says so, once.
TEST(RendezvousTest, AcrossNodesMasterAddrMustBeReachable) {
  WorkerEnv env;
  env.world_size = 2;
  env.local_world_size = 1;
  env.master_addr = "127.0.0.1";
  ::testing::internal::CaptureStderr();
  std::vector<absl::Status> results;
  for (int i = 0; i < 2; ++i) {
    env.master_port = FreePort();
    // No rank 1: the store gives up on it soon.
    results.push_back(OpenRendezvousStore(env, std::chrono::milliseconds(300)).status());
  }
  const std::string said = ::testing::internal::GetCapturedStderr();
  const std::string warning = "this LibTorch's TCPStore listens on every interface";
  if (compat::kTcpStoreTakesListenFd) {
    for (const absl::Status& status : results) {
      EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
      EXPECT_NE(status.message().find("is a loopback address on this host"), std::string::npos) << status;
    }
    EXPECT_EQ(said.find(warning), std::string::npos) << said;
  } else {
    const size_t first = said.find(warning);
    EXPECT_NE(first, std::string::npos) << said;
    EXPECT_EQ(said.find(warning, first + 1), std::string::npos) << "said more than once: " << said;
  }
}

// A port taken: the error names the rank, the address and the port.
TEST(RendezvousTest, APortTakenIsAnErrorNamingRankAddressAndPort) {
  const int port = FreePort();
  absl::StatusOr<int> taken = ListenSocket("127.0.0.1", port, false);
  ASSERT_TRUE(taken.ok()) << taken.status();
  WorkerEnv env;
  env.world_size = 2;
  env.local_world_size = 2;
  env.master_port = port;
  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store =
      OpenRendezvousStore(env, std::chrono::seconds(5));
  close(*taken);
  ASSERT_FALSE(store.ok());
  const std::string message(store.status().message());
  EXPECT_EQ(message.rfind("rank 0: ", 0), 0u) << message;
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << message;
}

// torchrun (TORCHELASTIC_USE_AGENT_STORE=True): its agent serves the store, every rank is
// a client, and this restart's keys are under /worker/attempt_<restart>.
TEST(RendezvousTest, UnderTorchrunEveryRankIsAClientOfTheAgentsStore) {
  c10d::TCPStoreOptions agent_options;
  agent_options.port = static_cast<std::uint16_t>(FreePort());
  agent_options.isServer = true;
  agent_options.waitWorkers = false;
  agent_options.timeout = std::chrono::seconds(30);
  auto agent = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", agent_options);
  WorkerEnv env;
  env.master_port = agent_options.port;
  env.agent_store = true;
  env.restart_count = 2;
  RunRanks(env, 2, [](WorkerEnv env) {
    absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store =
        OpenRendezvousStore(env, std::chrono::seconds(30));
    ASSERT_TRUE(store.ok()) << store.status();
    (*store)->set("rank" + std::to_string(env.rank), std::vector<uint8_t>{'x'});
  });
  EXPECT_TRUE(agent->check({"/worker/attempt_2/rank0", "/worker/attempt_2/rank1"}));
  EXPECT_FALSE(agent->check({"rank0"}));
}

TEST(ListenSocketTest, BindsTheAddressGiven) {
  const int port = FreePort();
  absl::StatusOr<int> fd = ListenSocket("127.0.0.1", port, false);
  ASSERT_TRUE(fd.ok()) << fd.status();
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(*fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  EXPECT_EQ(addr.sin_family, AF_INET);
  EXPECT_EQ(ntohl(addr.sin_addr.s_addr), INADDR_LOOPBACK);
  EXPECT_EQ(ntohs(addr.sin_port), port);
  EXPECT_EQ(ListeningAddresses(port), std::set<std::string>{"127.0.0.1"});
  absl::StatusOr<int> again = ListenSocket("127.0.0.1", port, false);
  EXPECT_EQ(again.status().message(),
            "cannot listen at 127.0.0.1 port " + std::to_string(port) + ": Address already in use");
  close(*fd);
}

TEST(ListenSocketTest, BindsIpv6) {
  int probe = socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 loopback{};
  loopback.sin6_family = AF_INET6;
  loopback.sin6_addr = in6addr_loopback;
  const bool ipv6 = probe >= 0 && bind(probe, reinterpret_cast<sockaddr*>(&loopback), sizeof(loopback)) == 0;
  if (probe >= 0) close(probe);
  if (!ipv6) GTEST_SKIP() << "no IPv6 loopback here";
  const int port = FreePort();
  absl::StatusOr<int> fd = ListenSocket("::1", port, false);
  ASSERT_TRUE(fd.ok()) << fd.status();
  EXPECT_EQ(ListeningAddresses(port), std::set<std::string>{"::1"});
  close(*fd);
}

TEST(ListenSocketTest, ErrorsNameTheAddress) {
  const std::string unresolved(ListenSocket("bad host name!", 29500, false).status().message());
  EXPECT_EQ(unresolved.rfind("cannot resolve \"bad host name!\": ", 0), 0u) << unresolved;
  // Across hosts, loopback would be reachable by no one else.
  absl::StatusOr<int> fd = ListenSocket("127.0.0.1", FreePort(), true);
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fd.status().message(),
            "\"127.0.0.1\" is a loopback address on this host (127.0.0.1), which other hosts "
            "cannot reach: give an address of this host that they can");
}

// The member detection in torch_compat.h, on stand-ins for TCPStoreOptions with and
// without masterListenFd (only one of which this LibTorch has).
struct OptionsWithListenFd {
  std::optional<int> masterListenFd;
  bool useLibUV = true;
};
struct OptionsWithoutListenFd {
  int port = 0;
};

TEST(TorchCompatTest, MasterListenFdIsFoundByItsMember) {
  EXPECT_TRUE(compat::HasMasterListenFd<OptionsWithListenFd>::value);
  EXPECT_FALSE(compat::HasMasterListenFd<OptionsWithoutListenFd>::value);
  OptionsWithListenFd with;
  EXPECT_TRUE(compat::SetMasterListenFd(with, 7));
  EXPECT_EQ(with.masterListenFd, 7);
  OptionsWithoutListenFd without;
  EXPECT_FALSE(compat::SetMasterListenFd(without, 7));
  std::printf("this LibTorch (%s): TCPStoreOptions %s masterListenFd\n", TORCH_VERSION,
              compat::kTcpStoreTakesListenFd ? "has" : "has no");
}

// The NCCL configuration of ProcessGroupNCCL::Options-like types: set where it is there.
struct NcclConfigStandIn {
  int maxCTAs = -1;
  int minCTAs = -1;
};
struct OptionsWithNcclConfig {
  NcclConfigStandIn config;
};
struct OptionsWithoutNcclConfig {
  bool is_high_priority_stream = false;
};

TEST(TorchCompatTest, NcclChannelsAreSetThroughTheConfig) {
  EXPECT_TRUE(compat::HasNcclConfig<OptionsWithNcclConfig>::value);
  EXPECT_FALSE(compat::HasNcclConfig<OptionsWithoutNcclConfig>::value);
  OptionsWithNcclConfig with;
  EXPECT_TRUE(compat::SetNcclMaxCtas(with, 4));
  EXPECT_EQ(with.config.maxCTAs, 4);
  EXPECT_EQ(with.config.minCTAs, -1);
  OptionsWithoutNcclConfig without;
  EXPECT_FALSE(compat::SetNcclMaxCtas(without, 4));
}

// Two groups through one rendezvous, each with its own collectives: a value reduced over
// one is not mixed up with another's.
TEST(CreateProcessGroupsTest, OneRendezvousSeveralGroups) {
  REQUIRE_GLOO();
  WorkerEnv env;  // one process: an in-memory store
  absl::StatusOr<std::vector<ProcessGroupPtr>> groups =
      CreateProcessGroups(env, /*nccl=*/false, std::chrono::seconds(10), std::vector<GroupOptions>(2));
  ASSERT_TRUE(groups.ok()) << groups.status();
  ASSERT_EQ(groups->size(), 2u);
  EXPECT_NE((*groups)[0].get(), (*groups)[1].get());
  for (const ProcessGroupPtr& group : *groups) {
    EXPECT_EQ(group->getSize(), 1);
    std::vector<at::Tensor> t{at::ones({3})};
    group->allreduce(t)->wait();
    EXPECT_TRUE(at::equal(t[0], at::ones({3})));
  }
}

// A group type with shutdown() (ProcessGroupNCCL in LibTorch 2.x) is shut down; one
// without (LibTorch 1.13) is left alone; a shutdown that takes arguments is not called.
struct GroupWithShutdown {
  int calls = 0;
  void shutdown() { ++calls; }
};
struct GroupWithoutShutdown {};
struct GroupWithShutdownArgument {
  void shutdown(int how) { (void)how; }
};

TEST(TorchCompatTest, ShutDownWhereTheGroupHasIt) {
  EXPECT_TRUE(compat::HasShutdown<GroupWithShutdown>::value);
  EXPECT_FALSE(compat::HasShutdown<GroupWithoutShutdown>::value);
  EXPECT_FALSE(compat::HasShutdown<GroupWithShutdownArgument>::value);
  GroupWithShutdown with;
  EXPECT_TRUE(compat::ShutDown(with));
  EXPECT_EQ(with.calls, 1);
  GroupWithoutShutdown without;
  EXPECT_FALSE(compat::ShutDown(without));
}

TEST(NcclEnvironmentTest, TransportThenTheExperimentsOwnVariables) {
  v1::Distributed d;
  EXPECT_TRUE(NcclEnvironment(d).empty());
  d.set_transport(v1::Distributed::NETWORK);
  v1::EnvironmentVariable* var = d.add_nccl_env();
  var->set_name("NCCL_SHM_USE_CUDA_MEMCPY");
  var->set_value("1");
  EnvironmentList want = {{"NCCL_P2P_DISABLE", "1"}, {"NCCL_SHM_DISABLE", "1"},
                          {"NCCL_SHM_USE_CUDA_MEMCPY", "1"}};
  EXPECT_EQ(NcclEnvironment(d), want);
  d.set_transport(v1::Distributed::HOST_MEMORY);
  want = {{"NCCL_P2P_DISABLE", "1"}, {"NCCL_SHM_USE_CUDA_MEMCPY", "1"}};
  EXPECT_EQ(NcclEnvironment(d), want);
}

TEST(ScopedEnvironmentTest, RestoresWhatWasThere) {
  setenv("DDPLAB_TEST_SET", "before", 1);
  unsetenv("DDPLAB_TEST_UNSET");
  {
    ScopedEnvironment scoped({{"DDPLAB_TEST_SET", "during"},
                              {"DDPLAB_TEST_UNSET", "x"},
                              {"DDPLAB_TEST_UNSET", "y"}});
    EXPECT_STREQ(getenv("DDPLAB_TEST_SET"), "during");
    EXPECT_STREQ(getenv("DDPLAB_TEST_UNSET"), "y");
  }
  EXPECT_STREQ(getenv("DDPLAB_TEST_SET"), "before");
  EXPECT_EQ(getenv("DDPLAB_TEST_UNSET"), nullptr);
}

}  // namespace
}  // namespace ddplab
