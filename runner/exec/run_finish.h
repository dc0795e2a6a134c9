// The end of a run: from its history, the metrics, the checks of its expectations (or of an
// incident's `reproduce:`), report.json with the site's environment, timeseries.csv,
// events.jsonl, rails.csv, the reports rendered from them (reports/write_reports.h) and the
// printed summary. Returns the exit code, the verdict of the report just written.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runner/core/rails.h"
#include "runner/core/scenario.h"
#include "runner/exec/history_builder.h"
#include "runner/exec/run.h"
#include "runner/exec/site.h"

namespace faultline::runner {

struct FinishInputs {
  Scenario* scenario = nullptr;  // its topology's rail_gbps is set for an inventory
  const RunOptions* options = nullptr;
  std::string out_dir;
  std::string run_id;
  int64_t t0_ns = 0;
  int64_t execute_start_ns = 0;  // when `faultline run` started this run
  BuiltHistory built;
  Site* site = nullptr;
  std::optional<RailSeries> rail_series;
  nlohmann::json hook_record;
  std::string timeline_scheduling;
  std::vector<std::string>* harness_errors = nullptr;
};

int FinishRun(FinishInputs& in);

}  // namespace faultline::runner
