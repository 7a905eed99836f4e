#include "tune/model/nccl_tests.h"

#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace ddplab::tune {
namespace {

constexpr absl::string_view kColumns = "size count type redop root time algbw busbw #wrong";

absl::Status LineError(int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("nccl-tests table, line ", line, ": ", what));
}

absl::Status BadNumber(int line, absl::string_view column, absl::string_view text, absl::string_view want) {
  return LineError(line, absl::StrCat(column, " is '", text, "', expected ", want));
}

absl::StatusOr<int64_t> ReadCount(int line, absl::string_view column, absl::string_view text) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < 0) {
    return BadNumber(line, column, text, "a whole number >= 0");
  }
  return value;
}

absl::StatusOr<double> ReadReal(int line, absl::string_view column, absl::string_view text) {
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value) || value < 0) {
    return BadNumber(line, column, text, "a finite number >= 0");
  }
  return value;
}

// #wrong: a count, or N/A where nccl-tests did not check. A count above 0 is an error.
absl::StatusOr<std::optional<int64_t>> ReadWrong(int line, absl::string_view run, absl::string_view text,
                                                 int64_t bytes) {
  if (text == "N/A") return std::optional<int64_t>();
  absl::StatusOr<int64_t> wrong = ReadCount(line, absl::StrCat(run, " #wrong"), text);
  if (!wrong.ok()) return wrong.status();
  if (*wrong > 0) {
    return LineError(line, absl::StrCat(run, " #wrong is ", *wrong, ": the all-reduce of ", bytes,
                                        " bytes gave wrong results, so its times must not be used; "
                                        "check the transport and measure again"));
  }
  return std::optional<int64_t>(*wrong);
}

// One table row, split into its columns.
absl::StatusOr<NcclTestsRow> ReadRow(int line, const std::vector<absl::string_view>& c) {
  const size_t n = c.size();
  if (n != 8 && n != 9 && n != 12 && n != 13) {
    return LineError(line, absl::StrCat("expected 9 columns (", kColumns,
                                        "), 8 without root, or 4 more for the in-place run; got ", n));
  }
  const bool has_root = n == 9 || n == 13;
  NcclTestsRow row;
  row.line = line;
  absl::StatusOr<int64_t> bytes = ReadCount(line, "size", c[0]);
  if (!bytes.ok()) return bytes.status();
  row.bytes = *bytes;
  absl::StatusOr<int64_t> count = ReadCount(line, "count", c[1]);
  if (!count.ok()) return count.status();
  row.count = *count;
  row.type = std::string(c[2]);
  row.redop = std::string(c[3]);
  if (has_root && !absl::SimpleAtoi(c[4], &row.root)) return BadNumber(line, "root", c[4], "a whole number");
  const size_t t = has_root ? 5 : 4;  // the out-of-place time's column
  absl::StatusOr<double> time = ReadReal(line, "out-of-place time", c[t]);
  if (!time.ok()) return time.status();
  row.time_us = *time;
  absl::StatusOr<double> algbw = ReadReal(line, "out-of-place algbw", c[t + 1]);
  if (!algbw.ok()) return algbw.status();
  row.algbw_gbps = *algbw;
  absl::StatusOr<double> busbw = ReadReal(line, "out-of-place busbw", c[t + 2]);
  if (!busbw.ok()) return busbw.status();
  row.busbw_gbps = *busbw;
  absl::StatusOr<std::optional<int64_t>> wrong = ReadWrong(line, "out-of-place", c[t + 3], row.bytes);
  if (!wrong.ok()) return wrong.status();
  row.wrong = *wrong;
  if (n == 12 || n == 13) {
    absl::StatusOr<double> in_time = ReadReal(line, "in-place time", c[t + 4]);
    if (!in_time.ok()) return in_time.status();
    row.in_place_time_us = *in_time;
    for (size_t i : {t + 5, t + 6}) {
      absl::StatusOr<double> bw = ReadReal(line, "in-place bandwidth", c[i]);
      if (!bw.ok()) return bw.status();
    }
    absl::StatusOr<std::optional<int64_t>> in_wrong = ReadWrong(line, "in-place", c[t + 7], row.bytes);
    if (!in_wrong.ok()) return in_wrong.status();
    row.in_place_wrong = *in_wrong;
  }
  return row;
}

}  // namespace

double AlgBandwidthGBps(double bytes, double time_us) {
  return time_us > 0 ? bytes / time_us * 1e-3 : 0.0;  // bytes/us * 1e6 / 1e9
}

