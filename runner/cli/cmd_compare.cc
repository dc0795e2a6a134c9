// faultline compare A B [--tolerance 10%]: per scenario and metric, A's and B's values, the
// change and whether it is a regression beyond the tolerance; exit 1 on any regression.
// faultline compare --stats DIR...: p50/p95 per scenario and metric over repeated runs.
// A, B and DIR are run directories or folders holding run directories (reports/compare.h).
// Reports of different schemas (a v1 run and a v2 run) are refused with exit 2: a metric's
// meaning changes with the schema (reports/schema.h).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "reports/compare.h"
#include "reports/write_reports.h"
#include "runner/cli/command.h"

namespace faultline::cli {
namespace {

bool Load(const std::string& path, std::vector<nlohmann::json>* out) {
  auto reports = reports::LoadReports(path);
  if (!reports.ok()) {
    FL_ERROR("compare", "%s", reports.status().ToString().c_str());
    return false;
  }
  out->insert(out->end(), reports->begin(), reports->end());
  return true;
}

// Exit 2 with the reason when the reports mix schemas.
bool SameSchema(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b) {
  const Status st = reports::CheckSameSchema(a, b);
  if (!st.ok()) FL_ERROR("compare", "%s", st.message().c_str());
  return st.ok();
}

}  // namespace

void RegisterCompare(CLI::App& app, Action* action) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto tolerance = std::make_shared<std::string>("10%");
  auto stats = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "compare", "compare two runs (A B) for regressions, or summarise repeated runs (--stats)");
  cmd->add_option("dirs", *dirs, "A B (run directories or folders of runs); with --stats, any number")
      ->required();
  cmd->add_option("--tolerance", *tolerance, "relative change allowed in the worse direction")
      ->capture_default_str();
  cmd->add_flag("--stats", *stats, "p50/p95 per scenario and metric over the runs in DIR...");
  cmd->callback([=] {
    *action = [=] {
      if (*stats) {
        std::vector<nlohmann::json> all;
        for (const auto& d : *dirs) {
          if (!Load(d, &all)) return kExitBadInput;
        }
        if (!SameSchema(all, {})) return kExitBadInput;
        std::printf("%s", reports::FormatStats(reports::RunStats(all)).c_str());
        return kExitOk;
      }
      if (dirs->size() != 2) {
        FL_ERROR("compare", "expected two directories A B (or --stats DIR...), got %zu",
                 dirs->size());
        return kExitBadInput;
      }
      auto tol = reports::ParseTolerance(*tolerance);
      if (!tol.ok()) {
        FL_ERROR("compare", "%s", tol.status().message().c_str());
        return kExitBadInput;
      }
      std::vector<nlohmann::json> a, b;
      if (!Load((*dirs)[0], &a) || !Load((*dirs)[1], &b)) return kExitBadInput;
      if (!SameSchema(a, b)) return kExitBadInput;
      const reports::Comparison c = reports::CompareRuns(a, b, *tol);
      FL_INFO("compare", "A = %s (%zu report(s)), B = %s (%zu report(s))\n", (*dirs)[0].c_str(),
              a.size(), (*dirs)[1].c_str(), b.size());
      std::printf("%s", reports::FormatComparison(c).c_str());
      return c.Regressions() > 0 ? kExitExpectation : kExitOk;
    };
  });
}

}  // namespace faultline::cli
