#include "core/report.h"

#include "core/run_files.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "core/png.h"

namespace ddplab {
namespace {

// `v` with `digits` after the point (in scientific notation with `scientific`), or "-".
std::string Fixed(std::optional<double> v, int digits, bool scientific = false) {
  if (!v) return "-";
  return scientific ? absl::StrFormat("%.*e", digits, *v) : absl::StrFormat("%.*f", digits, *v);
}

std::string Cell(const ReportRow& r, int column) {
  switch (column) {
    case 0: return r.experiment;
    case 1: return absl::StrCat(r.gpus);
    case 2: return r.nccl_transport.empty() ? r.transport : absl::StrCat(r.transport, " (", r.nccl_transport, ")");
    case 3: return absl::StrFormat("%.3f", r.steps_per_s);
    case 4: return Fixed(r.vs_single, 3);
    case 5: return Fixed(r.vs_naive, 3);
    case 6: return absl::StrFormat("%.2f", r.exposed_comm_ms);
    case 7: return Fixed(r.busbw_gbps, 1);
    case 8: return absl::StrFormat("%.2f", r.peak_memory_gib);
    case 9: return Fixed(r.gradient_error, 2, true);
    case 10: return absl::StrFormat("%.1f", r.tflops_per_gpu);
  }
  return "";
}

constexpr int kColumns = 11;
const char* const kHeaders[kColumns] = {
    "experiment", "GPUs",          "transport",       "steps/s",     "vs 1 GPU",      "vs naive",
    "exposed comm ms", "busbw GB/s", "peak GiB", "grad error", "TFLOP/s/GPU"};

std::string JsonString(absl::string_view s) {
  return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"\"", "\\\""}}), "\"");
}

std::string JsonNumber(std::optional<double> v) { return v ? absl::StrFormat("%.6g", *v) : "null"; }

}  // namespace

SuiteReport MakeReport(const std::vector<v1::RunResult>& runs) {
  SuiteReport report;
  const v1::RunResult* single = nullptr;
  for (const v1::RunResult& r : runs) {
    if (report.suite.empty()) report.suite = r.suite();
    if (!single && r.world_size() == 1 && !r.engine()) single = &r;
  }
  for (const v1::RunResult& r : runs) {
    // Naive DDP on the same processes and transport ("naive_ddp", or "naive_ddp_<transport>"
    // from a transport sweep).
    const v1::RunResult* naive = nullptr;
    for (const v1::RunResult& n : runs) {
      if ((n.experiment() == "naive_ddp" || absl::StartsWith(n.experiment(), "naive_ddp_")) &&
          n.world_size() == r.world_size() && n.transport() == r.transport()) {
        naive = &n;
        break;
      }
    }
    ReportRow row;
    row.experiment = r.experiment();
    row.gpus = r.world_size();
    row.transport = r.world_size() > 1 ? r.transport() : "-";
    if (row.transport == "TRANSPORT_UNSPECIFIED") row.transport = "default";
    row.nccl_transport = r.nccl_transport();
    row.steps_per_s = r.steps_per_s();
    if (single && single->steps_per_s() > 0) row.vs_single = r.steps_per_s() / single->steps_per_s();
    if (naive && naive->steps_per_s() > 0 && r.engine()) row.vs_naive = r.steps_per_s() / naive->steps_per_s();
    row.tflops_per_gpu = r.tflops_per_gpu();
    row.exposed_comm_ms = r.exposed_comm_ms();
    if (r.bucket_busbw_gbps_size() > 0) {
      int largest = 0;
      for (int b = 0; b < r.bucket_busbw_gbps_size() && b < r.bucket_bytes_size(); ++b) {
        if (r.bucket_bytes(b) > r.bucket_bytes(largest)) largest = b;
      }
      row.busbw_gbps = r.bucket_busbw_gbps(largest);
    }
    row.peak_memory_gib = r.peak_memory_gib();
    if (r.gradient_error_samples() > 0) row.gradient_error = r.gradient_error();
    row.diagnostic = r.diagnostic();
    report.rows.push_back(row);
  }
  return report;
}

std::string FormatMarkdown(const SuiteReport& report) {
  std::string out = absl::StrCat("| ", absl::StrJoin(kHeaders, kHeaders + kColumns, " | "), " |\n|");
  for (int c = 0; c < kColumns; ++c) absl::StrAppend(&out, c == 0 ? " --- |" : " ---: |");
  absl::StrAppend(&out, "\n");
  for (const ReportRow& r : report.rows) {
    std::vector<std::string> cells;
    for (int c = 0; c < kColumns; ++c) cells.push_back(Cell(r, c));
    absl::StrAppend(&out, "| ", absl::StrJoin(cells, " | "), " |\n");
  }
  return out;
}

