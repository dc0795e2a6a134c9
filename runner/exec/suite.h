// `faultline run` over more than one run: a scenario file with a `matrix:` (one run per
// combination) or a folder of scenario files (every *.yaml in it, sorted by name, matrices
// expanded). Each run goes into its own subdirectory of the output directory:
//   file with a matrix:  OUT/<combination>          e.g. OUT/op=allgather,bytes=64MiB
//   folder:              OUT/<file stem>[/<combination>]
// and OUT gets one junit.xml over every run (reports/junit.h) and index.html / index.md
// (reports/suite_index.h): each run's verdict, outcome, key metrics and links, and for a
// matrix pivot tables by its axes (median and spread over --seeds, the best cell per row).
//
// A run whose `requires:` names a feature this machine lacks is skipped with the reason (a
// skipped testcase in the JUnit file, never a pass); a file that does not validate is not
// run and counts as bad input. The exit code is the worst over the runs: 3 (harness failure)
// > 2 (bad input) > 1 (an expectation failed) > 0; a skipped run counts as 0, and with
// --report-only a run that only failed an expectation counts as 0 too (its report and JUnit
// testcase still say it failed). `--only` and `--seeds` choose and repeat the runs of every
// file (runner/core/run_selection.h); --only matching no run at all is bad input. A SIGINT or
// SIGTERM stops the current run as `faultline run` does and starts no further one.
#pragma once

#include "runner/exec/run.h"

namespace faultline::runner {

// `options.scenario_path` is a file or a folder. A plain scenario file without a matrix
// and without a missing requirement runs exactly as RunScenario does (into options.out_dir).
int RunScenarios(const RunOptions& options);

// Worse of two exit codes in the order above.
int WorseExitCode(int a, int b);

}  // namespace faultline::runner
