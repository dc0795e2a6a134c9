// The metric keys of report.json (DESIGN.md, "Metrics"), in the order the writers show them,
// with their unit and the direction in which a change is worse. Keys a report lacks (a v1
// report has no failover_first_ms) read as null.
#pragma once

#include <array>

namespace faultline::reports {

struct MetricKey {
  const char* name;
  const char* unit;          // "Gbit/s", "ms", "", "%"
  bool higher_is_worse;      // stall, latency, loss: higher is worse; busbw, ratio: lower is
};

inline constexpr std::array<MetricKey, 8> kMetricKeys = {{
    {"baseline_busbw_gbps", "Gbit/s", false},
    {"stall_ms", "ms", true},
    {"detection_ms", "ms", true},
    {"failover_first_ms", "ms", true},    // v2 (absent in v1): the first affected flow
    {"failover_latency_ms", "ms", true},  // v2: full convergence (RFC 6412), the last one
    {"recovery_ms", "ms", true},
    {"degraded_ratio", "", false},
    {"goodput_loss_pct", "%", true},
}};

}  // namespace faultline::reports
