#include "core/record/device_report.h"

#include <stdio.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <torch/version.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

#if defined(DDPLAB_CUDA)
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace ddplab {
namespace {

// Runs `command` through the shell; returns its standard output, or an error when it
// could not run or exited non-zero.
absl::StatusOr<std::string> RunCommand(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::UnavailableError(absl::StrCat("cannot run ", command));
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  int status = pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError(absl::StrCat(command, " failed (status ", status, ")"));
  }
  return out;
}

std::string ReadFirstLine(const std::string& path, absl::string_view prefix) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, prefix)) return line;
  }
  return "";
}

std::string CpuModel() {
  std::string line = ReadFirstLine("/proc/cpuinfo", "model name");
  size_t colon = line.find(':');
  return colon == std::string::npos ? "" : std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
}

// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu ..." -> "580.159.04"
std::string DriverVersion() {
  std::string line = ReadFirstLine("/proc/driver/nvidia/version", "NVRM version");
  for (absl::string_view word : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    if (!word.empty() && absl::ascii_isdigit(word[0]) && absl::StrContains(word, '.')) {
      return std::string(word);
    }
  }
  return "";
}

#if defined(DDPLAB_CUDA)
std::string CudaVersionString(int version) {
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

void CollectCuda(DeviceReport& report) {
  int version = 0;
  if (cudaRuntimeGetVersion(&version) == cudaSuccess) report.cuda_runtime = CudaVersionString(version);
  if (cudaDriverGetVersion(&version) == cudaSuccess && version > 0) {
    report.cuda_driver_api = CudaVersionString(version);
  }
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess) {
    // NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z since 2.9.
    report.nccl_version = absl::StrCat(nccl / 10000, ".", (nccl % 10000) / 100, ".", nccl % 100);
  }
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    report.notes.push_back(absl::StrCat("CUDA sees no GPU: ", cudaGetErrorString(err)));
    cudaGetLastError();
    return;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    GpuInfo gpu;
    gpu.index = i;
    gpu.name = prop.name;
    gpu.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    gpu.multiprocessors = prop.multiProcessorCount;
    gpu.compute_major = prop.major;
    gpu.compute_minor = prop.minor;
    gpu.pci_bus_id = absl::StrFormat("%04x:%02x:%02x.0", prop.pciDomainID, prop.pciBusID,
                                     prop.pciDeviceID);
    report.gpus.push_back(gpu);
  }
}

// Without nvidia-smi: whether each pair can reach the other's memory directly.
void PeerAccessLinks(DeviceReport& report) {
  size_t n = report.gpus.size();
  report.links.assign(n, std::vector<std::string>(n, "X"));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      int can = 0;
      cudaDeviceCanAccessPeer(&can, static_cast<int>(i), static_cast<int>(j));
      report.links[i][j] = can ? "P2P" : "HOST";
    }
  }
  report.links_source = "CUDA peer access";
}
#endif

// Removes terminal escape sequences (nvidia-smi underlines its header with them).
std::string StripAnsi(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      i += 2;
      while (i < text.size() && !absl::ascii_isalpha(static_cast<unsigned char>(text[i]))) ++i;
      continue;
    }
    out.push_back(text[i]);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::vector<std::string>>> ParseNvidiaSmiTopology(
    absl::string_view raw) {
  std::string text = StripAnsi(raw);
  std::vector<std::string> header;
  std::map<int, int> gpu_columns;  // GPU index -> column among the header's cells
  std::vector<std::vector<std::string>> rows;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<std::string> cells;
    for (absl::string_view cell : absl::StrSplit(line, '\t')) {
      cells.emplace_back(absl::StripAsciiWhitespace(cell));
    }
    if (cells.empty()) continue;
    if (header.empty()) {
      // The header row starts with an empty cell and names GPU0, GPU1, ...
      if (cells[0].empty() && cells.size() > 1 && absl::StartsWith(cells[1], "GPU")) {
        header = cells;
        for (size_t c = 1; c < cells.size(); ++c) {
          int index;
          if (absl::StartsWith(cells[c], "GPU") &&
              absl::SimpleAtoi(absl::string_view(cells[c]).substr(3), &index)) {
            gpu_columns[index] = static_cast<int>(c);
          }
        }
      }
      continue;
    }
    int row_index;
    if (!absl::StartsWith(cells[0], "GPU") ||
        !absl::SimpleAtoi(absl::string_view(cells[0]).substr(3), &row_index)) {
      if (!rows.empty()) break;  // past the GPU rows (NIC rows, the legend)
      continue;
    }
    if (row_index != static_cast<int>(rows.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("nvidia-smi topo -m: expected row GPU", rows.size(), ", got ", cells[0]));
    }
    std::vector<std::string> row;
    for (const auto& [gpu, column] : gpu_columns) {
      if (static_cast<size_t>(column) >= cells.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("nvidia-smi topo -m: row ", cells[0], " has no cell for GPU", gpu));
      }
      row.push_back(cells[column]);
    }
    rows.push_back(std::move(row));
  }
  if (header.empty()) {
    return absl::InvalidArgumentError("nvidia-smi topo -m: no header row naming GPU0");
  }
  if (rows.size() != gpu_columns.size()) {
    return absl::InvalidArgumentError(absl::StrCat("nvidia-smi topo -m: ", gpu_columns.size(),
                                                   " GPU columns but ", rows.size(), " GPU rows"));
  }
  return rows;
}

