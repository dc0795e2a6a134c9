// The typed model of one report.json (schema reports::kReportSchema, DESIGN.md "Report"):
// what the readers in reports/ take from a run, with ToJson/FromJson. FromJson keeps every key
// it does not type (and every typed key whose value has another type than the model's) in the
// `rest` object of its level, so ToJson(FromJson(j)) == j for any report CheckReport accepts:
// readers may use the typed fields without a writer losing a key. nlohmann::json objects are
// ordered by key, so the text written is the same too. Pure; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace faultline::reports {

// scenario: {name, file, seed, sha256, ...}.
struct ReportScenario {
  std::optional<std::string> name;
  std::optional<std::string> file;
  std::optional<uint64_t> seed;
  std::optional<std::string> sha256;
  nlohmann::json rest = nlohmann::json::object();
};

// faults[i]: {id, type, error, ...} (times, target and observations stay in rest).
struct ReportFault {
  std::optional<std::string> id;
  std::optional<std::string> type;
  std::optional<std::string> error;  // a null error stays in rest: no error
  nlohmann::json rest = nlohmann::json::object();
};

// expectations[i]: {name, limit, value, pass}.
struct ReportExpectation {
  std::optional<std::string> name;
  std::optional<nlohmann::json> limit;
  std::optional<nlohmann::json> value;  // present and null: not measured
  std::optional<bool> pass;
  nlohmann::json rest = nlohmann::json::object();
};

// files: {timeseries, events, junit, html, rails}; a null entry stays in rest.
struct ReportFileNames {
  std::optional<std::string> timeseries;
  std::optional<std::string> events;
  std::optional<std::string> junit;
  std::optional<std::string> html;
  std::optional<std::string> rails;
  nlohmann::json rest = nlohmann::json::object();
};

struct RunReport {
  std::string schema;
  std::optional<ReportScenario> scenario;
  std::optional<std::string> ccl;
  std::optional<std::string> outcome;    // "survived", "aborted_clean", ...
  std::optional<std::string> judged_by;  // "reproduce" for an incident replay
  std::optional<std::vector<ReportFault>> faults;
  std::optional<nlohmann::json> metrics;    // the run's metrics (metric_table.h keys)
  std::optional<nlohmann::json> per_fault;  // per_fault[]: metric_table.h keys plus id
  std::optional<std::vector<ReportExpectation>> expectations;
  std::optional<std::vector<std::string>> harness_errors;
  std::optional<ReportFileNames> files;
  nlohmann::json rest = nlohmann::json::object();  // every other top-level key

  nlohmann::json ToJson() const;
  // kInvalidArgument when `report` is not a report (CheckReport, run_data.h).
  static Result<RunReport> FromJson(const nlohmann::json& report);
};

}  // namespace faultline::reports
