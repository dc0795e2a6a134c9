// faultline explore SPACE.yaml --out DIR [--ccl C] [--budget DUR | --runs N] [--seed S]
//                   [--jobs N] [--confirm K/N] [--no-shrink] [--shrink-candidates N]
//                   [--sweep KIND.PARAM=A..B:N | --replay FILE]
// A seeded campaign over a fault space (runner/explore/campaign.h).
#include <cstdio>
#include <memory>
#include <string>

#include "base/log.h"
#include "base/units.h"
#include "runner/cli/command.h"
#include "runner/explore/campaign.h"
#include "workload/adapters/ccl_traits.h"

namespace faultline::cli {

void RegisterExplore(CLI::App& app, Action* action) {
  auto opts = std::make_shared<runner::explore::CampaignOptions>();
  auto ccl = std::make_shared<std::string>();
  auto budget = std::make_shared<std::string>();
  auto runs = std::make_shared<int64_t>(0);
  auto confirm = std::make_shared<std::string>("2/3");
  auto no_shrink = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "explore",
      "run a seeded campaign over a fault space: generated scenarios, invariants, shrinking");
  cmd->add_option("space", opts->space_path, "fault space YAML file (scenarios/explore/)")
      ->required();
  cmd->add_option("--out", opts->out_dir, "output directory")->required();
  cmd->add_option("--seed", opts->seed, "campaign seed (run i is generated from seed and i)")
      ->capture_default_str();
  cmd->add_option("--ccl", *ccl, "override the space's ccl")
      ->check(CLI::IsMember(workload::adapters::CclNames()));
  auto* budget_opt = cmd->add_option(
      "--budget", *budget, "no run starts after this long (e.g. 20m), shrinking included");
  auto* runs_opt = cmd->add_option("--runs", *runs, "at most this many generated runs")
                       ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  cmd->add_option("--jobs", opts->jobs,
                  "runs at once, each in a process of its own (OUT/runs/run-I.log); confirming "
                  "and shrinking a violation stay one run at a time")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--confirm", *confirm, "K/N: a failure counts when at least K of N runs fail")
      ->capture_default_str();
  cmd->add_flag("--no-shrink", *no_shrink, "confirm a violation but do not shrink it");
  cmd->add_option("--shrink-candidates", opts->max_candidates,
                  "shrinking asks about at most this many candidates")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  cmd->add_option("--shrink-topology", opts->max_topology_candidates,
                  "then asks about at most this many smaller topologies and messages (0: none)")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  auto sweep = std::make_shared<std::string>();
  auto* sweep_opt = cmd->add_option(
      "--sweep", *sweep,
      "KIND.PARAM=A..B:N: run only KIND with PARAM at N values from A to B (--runs per value), "
      "plot outcome and stall against it; e.g. link_flap.down=50..800:6");
  auto replay = std::make_shared<std::string>();
  auto* replay_opt = cmd->add_option(
      "--replay", *replay,
      "run this scenario file (e.g. a minimal.yaml) --runs times (default 5), judged by the "
      "space's invariants");
  cmd->add_option("--worker", opts->worker_path,
                  "faultline-worker binary (default: beside this one)");
  cmd->footer(
      "Exit codes: 0 no invariant was violated, 1 a violation was found (and shrunk to "
      "DIR/minimal.yaml), 2 bad input, 3 the harness failed. Without --runs or --budget the "
      "campaign runs until a violation or SIGINT.");
  cmd->callback([=] {
    *action = [=] {
      runner::explore::CampaignOptions o = *opts;
      if (budget_opt->count() > 0) {
        auto d = ParseDuration(*budget);
        if (!d.ok() || *d <= 0) {
          FL_ERROR("explore", "--budget must be a duration with a unit (e.g. 20m), got '%s'",
                   budget->c_str());
          return kExitBadInput;
        }
        o.budget_ns = *d;
      }
      if (runs_opt->count() > 0) o.runs = *runs;
      if (auto err = runner::explore::ParseConfirm(*confirm, &o.confirm_k, &o.confirm_n)) {
        FL_ERROR("explore", "%s", err->c_str());
        return kExitBadInput;
      }
      o.shrink = !*no_shrink;
      if (sweep_opt->count() > 0) o.sweep = *sweep;
      if (replay_opt->count() > 0) o.replay = *replay;
      if (o.sweep && o.replay) {
        FL_ERROR("explore", "--sweep and --replay do not go together");
        return kExitBadInput;
      }
      if (!ccl->empty()) o.ccl = runner::CclNameFromString(*ccl);
      return runner::explore::RunCampaign(o);
    };
  });
}

}  // namespace faultline::cli
