// faultline cluster up|down|status: the one-box Slurm cluster (runner/exec/slurm_cluster.h).
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "runner/cli/command.h"
#include "runner/exec/slurm_cluster.h"

namespace faultline::cli {
namespace {

struct ClusterCliOptions {
  runner::ClusterOptions up;
  std::string dir;
  bool json = false;
};

int ExitFor(const Status& st) {
  return st.code() == Code::kInvalidArgument || st.code() == Code::kUnavailable ||
                 st.code() == Code::kNotFound
             ? kExitBadInput
             : kExitHarness;
}

void PrintHowTo(const runner::ClusterInfo& c) {
  std::printf(
      "cluster %s up in %s: %d hosts (%s..%s) x %d ranks, %d rails of %g Gb/s\n"
      "  run a scenario on it:  faultline run FILE --launcher slurm\n"
      "  Slurm commands:        SLURM_CONF=%s ip netns exec %s sinfo\n"
      "  take it down:          faultline cluster down\n",
      c.cluster_name.c_str(), c.dir.c_str(), c.hosts, c.nodes.front().c_str(),
      c.nodes.back().c_str(), c.ranks_per_host, c.rails, c.rail_gbps, c.slurm_conf.c_str(),
      c.ctl_netns.c_str());
}

int Up(const ClusterCliOptions& o) {
  runner::ClusterOptions up = o.up;
  up.dir = o.dir;
  auto c = runner::ClusterUp(up);
  if (!c.ok()) {
    std::fprintf(stderr, "faultline cluster up: %s\n", c.status().ToString().c_str());
    return ExitFor(c.status());
  }
  if (o.json) {
    std::cout << c->ToJson().dump() << std::endl;
  } else {
    PrintHowTo(*c);
  }
  return kExitOk;
}

int Down(const ClusterCliOptions& o) {
  const std::string dir = o.dir.empty() ? runner::DefaultClusterDir() : o.dir;
  auto c = runner::LoadCluster(dir);
  if (!c.ok()) {
    std::fprintf(stderr, "faultline cluster down: %s\n", c.status().ToString().c_str());
    return ExitFor(c.status());
  }
  Status st = runner::ClusterDown(*c);
  if (!st.ok()) {
    std::fprintf(stderr, "faultline cluster down: %s (run `faultline cleanup`)\n",
                 st.ToString().c_str());
    return kExitHarness;
  }
  std::printf("cluster %s down: its daemons, namespaces and %s are gone\n",
              c->cluster_name.c_str(), c->dir.c_str());
  return kExitOk;
}

int Status_(const ClusterCliOptions& o) {
  const std::string dir = o.dir.empty() ? runner::DefaultClusterDir() : o.dir;
  auto c = runner::LoadCluster(dir);
  if (!c.ok()) {
    std::fprintf(stderr, "faultline cluster status: %s\n", c.status().ToString().c_str());
    return ExitFor(c.status());
  }
  auto s = runner::ClusterCommand(*c, {"sinfo", "-N", "-o", "%N %T %c"});
  if (o.json) {
    nlohmann::json j = c->ToJson();
    j["sinfo"] = s.ok() ? nlohmann::json(*s) : nlohmann::json(nullptr);
    std::cout << j.dump() << std::endl;
  } else {
    PrintHowTo(*c);
    std::printf("%s", s.ok() ? s->c_str() : (s.status().ToString() + "\n").c_str());
  }
  return s.ok() ? kExitOk : kExitHarness;
}

}  // namespace

void RegisterCluster(CLI::App& app, Action* action) {
  auto o = std::make_shared<ClusterCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "cluster", "A real Slurm (munged, slurmctld, a slurmd per host) over the namespace topology");
  cmd->require_subcommand(1);
  cmd->add_option("--dir", o->dir, "The cluster's directory (env FAULTLINE_CLUSTER_DIR)");
  CLI::App* up = cmd->add_subcommand("up", "Build the topology and start Slurm over it");
  up->add_option("--hosts", o->up.hosts, "Hosts (slurmd nodes h0..)")->capture_default_str();
  up->add_option("--ranks-per-host", o->up.ranks_per_host, "Ranks (CPUs) per node")
      ->capture_default_str();
  up->add_option("--rails", o->up.rails, "Rails per host")->capture_default_str();
  up->add_option("--rail-gbps", o->up.rail_gbps, "Shaped capacity of each rail")
      ->capture_default_str();
  up->add_option("--dir", o->dir, "The cluster's directory (env FAULTLINE_CLUSTER_DIR)");
  up->add_flag("--json", o->json, "Print the cluster's description as JSON");
  up->callback([o, action] { *action = [o] { return Up(*o); }; });
  CLI::App* down = cmd->add_subcommand("down", "Stop the daemons and remove everything up made");
  down->add_option("--dir", o->dir, "The cluster's directory (env FAULTLINE_CLUSTER_DIR)");
  down->callback([o, action] { *action = [o] { return Down(*o); }; });
  CLI::App* status = cmd->add_subcommand("status", "Describe the cluster and its nodes' states");
  status->add_option("--dir", o->dir, "The cluster's directory (env FAULTLINE_CLUSTER_DIR)");
  status->add_flag("--json", o->json, "JSON");
  status->callback([o, action] { *action = [o] { return Status_(*o); }; });
}

}  // namespace faultline::cli
