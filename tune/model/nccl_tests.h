// nccl-tests' table of all-reduce timings (all_reduce_perf's standard output): read into
// rows, written back in the same format, and made into a cost curve. A size sweep
// measured here is written in this format too, so that it can be compared with
// nccl-tests' own numbers on the same machine.
//
//   absl::StatusOr<std::vector<ddplab::tune::NcclTestsRow>> rows =
//       ddplab::tune::ParseNcclTestsTable(text);         // all_reduce_perf's output
//   if (!rows.ok()) return rows.status();                // "line 31: out-of-place #wrong is 1..."
//   absl::StatusOr<ddplab::tune::CostCurve> curve = ddplab::tune::CurveFromNcclTests(*rows);
#ifndef DDPLAB_TUNE_MODEL_NCCL_TESTS_H_
#define DDPLAB_TUNE_MODEL_NCCL_TESTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tune/model/cost_curve.h"

namespace ddplab::tune {

// nccl-tests' bandwidths, in GB/s (10^9 bytes per second) as all_reduce_perf prints them:
// algbw = bytes / time; busbw = algbw * 2(n-1)/n for an all-reduce over n ranks (the
// bytes each rank's link carries, comparable with the link's own bandwidth).
double AlgBandwidthGBps(double bytes, double time_us);
double AllReduceBusBandwidthGBps(double algbw_gbps, int ranks);

// One row of nccl-tests' table: size count type redop root time algbw busbw #wrong for
// the out-of-place run, and the in-place run's time and #wrong where printed.
struct NcclTestsRow {
  int64_t bytes = 0;
  int64_t count = 0;             // elements
  std::string type = "float";    // nccl-tests' dtype name: float, half, bfloat16, ...
  std::string redop = "sum";
  int64_t root = -1;             // -1 for an all-reduce; older nccl-tests print no root
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  std::optional<int64_t> wrong;  // empty where nccl-tests did not check ("N/A")
  std::optional<double> in_place_time_us;
  std::optional<int64_t> in_place_wrong;
  int line = 0;                  // where the row was read, counting from 1; 0 if made
};

// A row for an all-reduce measured here: algbw and busbw computed from `bytes`,
// `time_us` and `ranks` (>= 1), `count` from `element_bytes`.
NcclTestsRow MakeAllReduceRow(int64_t bytes, int element_bytes, absl::string_view type,
                              double time_us, int ranks, std::optional<int64_t> wrong);

// Reads nccl-tests' table (all_reduce_perf's standard output). Lines starting with '#'
// (after blanks) and blank lines are comments; so are NCCL's own log lines ("NCCL INFO").
// Every other line must be a row: size count type redop [root] time algbw busbw #wrong,
// optionally followed by the in-place time algbw busbw #wrong. A row whose #wrong is
// above 0 (a wrong result), or a malformed or negative number, or a table with no row,
// is an error naming the line ("line 12: out-of-place #wrong is 3: ...").
absl::StatusOr<std::vector<NcclTestsRow>> ParseNcclTestsTable(absl::string_view text);

// The table as nccl-tests prints it, out-of-place columns only, with its two header
// comment lines; ParseNcclTestsTable reads it back.
std::string FormatNcclTestsTable(const std::vector<NcclTestsRow>& rows);

// The cost curve of the rows' out-of-place times. The rows must be of one type and redop
// (one dtype's curve); their sizes as FromPoints asks.
absl::StatusOr<CostCurve> CurveFromNcclTests(const std::vector<NcclTestsRow>& rows);

}  // namespace ddplab::tune

#endif  // DDPLAB_TUNE_MODEL_NCCL_TESTS_H_
