// The verdict of one run, read from its report.json: the one rule behind `faultline run`'s
// exit code (the runner calls VerdictOf on the report it writes), junit.xml, report.html,
// summary.md and compare. HARNESS ERROR when the harness itself failed (report
// "harness_errors", or a fault that could not be injected: FaultErrors), else FAIL when an
// expectation failed or the run hung or crashed without an expectation that judges its
// outcome (UnexpectedOutcome), else PASS. Pure; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "reports/exit_code.h"

namespace faultline::reports {

// faults[].error of a fault whose time never came because every rank had ended before it.
inline constexpr const char* kRanksEndedFirstError =
    "not applied: every rank had ended before its time";

enum class Verdict { kPass, kFail, kHarnessError };

const char* VerdictName(Verdict v);  // "PASS", "FAIL", "HARNESS ERROR"
ExitCode ExitCodeOf(Verdict v);      // kOk, kExpectationFailed, kHarnessError
int VerdictExitCode(Verdict v);      // ToInt(ExitCodeOf(v)): 0, 1, 3

Verdict VerdictOf(const nlohmann::json& report);

// The worst verdict of `runs` (PASS < FAIL < HARNESS ERROR); kPass when there is none.
Verdict WorstVerdict(const std::vector<const nlohmann::json*>& runs);

// "fault <id>: <error>" for every fault whose error is the harness's failure: every fault that
// carries an error, except kRanksEndedFirstError in a run whose ranks did not survive (they
// aborted, hung or crashed on an earlier fault; the outcome says what happened, and there was
// nothing left to inject into). In a run that survived, that error still counts: the ranks
// finished their work before the fault's time, so the run did not test what the scenario says.
std::vector<std::string> FaultErrors(const nlohmann::json& report);

// Why the harness failed: the report's harness_errors, then FaultErrors. Empty when the harness
// did its job.
std::vector<std::string> HarnessErrors(const nlohmann::json& report);

// The expectations that failed, as "name: measured V, limit L"; a null V is shown with the
// expectation's "reason" when it has one ("measured nothing (null: fault f2 has none)").
std::vector<std::string> FailedExpectations(const nlohmann::json& report);

// "measured" text of a failed expectation whose value is null: its reason, when it has one.
std::string NullValueText(const nlohmann::json& expectation);

// Why the run fails by its outcome alone: the outcome is neither "survived" nor
// "aborted_clean" and no outcome expectation ("outcome", "reproduce.outcome") held with that
// very outcome as its value; this holds also for a scenario without expectations. nullopt
// otherwise, and for a skipped run.
std::optional<std::string> UnexpectedOutcome(const nlohmann::json& report);

// One line: "PASS: py-clean-allreduce on ftccl survived; 2/2 expectations hold".
std::string VerdictLine(const nlohmann::json& report);

}  // namespace faultline::reports
