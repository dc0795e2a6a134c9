// summary.md: the verdict and the tables of report.html in Markdown (GitHub/GitLab flavour),
// for pasting into a ticket. Pure; thread-safe.
#pragma once

#include <string>

#include "reports/run_data.h"

namespace faultline::reports {

// REQUIRES: CheckReport(run.report) passes.
std::string MarkdownSummary(const RunData& run);

}  // namespace faultline::reports
