// The report.json schema strings, written once: the runner writes kReportSchema, the readers
// (run_data.cc) accept every schema of kKnownReportSchemas, and `faultline compare` refuses
// to put reports of two different schemas side by side (compare.h, CheckSameSchema).
// Header-only; constants and pure functions, thread-safe.
#pragma once

#include <array>
#include <string_view>

namespace faultline::reports {

// The schema `faultline run` writes.
inline constexpr const char* kReportSchema = "faultline.report/v2";

// What the readers render. A v1 report has the same layout keys as v2 (v2 adds keys), so
// `faultline report` renders both; the metrics' meaning differs, so they are never compared.
inline constexpr std::array<std::string_view, 2> kKnownReportSchemas = {
    "faultline.report/v1", "faultline.report/v2"};

inline bool IsKnownReportSchema(std::string_view schema) {
  for (std::string_view s : kKnownReportSchemas) {
    if (s == schema) return true;
  }
  return false;
}

// Why the metrics of `older` cannot be compared with those of kReportSchema ("" when the
// change is not described here: any two different schemas are still refused).
inline const char* SchemaChangeSince(std::string_view older) {
  if (older == "faultline.report/v1") {
    return "the metric definitions changed between v1 and v2: failover_latency_ms is full "
           "convergence (RFC 6412: the last affected flow carries data again) instead of "
           "first-path, the run window ends at the last rank's last collective instead of at "
           "library teardown, and stall_ms is measured in fault-free runs instead of 0";
  }
  return "";
}

}  // namespace faultline::reports