std::string FormatCsv(const SuiteReport& report) {
  std::string out = absl::StrCat(absl::StrJoin(kHeaders, kHeaders + kColumns, ","), "\n");
  for (const ReportRow& r : report.rows) {
    std::vector<std::string> cells;
    for (int c = 0; c < kColumns; ++c) {
      std::string cell = Cell(r, c);
      cells.push_back(absl::StrContains(cell, ",") ? absl::StrCat("\"", cell, "\"") : cell);
    }
    absl::StrAppend(&out, absl::StrJoin(cells, ","), "\n");
  }
  return out;
}

std::string FormatJson(const SuiteReport& report) {
  std::string out = absl::StrCat("{\n \"suite\": ", JsonString(report.suite), ",\n \"rows\": [");
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const ReportRow& r = report.rows[i];
    absl::StrAppend(
        &out, i ? ",\n  " : "\n  ", "{\"experiment\": ", JsonString(r.experiment), ", \"gpus\": ", r.gpus,
        ", \"transport\": ", JsonString(r.transport), ", \"nccl_transport\": ", JsonString(r.nccl_transport),
        ", \"steps_per_s\": ", JsonNumber(r.steps_per_s), ", \"vs_single_gpu\": ", JsonNumber(r.vs_single),
        ", \"vs_naive\": ", JsonNumber(r.vs_naive), ", \"exposed_comm_ms\": ", JsonNumber(r.exposed_comm_ms),
        ", \"busbw_gbps\": ", JsonNumber(r.busbw_gbps), ", \"peak_memory_gib\": ", JsonNumber(r.peak_memory_gib),
        ", \"gradient_error\": ", JsonNumber(r.gradient_error), ", \"tflops_per_gpu\": ", JsonNumber(r.tflops_per_gpu),
        "}");
  }
  absl::StrAppend(&out, "\n ]\n}\n");
  return out;
}

namespace {

// The recommendation for the runs of several processes over one transport.
std::string RecommendAmong(const std::vector<const ReportRow*>& rows) {
  const ReportRow* best = nullptr;
  const ReportRow* best_lossless = nullptr;
  for (const ReportRow* r : rows) {
    if (!best || r->steps_per_s > best->steps_per_s) best = r;
    if (!r->gradient_error && (!best_lossless || r->steps_per_s > best_lossless->steps_per_s)) best_lossless = r;
  }
  std::string out = absl::StrFormat("%s is the fastest on this machine, %.3f steps/s on %d %s", best->experiment,
                                    best->steps_per_s, best->gpus, best->gpus == 1 ? "process" : "processes");
  if (best->vs_naive && *best->vs_naive != 1) {
    absl::StrAppendFormat(&out, ", %.0f%% over naive_ddp (one bucket after backward)", 100 * (*best->vs_naive - 1));
  }
  if (best->vs_single) absl::StrAppendFormat(&out, ", %.3f of the single-process step rate", *best->vs_single);
  absl::StrAppend(&out, ".");
  const double step_ms = 1e3 / best->steps_per_s;
  if (best->exposed_comm_ms > 0.05 * step_ms) {
    absl::StrAppendFormat(&out,
                          " Communication is still exposed: %.1f ms of its %.1f ms step wait for the last "
                          "reduction; smaller buckets or compression may hide more.",
                          best->exposed_comm_ms, step_ms);
  } else {
    absl::StrAppendFormat(&out, " Communication is hidden behind backward (%.2f ms exposed of %.1f ms).",
                          best->exposed_comm_ms, step_ms);
  }
  if (best->gradient_error) {
    absl::StrAppendFormat(&out, " It is lossy: gradients differ from exact all-reduce by %.1e (relative).",
                          *best->gradient_error);
    if (best_lossless) {
      absl::StrAppendFormat(&out, " The fastest exact one is %s, %.3f steps/s", best_lossless->experiment,
                            best_lossless->steps_per_s);
      if (best_lossless->vs_single) {
        absl::StrAppendFormat(&out, " (%.3f of the single-process step rate)", *best_lossless->vs_single);
      }
      absl::StrAppend(&out, ".");
    }
  }
  return out;
}

}  // namespace

