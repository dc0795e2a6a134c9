// The per-run artefacts made from the history: timeseries.csv (one row per completed
// collective) and events.jsonl (one JSON object a line: faults, the library's path events,
// policy decisions, restarts, checkpoints, holds, shrinks). Times are seconds since t0. The
// rows are reports' types and the files' text is reports' (reports/run_files.h, beside the
// parsers that read them back); this unit only turns the history into rows.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "reports/run_data.h"
#include "runner/core/history.h"

namespace faultline::runner {

// Every complete collective (metrics' CompleteOps) as a timeseries row.
std::vector<reports::SeriesPoint> SeriesOf(const History& h, int64_t t0_ns);
// events.jsonl's lines: faults, CCL events, then the training workload's records.
std::vector<nlohmann::json> EventLinesOf(const History& h, int64_t t0_ns);

void WriteTimeseriesCsv(const History& h, int64_t t0_ns, std::ostream& out);
void WriteEventsJsonl(const History& h, int64_t t0_ns, std::ostream& out);

}  // namespace faultline::runner