double AllReduceBusBandwidthGBps(double algbw_gbps, int ranks) {
  return ranks > 0 ? algbw_gbps * 2.0 * (ranks - 1) / ranks : 0.0;
}

NcclTestsRow MakeAllReduceRow(int64_t bytes, int element_bytes, absl::string_view type, double time_us, int ranks,
                              std::optional<int64_t> wrong) {
  NcclTestsRow row;
  row.bytes = bytes;
  row.count = element_bytes > 0 ? bytes / element_bytes : 0;
  row.type = std::string(type);
  row.redop = "sum";
  row.root = -1;
  row.time_us = time_us;
  row.algbw_gbps = AlgBandwidthGBps(static_cast<double>(bytes), time_us);
  row.busbw_gbps = AllReduceBusBandwidthGBps(row.algbw_gbps, ranks);
  row.wrong = wrong;
  return row;
}

absl::StatusOr<std::vector<NcclTestsRow>> ParseNcclTestsTable(absl::string_view text) {
  std::vector<NcclTestsRow> rows;
  int line = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line;
    const absl::string_view stripped = absl::StripAsciiWhitespace(raw);
    if (stripped.empty() || stripped[0] == '#') continue;
    // NCCL_DEBUG's lines ("host:123:456 [0] NCCL INFO ...") share nccl-tests' output.
    if (absl::StrContains(stripped, "NCCL INFO") || absl::StrContains(stripped, "NCCL WARN")) continue;
    std::vector<absl::string_view> columns = absl::StrSplit(stripped, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    absl::StatusOr<NcclTestsRow> row = ReadRow(line, columns);
    if (!row.ok()) return row.status();
    rows.push_back(*std::move(row));
  }
  if (rows.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl-tests table: no rows; expected all_reduce_perf's output, rows of ", kColumns));
  }
  return rows;
}

std::string FormatNcclTestsTable(const std::vector<NcclTestsRow>& rows) {
  std::string out = absl::StrFormat("# %10s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s\n", "size", "count", "type",
                                    "redop", "root", "time", "algbw", "busbw", "#wrong");
  absl::StrAppend(&out, absl::StrFormat("# %10s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s\n", "(B)", "(elements)",
                                        "", "", "", "(us)", "(GB/s)", "(GB/s)", ""));
  for (const NcclTestsRow& r : rows) {
    const std::string wrong = r.wrong.has_value() ? absl::StrCat(*r.wrong) : "N/A";
    absl::StrAppend(&out, absl::StrFormat("%12d  %12d  %8s  %6s  %6d  %9.2f  %7.2f  %7.2f  %6s\n", r.bytes,
                                          r.count, r.type.empty() ? "-" : r.type, r.redop.empty() ? "-" : r.redop,
                                          r.root, r.time_us, r.algbw_gbps, r.busbw_gbps, wrong));
  }
  return out;
}

absl::StatusOr<CostCurve> CurveFromNcclTests(const std::vector<NcclTestsRow>& rows) {
  if (rows.empty()) return absl::InvalidArgumentError("nccl-tests table: no rows to make a cost curve of");
  std::set<int64_t> seen;
  std::vector<CostPoint> points;
  for (size_t i = 0; i < rows.size(); ++i) {
    const NcclTestsRow& r = rows[i];
    const std::string where = r.line > 0 ? absl::StrCat("line ", r.line) : absl::StrCat("row ", i + 1);
    if (r.type != rows[0].type || r.redop != rows[0].redop) {
      return absl::InvalidArgumentError(absl::StrCat(
          "nccl-tests table, ", where, ": ", r.type, " ", r.redop, " after rows of ", rows[0].type, " ",
          rows[0].redop, "; a cost curve is of one dtype and operation, so give each its own table"));
    }
    if (r.wrong.value_or(0) > 0 || r.in_place_wrong.value_or(0) > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("nccl-tests table, ", where, ": #wrong is above 0; a wrong result's time must not be used"));
    }
    if (!seen.insert(r.bytes).second) {
      return absl::InvalidArgumentError(absl::StrCat("nccl-tests table, ", where, ": the size ", r.bytes,
                                                     " bytes again; keep one row per size"));
    }
    points.push_back({static_cast<double>(r.bytes), r.time_us});
  }
  return CostCurve::FromPoints(std::move(points));
}

}  // namespace ddplab::tune
