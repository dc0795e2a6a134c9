// faultline run SCENARIO.yaml|FOLDER [--out DIR] [--seed N] [--seeds N] [--only KEY=VALUE]...
//               [--ccl NAME] [--report-only] [--allow NETNS/DEV]...
// A matrix file or a folder runs every run into its own subdirectory (runner/exec/suite.h).
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "runner/cli/command.h"
#include "runner/exec/run.h"
#include "runner/exec/suite.h"
#include "workload/adapters/ccl_traits.h"

namespace faultline::cli {

void RegisterRun(CLI::App& app, Action* action) {
  auto opts = std::make_shared<runner::RunOptions>();
  auto seed = std::make_shared<uint64_t>(0);
  auto ccl = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "run", "run a scenario (every combination of its matrix), or every scenario of a folder");
  cmd->add_option("scenario", opts->scenario_path, "scenario YAML file or a folder of them")
      ->required();
  cmd->add_option("--out", opts->out_dir, "output directory (default out/<name>-<run id>)");
  auto* seed_opt = cmd->add_option("--seed", *seed, "override the scenario's seed");
  cmd->add_option("--seeds", opts->selection.seeds,
                  "run every combination with N seeds: the scenario's (or --seed) and the next "
                  "N-1")
      ->check(CLI::Range(1, 1000));
  auto only = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--only", *only,
                  "run only the matrix combinations with KEY=VALUE (a matrix key, the value as "
                  "spelled in the file); repeatable");
  cmd->add_flag("--report-only", opts->report_only,
                "check and report expectations, but exit 0 when only expectations failed "
                "(for a baseline expected to fail them)");
  std::string ccl_names;
  for (const std::string& n : workload::adapters::CclNames()) {
    ccl_names += (ccl_names.empty() ? "" : "|") + n;
  }
  cmd->add_option("--ccl", *ccl, "override the scenario's ccl (" + ccl_names + ")")
      ->check(CLI::IsMember(workload::adapters::CclNames()));
  cmd->add_option("--allow", opts->allow, "extra injector allowlist entry NETNS/DEV");
  cmd->add_option("--worker", opts->worker_path, "faultline-worker binary (default: beside this one)");
  cmd->add_option("--launcher", opts->launcher,
                  "local (ranks in this machine's namespaces) or slurm (an srun step: on the "
                  "cluster of `faultline cluster up`, or on the hosts of an inventory topology)")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->capture_default_str();
  cmd->add_option("--cluster", opts->cluster_dir,
                  "--launcher slurm: the cluster's directory (env FAULTLINE_CLUSTER_DIR)");
  cmd->add_option("--partition", opts->partition,
                  "--launcher slurm, inventory topology, outside an allocation: the partition "
                  "srun asks for the hosts in");
  cmd->add_option(
         "--inventory", opts->inventory_file,
         "host file (an inventory's `hosts:`) on which scenarios of kind netns run "
         "instead of namespaces: same number of hosts and rails; hosts with a loopback "
         "addr are this machine (local launcher), others are reached with --launcher slurm")
      ->check(CLI::ExistingFile);
  cmd->add_option("--op-timeout-ms", opts->op_timeout_ms,
                  "deadline of one collective (over the scenario's workload.op_timeout)")
      ->capture_default_str()
      ->each([opts](const std::string&) { opts->op_timeout_given = true; });
  using workload::adapters::CclTraits;
  cmd->footer(
      "Every " +
      workload::adapters::CclNamesWhere([](const CclTraits& t) { return t.serves_fault_hook; }) +
      " rank serves the fault hook (injector/FAULT_HOOK.md) at OUT/ranks/rankN.hook, "
      "or under /run/faultline/hooks when that path is too long for a Unix socket; report.json "
      "lists them under environment.fault_hook. A run with conn_corrupt or qp_error faults is "
      "skipped, with the reason, for a ccl that serves no hook (" +
      workload::adapters::CclNamesWhere([](const CclTraits& t) { return !t.serves_fault_hook; }) +
      ").");
  cmd->callback([=] {
    *action = [=] {
      runner::RunOptions o = *opts;
      if (seed_opt->count() > 0) o.seed = *seed;
      for (const auto& text : *only) {
        std::pair<std::string, std::string> kv;
        if (auto err = runner::ParseOnly(text, &kv)) {
          FL_ERROR("run", "%s", err->c_str());
          return kExitBadInput;
        }
        o.selection.only.push_back(std::move(kv));
      }
      if (!ccl->empty()) o.ccl = runner::CclNameFromString(*ccl);
      return runner::RunScenarios(o);
    };
  });
}

}  // namespace faultline::cli
