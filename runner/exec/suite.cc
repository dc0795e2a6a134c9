#include "runner/exec/suite.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/log.h"
#include "reports/exit_code.h"
#include "reports/junit.h"
#include "reports/schema.h"
#include "reports/suite_index.h"
#include "runner/core/inventory.h"
#include "runner/core/run_selection.h"
#include "runner/core/scenario.h"
#include "runner/exec/requirements.h"

namespace faultline::runner {
namespace {

namespace fs = std::filesystem;

using reports::ExitCode;
using reports::ExitCodeFromInt;

constexpr int kOk = reports::ToInt(ExitCode::kOk);
constexpr int kBadInput = reports::ToInt(ExitCode::kBadInput);
constexpr int kHarness = reports::ToInt(ExitCode::kHarnessError);
constexpr int kExpectationFailed = reports::ToInt(ExitCode::kExpectationFailed);

// One run of the suite as the index and the JUnit file show it.
struct Entry {
  std::string name;  // the scenario's name (with its matrix label)
  std::string dir;   // relative to the output directory
  std::string group;  // the file's stem in a folder run
  std::vector<std::pair<std::string, std::string>> axes;  // the matrix combination
  int code = kOk;
  bool skipped = false;
  std::string skip_reason;
  double seconds = 0;
  nlohmann::json report;
};

std::string DirPart(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
                      c == '-' || c == '=' || c == ',' || c == '+';
    out += keep ? c : '_';
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

std::string Timestamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &tm);
  return buf;
}

std::optional<nlohmann::json> ReadReport(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

// The report of a run that produced none (not run, or the harness stopped before it):
// enough of the report schema for the JUnit writer, with the reason as a harness error.
nlohmann::json StandInReport(const std::string& name, const std::string& file, uint64_t seed,
                             const std::string& ccl, const std::string& outcome,
                             const std::vector<std::string>& errors) {
  nlohmann::json r = {{"schema", reports::kReportSchema},
                      {"scenario", {{"name", name}, {"file", file}, {"seed", seed}}},
                      {"ccl", ccl},
                      {"outcome", outcome},
                      {"correctness", {{"checked", false}, {"wrong", nullptr}}},
                      {"faults", nlohmann::json::array()},
                      {"metrics", nlohmann::json::object()},
                      {"per_fault", nlohmann::json::array()},
                      {"expectations", nlohmann::json::array()},
                      {"files", nlohmann::json::object()}};
  if (!errors.empty()) r["harness_errors"] = errors;
  return r;
}

void WriteFileAtomic(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
}

std::string VerdictText(const Entry& e) {
  if (e.skipped) return "SKIPPED";
  // A replay judged by the file's reproduce: key says whether it reproduced the incident.
  const bool replay = e.report.is_object() && e.report.value("judged_by", "") == "reproduce";
  switch (ExitCodeFromInt(e.code)) {
    case ExitCode::kOk:
      return replay ? "REPRODUCED" : "PASS";
    case ExitCode::kExpectationFailed:
      return replay ? "NOT REPRODUCED" : "FAIL";
    case ExitCode::kBadInput:
      return "BAD INPUT";
    case ExitCode::kHarnessError:
      break;
  }
  return "HARNESS ERROR";
}

// The index's view of the runs (reports/suite_index.h).
std::vector<reports::SuiteRun> SuiteRuns(const std::vector<Entry>& entries, const fs::path& root) {
  std::vector<reports::SuiteRun> out;
  for (const auto& e : entries) {
    reports::SuiteRun r;
    r.name = e.name;
    r.group = e.group;
    r.dir = e.dir;
    r.axes = e.axes;
    r.verdict = VerdictText(e);
    r.seconds = e.seconds;
    r.report = e.report;
    for (const char* f : {"report.html", "report.json"}) {
      if (fs::exists(root / e.dir / f)) r.links.push_back(f);
    }
    r.note = reports::SuiteRunNote(e.report);  // a skipped run's report holds its reason
    out.push_back(std::move(r));
  }
  return out;
}

std::string ExeDir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "." : self.parent_path().string();
}

}  // namespace

int WorseExitCode(int a, int b) {
  // Ranked as codes (anything unexpected counts as kHarnessError), returned as given.
  return reports::ToInt(ExitCodeFromInt(b)) > reports::ToInt(ExitCodeFromInt(a)) ? b : a;
}

