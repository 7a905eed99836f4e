// The suite report: what each lever bought on this machine, in the spirit of nccl-tests'
// tables, as Markdown, JSON and CSV, a PNG chart, and a recommendation.
//
//   std::vector<ddplab::v1::RunResult> runs = ...;   // one per completed experiment
//   ddplab::SuiteReport report = ddplab::MakeReport(runs);
//   std::cout << ddplab::FormatMarkdown(report) << ddplab::Recommend(report);
//   ddplab::WriteReport(report, "ddplab_results/seed_study");  // report.{md,json,csv,png}

#ifndef DDPLAB_CORE_REPORT_H_
#define DDPLAB_CORE_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ddplab/v1/result.pb.h"

namespace ddplab {

struct ReportRow {
  std::string experiment;
  int gpus = 1;
  std::string transport;      // as asked ("NVLINK", "HOST_MEMORY", ...), or "-" for one process
  std::string nccl_transport;  // as NCCL's log shows it (P2P, SHM, NET), if read
  double steps_per_s = 0;
  std::optional<double> vs_single;  // steps/s over the single-process run's
  std::optional<double> vs_naive;   // steps/s over naive_ddp's
  double tflops_per_gpu = 0;
  double exposed_comm_ms = 0;
  std::optional<double> busbw_gbps;  // the largest bucket's
  double peak_memory_gib = 0;
  std::optional<double> gradient_error;
  // A diagnostic run (a plugin of diagnostic status): never recommended.
  bool diagnostic = false;
};

struct SuiteReport {
  std::string suite;
  std::vector<ReportRow> rows;
};

// Rows in the order given. The single-process baseline is the first run of one process
// without the engine; "naive" is the run named naive_ddp, if any.
SuiteReport MakeReport(const std::vector<v1::RunResult>& runs);

std::string FormatMarkdown(const SuiteReport& report);
std::string FormatCsv(const SuiteReport& report);
std::string FormatJson(const SuiteReport& report);

// A few sentences derived from the rows: the fastest configuration of several
// processes, what it gains over naive DDP and the single-process step, and whether
// communication is still exposed.
std::string Recommend(const SuiteReport& report);

// A bar chart of steps/s per experiment, as PNG bytes.
std::string RenderChartPng(const SuiteReport& report);

// Writes report.md, report.json, report.csv and report.png into `directory`.
absl::Status WriteReport(const SuiteReport& report, const std::string& directory);

// Which transports NCCL's channels used, from its log (NCCL_DEBUG=INFO): "P2P", "SHM",
// "NET", or several joined by "+" ("P2P+SHM"), or "" when the log names none. Channel
// lines read like "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read".
std::string NcclTransportFromLog(absl::string_view log);

}  // namespace ddplab

#endif  // DDPLAB_CORE_REPORT_H_
