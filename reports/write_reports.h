// The I/O side of the report writers: renders a run directory's junit.xml, report.html and
// summary.md from its report.json (and timeseries.csv, events.jsonl, scenario.yaml), and
// records junit.xml and report.html in report.json's "files". Each file is written to a
// temporary name and renamed, so a reader never sees half a file. Not thread-safe for the
// same directory.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace faultline::reports {

inline constexpr const char* kJUnitFile = "junit.xml";
inline constexpr const char* kHtmlFile = "report.html";
inline constexpr const char* kSummaryFile = "summary.md";

// Writes `content` to `path` through a temporary file "<path>.tmp" renamed over it, so a
// reader sees the old file or the whole new one. kInternal naming the file on failure (the
// temporary file is removed when the rename failed).
Status WriteFileAtomically(const std::string& path, const std::string& content);

// Success: the three files exist and report.json names junit.xml and report.html under
// "files". Failure: kNotFound / kInvalidArgument for a missing or malformed report.json,
// kInternal when a file could not be written (what was written before stays).
Status WriteReports(const std::string& dir);

// Every report.json in or below `path` (FindRunDirs), parsed and checked.
Result<std::vector<nlohmann::json>> LoadReports(const std::string& path);

}  // namespace faultline::reports
