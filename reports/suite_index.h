// The index of a suite run (`faultline run` over a matrix or a folder): index.html and
// index.md at the top of the output directory. Per run its verdict, outcome, time and key
// metrics; per scenario file with a matrix, pivot tables by the matrix's axes: rows are the
// combinations of every axis but one, columns that one axis, a cell the median of a key
// metric over the runs that share it (the seeds of --seeds N, with their spread max - min
// and how many of them measured it), and the best cell of each row marked by the metric's
// better direction (metric_table.h). Pure; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace faultline::reports {

// One run of the suite as the index shows it.
struct SuiteRun {
  std::string name;   // the scenario's name with its matrix label
  std::string group;  // the scenario file's stem in a folder run; "" for one file
  std::string dir;    // relative to the output directory
  // The matrix combination, in the file's axis order, with "seed" last when --seeds repeated
  // it; empty for a scenario without a matrix.
  std::vector<std::pair<std::string, std::string>> axes;
  std::string verdict;  // PASS, FAIL, SKIPPED, BAD INPUT, HARNESS ERROR, (NOT) REPRODUCED
  std::string note;     // the skip reason or the first harness error
  std::optional<double> seconds;  // how long it took; unknown when re-read from disk
  std::vector<std::string> links;  // files of the run present to link (report.html, ...)
  nlohmann::json report;           // its report.json (or the stand-in of a run not made)
};

struct SuiteSummary {
  std::string title;  // the scenario path as given
  int exit_code = 0;
  std::optional<double> seconds;  // the whole suite's; unknown when re-rendered from disk
};

// The key metrics of a run, as (report.json key, value): a training run's goodput_ratio and
// steps_per_s; a collective run's stall_ms, failover_latency_ms (full convergence),
// progress_ms, degraded_ratio and recovery_ms. Overall values are report.json "metrics"'
// (progress_ms, a per-fault figure, is the largest over the faults and null when any fault's
// is). Null where the report has none.
std::vector<std::pair<std::string, std::optional<double>>> KeyMetrics(
    const nlohmann::json& report);

struct PivotCell {
  std::optional<double> median;  // over the runs that measured it
  double spread = 0;             // max - min over them
  int measured = 0;              // runs with a value
  int runs = 0;                  // runs in the cell
  bool best = false;             // the best median of its row
};

struct Pivot {
  std::string group;      // SuiteRun::group
  std::string metric;     // report.json key
  std::string unit;       // metric_table.h's
  bool higher_is_worse = true;
  std::string row_axes;   // e.g. "hosts, op"; "" when the matrix has one axis besides seed
  std::string col_axis;   // e.g. "op"
  std::vector<std::string> rows;  // "2, allreduce"; one "" row when row_axes is ""
  std::vector<std::string> cols;
  std::vector<std::vector<PivotCell>> cells;  // [row][col]
};

// One pivot per group with a matrix and per key metric that some run of it measured. The
// column axis is the matrix's last axis (seed never: repeated seeds fold into a cell); rows
// and columns keep the order in which runs first show them.
std::vector<Pivot> MatrixPivots(std::span<const SuiteRun> runs);

std::string SuiteIndexHtml(const SuiteSummary& s, std::span<const SuiteRun> runs);
std::string SuiteIndexMarkdown(const SuiteSummary& s, std::span<const SuiteRun> runs);

// A suite's runs read back from its output directory `root` (every directory below it with a
// report.json, FindRunDirs): name from the report, the matrix combination from the directory
// name (`k=v,k=v`; the directories above it are the group), the verdict from the report
// (SKIPPED, BAD INPUT for a file that did not validate, (NOT) REPRODUCED for a replay, else
// verdict.h's). Pure but for reading the files.
struct SuiteOnDisk {
  std::vector<SuiteRun> runs;
  int exit_code = 0;  // the worst over the runs (a skip counts as 0)
};
SuiteOnDisk ReadSuite(const std::string& root, const std::vector<std::string>& run_dirs);

// The note of one run's report as the index shows it: "skipped: <why>", else the first
// harness error, else "".
std::string SuiteRunNote(const nlohmann::json& report);

// The verdict text of one run's report as the index shows it.
std::string SuiteVerdictText(const nlohmann::json& report);

}  // namespace faultline::reports