std::string Recommend(const SuiteReport& report) {
  // Runs of several processes by transport, in the order they ran; not the diagnostic
  // runs that exchange nothing.
  std::vector<std::pair<std::string, std::vector<const ReportRow*>>> groups;
  for (const ReportRow& r : report.rows) {
    if (r.gpus <= 1 || r.diagnostic) continue;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == r.transport; });
    if (it == groups.end()) {
      groups.push_back({r.transport, {}});
      it = groups.end() - 1;
    }
    it->second.push_back(&r);
  }
  if (groups.empty()) {
    return "Recommendation: no run of several processes that communicates completed; nothing to compare.\n";
  }
  if (groups.size() == 1) return absl::StrCat("Recommendation: ", RecommendAmong(groups[0].second), "\n");
  std::string out = "Recommendation, by transport:\n";
  for (const auto& [transport, rows] : groups) {
    absl::StrAppend(&out, "- over ", transport, ": ", RecommendAmong(rows), "\n");
  }
  return out;
}

std::string RenderChartPng(const SuiteReport& report) {
  // Each label in full (up to kMostLabelChars): the column is as wide as the longest.
  constexpr size_t kMostLabelChars = 64;
  const int scale = 2, bar_h = 22, gap = 8, left = 16, bars_w = 420, right = 170;
  const auto label_of = [](const ReportRow& r) {
    std::string label = r.gpus > 1 ? absl::StrCat(r.experiment, " x", r.gpus) : r.experiment;
    if (label.size() > kMostLabelChars) label = label.substr(0, kMostLabelChars);
    return label;
  };
  size_t longest = 8;
  for (const ReportRow& r : report.rows) longest = std::max(longest, label_of(r).size());
  const int label_w = static_cast<int>(longest) * 6 * scale + 16;
  const int width = left + label_w + bars_w + right;
  const int top = 44;
  const int height = top + static_cast<int>(report.rows.size()) * (bar_h + gap) + 16;
  Canvas canvas(width, height, Rgb{255, 255, 255});
  canvas.Text(left, 12, absl::StrCat(report.suite, ": steps/s"), Rgb{0, 0, 0}, scale);
  double max_rate = 0;
  for (const ReportRow& r : report.rows) max_rate = std::max(max_rate, r.steps_per_s);
  const Rgb single{120, 120, 120}, lossless{46, 110, 180}, lossy{214, 120, 40}, exchanged_nothing{190, 190, 190};
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const ReportRow& r = report.rows[i];
    const int y = top + static_cast<int>(i) * (bar_h + gap);
    canvas.Text(left, y + 4, label_of(r), Rgb{0, 0, 0}, scale);
    const int w = max_rate > 0 ? static_cast<int>(bars_w * r.steps_per_s / max_rate) : 0;
    canvas.FillRect(left + label_w, y, std::max(w, 1), bar_h, r.gpus == 1                ? single
                       : r.diagnostic ? exchanged_nothing
                       : r.gradient_error   ? lossy
                                            : lossless);
    canvas.Text(left + label_w + w + 8, y + 4, absl::StrFormat("%.2f", r.steps_per_s), Rgb{0, 0, 0}, scale);
  }
  return canvas.EncodePng();
}

absl::Status WriteReport(const SuiteReport& report, const std::string& directory) {
  const std::pair<const char*, std::string> files[] = {
      {"report.md", absl::StrCat("# ", report.suite, "\n\n", FormatMarkdown(report), "\n", Recommend(report))},
      {"report.json", FormatJson(report)},
      {"report.csv", FormatCsv(report)},
      {"report.png", RenderChartPng(report)},
  };
  // Every file whole, or none replaced: a report is never half old, half new.
  for (const auto& [name, content] : files) {
    const std::string path = absl::StrCat(directory, "/", name, ".new");
    if (absl::Status s = WriteFileAtomically(path, content); !s.ok()) {
      for (const auto& [written, unused] : files) std::remove(absl::StrCat(directory, "/", written, ".new").c_str());
      return s;
    }
  }
  for (const auto& [name, content] : files) {
    const std::string path = absl::StrCat(directory, "/", name);
    if (std::rename((path + ".new").c_str(), path.c_str()) != 0) {
      return absl::UnavailableError(absl::StrCat("cannot rename ", path, ".new to ", path));
    }
  }
  return absl::OkStatus();
}

std::string NcclTransportFromLog(absl::string_view log) {
  bool p2p = false, shm = false, net = false;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    size_t via = line.find(" via ");
    if (via == absl::string_view::npos || !absl::StrContains(line, "Channel")) continue;
    absl::string_view how = line.substr(via + 5);
    p2p |= absl::StartsWith(how, "P2P");
    shm |= absl::StartsWith(how, "SHM");
    net |= absl::StartsWith(how, "NET");
  }
  std::vector<std::string> used;
  if (p2p) used.push_back("P2P");
  if (shm) used.push_back("SHM");
  if (net) used.push_back("NET");
  return absl::StrJoin(used, "+");
}

}  // namespace ddplab
