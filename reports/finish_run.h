// The end of one run: stores report.json, renders junit.xml, report.html and summary.md from
// it (WriteReports), and takes the verdict and exit code from the report.json read back from
// disk, so that the exit code, report.json and every writer agree.
//
// A writer failure is the harness's: it is added to report.json's "harness_errors" as
// "writing the reports: <status>" (the file read back then says HARNESS ERROR). When that
// cannot be recorded (report.json cannot be written, read back or parsed), the exit code is
// kHarnessError whatever the report says. Not thread-safe for the same directory.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reports/exit_code.h"
#include "reports/verdict.h"

namespace faultline::reports {

inline constexpr const char* kReportFile = "report.json";

struct FinishedRun {
  ExitCode code = ExitCode::kHarnessError;
  Verdict verdict = Verdict::kHarnessError;
  // report.json as read back from `dir`; null when it could not be read or parsed.
  nlohmann::json report;
  // Every failure of the writers or of reading back, for stderr (those report.json could
  // record are also in its harness_errors).
  std::vector<std::string> errors;
};

// Writes `report` to DIR/report.json (to a temporary name, then renamed), then the other
// report files, then reads report.json back. code = ExitCodeOf(VerdictOf(read back)), or
// kHarnessError when the file is missing or unreadable or a writer failure could not be
// recorded in it.
FinishedRun FinishRun(const std::string& dir, const nlohmann::json& report);

}  // namespace faultline::reports
