// The per-run artefacts written from the history: timeseries.csv (one row per completed
// collective) and events.jsonl (one JSON object a line: faults, the library's path events,
// policy decisions, restarts, checkpoints, holds, shrinks). Times are seconds since t0.
#pragma once

#include <cstdint>
#include <ostream>

#include "runner/core/history.h"

namespace faultline::runner {

void WriteTimeseriesCsv(const History& h, int64_t t0_ns, std::ostream& out);
void WriteEventsJsonl(const History& h, int64_t t0_ns, std::ostream& out);

}  // namespace faultline::runner
