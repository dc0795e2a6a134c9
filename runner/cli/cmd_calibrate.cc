// faultline calibrate RUN_DIR... [--out FILE]: every report.json under the given run
// directories (or report files) becomes cost samples per CCL and fault kind
// (runner/sim/calibration.h), written as one calibration file for `faultline simulate`.
// A report that cannot be used (another schema, not a report) is listed as skipped, with why.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/log.h"
#include "runner/cli/command.h"
#include "runner/sim/calibration.h"

namespace faultline::cli {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> ReportFiles(const std::string& path, std::string* error) {
  std::vector<std::string> out;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return {path};
  if (!fs::is_directory(path, ec)) {
    *error = path + ": no such run directory or report";
    return out;
  }
  for (auto it = fs::recursive_directory_iterator(
           path, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::end(it); it.increment(ec)) {
    std::error_code fe;
    if (it->is_regular_file(fe) && it->path().filename() == "report.json") {
      out.push_back(it->path().string());
    }
  }
  if (ec) *error = path + ": " + ec.message() + " (while listing its runs)";
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

void RegisterCalibrate(CLI::App& app, Action* action) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>("calibration.json");
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "turn runs' report.json files into per-CCL, per-fault-kind cost samples");
  cmd->add_option("dirs", *dirs, "run directories, folders of runs, or report.json files")
      ->required();
  cmd->add_option("--out", *out, "the calibration file to write")->capture_default_str();
  cmd->callback([=] {
    *action = [=] {
      sim::Calibration cal;
      for (const auto& d : *dirs) {
        std::string error;
        const auto files = ReportFiles(d, &error);
        if (!error.empty()) {
          FL_ERROR("calibrate", "%s", error.c_str());
          return kExitBadInput;
        }
        for (const auto& f : files) {
          std::ifstream in(f);
          std::stringstream text;
          text << in.rdbuf();
          Status st;
          if (!in) {
            st = InvalidArgument("cannot be read");
          } else {
            const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
            st = j.is_discarded() ? InvalidArgument("not valid JSON") : sim::AddReport(j, f, &cal);
          }
          if (!st.ok()) cal.skipped.push_back(f + ": " + st.message());
        }
      }
      if (cal.sources.empty()) {
        FL_ERROR("calibrate", "no usable report.json under the given paths");
        for (const auto& s : cal.skipped) std::fprintf(stderr, "  skipped %s\n", s.c_str());
        return kExitBadInput;
      }
      {
        std::ofstream f(*out);
        f << cal.ToJson().dump(2) << "\n";
        if (!f) {
          FL_ERROR("calibrate", "cannot write %s", out->c_str());
          return kExitBadInput;
        }
      }
      FL_INFO("calibrate", "%zu reports -> %s", cal.sources.size(), out->c_str());
      std::printf("  %-8s %-14s %-10s %6s %9s\n", "ccl", "kind", "policy", "faults", "survived");
      for (const auto& e : cal.entries) {
        std::printf("  %-8s %-14s %-10s %6zu %9d\n", e.ccl.c_str(), e.kind.c_str(),
                    e.policy.c_str(), e.samples.size(), e.Survived());
      }
      for (const auto& s : cal.skipped) std::printf("  skipped %s\n", s.c_str());
      return kExitOk;
    };
  });
}

}  // namespace faultline::cli
