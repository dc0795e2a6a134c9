#include "runner/core/checks.h"

#include <string_view>

#include "reports/metric_table.h"

namespace faultline::runner {
namespace {

nlohmann::json Value(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// The value of metric `name` in one fault's figures.
std::optional<double> FaultValue(const FaultMetrics& fm, std::string_view name) {
  const MetricValues& v = fm.values;
  if (name == reports::kStallMs) return v.stall_ms;
  if (name == reports::kDetectionMs) return v.detection_ms;
  if (name == reports::kFailoverFirstMs) return v.failover_first_ms;
  if (name == reports::kFailoverLatencyMs) return v.failover_latency_ms;
  if (name == reports::kRecoveryMs) return v.recovery_ms;
  if (name == reports::kDegradedRatio) return v.degraded_ratio;
  if (name == reports::kGoodputLossPct) return v.goodput_loss_pct;
  return std::nullopt;
}

// Why the overall value of metric `name` is null (ComputeMetrics' overall rule).
std::string NullReason(std::string_view name, const RunMetrics& m) {
  if (!m.overall.baseline_busbw_gbps && name != reports::kDetectionMs &&
      name != reports::kFailoverFirstMs && name != reports::kFailoverLatencyMs) {
    return "null: no baseline busbw was measured before the first fault";
  }
  std::vector<const FaultMetrics*> applied;
  for (const FaultMetrics& fm : m.per_fault) {
    if (!fm.convergence.empty()) applied.push_back(&fm);  // set for every applied fault
  }
  if (applied.empty()) return "null: no fault was applied";
  std::string ids;
  bool no_path_events = false;
  for (const FaultMetrics* fm : applied) {
    if (FaultValue(*fm, name)) continue;
    if (name == reports::kDegradedRatio) continue;  // listed below with the permanent faults
    ids += (ids.empty() ? "" : ", ") + fm->id;
    no_path_events = no_path_events || fm->convergence == "collective_progress";
  }
  if (name == reports::kDegradedRatio) {
    return "null: no permanent fault has a steady busbw to compare (degraded_ratio applies to "
           "permanent faults only)";
  }
  if (ids.empty()) return "null: not measured";
  std::string why = "null: fault " + ids + " has none";
  if ((name == reports::kDetectionMs || name == reports::kFailoverFirstMs) && no_path_events) {
    why += " (no path event of the library crossed its target)";
  } else if (name == reports::kFailoverLatencyMs || name == reports::kRecoveryMs) {
    why += " (it never got there within the run)";
  }
  return why;
}

// The check of metric `name` (a reports::kMetricTable row) against its expectation's limit.
CheckResult AtMost(const char* name, double max, const std::optional<double>& v) {
  return {name, {{reports::FindMetric(name)->limit, max}}, Value(v), v.has_value() && *v <= max};
}

}  // namespace

nlohmann::json CheckResult::ToJson() const {
  nlohmann::json j = {{"name", name}, {"limit", limit}, {"value", value}, {"pass", pass}};
  if (!reason.empty()) j["reason"] = reason;
  return j;
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
  for (CheckResult& c : out) {
    if (c.value.is_null() && reports::FindMetric(c.name) != nullptr) {
      c.reason = NullReason(c.name, m);
    }
  }
  return out;
}

CheckResult CheckParamHashAgainstTwin(const std::optional<std::string>& run,
                                      const std::optional<std::string>& twin) {
  return {"param_sha256",
          twin ? nlohmann::json(*twin) : nlohmann::json("the fault-free twin's (none was had)"),
          run ? nlohmann::json(*run) : nlohmann::json(nullptr),
          run.has_value() && twin.has_value() && *run == *twin};
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
