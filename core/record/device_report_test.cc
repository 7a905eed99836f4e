#include "core/record/device_report.h"

#include <torch/version.h>

#include "gtest/gtest.h"

namespace ddplab {
namespace {

using Matrix = std::vector<std::vector<std::string>>;

// As nvidia-smi 580 prints it for 4 H200s, header underlined with escape codes.
constexpr char kFourNvlinkGpus[] =
    "\t\x1b[4mGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tNV18\tNV18\tNV18\t0-63\t0\t\tN/A\n"
    "GPU1\tNV18\t X \tNV18\tNV18\t0-63\t0\t\tN/A\n"
    "GPU2\tNV18\tNV18\t X \tNV18\t0-63\t0\t\tN/A\n"
    "GPU3\tNV18\tNV18\tNV18\t X \t0-63\t0\t\tN/A\n"
    "\n"
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n";

// A PCIe machine with a NIC column and row, as on multi-node hosts.
constexpr char kPcieWithNic[] =
    "\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNODE\tSYS\tPIX\t0-31\t0\t\tN/A\n"
    "GPU1\tNODE\t X \tSYS\tNODE\t0-31\t0\t\tN/A\n"
    "GPU2\tSYS\tSYS\t X \tSYS\t32-63\t1\t\tN/A\n"
    "NIC0\tPIX\tNODE\tSYS\t X \t\t\t\t\n"
    "\n"
    "Legend:\n";

TEST(ParseNvidiaSmiTopologyTest, ReadsAnNvlinkMatrix) {
  absl::StatusOr<Matrix> links = ParseNvidiaSmiTopology(kFourNvlinkGpus);
  ASSERT_TRUE(links.ok()) << links.status();
  ASSERT_EQ(links->size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_EQ((*links)[i].size(), 4u);
    for (size_t j = 0; j < 4; ++j) EXPECT_EQ((*links)[i][j], i == j ? "X" : "NV18");
  }
}

TEST(ParseNvidiaSmiTopologyTest, LeavesOutNicsAndAffinities) {
  absl::StatusOr<Matrix> links = ParseNvidiaSmiTopology(kPcieWithNic);
  ASSERT_TRUE(links.ok()) << links.status();
  EXPECT_EQ(*links, (Matrix{{"X", "NODE", "SYS"}, {"NODE", "X", "SYS"}, {"SYS", "SYS", "X"}}));
}

TEST(ParseNvidiaSmiTopologyTest, RefusesTextWithoutAMatrix) {
  auto error = [](const char* text) {
    return std::string(ParseNvidiaSmiTopology(text).status().message());
  };
  EXPECT_EQ(error("No devices were found\n"), "nvidia-smi topo -m: no header row naming GPU0");
  EXPECT_EQ(error("\tGPU0\tGPU1\nGPU0\t X \n"), "nvidia-smi topo -m: row GPU0 has no cell for GPU1");
  EXPECT_EQ(error("\tGPU0\tGPU1\nGPU0\t X \tNV4\n"),
            "nvidia-smi topo -m: 2 GPU columns but 1 GPU rows");
  EXPECT_EQ(error("\tGPU0\tGPU1\nGPU1\tNV4\t X \n"), "nvidia-smi topo -m: expected row GPU0, got GPU1");
}

TEST(DeviceReportTest, NamesLibTorchAndCpuCores) {
  DeviceReport report = CollectDeviceReport();
  EXPECT_EQ(report.torch_version, TORCH_VERSION);
  EXPECT_GT(report.cpu_cores, 0);
  std::string text = FormatDeviceReport(report);
  EXPECT_NE(text.find(std::string("LibTorch      ") + TORCH_VERSION), std::string::npos) << text;
  EXPECT_NE(text.find("cores"), std::string::npos) << text;
}

}  // namespace
}  // namespace ddplab
