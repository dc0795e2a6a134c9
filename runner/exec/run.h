// `faultline run`: one scenario end to end (runner/exec/run.cc, the lifecycle). Its Site
// (runner/exec/site.h: namespaces, this machine's interfaces, or Slurm and fault agents)
// provides the network and launches one worker per rank, the fault timeline is driven at its
// absolute times, the ranks are waited for under a watchdog, every fault is healed and the
// site torn down (also on SIGINT or SIGTERM; after a SIGKILL, `faultline cleanup` undoes the
// journal), then the metrics are computed, the expectations checked and report.json,
// timeseries.csv and events.jsonl written.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runner/core/run_selection.h"
#include "runner/core/scenario.h"

namespace faultline::runner {

struct RunOptions {
  std::string scenario_path;
  std::string out_dir;              // empty: out/<scenario name>-<run id>
  std::optional<uint64_t> seed;     // overrides the scenario's seed
  std::optional<CclName> ccl;       // overrides the scenario's ccl
  std::vector<std::string> allow;   // extra allowlist entries (NETNS/DEV) for the injector
  std::string worker_path;          // empty: faultline-worker next to this executable
  int64_t op_timeout_ms = 10000;    // deadline of one collective in the workers
  bool op_timeout_given = false;    // --op-timeout-ms was given: it wins over workload.op_timeout
  RunSelection selection;           // --only, --seeds (matrix and folder runs, runner/exec/suite.h)
  // --report-only: expectations are checked and reported as usual, but a failed one does not
  // make the exit code 1 (for a baseline that is expected to fail them); 2 and 3 still count.
  bool report_only = false;
  // "local" (every rank a child of this process in its host's namespace) or "slurm" (one srun
  // job step over the one-box cluster of `faultline cluster up` in `cluster_dir`, whose
  // topology the scenario's must fit; runner/exec/slurm_launcher.h).
  // A scenario of kind inventory runs on its hosts through this machine's Slurm instead
  // (runner/exec/fleet_site.h): inside the allocation the runner runs in, or in one srun asks
  // for, in `partition` when given.
  std::string launcher = "local";
  std::string cluster_dir;  // empty: DefaultClusterDir()
  std::string partition;    // inventory runs outside an allocation; "" the default
  // --inventory: a host file on which scenarios of kind netns run instead of namespaces
  // (scenario.h InventoryPlacement); "" runs every file on its own topology.
  std::string inventory_file;
  // Set by RunParsedScenario for a training workload with faults: the report.json of its
  // fault-free twin (the same scenario without its faults and expectations, same seed and
  // ccl, under policy failover for every policy: one denominator, so a policy's own cost on a
  // fault-free job counts against it), run once into <out>/../twins/<key>/ and reused by every
  // later run with the same key (scenario less its faults and policy, seed, build, FTCCL_*
  // environment overrides), e.g. the other combinations of a matrix. goodput_ratio divides by
  // its rate. Empty when none could be had (twin_error).
  std::string twin_report;
  std::string twin_error;
  bool twin_reused = false;
};

// The rank program a run of `ccl` starts: `worker_path` when given, otherwise the library's
// (its traits' rank_program) beside this executable.
std::string RankProgramPath(CclName ccl, const std::string& worker_path);

// Why the local launcher cannot run `scenario`, or nullopt when it can: an inventory topology
// names real hosts, which it does not reach (its hosts are namespaces on this machine); they
// run with --launcher slurm. The exception is an inventory whose every host is this machine
// (inventory.h IsLocalInventory): its ranks run here, in this network namespace, on the named
// interfaces. Bad input (exit code 2) for the suite (runner/exec/suite.h).
std::optional<std::string> LocalRunRefusal(const Scenario& scenario);

// Runs a scenario already parsed (e.g. one combination of a matrix): the report names
// options.scenario_path as its file; options.seed and options.ccl override. Returns the exit
// code of DESIGN.md: 0 all expectations hold, 1 one failed, 2 bad input, 3 the harness itself
// failed (and said why on stderr).
int RunParsedScenario(Scenario scenario, const RunOptions& options);

// True when the last run was stopped by SIGINT or SIGTERM.
bool RunInterrupted();

}  // namespace faultline::runner
