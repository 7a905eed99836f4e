// The charts of report.html, each an HTML <section> with its heading, subtitle and
// inline <svg>, drawn from the suite report's rows; and the few words and colours the
// charts and the page's table share. Used by report_html.cc.
//
//   std::string levers = ddplab::report_html::LeversChart(report);
//   std::string scaling = ddplab::report_html::ScalingChart(report);  // "" if no scaling
#ifndef DDPLAB_CORE_REPORT_REPORT_CHARTS_H_
#define DDPLAB_CORE_REPORT_REPORT_CHARTS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "ddplab/v1/report.pb.h"

namespace ddplab {
namespace report_html {

// A transport as a reader says it: "NVLINK" is "NVLink", "HOST_MEMORY" "host memory",
// "" and "default" "default".
std::string TransportName(absl::string_view transport);

// The distinct transports of the rows of several processes, in order of first
// appearance ("" and "default" as one, "default").
std::vector<std::string> Transports(const v1::SuiteReport& report);

// A transport's colour: NVLink blue, host memory red, network green, default purple,
// others from a palette by their place in `Transports`.
std::string TransportColor(const v1::SuiteReport& report, absl::string_view transport);

// `v` with `decimals` ("%.2f", or "%.2e" when `scientific`); NaN as "NaN" and
// infinities as "∞" and "-∞".
std::string Number(double v, int decimals, bool scientific = false);

// The single-process rows (one process), in the report's order.
std::vector<const v1::ReportRow*> SingleProcessRows(const v1::SuiteReport& report);

// "What each lever buys": one line per configuration and process count, one dot per
// transport at vs_single (or steps/s when no row has vs_single). "" without rows of
// several processes.
std::string LeversChart(const v1::SuiteReport& report);

// "Where the step goes": a stacked bar of StepParts per row, the single-process row
// first. "" when no row has parts.
std::string StepChart(const v1::SuiteReport& report);

// "Scaling": aggregate steps/s (steps/s x processes) against GPUs per configuration and
// transport, from the 1-GPU point (the configuration's own single-process row, else the
// report's first) with the ideal line from it. "" unless some configuration's rows ran
// at two or more GPU counts (a single-process row of the same configuration counting as
// 1): a configuration only ever compared with the baseline adds nothing to vs_single.
std::string ScalingChart(const v1::SuiteReport& report);

}  // namespace report_html
}  // namespace ddplab

#endif  // DDPLAB_CORE_REPORT_REPORT_CHARTS_H_
