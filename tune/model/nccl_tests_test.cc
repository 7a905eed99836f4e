#include "tune/model/nccl_tests.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ddplab::tune {
namespace {

// all_reduce_perf's output, as nccl-tests prints it (2.13 on, with the root column),
// with an NCCL_DEBUG line among it.
constexpr char kTable[] = R"(# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   6899 on    node device  0 [0000:04:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   6900 on    node device  1 [0000:05:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
node:6899:6899 [0] NCCL INFO comm 0x55d5 rank 0 nranks 2 cudaDev 0 busId 4000 - Init COMPLETE
           8             2     float     sum      -1    10.52    0.00    0.00      0    10.31    0.00    0.00      0
        1024           256     float     sum      -1    11.00    0.09    0.09      0    10.90    0.09    0.09    N/A
     1048576        262144     float     sum      -1    25.00   41.94   41.94      0    24.80   42.28   42.28      0
   134217728      33554432     float     sum      -1   1400.0   95.87   95.87      0   1398.0   96.01   96.01      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 34.51
#
)";

TEST(NcclTestsTest, ReadsAllReducePerfOutput) {
  absl::StatusOr<std::vector<NcclTestsRow>> rows = ParseNcclTestsTable(kTable);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 4u);
  const NcclTestsRow& r = (*rows)[2];
  EXPECT_EQ(r.bytes, 1048576);
  EXPECT_EQ(r.count, 262144);
  EXPECT_EQ(r.type, "float");
  EXPECT_EQ(r.redop, "sum");
  EXPECT_EQ(r.root, -1);
  EXPECT_DOUBLE_EQ(r.time_us, 25.0);
  EXPECT_DOUBLE_EQ(r.algbw_gbps, 41.94);
  EXPECT_DOUBLE_EQ(r.busbw_gbps, 41.94);
  ASSERT_TRUE(r.wrong.has_value());
  EXPECT_EQ(*r.wrong, 0);
  ASSERT_TRUE(r.in_place_time_us.has_value());
  EXPECT_DOUBLE_EQ(*r.in_place_time_us, 24.8);
  EXPECT_EQ(r.line, 13);
  EXPECT_FALSE((*rows)[1].in_place_wrong.has_value());  // N/A: not checked

  absl::StatusOr<CostCurve> curve = CurveFromNcclTests(*rows);
  ASSERT_TRUE(curve.ok()) << curve.status();
  EXPECT_DOUBLE_EQ(curve->TimeUs(1048576), 25.0);
  EXPECT_DOUBLE_EQ(curve->TimeUs(8), 10.52);
}

TEST(NcclTestsTest, ReadsOlderTablesWithoutRootAndOutOfPlaceOnly) {
  absl::StatusOr<std::vector<NcclTestsRow>> rows = ParseNcclTestsTable(
      "#  size count type redop time algbw busbw #wrong\n"
      "  1024  256  float  sum  12.5  0.08  0.12  0\n"
      "\n"
      "  2048  512  float  sum  13.5  0.15  0.23  N/A\n");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].root, -1);
  EXPECT_DOUBLE_EQ((*rows)[1].time_us, 13.5);
  EXPECT_FALSE((*rows)[1].wrong.has_value());
  EXPECT_FALSE((*rows)[1].in_place_time_us.has_value());
  EXPECT_EQ((*rows)[1].line, 4);
}

TEST(NcclTestsTest, RejectsWrongResultsNamingTheLine) {
  const std::string table = absl::StrCat(
      "# size count type redop root time algbw busbw #wrong\n",
      "   8    2  float  sum  -1  10.0  0.00  0.00  0\n",
      "  16    4  float  sum  -1  10.1  0.00  0.00  1\n");
  const absl::Status status = ParseNcclTestsTable(table).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "line 3")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "out-of-place #wrong is 1")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "16 bytes")) << status;
  // In the in-place run too.
  const absl::Status in_place =
      ParseNcclTestsTable("8 2 float sum -1 10.0 0.00 0.00 0 10.0 0.00 0.00 2\n").status();
  EXPECT_TRUE(absl::StrContains(in_place.message(), "line 1: in-place #wrong is 2")) << in_place;
}

