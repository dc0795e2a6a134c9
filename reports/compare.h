// Comparing runs. Pure functions of report.json objects; thread-safe.
//
// Reports are grouped by scenario: the key is "<scenario name> [<ccl>]". When a side holds
// several runs of one key (repeated runs), its value for a metric is the median (p50) of the
// runs where the metric is not null.
//
// CompareRuns (A = before, B = after), per key and metric:
//  - change = (B - A) / |A| in percent; when A is 0, 0 if B is 0, else +/-infinity.
//  - Direction: higher stall_ms, detection_ms, failover_latency_ms, recovery_ms and
//    goodput_loss_pct is worse; lower baseline_busbw_gbps and degraded_ratio is worse.
//  - A regression: a change in the worse direction beyond the tolerance (strictly greater).
//  - Nulls: null in both is "n/a" (not a regression); measured in A and null in B is a
//    regression ("lost": e.g. recovery_ms null means the run never recovered); null in A and
//    measured in B is "new" (not a regression).
//  - Beside the metrics: a worse verdict (PASS < FAIL < HARNESS ERROR, worst run of each
//    side) and more wrong results (any increase) are regressions; a key present in A and
//    missing in B is a regression, a key only in B is reported as new.
//
// RunStats: per key, over N runs, per metric: how many runs measured it, p50 and p95
// (nearest rank: the ceil(p/100 x n)-th smallest value), min and max.
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
const char* ChangeStatusName(ChangeStatus s);  // "ok", "improved", "REGRESSION", "n/a", "LOST", "new"

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

// REQUIRES: every report passes CheckReport; tolerance_pct >= 0.
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
  size_t measured = 0;  // runs where the metric is not null
  size_t nulls = 0;
  std::optional<double> p50, p95, min, max;
};

struct ScenarioStats {
  std::string key;
  size_t runs = 0;
  std::map<std::string, size_t> verdicts;  // "PASS" -> count
  std::map<std::string, size_t> outcomes;  // "survived" -> count
  std::vector<MetricStats> metrics;
};

// REQUIRES: every report passes CheckReport. Sorted by key.
std::vector<ScenarioStats> RunStats(const std::vector<nlohmann::json>& reports);
std::string FormatStats(const std::vector<ScenarioStats>& stats);

}  // namespace faultline::reports
