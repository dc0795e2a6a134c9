#include "reports/finish_run.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "reports/run_data.h"
#include "reports/write_reports.h"

namespace faultline::reports {
namespace {

namespace fs = std::filesystem;

Result<nlohmann::json> ReadBack(const std::string& dir) {
  std::ifstream in(fs::path(dir) / kReportFile, std::ios::binary);
  if (!in) return NotFound("cannot open " + dir + "/" + kReportFile);
  std::stringstream text;
  text << in.rdbuf();
  return ParseReport(text.str(), dir);
}

std::string Dump(const nlohmann::json& report) { return report.dump(2) + "\n"; }

}  // namespace

FinishedRun FinishRun(const std::string& dir, const nlohmann::json& report) {
  FinishedRun out;
  const fs::path file = fs::path(dir) / kReportFile;
  bool unrecorded = false;
  if (Status st = WriteFileAtomically(file.string(), Dump(report)); !st.ok()) {
    out.errors.push_back("writing the report: " + st.ToString());
    unrecorded = true;
  } else if (Status wr = WriteReports(dir); !wr.ok()) {
    const std::string error = "writing the reports: " + wr.ToString();
    out.errors.push_back(error);
    // WriteReports may have updated report.json ("files"): add the error to what is on disk.
    Result<nlohmann::json> on_disk = ReadBack(dir);
    nlohmann::json updated = on_disk.ok() ? *std::move(on_disk) : report;
    if (!updated.contains("harness_errors") || !updated["harness_errors"].is_array()) {
      updated["harness_errors"] = nlohmann::json::array();
    }
    updated["harness_errors"].push_back(error);
    if (Status again = WriteFileAtomically(file.string(), Dump(updated)); !again.ok()) {
      out.errors.push_back("recording that in the report: " + again.ToString());
      unrecorded = true;
    }
  }
  Result<nlohmann::json> read = ReadBack(dir);
  if (!read.ok()) {
    out.errors.push_back("reading the report back: " + read.status().ToString());
    return out;  // kHarnessError, a null report
  }
  out.report = *std::move(read);
  out.verdict = VerdictOf(out.report);
  out.code = ExitCodeOf(out.verdict);
  if (unrecorded) {
    out.verdict = Verdict::kHarnessError;
    out.code = ExitCode::kHarnessError;
  }
  return out;
}

}  // namespace faultline::reports
