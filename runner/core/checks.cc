#include "runner/core/checks.h"

namespace faultline::runner {
namespace {

nlohmann::json Value(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

CheckResult AtMost(const char* name, double max, const std::optional<double>& v) {
  return {name, {{"max", max}}, Value(v), v.has_value() && *v <= max};
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
  if (e.stall_ms_max) out.push_back(AtMost("stall_ms", *e.stall_ms_max, v.stall_ms));
  if (e.detection_ms_max) {
    out.push_back(AtMost("detection_ms", *e.detection_ms_max, v.detection_ms));
  }
  if (e.failover_first_ms_max) {
    out.push_back(AtMost("failover_first_ms", *e.failover_first_ms_max, v.failover_first_ms));
  }
  if (e.failover_latency_ms_max) {
    out.push_back(AtMost("failover_latency_ms", *e.failover_latency_ms_max, v.failover_latency_ms));
  }
  if (e.recovery) {
    out.push_back({"recovery_ms",
                   {{"pct", e.recovery->pct},
                    {"within_ms", e.recovery->within_ms},
                    {"sustain_ms", e.recovery->sustain_ms}},
                   Value(v.recovery_ms),
                   v.recovery_ms.has_value() && *v.recovery_ms <= e.recovery->within_ms});
  }
  if (e.degraded_ratio_min) {
    out.push_back({"degraded_ratio",
                   {{"min", *e.degraded_ratio_min}},
                   Value(v.degraded_ratio),
                   v.degraded_ratio.has_value() && *v.degraded_ratio >= *e.degraded_ratio_min});
  }
  if (e.goodput_loss_pct_max) {
    out.push_back(AtMost("goodput_loss_pct", *e.goodput_loss_pct_max, v.goodput_loss_pct));
  }
  return out;
}

}  // namespace faultline::runner
