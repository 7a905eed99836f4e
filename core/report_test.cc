#include "core/report.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace ddplab {
namespace {

v1::RunResult Run(const std::string& name, int world, double steps_per_s, bool engine) {
  v1::RunResult r;
  r.set_suite("s");
  r.set_experiment(name);
  r.set_world_size(world);
  r.set_steps_per_s(steps_per_s);
  r.set_engine(engine);
  r.set_transport("NVLINK");
  r.set_peak_memory_gib(4.82);
  r.set_tflops_per_gpu(37.2);
  return r;
}

std::vector<v1::RunResult> Runs() {
  std::vector<v1::RunResult> runs{Run("single_gpu", 1, 12.5, false), Run("naive_ddp", 4, 11.0, true),
                                   Run("bf16", 4, 11.8, true)};
  runs[1].set_exposed_comm_ms(7.0);
  runs[2].set_exposed_comm_ms(0.1);
  runs[2].set_gradient_error(3e-3);
  runs[2].set_gradient_error_samples(4);
  runs[2].add_bucket_bytes(100);
  runs[2].add_bucket_bytes(400);
  runs[2].add_bucket_busbw_gbps(80);
  runs[2].add_bucket_busbw_gbps(300);
  runs[2].set_nccl_transport("P2P");
  return runs;
}

TEST(ReportTest, RatiosAgainstTheSingleProcessRunAndNaive) {
  SuiteReport report = MakeReport(Runs());
  ASSERT_EQ(report.rows.size(), 3u);
  EXPECT_EQ(report.suite, "s");
  EXPECT_DOUBLE_EQ(*report.rows[1].vs_single, 11.0 / 12.5);
  EXPECT_FALSE(report.rows[0].vs_naive.has_value());  // the single run has no engine
  EXPECT_DOUBLE_EQ(*report.rows[2].vs_naive, 11.8 / 11.0);
  EXPECT_DOUBLE_EQ(*report.rows[2].busbw_gbps, 300);  // the largest bucket's
  EXPECT_EQ(report.rows[0].transport, "-");
}

// The chart's label column fits the longest name (the default suite's are up to 40
// characters; a label is cut only beyond 64): the chart grows with it.
TEST(ReportTest, ChartLabelsAreNotCutShort) {
  const auto png_width = [](const std::string& png) {
    // IHDR follows the 8-byte signature and the chunk's length and type: width, big-endian.
    EXPECT_GE(png.size(), 24u);
    if (png.size() < 24) return uint32_t{0};
    uint32_t w = 0;
    for (int i = 16; i < 20; ++i) w = (w << 8) | static_cast<uint8_t>(png[i]);
    return w;
  };
  std::vector<v1::RunResult> runs = Runs();
  const uint32_t short_width = png_width(RenderChartPng(MakeReport(runs)));
  const std::string name = "static_graph_bucket_view_host_memory";  // 36 characters, " x4" after it
  runs[1].set_experiment(name);
  const uint32_t long_width = png_width(RenderChartPng(MakeReport(runs)));
  // 5x7 glyphs drawn twice their size, one column between: 12 pixels a character.
  EXPECT_GE(long_width, short_width + 12 * (name.size() + 3 - std::string("naive_ddp x4").size()));
}

// The no_communication diagnostic exchanges nothing: however fast, it is never the
// recommendation.
TEST(ReportTest, NeverRecommendsARunThatExchangedNothing) {
  std::vector<v1::RunResult> runs = Runs();
  runs.push_back(::ddplab::Run("no_communication", 4, 12.4, true));
  runs.back().set_diagnostic(true);
  SuiteReport report = MakeReport(runs);
  ASSERT_EQ(report.rows.size(), 4u);
  EXPECT_TRUE(report.rows[3].diagnostic);
  EXPECT_FALSE(report.rows[2].diagnostic);
  const std::string text = Recommend(report);
  EXPECT_EQ(text.find("no_communication"), std::string::npos) << text;
  EXPECT_NE(text.find("bf16 is the fastest"), std::string::npos) << text;
}

// Every figure of the Markdown table is the JSON's, printed as the table prints it.
TEST(ReportTest, TheTablesFiguresEqualTheJsons) {
  SuiteReport report = MakeReport(Runs());
  google::protobuf::Struct json;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(FormatJson(report), &json).ok());
  const auto& rows = json.fields().at("rows").list_value().values();
  std::vector<std::string> lines = absl::StrSplit(FormatMarkdown(report), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2 + rows.size());
  for (int i = 0; i < rows.size(); ++i) {
    const auto& f = rows[i].struct_value().fields();
    std::vector<std::string> cells = absl::StrSplit(lines[2 + i], " | ");
    EXPECT_EQ(cells[0], "| " + f.at("experiment").string_value());
    EXPECT_EQ(cells[1], absl::StrCat(f.at("gpus").number_value()));
    EXPECT_EQ(cells[3], absl::StrFormat("%.3f", f.at("steps_per_s").number_value()));
    auto optional = [&](const char* key, const char* format) {
      const auto& v = f.at(key);
      return v.has_null_value() ? std::string("-") : absl::StrFormat(format, v.number_value());
    };
    EXPECT_EQ(cells[4], optional("vs_single_gpu", "%.3f"));
    EXPECT_EQ(cells[5], optional("vs_naive", "%.3f"));
    EXPECT_EQ(cells[6], absl::StrFormat("%.2f", f.at("exposed_comm_ms").number_value()));
    EXPECT_EQ(cells[7], optional("busbw_gbps", "%.1f"));
    EXPECT_EQ(cells[8], absl::StrFormat("%.2f", f.at("peak_memory_gib").number_value()));
    EXPECT_EQ(cells[9], optional("gradient_error", "%.2e"));
  }
  EXPECT_NE(FormatMarkdown(report).find("NVLINK (P2P)"), std::string::npos);
  // CSV: the same cells, one line each.
  std::vector<std::string> csv = absl::StrSplit(FormatCsv(report), '\n', absl::SkipEmpty());
  EXPECT_EQ(csv.size(), 4u);
  EXPECT_EQ(csv[3], "bf16,4,NVLINK (P2P),11.800,0.944,1.073,0.10,300.0,4.82,3.00e-03,37.2");
}

