// The data files of a run directory written from reports' own types (run_data.h): the
// runner turns its history into these rows and the text of each file is made here, beside
// the parsers that read it back (a write then a parse gives the same rows to the printed
// precision: times to the microsecond, durations to the microsecond, rates to 1e-4 Gbit/s in
// timeseries.csv and 1e-6 in rails.csv). Pure; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "reports/run_data.h"

namespace faultline::reports {

// timeseries.csv: the header ParseTimeseriesCsv expects, then one row per point in order.
std::string TimeseriesCsv(std::span<const SeriesPoint> series);

// rails.csv: "t_s", then each column's name as h<host>[_n<rank>]_r<rail>_[rdma_](tx|rx)_gbps
// made from its fields (RailColumn::name is not read), then one row per t_s with an empty cell
// where a value is missing. Every column must have one value per t_s (checked: a column of
// another length is a programming error and throws std::invalid_argument).
std::string RailsCsv(const RailsTable& table);
// The name rails.csv gives `c` (what ParseRailsCsv reads back into its fields).
std::string RailColumnName(const RailColumn& c);

// A CCL event as events.jsonl writes it: {"type":"ccl_event","t_s",...,"rank","kind","path",
// "reason"}.
nlohmann::json CclEventJson(const EventRow& e);

// events.jsonl: one compact JSON object a line, in order. Every line is an object with a
// string "type" (checked: anything else throws std::invalid_argument, a programming error).
std::string EventsJsonl(std::span<const nlohmann::json> lines);

}  // namespace faultline::reports