TEST(NcclTestsTest, RejectsGarbageNamingTheLineAndColumn) {
  absl::Status status = ParseNcclTestsTable("# header\n8 2 float sum -1 fast 0.00 0.00 0\n").status();
  EXPECT_TRUE(absl::StrContains(status.message(), "line 2: out-of-place time is 'fast'")) << status;
  status = ParseNcclTestsTable("8 2 float sum -1 10 0.00 0.00 0\nSegmentation fault (core dumped)\n").status();
  EXPECT_TRUE(absl::StrContains(status.message(), "line 2: expected 9 columns")) << status;
  status = ParseNcclTestsTable("-8 2 float sum -1 10 0.00 0.00 0\n").status();
  EXPECT_TRUE(absl::StrContains(status.message(), "line 1: size is '-8'")) << status;
  status = ParseNcclTestsTable("8 2 float sum -1 10 0.00 0.00 zero\n").status();
  EXPECT_TRUE(absl::StrContains(status.message(), "line 1: out-of-place #wrong is 'zero'")) << status;
  status = ParseNcclTestsTable("# only comments\n\n").status();
  EXPECT_TRUE(absl::StrContains(status.message(), "no rows")) << status;
}

TEST(NcclTestsTest, BandwidthsAsNcclTestsComputesThem) {
  // 1 GB in 10 ms: 100 GB/s; over 8 ranks busbw = 100 * 2 * 7 / 8 = 175 GB/s.
  EXPECT_DOUBLE_EQ(AlgBandwidthGBps(1e9, 1e4), 100);
  EXPECT_DOUBLE_EQ(AllReduceBusBandwidthGBps(100, 8), 175);
  EXPECT_DOUBLE_EQ(AllReduceBusBandwidthGBps(100, 2), 100);
  EXPECT_DOUBLE_EQ(AllReduceBusBandwidthGBps(100, 1), 0);
  const NcclTestsRow row = MakeAllReduceRow(1 << 20, 2, "bfloat16", 20.0, 4, 0);
  EXPECT_EQ(row.count, 1 << 19);
  EXPECT_DOUBLE_EQ(row.algbw_gbps, 1048576 / 20.0 / 1000);
  EXPECT_DOUBLE_EQ(row.busbw_gbps, row.algbw_gbps * 1.5);
}

TEST(NcclTestsTest, FormatsATableThatReadsBack) {
  std::vector<NcclTestsRow> rows = {MakeAllReduceRow(8, 4, "float", 10.25, 2, 0),
                                    MakeAllReduceRow(1 << 20, 4, "float", 30.5, 2, std::nullopt),
                                    MakeAllReduceRow(1 << 30, 4, "float", 12345.67, 2, 0)};
  const std::string text = FormatNcclTestsTable(rows);
  EXPECT_TRUE(absl::StartsWith(text, "#       size         count")) << text;
  EXPECT_TRUE(absl::StrContains(text, "#wrong")) << text;
  absl::StatusOr<std::vector<NcclTestsRow>> back = ParseNcclTestsTable(text);
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << text;
  ASSERT_EQ(back->size(), 3u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ((*back)[i].bytes, rows[i].bytes);
    EXPECT_EQ((*back)[i].count, rows[i].count);
    EXPECT_EQ((*back)[i].type, "float");
    EXPECT_EQ((*back)[i].root, -1);
    EXPECT_NEAR((*back)[i].time_us, rows[i].time_us, 0.005);
    EXPECT_NEAR((*back)[i].busbw_gbps, rows[i].busbw_gbps, 0.005);
    EXPECT_EQ((*back)[i].wrong, rows[i].wrong);
  }
}

TEST(NcclTestsTest, CurveNeedsOneDtypeAndOneRowPerSize) {
  std::vector<NcclTestsRow> rows = {MakeAllReduceRow(8, 4, "float", 10, 2, 0),
                                    MakeAllReduceRow(16, 2, "half", 11, 2, 0)};
  absl::Status status = CurveFromNcclTests(rows).status();
  EXPECT_TRUE(absl::StrContains(status.message(), "row 2: half sum after rows of float sum")) << status;
  rows = {MakeAllReduceRow(8, 4, "float", 10, 2, 0), MakeAllReduceRow(8, 4, "float", 11, 2, 0)};
  status = CurveFromNcclTests(rows).status();
  EXPECT_TRUE(absl::StrContains(status.message(), "the size 8 bytes again")) << status;
  rows = {MakeAllReduceRow(8, 4, "float", 10, 2, 0), MakeAllReduceRow(16, 4, "float", 11, 2, 3)};
  EXPECT_FALSE(CurveFromNcclTests(rows).ok());
}

}  // namespace
}  // namespace ddplab::tune
