// faultline trend NIGHT... --out DIR: the same suite's runs over many nights (oldest first),
// per scenario and metric a series with a regression flagged only beyond the run-to-run noise
// (reports/trend.h states the rule); writes trend.json, trend.md and trend.html into DIR and
// prints the Markdown summary. Exit 1 when a regression is flagged, 2 on bad input, 3 when the
// files cannot be written.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "reports/compare.h"
#include "reports/trend.h"
#include "reports/write_reports.h"
#include "runner/cli/command.h"

namespace faultline::cli {
namespace {

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) {
    FL_ERROR("trend", "cannot write %s", path.c_str());
    return false;
  }
  return true;
}

}  // namespace

void RegisterTrend(CLI::App& app, Action* action) {
  auto nights = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto k = std::make_shared<double>(reports::TrendOptions{}.k);
  auto min_rel = std::make_shared<std::string>("25%");
  auto min_before = std::make_shared<size_t>(reports::TrendOptions{}.min_before);
  auto min_after = std::make_shared<size_t>(reports::TrendOptions{}.min_after);
  CLI::App* cmd = app.add_subcommand(
      "trend", "the same suite over many nights: a series per scenario and metric, regressions "
               "flagged beyond the measured noise (trend.html, trend.json, trend.md)");
  cmd->add_option("nights", *nights,
                  "one run directory or folder of runs per night, oldest first")
      ->required();
  cmd->add_option("--out", *out, "folder for trend.html, trend.json and trend.md")->required();
  cmd->add_option("--k", *k, "noise multiples a change must exceed")->capture_default_str();
  cmd->add_option("--min-rel", *min_rel, "... and this share of the baseline median")
      ->capture_default_str();
  cmd->add_option("--min-before", *min_before, "nights of baseline before a change can be found")
      ->capture_default_str();
  cmd->add_option("--min-after", *min_after, "nights that must show a change before it counts")
      ->capture_default_str();
  cmd->callback([=] {
    *action = [=] {
      reports::TrendOptions o;
      o.k = *k;
      o.min_before = *min_before;
      o.min_after = *min_after;
      auto rel = reports::ParseTolerance(*min_rel);
      if (!rel.ok()) {
        FL_ERROR("trend", "--min-rel: %s", rel.status().message().c_str());
        return kExitBadInput;
      }
      o.min_rel = *rel / 100.0;
      std::vector<reports::TrendNight> in;
      for (const std::string& d : *nights) {
        auto reports = reports::LoadReports(d);
        if (!reports.ok()) {
          FL_ERROR("trend", "%s", reports.status().ToString().c_str());
          return kExitBadInput;
        }
        in.push_back({d, std::move(*reports)});
      }
      auto t = reports::ComputeTrend(in, o);
      if (!t.ok()) {
        FL_ERROR("trend", "%s", t.status().message().c_str());
        return kExitBadInput;
      }
      std::error_code ec;
      std::filesystem::create_directories(*out, ec);
      if (ec) {
        FL_ERROR("trend", "cannot create %s: %s", out->c_str(), ec.message().c_str());
        return kExitHarness;
      }
      const std::string md = reports::TrendMarkdown(*t);
      if (!WriteFile(*out + "/trend.json", reports::TrendToJson(*t).dump(1) + "\n") ||
          !WriteFile(*out + "/trend.md", md) ||
          !WriteFile(*out + "/trend.html", reports::TrendHtml(*t))) {
        return kExitHarness;
      }
      std::printf("%s\nfaultline trend: %d regression(s); %s/trend.html\n", md.c_str(),
                  t->Regressions(), out->c_str());
      return t->Regressions() > 0 ? kExitExpectation : kExitOk;
    };
  });
}

}  // namespace faultline::cli
