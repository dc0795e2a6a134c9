// report.json (schema reports::kReportSchema, reports/schema.h): a pure function of the
// scenario, the recorded history, the metrics and the checks. Writes nothing itself; the
// caller stores the JSON.
// Keys are those of DESIGN.md, "Report". Times of faults are seconds from the run start.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "runner/core/checks.h"
#include "runner/core/history.h"
#include "runner/core/metrics.h"
#include "runner/core/rails.h"
#include "runner/core/scenario.h"

namespace faultline::runner {

struct ReportFiles {
  std::optional<std::string> timeseries;
  std::optional<std::string> events;
  std::optional<std::string> junit;
  std::optional<std::string> html;
  std::optional<std::string> rails;  // rails.csv; null when the rail ports were not sampled
};

struct ReportInputs {
  const Scenario* scenario = nullptr;
  std::string scenario_file;
  std::string scenario_sha256;  // of the file's bytes (Sha256Hex)
  uint64_t seed = 0;            // the seed in force (the scenario's or --seed)
  // {kernel, versions, knobs}: gathered by the caller; copied as given.
  nlohmann::json environment = nlohmann::json::object();
  const History* history = nullptr;
  const RunMetrics* metrics = nullptr;
  const std::vector<CheckResult>* checks = nullptr;
  ReportFiles files;
  // Optional: per-fault rail-port windows (runner/core/rails.h); each becomes
  // per_fault[i]["rails"] of the fault with the same id. Null: no "rails" key.
  const std::vector<FaultRails>* fault_rails = nullptr;
  // Optional: a training workload's figures, merged into "metrics" (with a top-level
  // "workload" object describing the training). Null for a collectives workload.
  const TrainingMetrics* training = nullptr;
  // Optional: the top-level "rails" object (how the rail ports were sampled, what failed).
  nlohmann::json rails_note;
};

// REQUIRES: scenario, history, metrics and checks are set.
nlohmann::json BuildReportJson(const ReportInputs& in);

// Lower-case hex SHA-256 of `data`: lives in base/sha256.h; kept visible here for the runner's
// existing callers.
using ::faultline::Sha256Hex;

}  // namespace faultline::runner
