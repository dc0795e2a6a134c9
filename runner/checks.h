// Checks: the scenario's expectations judged against the run's metrics. Pure; thread-safe.
//
// Each expectation present in the scenario gives one CheckResult. A metric that is null
// (it could not be measured) fails its check: an expectation the run cannot show to hold does
// not hold.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runner/metrics.h"
#include "runner/scenario.h"

namespace faultline::runner {

struct CheckResult {
  std::string name;      // "outcome", "wrong_results", "stall_ms", "recovery_ms", ...
  nlohmann::json limit;  // e.g. {"max": 500}, {"pct": 90, "within_ms": 1000}, "survived"
  nlohmann::json value;  // the measured value; null when not measured
  bool pass = false;
  nlohmann::json ToJson() const;  // {name, limit, value, pass}
};

// In a fixed order: outcome, wrong_results, stall_ms, detection_ms, failover_latency_ms,
// recovery_ms, degraded_ratio, goodput_loss_pct (only those the scenario sets).
std::vector<CheckResult> CheckExpectations(const Expectations& expect, const RunMetrics& metrics);

// Exit code of `faultline run` for a run that completed: 0 when every check passed, 1 when one
// failed. (2, bad input, and 3, harness failure, are decided before there are checks.)
int ExitCodeForChecks(const std::vector<CheckResult>& checks);

}  // namespace faultline::runner
