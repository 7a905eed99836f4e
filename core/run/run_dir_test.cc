#include "core/run/run_dir.h"

#include "gtest/gtest.h"

namespace ddplab {
namespace {

TEST(NcclTransportTest, ReadsTheChannelLines) {
  EXPECT_EQ(NcclTransportFromLog("host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
                                 "host:1:2 [0] NCCL INFO Connected all rings\n"),
            "P2P");
  EXPECT_EQ(NcclTransportFromLog("NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n"), "SHM");
  EXPECT_EQ(NcclTransportFromLog("NCCL INFO Channel 00/0 : 1[1] -> 0[0] [send] via NET/Socket/0\n"), "NET");
  EXPECT_EQ(NcclTransportFromLog("NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n"
                                 "NCCL INFO Channel 01 : 1[1] -> 2[2] via SHM/direct/direct\n"),
            "P2P+SHM");
  EXPECT_EQ(NcclTransportFromLog("NCCL INFO Bootstrap : Using eth0\n"), "");
}

}  // namespace
}  // namespace ddplab
