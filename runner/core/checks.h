// Checks: the scenario's expectations judged against the run's metrics. Pure; thread-safe.
//
// Each expectation present in the scenario gives one CheckResult. A metric that is null
// (it could not be measured) fails its check: an expectation the run cannot show to hold does
// not hold.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runner/core/metrics.h"
#include "runner/core/scenario.h"

namespace faultline::runner {

struct CheckResult {
  std::string name;      // "outcome", "wrong_results", "stall_ms", "recovery_ms", ...
  nlohmann::json limit;  // e.g. {"max": 500}, {"pct": 90, "within_ms": 1000}, "survived"
  nlohmann::json value;  // the measured value; null when not measured
  bool pass = false;
  // Why the value is null, when it is (a check on a null value fails): e.g. "null: fault f2
  // has no detection_ms (no path event crossed its target)". Empty otherwise.
  std::string reason = {};
  nlohmann::json ToJson() const;  // {name, limit, value, pass}, and reason when set
};

// In a fixed order: outcome, wrong_results, then the metric rows of reports::kMetricTable
// (reports/metric_table.h) that have an expectation: stall_ms, detection_ms,
// failover_first_ms, failover_latency_ms, recovery_ms, degraded_ratio, goodput_loss_pct (only
// those the scenario sets). A metric check is named by the metric's key and its limit by the
// row's limit key.
std::vector<CheckResult> CheckExpectations(const Expectations& expect, const RunMetrics& metrics);

// A replay judged by `reproduce:` (Scenario::JudgedByReproduce), in this order:
//   reproduce.outcome: the run's outcome is the incident's;
//   reproduce.ranks (when ranks are listed): each listed rank failed (returned an error, or
//     its process crashed) after the first applied fault and, unless the outcome is "hung",
//     within `within` of it (a hang's end says nothing of when it began); the value maps each
//     listed rank to its failure time in ms after that fault, or to "did not fail".
std::vector<CheckResult> CheckReproduce(const Reproduce& reproduce, const RunMetrics& metrics,
                                        const History& history);

// expect.param_sha256: twin. `run`: this run's common parameter hash (absent when ranks
// disagreed or none finished); `twin`: the fault-free twin's (absent without a twin). Passes
// only when both are present and equal.
CheckResult CheckParamHashAgainstTwin(const std::optional<std::string>& run,
                                      const std::optional<std::string>& twin);

// The verdict and exit code of a run are not decided here: reports/verdict.h reads them from
// the report.json these checks go into.

}  // namespace faultline::runner