TEST(ReportTest, RecommendsTheFastestAndSaysWhetherCommunicationIsExposed) {
  std::string text = Recommend(MakeReport(Runs()));
  EXPECT_EQ(text,
            "Recommendation: bf16 is the fastest on this machine, 11.800 steps/s on 4 processes, 7% "
            "over naive_ddp (one bucket after backward), 0.944 of the single-process step rate. Communication is hidden behind "
            "backward (0.10 ms exposed of 84.7 ms). It is lossy: gradients differ from exact "
            "all-reduce by 3.0e-03 (relative). The fastest exact one is naive_ddp, 11.000 steps/s "
            "(0.880 of the single-process step rate).\n");
  std::vector<v1::RunResult> runs = Runs();
  runs.pop_back();
  EXPECT_NE(Recommend(MakeReport(runs)).find("Communication is still exposed: 7.0 ms of its 90.9 ms step"),
            std::string::npos);
}

TEST(ReportTest, ByTransportWithSweptNames) {
  std::vector<v1::RunResult> runs{ddplab::Run("single_gpu", 1, 12.5, false)};
  for (const char* transport : {"NVLINK", "HOST_MEMORY"}) {
    const bool host = std::string(transport) == "HOST_MEMORY";
    std::string suffix = host ? "_host_memory" : "_nvlink";
    runs.push_back(ddplab::Run("naive_ddp" + suffix, 4, host ? 8.0 : 11.0, true));
    runs.push_back(ddplab::Run("tuned" + suffix, 4, host ? 9.0 : 11.5, true));
    runs[runs.size() - 2].set_transport(transport);
    runs.back().set_transport(transport);
  }
  SuiteReport report = MakeReport(runs);
  EXPECT_DOUBLE_EQ(*report.rows[2].vs_naive, 11.5 / 11.0);
  EXPECT_DOUBLE_EQ(*report.rows[4].vs_naive, 9.0 / 8.0);
  std::string text = Recommend(report);
  EXPECT_EQ(text.substr(0, text.find('\n')), "Recommendation, by transport:");
  EXPECT_NE(text.find("- over NVLINK: tuned_nvlink is the fastest on this machine, 11.500 steps/s on 4 "
                      "processes, 5% over naive_ddp (one bucket after backward)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("- over HOST_MEMORY: tuned_host_memory is the fastest on this machine, 9.000 "
                      "steps/s on 4 processes, 12% over naive_ddp (one bucket after backward)"),
            std::string::npos)
      << text;
}

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
