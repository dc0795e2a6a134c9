// The verdict of one run, read from its report.json the way `faultline run` decides its exit
// code: HARNESS ERROR when the harness itself failed (report "harness_errors", or a fault that
// could not be injected), else FAIL when an expectation failed, else PASS. Pure; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace faultline::reports {

enum class Verdict { kPass, kFail, kHarnessError };

const char* VerdictName(Verdict v);  // "PASS", "FAIL", "HARNESS ERROR"
int VerdictExitCode(Verdict v);      // 0, 1, 3 (DESIGN.md exit codes)

Verdict VerdictOf(const nlohmann::json& report);

// Why the harness failed: the report's harness_errors, then "fault <id>: <error>" for every
// fault that carries an error. Empty when the harness did its job.
std::vector<std::string> HarnessErrors(const nlohmann::json& report);

// The expectations that failed, as "name: measured V, limit L".
std::vector<std::string> FailedExpectations(const nlohmann::json& report);

// One line: "PASS: py-clean-allreduce on ftccl survived; 2/2 expectations hold".
std::string VerdictLine(const nlohmann::json& report);

}  // namespace faultline::reports