DeviceReport CollectDeviceReport() {
  DeviceReport report;
  report.torch_version = TORCH_VERSION;
  report.cpu_model = CpuModel();
  report.cpu_cores = static_cast<int>(std::thread::hardware_concurrency());
  report.driver_version = DriverVersion();
#if defined(USE_C10D_GLOO)
  report.c10d_gloo = true;
#endif
#if defined(USE_C10D_NCCL)
  report.c10d_nccl = true;
#endif
#if defined(DDPLAB_CUDA)
  report.cuda_build = true;
  CollectCuda(report);
#else
  report.notes.push_back("CPU build: CUDA and NCCL are not compiled in");
#endif
  if (report.gpus.empty()) return report;

  absl::StatusOr<std::string> topo = RunCommand("nvidia-smi topo -m 2>/dev/null");
  if (topo.ok()) {
    absl::StatusOr<std::vector<std::vector<std::string>>> links = ParseNvidiaSmiTopology(*topo);
    if (links.ok() && links->size() == report.gpus.size()) {
      report.links = *std::move(links);
      report.links_source = "nvidia-smi topo -m";
      return report;
    }
    report.notes.push_back(links.ok() ? absl::StrCat("nvidia-smi shows ", links->size(),
                                                     " GPUs, CUDA ", report.gpus.size())
                                      : std::string(links.status().message()));
  } else {
    report.notes.push_back(absl::StrCat("no link matrix from nvidia-smi: ", topo.status().message()));
  }
#if defined(DDPLAB_CUDA)
  PeerAccessLinks(report);
#endif
  return report;
}

std::string FormatDeviceReport(const DeviceReport& r) {
  auto or_none = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  std::string out = "Device report\n";
  absl::StrAppend(&out, "  LibTorch      ", r.torch_version, r.cuda_build ? " (CUDA build)" : " (CPU build)", "\n");
  absl::StrAppend(&out, "  CUDA runtime  ", or_none(r.cuda_runtime), "   driver ",
                  or_none(r.driver_version), " (CUDA ", or_none(r.cuda_driver_api), ")\n");
  absl::StrAppend(&out, "  NCCL          ", or_none(r.nccl_version), "\n");
  absl::StrAppend(&out, "  c10d          Gloo ", r.c10d_gloo ? "yes" : "no", ", NCCL ",
                  r.c10d_nccl ? "yes" : "no", "\n");
  absl::StrAppend(&out, "  CPU           ", r.cpu_cores, " cores", r.cpu_model.empty() ? "" : ", ",
                  r.cpu_model, "\n");
  absl::StrAppend(&out, "  GPUs          ", r.gpus.size(), "\n");
  for (const GpuInfo& g : r.gpus) {
    absl::StrAppend(&out, absl::StrFormat("    GPU%d  %s  %.1f GiB  %d SMs  sm_%d%d  %s\n", g.index,
                                          g.name, g.memory_bytes / double(1 << 30),
                                          g.multiprocessors, g.compute_major, g.compute_minor,
                                          g.pci_bus_id));
  }
  if (!r.links.empty()) {
    absl::StrAppend(&out, "  Links (", r.links_source, ")\n          ");
    for (size_t j = 0; j < r.links.size(); ++j) absl::StrAppend(&out, absl::StrFormat("%-6s", absl::StrCat("GPU", j)));
    absl::StrAppend(&out, "\n");
    for (size_t i = 0; i < r.links.size(); ++i) {
      absl::StrAppend(&out, absl::StrFormat("    %-6s", absl::StrCat("GPU", i)));
      for (const std::string& cell : r.links[i]) absl::StrAppend(&out, absl::StrFormat("%-6s", cell));
      absl::StrAppend(&out, "\n");
    }
  }
  for (const std::string& note : r.notes) absl::StrAppend(&out, "  note: ", note, "\n");
  return out;
}

}  // namespace ddplab
