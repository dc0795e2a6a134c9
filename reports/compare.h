// Comparing runs. Pure functions of report.json objects; thread-safe.
//
// Reports are grouped by scenario: the key is "<scenario name> [<ccl>]". When a side holds
// several runs of one key (repeated runs), its value for a metric is the median (p50) over the
// runs where the metric is measured or "never" (below); not-applicable nulls are left out.
//
// Never vs not applicable (RunValue). For the convergence and recovery metrics
// (IsConvergenceMetric: recovery_ms, failover_latency_ms, failover_first_ms) a null can mean
// "it never happened" or "it does not apply". Per applied fault (faults[].applied_s not null,
// matched to per_fault[] by id), a null value is "never" when:
//  - recovery_ms: the fault's baseline_busbw_gbps (else the run's) is measured;
//  - failover_latency_ms: per_fault[].never_converged is true; where the report has no such
//    key (v1), when the fault's detection_ms is measured (noticed, never resumed);
//  - failover_first_ms: the fault's detection_ms is measured.
// Otherwise the null does not apply (no fault applied, no baseline, a CCL without path
// events, a fault that touched none of the library's flows). A run's value is "never" when
// any applied fault's is (the run's value is the worst over its faults), else the run's
// metrics[] value when it is a number, else not applicable. "never" counts as +infinity in
// medians and percentiles and prints as "never". Other metrics: null is not applicable.
//
// CompareRuns (A = before, B = after), per key and metric:
//  - change = (B - A) / |A| in percent; when A is 0, 0 if B is 0, else +/-infinity.
//  - Direction: higher stall_ms, detection_ms, failover_first_ms, failover_latency_ms,
//    recovery_ms and goodput_loss_pct is worse; lower baseline_busbw_gbps and degraded_ratio
//    is worse.
//  - A regression: a change in the worse direction beyond the tolerance (strictly greater).
//    A number in A and "never" in B is a regression (change +inf%); "never" in A and a number
//    in B is an improvement; "never" in both is ok.
//  - Nulls (not applicable): null in both is "n/a" (not a regression); measured in A and null
//    in B is a regression ("lost"); null in A and measured in B is "new" (not a regression).
//  - Beside the metrics: a worse verdict (PASS < FAIL < HARNESS ERROR, worst run of each
//    side) and more wrong results (any increase) are regressions; a key present in A and
//    missing in B is a regression, a key only in B is reported as new.
//  - Only reports of one schema are compared (CheckSameSchema): a metric's meaning changes
//    with the schema (schema.h).
//
// RunStats: per key, over N runs, per metric: n (runs measured or never), n_never, n/a (runs
// where it does not apply), p50 and p95 (nearest rank: the ceil(p/100 x n)-th smallest value,
// never = +inf), min and max.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace faultline::reports {

enum class ChangeStatus { kOk, kImproved, kRegression, kBothNull, kLost, kNew };
const char* ChangeStatusName(
    ChangeStatus s);  // "ok", "improved", "REGRESSION", "n/a", "LOST", "new"

struct MetricChange {
  std::string metric;
  bool higher_is_worse = true;
  std::optional<double> a;
  std::optional<double> b;
  std::optional<double> change_pct;  // absent when either side is null
  ChangeStatus status = ChangeStatus::kOk;
  bool regression() const {
    return status == ChangeStatus::kRegression || status == ChangeStatus::kLost;
  }
};

struct ScenarioChange {
  std::string key;
  size_t runs_a = 0;  // 0: missing on that side
  size_t runs_b = 0;
  std::string verdict_a;  // worst verdict over the side's runs
  std::string verdict_b;
  bool verdict_regressed = false;
  std::optional<int64_t> wrong_a;  // most wrong results in one run; absent when not checked
  std::optional<int64_t> wrong_b;
  bool wrong_regressed = false;
  std::vector<MetricChange> metrics;  // empty when the key is missing on a side
  int Regressions() const;
};

struct Comparison {
  double tolerance_pct = 10;
  std::vector<ScenarioChange> scenarios;  // sorted by key
  int Regressions() const;
};

// The grouping key of a report: "<scenario name> [<ccl>]".
std::string ScenarioKey(const nlohmann::json& report);

// Whether `metric` is one whose null can mean "never" (recovery_ms, failover_latency_ms,
// failover_first_ms).
bool IsConvergenceMetric(const std::string& metric);

// A run's value of `metric` as the statistics take it: a number, +infinity for "never", or
// nullopt when it does not apply (rules above). REQUIRES: `report` passes CheckReport.
std::optional<double> RunValue(const nlohmann::json& report, const std::string& metric);

// OK when every report of `a` and `b` has the same schema; else kInvalidArgument saying which
// side holds which schema and why their metrics cannot be compared.
Status CheckSameSchema(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b);

// REQUIRES: every report passes CheckReport; CheckSameSchema(a, b) is OK; tolerance_pct >= 0.
Comparison CompareRuns(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b,
                       double tolerance_pct);

// A table per scenario and a last line "compare: N regression(s) ...".
std::string FormatComparison(const Comparison& c);

// "10%", "10" and "2.5%" are percentages; anything else (negative, not a number) is
// kInvalidArgument.
Result<double> ParseTolerance(const std::string& text);

// Nearest-rank percentile of `values`. REQUIRES: !values.empty(), 0 < p <= 100.
double Percentile(std::vector<double> values, double p);

struct MetricStats {
  std::string metric;
  size_t n = 0;        // runs where the metric is measured or never
  size_t n_never = 0;  // of those, runs where it never happened (counted as +infinity)
  size_t n_na = 0;     // runs where it does not apply (null, not never)
  std::optional<double> p50, p95, min, max;  // absent when n is 0; +infinity: never
};

struct ScenarioStats {
  std::string key;
  size_t runs = 0;
  std::map<std::string, size_t> verdicts;  // "PASS" -> count
  std::map<std::string, size_t> outcomes;  // "survived" -> count
  std::vector<MetricStats> metrics;
};

// REQUIRES: every report passes CheckReport; CheckSameSchema(reports, {}) is OK. Sorted by key.
std::vector<ScenarioStats> RunStats(const std::vector<nlohmann::json>& reports);
std::string FormatStats(const std::vector<ScenarioStats>& stats);

}  // namespace faultline::reports
