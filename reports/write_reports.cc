#include "reports/write_reports.h"

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "reports/html.h"
#include "reports/junit.h"
#include "reports/markdown.h"
#include "reports/run_data.h"
#include "reports/run_report.h"

namespace faultline::reports {
namespace {

namespace fs = std::filesystem;

Status WriteAtomically(const fs::path& path, const std::string& content) {
  return WriteFileAtomically(path.string(), content);
}

}  // namespace

Status WriteFileAtomically(const std::string& target, const std::string& content) {
  const fs::path path(target);
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Internal("cannot create " + tmp.string());
    out << content;
    out.flush();
    if (!out) return Internal("writing " + tmp.string() + " failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Internal("renaming " + tmp.string() + " to " + path.string() + " failed");
  }
  return Status::Ok();
}

Status WriteReports(const std::string& dir) {
  FL_ASSIGN_OR_RETURN(RunData run, LoadRunDir(dir));
  FL_ASSIGN_OR_RETURN(RunReport report, RunReport::FromJson(run.report));
  ReportFileNames& files = report.files ? *report.files : report.files.emplace();
  const bool update = files.junit != kJUnitFile || files.html != kHtmlFile;
  files.junit = kJUnitFile;
  files.html = kHtmlFile;
  run.report = report.ToJson();
  const fs::path root(dir);
  FL_RETURN_IF_ERROR(WriteAtomically(root / kJUnitFile, JUnitXml({run.report})));
  FL_RETURN_IF_ERROR(WriteAtomically(root / kHtmlFile, HtmlReport(run)));
  FL_RETURN_IF_ERROR(WriteAtomically(root / kSummaryFile, MarkdownSummary(run)));
  if (update) FL_RETURN_IF_ERROR(WriteAtomically(root / "report.json", run.report.dump(2) + "\n"));
  return Status::Ok();
}

Result<std::vector<nlohmann::json>> LoadReports(const std::string& path) {
  FL_ASSIGN_OR_RETURN(std::vector<std::string> dirs, FindRunDirs(path));
  std::vector<nlohmann::json> out;
  for (const auto& d : dirs) {
    std::ifstream in(fs::path(d) / "report.json", std::ios::binary);
    if (!in) return NotFound("cannot open " + d + "/report.json");
    std::stringstream text;
    text << in.rdbuf();
    FL_ASSIGN_OR_RETURN(nlohmann::json j, ParseReport(text.str(), d));
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace faultline::reports
