// What this machine has for training: library versions, GPUs, how they are linked, CPUs.
//
//   ddplab::DeviceReport report = ddplab::CollectDeviceReport();
//   std::cout << ddplab::FormatDeviceReport(report);
//
// The links between GPUs are read from `nvidia-smi topo -m` and use its words: NV<n>
// (n NVLink links), PIX, PXB, PHB, NODE, SYS (PCIe paths through a switch, several
// switches, a host bridge, a NUMA node, or between NUMA nodes). Without nvidia-smi they
// come from CUDA's peer-access query: P2P or HOST.

#ifndef DDPLAB_CORE_RECORD_DEVICE_REPORT_H_
#define DDPLAB_CORE_RECORD_DEVICE_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddplab {

struct GpuInfo {
  int index = 0;
  std::string name;
  int64_t memory_bytes = 0;
  int multiprocessors = 0;
  int compute_major = 0;
  int compute_minor = 0;
  std::string pci_bus_id;
};

struct DeviceReport {
  std::string torch_version;     // the LibTorch this binary was built against
  bool cuda_build = false;       // built with CUDA, NCCL and NVTX
  std::string cuda_runtime;      // e.g. "13.0"; empty in a CPU build
  std::string cuda_driver_api;   // the CUDA version the driver supports, e.g. "13.0"
  std::string driver_version;    // the kernel driver's, e.g. "580.159.04"
  std::string nccl_version;      // e.g. "2.28.9"; empty in a CPU build
  bool c10d_gloo = false;        // c10d's Gloo process group is built in (CPU runs)
  bool c10d_nccl = false;        // c10d's NCCL process group is built in (GPU runs)
  std::vector<GpuInfo> gpus;
  // links[i][j]: how GPU i reaches GPU j ("X" on the diagonal).
  std::vector<std::vector<std::string>> links;
  std::string links_source;      // "nvidia-smi topo -m", "CUDA peer access" or ""
  std::string cpu_model;
  int cpu_cores = 0;
  std::vector<std::string> notes;  // what could not be read, and why
};

// Reads the report from this machine. Never fails: what cannot be read is left empty
// and explained in `notes`.
DeviceReport CollectDeviceReport();

// The report as a person reads it, ending in a newline.
std::string FormatDeviceReport(const DeviceReport& report);

// Parses the GPU-to-GPU matrix of `nvidia-smi topo -m` output. Rows and columns are the
// GPUs in nvidia-smi's order; other columns (NICs, affinities) are left out.
absl::StatusOr<std::vector<std::vector<std::string>>> ParseNvidiaSmiTopology(
    absl::string_view text);

}  // namespace ddplab

#endif  // DDPLAB_CORE_RECORD_DEVICE_REPORT_H_
