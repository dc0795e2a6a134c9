// faultline report DIR...: (re)renders junit.xml, report.html and summary.md of run
// directories from their report.json, timeseries.csv, events.jsonl and scenario.yaml.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "reports/write_reports.h"
#include "runner/cli/command.h"

namespace faultline::cli {

void RegisterReport(CLI::App& app, Action* action) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "report", "render junit.xml, report.html and summary.md of a run directory");
  cmd->add_option("dir", *dirs, "run directory (holds report.json)")->required();
  cmd->callback([=] {
    *action = [=] {
      int code = kExitOk;
      for (const auto& dir : *dirs) {
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
