// report.html: one self-contained page (inline CSS and SVG, no script, no external resource;
// a Content-Security-Policy forbids fetching anything) that a CI artifact viewer or a vendor
// opens offline. Sections, in order: the verdict; the run's facts; busbw over time with the
// faults and their detection/failover/recovery instants; the rails' path state (per-rail
// throughput is not recorded by the workers, and the page says so); faults with per-fault
// metrics; overall metrics; expectations; the scenario file; the environment. Pure.
#pragma once

#include <string>

#include "reports/run_data.h"

namespace faultline::reports {

// REQUIRES: CheckReport(run.report) passes.
std::string HtmlReport(const RunData& run);

}  // namespace faultline::reports
