// A run directory's files as the report writers read them, and the thin loader that reads
// them. The parsers are pure; LoadRunDir and FindRunDirs only read files. Thread-safe.
//
// A run directory (what `faultline run --out DIR` writes) holds report.json (required),
// timeseries.csv, events.jsonl, scenario.yaml and ranks/. Files other than report.json may be
// missing (a run that failed early); the writers then say so instead of drawing.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "reports/schema.h"

namespace faultline::reports {

// One completed collective (a timeseries.csv row). Times are seconds from the run start.
struct SeriesPoint {
  int64_t index = 0;
  double start_s = 0;
  double end_s = 0;
  double duration_ms = 0;
  uint64_t bytes = 0;
  double busbw_gbps = 0;
};

// One CCL event (an events.jsonl line of type "ccl_event").
struct EventRow {
  double t_s = 0;
  int rank = 0;
  std::string kind;  // path_down, migrated, resumed, rebalanced, path_up, failback, abort
  int path = -1;     // rail index; -1 when the event concerns no single path
  std::string reason;
};

// One column of rails.csv: a rail port's rate in one direction, Gbit/s per sample interval.
struct RailColumn {
  std::string name;         // e.g. "h0_r1_tx_gbps", "h1_n0_r0_rdma_rx_gbps"
  int host = 0;
  std::optional<int> rank;  // per-rank NICs
  int rail = 0;
  bool tx = true;           // tx (sent by the port) or rx
  bool rdma = false;        // the RDMA device's counters rather than the interface's
  std::vector<std::optional<double>> values;  // per row; nullopt where the cell is empty
};

// rails.csv: sample times (seconds from the run start, at each interval's end) and columns.
struct RailsTable {
  std::vector<double> t_s;
  std::vector<RailColumn> columns;
};

struct RunData {
  nlohmann::json report;                    // report.json
  std::vector<SeriesPoint> series;          // timeseries.csv
  std::vector<EventRow> events;             // events.jsonl, CCL events only
  std::optional<std::string> scenario_text; // scenario.yaml as copied into the run directory
  std::optional<RailsTable> rails;          // rails.csv, when the run sampled its rail ports
  std::vector<std::string> notes;           // what could not be read, for the reader
};

// timeseries.csv: the header "index,start_s,end_s,duration_ms,bytes,busbw_gbps" then one row
// per collective. Fails with kInvalidArgument naming the line on a malformed row.
Result<std::vector<SeriesPoint>> ParseTimeseriesCsv(std::string_view text);

// rails.csv: the header "t_s" then columns named h<h>[_n<l>]_r<r>_[rdma_](tx|rx)_gbps, then
// one row of numbers (or empty cells) per sample. kInvalidArgument naming the line on a bad
// header or row.
Result<RailsTable> ParseRailsCsv(std::string_view text);

// events.jsonl: keeps the "ccl_event" lines; "fault" lines are in report.json already. A
// cut-off last line is ignored; any other malformed line fails naming its line.
Result<std::vector<EventRow>> ParseEventsJsonl(std::string_view text);

// Checks that `report` is an object of a known schema (schema.h: faultline.report/v1 or v2)
// with the keys the writers read (schema, scenario, outcome, faults, metrics, per_fault,
// expectations; each expectation an object with a boolean "pass"). Keys it does not name
// (v2's failover_first_ms, per_fault[].flows, ...) may be present or absent.
Status CheckReport(const nlohmann::json& report);

// Parses the text of DIR/report.json and checks it (CheckReport); `dir` names it in errors.
// kInvalidArgument for text that is not JSON or not a report. Pure; never throws.
Result<nlohmann::json> ParseReport(std::string_view text, const std::string& dir);

// Reads DIR/report.json (required: kNotFound / kInvalidArgument when missing or malformed)
// and whatever of timeseries.csv, events.jsonl, scenario.yaml and rails.csv exists (a
// missing rails.csv is a note only when report.json names it under files.rails).
Result<RunData> LoadRunDir(const std::string& dir);

// Run directories under `path`: `path` itself when it holds report.json, else every directory
// below it that does (sorted). kNotFound when there is none.
Result<std::vector<std::string>> FindRunDirs(const std::string& path);

}  // namespace faultline::reports
