// Writes a report chart of three runs to the file named by argv[1], for //core:png_test.
#include <fstream>

#include "core/report.h"

namespace {
ddplab::ReportRow Row(const char* name, int gpus, double steps_per_s) {
  ddplab::ReportRow row;
  row.experiment = name;
  row.gpus = gpus;
  row.steps_per_s = steps_per_s;
  return row;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  ddplab::SuiteReport report;
  report.suite = "chart_test";
  report.rows.push_back(Row("single_gpu", 1, 12.5));
  report.rows.push_back(Row("naive_ddp", 4, 11.2));
  report.rows.push_back(Row("bf16", 4, 11.8));
  report.rows.back().gradient_error = 3e-3;
  std::ofstream(argv[1], std::ios::binary) << ddplab::RenderChartPng(report);
  return 0;
}