int RunScenarios(const RunOptions& given) {
  // --seeds sets every run's seed during the selection below; --seed is its base then.
  RunOptions options = given;
  if (options.selection.seeds > 1) options.seed.reset();
  const auto started = std::chrono::steady_clock::now();
  std::error_code ec;
  const bool folder = fs::is_directory(options.scenario_path, ec);
  std::vector<std::string> files;
  if (folder) {
    for (const auto& de : fs::directory_iterator(options.scenario_path, ec)) {
      if (de.is_regular_file() && de.path().extension() == ".yaml") {
        files.push_back(de.path().string());
      }
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      FL_ERROR("run", "no *.yaml scenario in %s", options.scenario_path.c_str());
      return kBadInput;
    }
  } else {
    files.push_back(options.scenario_path);
  }
  const std::string worker =
      options.worker_path.empty() ? ExeDir() + "/faultline-worker" : options.worker_path;
  RequirementChecker requirements(worker);

  // Expand (and so validate) everything before the first run starts.
  struct Planned {
    std::string file;
    ExpandOutcome expanded;
  };
  std::vector<Planned> plan;
  RunSelection selection = given.selection;
  selection.base_seed = given.seed;
  // --inventory: the host file, read once; every file's runs are placed on it.
  std::optional<InventoryPlacement> placement;
  if (!options.inventory_file.empty()) {
    InventoryOutcome inv = ParseInventoryFile(options.inventory_file);
    if (!inv.ok()) {
      for (const auto& d : inv.diagnostics) std::fprintf(stderr, "%s\n", d.ToString().c_str());
      FL_ERROR("run", "--inventory %s is not a valid host file", options.inventory_file.c_str());
      return kBadInput;
    }
    placement = InventoryPlacement{
        std::move(inv.hosts), fs::absolute(options.inventory_file).lexically_normal().string()};
  }
  for (const auto& f : files) {
    ExpandOutcome expanded = ExpandScenarioFile(f, placement ? &*placement : nullptr);
    if (expanded.ok()) {
      const bool matrix_ccl =
          std::any_of(expanded.runs.begin(), expanded.runs.end(), [](const Scenario& sc) {
            return std::any_of(sc.matrix.begin(), sc.matrix.end(),
                               [](const auto& kv) { return kv.first == "ccl"; });
          });
      if (auto why =
              given.launcher == "slurm" ? std::nullopt : LocalRunRefusal(expanded.runs.front())) {
        expanded.diagnostics.push_back({f, {}, *why, ""});
      } else if (auto err = SelectRuns(selection, &expanded.runs)) {
        expanded.diagnostics.push_back({f, {}, *err, ""});
      } else if (options.ccl && matrix_ccl) {
        // Overriding would run one library under every combination's ccl label.
        const std::string c = CclNameString(*options.ccl);
        expanded.diagnostics.push_back({f, {}, "--ccl " + c + " conflicts with the file's matrix.ccl",
                                        "choose the matrix's runs with --only ccl=" + c});
      } else if (expanded.runs.empty()) {
        continue;  // --only matched none of this file's combinations
      }
    }
    for (const auto& d : expanded.diagnostics) std::fprintf(stderr, "%s\n", d.ToString().c_str());
    plan.push_back({f, std::move(expanded)});
  }
  if (plan.empty()) {
    std::fprintf(stderr, "faultline run: no run of %s matches", options.scenario_path.c_str());
    for (const auto& [k, v] : selection.only) {
      std::fprintf(stderr, " --only %s=%s", k.c_str(), v.c_str());
    }
    std::fprintf(stderr, "\n");
    return kBadInput;
  }
  // A single scenario without a matrix: exactly `faultline run FILE`, unless it is skipped.
  if (!folder) {
    ExpandOutcome& e = plan.front().expanded;
    if (!e.ok()) {
      if (e.diagnostics.empty()) {
        std::fprintf(stderr, "%s: not a valid scenario\n", options.scenario_path.c_str());
      }
      return kBadInput;
    }
    if (e.runs.size() == 1 && e.runs[0].matrix.empty()) {
      if (auto why = requirements.Missing(RequiredFeatures(e.runs[0]),
                                          CclNameString(options.ccl.value_or(e.runs[0].ccl)),
                                          &e.runs[0].topology)) {
        FL_INFO("run", "%s skipped: %s", e.runs[0].name.c_str(), why->c_str());
        return kOk;
      }
      const int c = RunParsedScenario(std::move(e.runs[0]), options);
      if (options.report_only && c == kExpectationFailed) {
        FL_INFO("run", "expectations failed; reported, not judged (--report-only)");
        return kOk;
      }
      return c;
    }
  }

  fs::path input = fs::absolute(options.scenario_path).lexically_normal();
  if (input.filename().empty()) input = input.parent_path();  // "dir/"
  const std::string root_name = folder ? input.filename().string() : input.stem().string();
  const fs::path root =
      options.out_dir.empty() ? fs::path("out") / (DirPart(root_name) + "-" + Timestamp())
                              : fs::path(options.out_dir);
  fs::create_directories(root, ec);
  if (ec) {
    FL_ERROR("run", "cannot create %s: %s", root.c_str(), ec.message().c_str());
    return kBadInput;
  }

  std::vector<Entry> entries;
  int code = kOk;
  bool interrupted = false;
  for (auto& p : plan) {
    const std::string file_dir = folder ? DirPart(fs::path(p.file).stem().string()) : "";
    if (!p.expanded.ok()) {
      Entry e;
      e.name = fs::path(p.file).stem().string();
      e.dir = file_dir;
      e.code = kBadInput;
      std::vector<std::string> errors;
      for (const auto& d : p.expanded.diagnostics) errors.push_back("bad input: " + d.ToString());
      if (errors.empty()) errors.push_back("bad input: " + p.file + " is not a valid scenario");
      e.report = StandInReport(e.name, p.file, 0, "", "not_run", errors);
      fs::create_directories(root / e.dir, ec);
      WriteFileAtomic(root / e.dir / "report.json", e.report.dump(2) + "\n");
      code = WorseExitCode(code, e.code);
      entries.push_back(std::move(e));
      continue;
    }
    for (auto& sc : p.expanded.runs) {
      Entry e;
      e.name = sc.name;
      e.group = file_dir;
      e.axes.assign(sc.matrix.begin(), sc.matrix.end());
      const std::string label = sc.matrix.empty() ? "" : DirPart(sc.MatrixLabel());
      e.dir = file_dir.empty() ? label : (label.empty() ? file_dir : file_dir + "/" + label);
      if (interrupted) break;
      const fs::path dir = root / e.dir;
      fs::remove_all(dir, ec);  // nothing of an earlier run in the same --out may be read back
      fs::create_directories(dir, ec);
      const auto t0 = std::chrono::steady_clock::now();
      if (auto why = requirements.Missing(
              RequiredFeatures(sc), CclNameString(options.ccl.value_or(sc.ccl)), &sc.topology)) {
        e.skipped = true;
        e.skip_reason = *why;
        std::printf("\nfaultline run: %s skipped: %s\n", sc.name.c_str(), why->c_str());
        e.report = StandInReport(sc.name, p.file, options.seed.value_or(sc.seed),
                                 CclNameString(options.ccl.value_or(sc.ccl)), "skipped", {});
        e.report["skipped"] = *why;
        WriteFileAtomic(dir / "report.json", e.report.dump(2) + "\n");
      } else {
        std::printf("\nfaultline run: %s -> %s\n", sc.name.c_str(), dir.c_str());
        std::fflush(stdout);
        RunOptions o = options;
        o.scenario_path = p.file;
        o.out_dir = dir.string();
        const std::string name = sc.name;
        const uint64_t seed = options.seed.value_or(sc.seed);
        const std::string ccl = CclNameString(options.ccl.value_or(sc.ccl));
        e.code = RunParsedScenario(std::move(sc), o);
        if (auto r = ReadReport(dir / "report.json")) {
          e.report = std::move(*r);
        } else {
          e.report = StandInReport(
              name, p.file, seed, ccl, "not_run",
              {"faultline run ended with exit code " + std::to_string(e.code) +
               " before it wrote a report (see its output)"});
          WriteFileAtomic(dir / "report.json", e.report.dump(2) + "\n");
        }
        interrupted = RunInterrupted();
      }
      e.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      code =
          WorseExitCode(code, options.report_only && e.code == kExpectationFailed ? kOk : e.code);
      entries.push_back(std::move(e));
    }
  }

  std::vector<nlohmann::json> reports;
  for (const auto& e : entries) reports.push_back(e.report);
  WriteFileAtomic(root / "junit.xml", reports::JUnitXml(reports));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const std::vector<reports::SuiteRun> runs = SuiteRuns(entries, root);
  const reports::SuiteSummary summary{options.scenario_path, code, seconds};
  WriteFileAtomic(root / "index.html", reports::SuiteIndexHtml(summary, runs));
  WriteFileAtomic(root / "index.md", reports::SuiteIndexMarkdown(summary, runs));

  std::printf("\nfaultline run: %zu runs of %s in %.0f s\n", entries.size(),
              options.scenario_path.c_str(), seconds);
  for (const auto& e : entries) {
    std::printf("  %-13s %-60s %6.1f s  %s\n", VerdictText(e).c_str(), e.name.c_str(), e.seconds,
                e.skipped ? ("(" + e.skip_reason + ")").c_str() : e.dir.c_str());
  }
  if (options.report_only) {
    const auto failed = std::count_if(entries.begin(), entries.end(), [](const Entry& e) {
      return !e.skipped && e.code == kExpectationFailed;
    });
    std::printf("  --report-only: %zd runs failed an expectation; reported, not judged\n",
                static_cast<ssize_t>(failed));
  }
  std::printf("  exit %d; %s/index.html (index.md), %s/junit.xml\n", code, root.c_str(),
              root.c_str());
  std::fflush(stdout);
  if (interrupted) {
    FL_WARN("run", "interrupted; the remaining runs were not started");
    return WorseExitCode(code, kHarness);
  }
  return code;
}

}  // namespace faultline::runner
