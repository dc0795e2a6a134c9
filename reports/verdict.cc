#include "reports/verdict.h"

#include "reports/text.h"

namespace faultline::reports {

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "PASS";
    case Verdict::kFail: return "FAIL";
    case Verdict::kHarnessError: return "HARNESS ERROR";
  }
  return "?";
}

ExitCode ExitCodeOf(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return ExitCode::kOk;
    case Verdict::kFail:
      return ExitCode::kExpectationFailed;
    case Verdict::kHarnessError:
      return ExitCode::kHarnessError;
  }
  return ExitCode::kHarnessError;
}

int VerdictExitCode(Verdict v) { return ToInt(ExitCodeOf(v)); }

std::vector<std::string> FaultErrors(const nlohmann::json& report) {
  std::vector<std::string> out;
  if (!report.contains("faults") || !report["faults"].is_array()) return out;
  const bool survived = report.value("outcome", nlohmann::json()) == "survived";
  for (const auto& f : report["faults"]) {
    if (!f.is_object() || !f.contains("error") || f["error"].is_null()) continue;
    if (!survived && f["error"] == kRanksEndedFirstError) continue;
    out.push_back("fault " + FormatValue(f.value("id", nlohmann::json("?"))) + ": " +
                  FormatValue(f["error"]));
  }
  return out;
}

std::vector<std::string> HarnessErrors(const nlohmann::json& report) {
  std::vector<std::string> out;
  if (report.contains("harness_errors") && report["harness_errors"].is_array()) {
    for (const auto& e : report["harness_errors"]) out.push_back(FormatValue(e));
  }
  for (auto& e : FaultErrors(report)) out.push_back(std::move(e));
  return out;
}

std::string NullValueText(const nlohmann::json& expectation) {
  if (expectation.contains("reason") && expectation["reason"].is_string()) {
    return "nothing (" + expectation["reason"].get<std::string>() + ")";
  }
  return "nothing (null: not measured)";
}

std::vector<std::string> FailedExpectations(const nlohmann::json& report) {
  std::vector<std::string> out;
  if (!report.contains("expectations") || !report["expectations"].is_array()) return out;
  for (const auto& e : report["expectations"]) {
    if (!e.is_object() || e.value("pass", false)) continue;
    const nlohmann::json value = e.value("value", nlohmann::json());
    out.push_back(FormatValue(e.value("name", nlohmann::json("?"))) + ": measured " +
                  (value.is_null() ? NullValueText(e) : FormatValue(value)) + ", limit " +
                  FormatLimit(e.value("limit", nlohmann::json())));
  }
  return out;
}

std::optional<std::string> UnexpectedOutcome(const nlohmann::json& report) {
  if (report.contains("skipped")) return std::nullopt;  // never started: nothing to judge
  const nlohmann::json outcome = report.value("outcome", nlohmann::json());
  if (!outcome.is_string()) return std::nullopt;
  const std::string o = outcome.get<std::string>();
  if (o == "survived" || o == "aborted_clean") return std::nullopt;
  if (report.contains("expectations") && report["expectations"].is_array()) {
    for (const auto& e : report["expectations"]) {
      if (!e.is_object()) continue;
      const nlohmann::json name = e.value("name", nlohmann::json());
      // The scenario expected exactly this outcome, and its expectation held.
      if ((name == "outcome" || name == "reproduce.outcome") && e.value("value", nlohmann::json()) == o &&
          e.value("pass", false)) {
        return std::nullopt;
      }
    }
  }
  return "outcome: the run " + o +
         " and the scenario does not expect it (a run fails unless it survived or aborted "
         "cleanly, or an expectation of its scenario names what happened)";
}

Verdict VerdictOf(const nlohmann::json& report) {
  if (!HarnessErrors(report).empty()) return Verdict::kHarnessError;
  if (!FailedExpectations(report).empty() || UnexpectedOutcome(report)) return Verdict::kFail;
  return Verdict::kPass;
}

Verdict WorstVerdict(const std::vector<const nlohmann::json*>& runs) {
  // The exit codes order the verdicts (0 < 1 < 3).
  Verdict worst = Verdict::kPass;
  for (const nlohmann::json* r : runs) {
    const Verdict v = VerdictOf(*r);
    if (VerdictExitCode(v) > VerdictExitCode(worst)) worst = v;
  }
  return worst;
}

std::string VerdictLine(const nlohmann::json& report) {
  const Verdict v = VerdictOf(report);
  size_t total = 0;
  size_t held = 0;
  if (report.contains("expectations") && report["expectations"].is_array()) {
    for (const auto& e : report["expectations"]) {
      ++total;
      if (e.is_object() && e.value("pass", false)) ++held;
    }
  }
  std::string name = "?";
  if (report.contains("scenario") && report["scenario"].is_object()) {
    name = FormatValue(report["scenario"].value("name", nlohmann::json("?")));
  }
  std::string line = std::string(VerdictName(v)) + ": " + name + " on " +
                     FormatValue(report.value("ccl", nlohmann::json("?"))) + " " +
                     FormatValue(report.value("outcome", nlohmann::json("?"))) + "; " +
                     std::to_string(held) + "/" + std::to_string(total) + " expectations hold";
  // An incident replay on the fail-stop library is judged by the file's reproduce: key.
  if (report.value("judged_by", "") == "reproduce" && report.contains("reproduce") &&
      report["reproduce"].is_object()) {
    const nlohmann::json& r = report["reproduce"];
    line += r.value("reproduced", false) ? " (the incident was reproduced)"
                                          : " (the incident was NOT reproduced)";
  }
  return line;
}

}  // namespace faultline::reports
