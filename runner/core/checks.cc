#include "runner/core/checks.h"

#include "reports/metric_table.h"

namespace faultline::runner {
namespace {

nlohmann::json Value(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// The check of metric `name` (a reports::kMetricTable row) against its expectation's limit.
CheckResult AtMost(const char* name, double max, const std::optional<double>& v) {
  return {name, {{reports::FindMetric(name)->limit, max}}, Value(v), v.has_value() && *v <= max};
}

}  // namespace

nlohmann::json CheckResult::ToJson() const {
  return {{"name", name}, {"limit", limit}, {"value", value}, {"pass", pass}};
}

std::vector<CheckResult> CheckExpectations(const Expectations& e, const RunMetrics& m) {
  std::vector<CheckResult> out;
  if (e.outcome) {
    const Outcome want =
        *e.outcome == ExpectedOutcome::kSurvive ? Outcome::kSurvived : Outcome::kAbortedClean;
    out.push_back({"outcome", OutcomeName(want), OutcomeName(m.outcome), m.outcome == want});
  }
  if (e.wrong_results) {
    // Null when results were not checked (the parser refuses the expectation then).
    out.push_back({"wrong_results",
                   {{"max", *e.wrong_results}},
                   m.wrong_results ? nlohmann::json(*m.wrong_results) : nlohmann::json(nullptr),
                   m.wrong_results.has_value() && *m.wrong_results <= *e.wrong_results});
  }
  const MetricValues& v = m.overall;
  if (e.stall_ms_max) out.push_back(AtMost(reports::kStallMs, *e.stall_ms_max, v.stall_ms));
  if (e.detection_ms_max) {
    out.push_back(AtMost(reports::kDetectionMs, *e.detection_ms_max, v.detection_ms));
  }
  if (e.failover_first_ms_max) {
    out.push_back(AtMost(reports::kFailoverFirstMs, *e.failover_first_ms_max, v.failover_first_ms));
  }
  if (e.failover_latency_ms_max) {
    out.push_back(
        AtMost(reports::kFailoverLatencyMs, *e.failover_latency_ms_max, v.failover_latency_ms));
  }
  if (e.recovery) {
    out.push_back({reports::kRecoveryMs,
                   {{"pct", e.recovery->pct},
                    {"within_ms", e.recovery->within_ms},
                    {"sustain_ms", e.recovery->sustain_ms}},
                   Value(v.recovery_ms),
                   v.recovery_ms.has_value() && *v.recovery_ms <= e.recovery->within_ms});
  }
  if (e.degraded_ratio_min) {
    out.push_back({reports::kDegradedRatio,
                   {{reports::FindMetric(reports::kDegradedRatio)->limit, *e.degraded_ratio_min}},
                   Value(v.degraded_ratio),
                   v.degraded_ratio.has_value() && *v.degraded_ratio >= *e.degraded_ratio_min});
  }
  if (e.goodput_loss_pct_max) {
    out.push_back(AtMost(reports::kGoodputLossPct, *e.goodput_loss_pct_max, v.goodput_loss_pct));
  }
  return out;
}

std::vector<CheckResult> CheckReproduce(const Reproduce& r, const RunMetrics& m,
                                        const History& h) {
  std::vector<CheckResult> out;
  out.push_back({"reproduce.outcome", r.outcome, OutcomeName(m.outcome),
                 r.outcome == OutcomeName(m.outcome)});
  if (r.ranks.empty()) return out;
  std::optional<int64_t> first_fault;
  for (const FaultRecord& f : h.faults) {
    if (f.applied_ns && (!first_fault || *f.applied_ns < *first_fault)) first_fault = f.applied_ns;
  }
  nlohmann::json value = nlohmann::json::object();
  bool pass = first_fault.has_value();
  for (int rank : r.ranks) {
    const RankEnd* end = nullptr;
    for (const RankEnd& e : h.ranks) {
      if (e.rank == rank) end = &e;
    }
    const bool failed =
        end != nullptr && (end->exit == RankExit::kError || end->exit == RankExit::kCrashed);
    if (!failed || !first_fault) {
      value[std::to_string(rank)] = end == nullptr ? "not in the run" : "did not fail";
      pass = false;
      continue;
    }
    const int64_t at = end->first_error_ns.value_or(end->end_ns) - *first_fault;
    value[std::to_string(rank)] = static_cast<double>(at) / 1e6;
    if (at < 0) {
      pass = false;  // it failed before the fault: not this incident's symptom
    } else if (r.outcome != "hung") {
      // A hang is a call that never returned: its end (a watchdog's, the run's) says nothing
      // about when it started to hang, so only failures that are not hangs are timed.
      pass = pass && at <= r.within_ns;
    }
  }
  if (!first_fault) value = nullptr;  // no fault was applied: nothing to count from
  nlohmann::json limit = {{"ranks", r.ranks}, {"from", "the first applied fault"}};
  if (r.outcome != "hung") limit["within_ms"] = static_cast<double>(r.within_ns) / 1e6;
  out.push_back({"reproduce.ranks", limit, value, pass});
  return out;
}

}  // namespace faultline::runner
