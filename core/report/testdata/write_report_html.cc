// Writes report.html for a sample suite to the file named by argv[1], for
// //core:report_html_browser_test: two transports at 2 GPUs with three repetitions each,
// lossy and diagnostic rows, a single-process row and two configurations also at 4 GPUs,
// so that every chart of the page is drawn. With "long" after the file, the page also
// holds what real suites write at full length: a third transport, derived experiment names,
// a description that runs on, and PyTorch code with a comment at the end of a line.
//
//   bazel run //core:testdata/write_report_html -- "$PWD/report.html" [long]
#include <algorithm>
#include <fstream>
#include <string>

#include "core/report/report_html.h"
#include "ddplab/v1/report.pb.h"

namespace {

using ddplab::v1::ReportRow;
using ddplab::v1::SuiteReport;

constexpr double kSingleStepsPerS = 12.55;

void SetSpread(ddplab::v1::Spread* s, double median, double spread) {
  s->set_median(median);
  s->set_min(median * (1 - spread));
  s->set_max(median * (1 + spread / 2));
  s->set_count(3);
}

// A row of `gpus` processes at `vs_single` of one GPU's step rate, its step's parts
// following from that.
ReportRow* AddRow(SuiteReport& report, const std::string& config, const std::string& transport,
                  int gpus, double vs_single, double exposed_ms) {
  ReportRow* row = report.add_rows();
  row->set_configuration(config);
  row->set_experiment(config + (gpus > 2 ? "_4gpu" : "") +
                      (transport == "NVLINK" ? "_nvlink" : "_host_memory"));
  row->set_gpus(gpus);
  row->set_transport(transport);
  row->set_nccl_transport(transport == "NVLINK" ? "P2P" : "SHM");
  SetSpread(row->mutable_steps_per_s(), kSingleStepsPerS * vs_single, 0.012);
  SetSpread(row->mutable_vs_single(), vs_single, 0.012);
  row->set_vs_naive(vs_single / (transport == "NVLINK" ? 0.906 : 0.634));
  row->set_tflops_per_gpu(37.2 * vs_single);
  row->set_exposed_comm_ms(exposed_ms);
  row->set_busbw_gbps(transport == "NVLINK" ? 310.5 : 21.4);
  row->set_peak_memory_gib(5.12);
  ddplab::v1::StepParts* p = row->mutable_parts();
  p->set_forward_ms(28.6);
  p->set_backward_single_ms(50.3);
  p->set_exposed_comm_ms(exposed_ms);
  p->set_optimizer_ms(0.6);
  p->set_other_ms(0.8);
  const double step_ms = 1000 / (kSingleStepsPerS * vs_single);
  p->set_compute_slowdown_ms(std::max(0.0, step_ms - 28.6 - 50.3 - exposed_ms - 1.4));
  p->set_step_ms(step_ms);
  row->set_pytorch("DDP(model, device_ids=[rank], bucket_cap_mb=25)");
  return row;
}

void AddSingleProcessRow(SuiteReport& report) {
  ReportRow* row = report.add_rows();
  row->set_experiment("single_gpu");
  row->set_configuration("single_gpu");
  row->set_description("One process, no communication: the baseline.");
  row->set_gpus(1);
  SetSpread(row->mutable_steps_per_s(), kSingleStepsPerS, 0.01);
  row->set_tflops_per_gpu(37.2);
  row->set_peak_memory_gib(4.82);
  ddplab::v1::StepParts* p = row->mutable_parts();
  p->set_forward_ms(28.4);
  p->set_backward_single_ms(50.3);
  p->set_optimizer_ms(0.6);
  p->set_other_ms(0.4);
  p->set_step_ms(79.7);
}

void AddRecommendations(SuiteReport& report) {
  ddplab::v1::Recommendation* r = report.add_recommendations();
  r->set_transport("NVLINK");
  r->set_fastest("zero_copy_nvlink");
  r->set_runner_up("bucket_25mb_nvlink");
  r->set_text(
      "On NVLink, zero_copy is fastest: 0.971 of one GPU's step rate, 1.07x naive DDP "
      "(one bucket for all gradients).");
  r->set_pytorch(
      "model = DDP(model, device_ids=[rank], bucket_cap_mb=25,\n"
      "            gradient_as_bucket_view=True, static_graph=True)");
  r->add_ddplab_only("zero_copy");
  r = report.add_recommendations();
  r->set_transport("HOST_MEMORY");
  r->set_fastest("powersgd_r1_host_memory");
  r->set_runner_up("zero_copy_host_memory");
  r->set_within_noise(true);
  r->set_fastest_exact("zero_copy_host_memory");
  r->set_text(
      "Over host memory, PowerSGD rank 1 and zero_copy are within noise of each other; "
      "zero_copy is exact.");
  r->set_pytorch(
      "model = DDP(model, device_ids=[rank], bucket_cap_mb=25)\n"
      "state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=1)\n"
      "model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)");
}

SuiteReport SampleReport() {
  SuiteReport report;
  report.set_suite("seed_study <levers> & \"transports\"");
  report.set_date("2025-11-02T03:51:00Z");
  report.set_repetitions(3);
  ddplab::v1::Machine* m = report.mutable_machine();
  m->set_device("NVIDIA H200");
  m->set_device_count(4);
  m->set_driver("580.159.04");
  m->set_cuda_runtime("13.0");
  m->set_nccl_version("2.28.9");
  m->set_torch_version("2.9.0");
  m->set_topology("NV18");
  m->set_cpu("2x AMD EPYC 9654, 96 cores");
  m->set_nodes(1);
  AddSingleProcessRow(report);
  const struct {
    const char* config;
    double nvlink, host, nvlink_ms, host_ms;
  } kLevers[] = {
      {"naive_ddp", 0.906, 0.634, 5.4, 42.9},     {"static_graph", 0.904, 0.633, 5.5, 43.2},
      {"bucket_25mb", 0.922, 0.850, 0.1, 1.2},    {"zero_copy", 0.971, 0.891, 0.4, 1.3},
      {"bf16_hook_25mb", 0.931, 0.883, 1.1, 1.2}, {"powersgd_r1", 0.950, 0.951, 0.2, 0.2},
  };
  for (const auto& l : kLevers) {
    ReportRow* nvlink = AddRow(report, l.config, "NVLINK", 2, l.nvlink, l.nvlink_ms);
    ReportRow* host = AddRow(report, l.config, "HOST_MEMORY", 2, l.host, l.host_ms);
    if (std::string(l.config) == "bf16_hook_25mb" || std::string(l.config) == "powersgd_r1") {
      nvlink->set_gradient_error(l.config[0] == 'b' ? 2.3e-3 : 0.75);
      host->set_gradient_error(l.config[0] == 'b' ? 2.3e-3 : 0.75);
    }
  }
  ReportRow* trace = AddRow(report, "nccl_trace", "NVLINK", 2, 0.897, 6.1);
  trace->set_diagnostic(true);
  trace->set_description("Records every collective's timing <for the trace> & more.");
  AddRow(report, "naive_ddp", "NVLINK", 4, 0.871, 7.9);
  AddRow(report, "bucket_25mb", "NVLINK", 4, 0.905, 0.6);
  AddRecommendations(report);
  return report;
}

// What real suites write at full length (see the file's comment).
void AddLongRows(SuiteReport& report) {
  ReportRow* row = AddRow(report, "bf16_fp32_sum_25mb", "SOCKETS", 2, 0.321, 61.2);
  row->set_experiment("bf16_fp32_sum_bucket_25mb_gradient_as_bucket_view_sockets-convergence-2");
  row->set_nccl_transport("NET Socket, NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1");
  row->set_gradient_error(2.3e-3);
  row->set_description(
      "bf16 on the wire, summed in float32 after a per-bucket all-to-all: the exact sum's "
      "order differs from NCCL's ring, so its error is the cast's alone, sampled every 50 steps.");
  row->set_pytorch(
      "state = powerSGD.PowerSGDState(process_group=None, matrix_approximation_rank=4,\n"
      "    start_powerSGD_iter=1000,  # for training: PyTorch's default; its docs advise about 10% "
      "of the steps (this run compressed from step 2)\n"
      "    min_compression_rate=2, use_error_feedback=True, warm_start=True, random_seed=0)");
  ddplab::v1::Recommendation* r = report.add_recommendations();
  r->set_transport("SOCKETS");
  r->set_fastest(row->experiment());
  r->set_text("Over sockets, " + row->experiment() + " is fastest: 0.321 of one GPU's step rate.");
  r->set_pytorch(row->pytorch());
}

}  // namespace

int main(int argc, char** argv) {
  const bool long_rows = argc == 3 && std::string(argv[2]) == "long";
  if (argc != 2 && !long_rows) return 2;
  SuiteReport report = SampleReport();
  if (long_rows) AddLongRows(report);
  std::ofstream out(argv[1], std::ios::binary);
  out << ddplab::FormatHtml(report);
  return out ? 0 : 1;
}
