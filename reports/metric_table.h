// The one table of report.json's metrics (DESIGN.md, "Metrics"): each row names the key
// metrics.cc writes, its unit, the direction in which a change is worse, the scenario's
// `expect:` key that judges it (checks.cc) and what a null means. The writers (HTML and
// Markdown columns, compare, trend), the checks and `faultline calibrate` read the keys from
// here; adding a metric = a row here, its computation in runner/core/metrics.cc, and (for an
// expectation) the scenario parser's key. Keys a report lacks (a v1 report has no
// failover_first_ms) read as null. constexpr; no I/O.
#pragma once

#include <array>
#include <string_view>

namespace faultline::reports {

// report.json "metrics" and per_fault[] keys of a run (MetricValues in runner/core/metrics.h).
inline constexpr const char* kBaselineBusbwGbps = "baseline_busbw_gbps";
inline constexpr const char* kStallMs = "stall_ms";
inline constexpr const char* kDetectionMs = "detection_ms";
inline constexpr const char* kFailoverFirstMs = "failover_first_ms";
inline constexpr const char* kFailoverLatencyMs = "failover_latency_ms";
inline constexpr const char* kRecoveryMs = "recovery_ms";
inline constexpr const char* kDegradedRatio = "degraded_ratio";
inline constexpr const char* kGoodputLossPct = "goodput_loss_pct";
// A training run's figures, merged into report.json "metrics" (TrainingMetrics).
inline constexpr const char* kStepsCompleted = "steps_completed";
inline constexpr const char* kStepsPerS = "steps_per_s";
inline constexpr const char* kParamSha256 = "param_sha256";
inline constexpr const char* kParamSha256Agree = "param_sha256_agree";
inline constexpr const char* kRanksReported = "ranks_reported";
inline constexpr const char* kFinalLoss = "final_loss";
inline constexpr const char* kGoodputRatio = "goodput_ratio";

// What a null value of the metric means. A check on a null value always fails (an
// expectation the run cannot show to hold does not hold); these rules are for readers that
// compare runs (compare.h: a "never" counts as infinitely bad).
enum class NullRule {
  kNotMeasured,          // it could not be measured
  kNeverIfBaseline,      // with a measured baseline busbw: it never happened (recovery)
  kNeverIfNotConverged,  // per_fault never_converged true: it never happened (convergence)
  kNeverIfDetected,      // with a measured detection_ms: it never happened (first path)
};

struct MetricRow {
  const char* name;         // the report.json key
  const char* unit;         // "Gbit/s", "ms", "", "%"
  bool higher_is_worse;     // stall, latency, loss: higher is worse; busbw, ratio: lower is
  const char* expectation;  // the scenario's expect: key judging it; nullptr when none
  const char* limit;        // the limit's key in that expectation: "max", "min", "within_ms"
  NullRule null_rule;
};

// The per-fault metrics, in the order the writers show them (MetricValues::ToJson's keys).
inline constexpr std::array<MetricRow, 8> kMetricTable = {{
    {kBaselineBusbwGbps, "Gbit/s", false, nullptr, nullptr, NullRule::kNotMeasured},
    {kStallMs, "ms", true, "stall_ms", "max", NullRule::kNotMeasured},
    {kDetectionMs, "ms", true, "detection_ms", "max", NullRule::kNotMeasured},
    // v2 (absent in v1): the first affected flow.
    {kFailoverFirstMs, "ms", true, "failover_first_ms", "max", NullRule::kNeverIfDetected},
    // v2: full convergence (RFC 6412), the last one.
    {kFailoverLatencyMs, "ms", true, "failover_latency_ms", "max", NullRule::kNeverIfNotConverged},
    {kRecoveryMs, "ms", true, "recovery", "within_ms", NullRule::kNeverIfBaseline},
    {kDegradedRatio, "", false, "degraded_ratio", "min", NullRule::kNotMeasured},
    {kGoodputLossPct, "%", true, "goodput_loss_pct", "max", NullRule::kNotMeasured},
}};

// A training run's metrics (TrainingMetrics::ToJson's keys). No expectation judges them;
// trend follows goodput_ratio.
inline constexpr std::array<MetricRow, 7> kTrainingMetricTable = {{
    {kStepsCompleted, "", false, nullptr, nullptr, NullRule::kNotMeasured},
    {kStepsPerS, "1/s", false, nullptr, nullptr, NullRule::kNotMeasured},
    {kParamSha256, "", false, nullptr, nullptr, NullRule::kNotMeasured},
    {kParamSha256Agree, "", false, nullptr, nullptr, NullRule::kNotMeasured},
    {kRanksReported, "", false, nullptr, nullptr, NullRule::kNotMeasured},
    {kFinalLoss, "", true, nullptr, nullptr, NullRule::kNotMeasured},
    {kGoodputRatio, "", false, nullptr, nullptr, NullRule::kNotMeasured},
}};

// The expect: keys judged on the run as a whole rather than on a metric row: the outcome,
// the count of wrong results (report.json "wrong_results") and how soon a fail-stop run
// aborted (judged through the outcome).
inline constexpr std::array<const char*, 3> kRunExpectations = {"outcome", "wrong_results",
                                                                "abort_within"};

// The row of `name` in kMetricTable or kTrainingMetricTable; nullptr when none.
constexpr const MetricRow* FindMetric(std::string_view name) {
  for (const MetricRow& r : kMetricTable) {
    if (name == r.name) return &r;
  }
  for (const MetricRow& r : kTrainingMetricTable) {
    if (name == r.name) return &r;
  }
  return nullptr;
}

// The row judged by the expect: key `expectation`; nullptr for kRunExpectations and unknown
// keys.
constexpr const MetricRow* MetricForExpectation(std::string_view expectation) {
  for (const MetricRow& r : kMetricTable) {
    if (r.expectation != nullptr && expectation == r.expectation) return &r;
  }
  return nullptr;
}

}  // namespace faultline::reports
