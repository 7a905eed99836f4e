#include "core/distributed.h"

#include <stdlib.h>

#include "gtest/gtest.h"

namespace ddplab {
namespace {

class WorkerEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                             "MASTER_PORT", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS",
                             "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE",
                             "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
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
}

TEST_F(WorkerEnvTest, ReadsSlurmsAndOpenMpisVariables) {
  setenv("SLURM_PROCID", "3", 1);
  setenv("SLURM_LOCALID", "1", 1);
  setenv("SLURM_NTASKS", "4", 1);
  absl::StatusOr<std::optional<WorkerEnv>> slurm = WorkerEnvFromEnvironment();
  ASSERT_TRUE(slurm.ok() && slurm->has_value()) << slurm.status();
  EXPECT_EQ((*slurm)->rank, 3);
  EXPECT_EQ((*slurm)->local_rank, 1);
  EXPECT_EQ((*slurm)->world_size, 4);
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

TEST_F(WorkerEnvTest, InconsistentVariablesAreErrors) {
  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "2", 1);
  EXPECT_EQ(WorkerEnvFromEnvironment().status().message(), "RANK 2 is not below WORLD_SIZE 2");
  setenv("RANK", "one", 1);
  EXPECT_EQ(WorkerEnvFromEnvironment().status().message(),
            "environment variable RANK=\"one\" is not a whole number >= 0");
  setenv("RANK", "0", 1);
  setenv("MASTER_PORT", "70000", 1);
  EXPECT_EQ(WorkerEnvFromEnvironment().status().message(), "MASTER_PORT 70000 is not a TCP port");
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
