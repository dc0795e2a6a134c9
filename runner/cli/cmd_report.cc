// faultline report DIR...: (re)renders junit.xml, report.html and summary.md of run
// directories from their report.json, timeseries.csv, events.jsonl and scenario.yaml. A DIR
// without a report.json that holds runs below it (a suite's output: a matrix or a folder)
// gets every run's reports and its own index.html, index.md and junit.xml again.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "reports/junit.h"
#include "reports/run_data.h"
#include "reports/suite_index.h"
#include "reports/write_reports.h"
#include "runner/cli/command.h"

namespace faultline::cli {

namespace {

// Writes `text` to `path` through a temporary file; false when it could not.
bool WriteFile(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return false;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  return !ec;
}

// A suite's output directory: every run's reports, then the index and the JUnit file.
int RenderSuite(const std::string& root) {
  auto runs = reports::FindRunDirs(root);
  if (!runs.ok()) {
    FL_ERROR("report", "%s", runs.status().ToString().c_str());
    return kExitBadInput;
  }
  int code = kExitOk;
  for (const std::string& d : *runs) {
    if (Status st = reports::WriteReports(d); !st.ok()) {
      FL_ERROR("report", "%s", st.ToString().c_str());
      code = kExitHarness;
    }
  }
  const reports::SuiteOnDisk suite = reports::ReadSuite(root, *runs);
  std::vector<nlohmann::json> all;
  for (const auto& r : suite.runs) all.push_back(r.report);
  const reports::SuiteSummary summary{root, suite.exit_code, std::nullopt};
  const std::filesystem::path p(root);
  if (!WriteFile(p / "index.html", reports::SuiteIndexHtml(summary, suite.runs)) ||
      !WriteFile(p / "index.md", reports::SuiteIndexMarkdown(summary, suite.runs)) ||
      !WriteFile(p / reports::kJUnitFile, reports::JUnitXml(all))) {
    FL_ERROR("report", "cannot write the index of %s", root.c_str());
    return kExitHarness;
  }
  std::printf("%s/index.html\n%s/index.md\n%s/%s (%zu runs)\n", root.c_str(), root.c_str(),
              root.c_str(), reports::kJUnitFile, suite.runs.size());
  return code;
}

}  // namespace

void RegisterReport(CLI::App& app, Action* action) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "report", "render junit.xml, report.html and summary.md of a run directory");
  cmd->add_option("dir", *dirs, "run directory (holds report.json), or a suite's output")
      ->required();
  cmd->callback([=] {
    *action = [=] {
      int code = kExitOk;
      for (const auto& dir : *dirs) {
        std::error_code ec;
        if (!std::filesystem::exists(std::filesystem::path(dir) / "report.json", ec)) {
          code = std::max(code, RenderSuite(dir));
          continue;
        }
        Status st = reports::WriteReports(dir);
        if (!st.ok()) {
          FL_ERROR("report", "%s", st.ToString().c_str());
          const bool input = st.code() == Code::kNotFound || st.code() == Code::kInvalidArgument;
          code = std::max(code, input ? kExitBadInput : kExitHarness);
          continue;
        }
        std::printf("%s/%s\n%s/%s\n%s/%s\n", dir.c_str(), reports::kJUnitFile, dir.c_str(),
                    reports::kHtmlFile, dir.c_str(), reports::kSummaryFile);
      }
      return code;
    };
  });
}

}  // namespace faultline::cli
