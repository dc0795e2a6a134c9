// The one-box Slurm cluster (`faultline cluster up|down`): the namespace topology of a run plus
// a real Slurm over it, for the tests of fleet mode and for users who want to try it on one
// machine. Nothing of it is a mock: munged, slurmctld and one slurmd per host are Debian's
// daemons, and `srun` places ranks in the hosts' namespaces.
//
// Layout: the topology of TopologyOptions{run_id, hosts, rails, rail_gbps, ranks_per_host} with
// its management network; the management bridge in the switch namespace gets kCtlAddress, and
// slurmctld runs there (so does every client command: srun, sinfo, scancel). Host i runs
// `slurmd -N h<i>` in its namespace; node h<i> has NodeAddr 198.19.0.<i+1> and
// CPUs = ranks_per_host + 1 (the ranks and the host's fault agent). A private munged (its own key, socket and pid file) serves all of
// them; its socket is named by AuthInfo. Everything lives under one directory (default
// /run/faultline/cluster): slurm.conf, cgroup.conf, the munge key and socket, the state, spool
// and log files (per node: %n). /etc/slurm and /etc/munge are never read or written.
//
// Every resource is journaled before it is created (namespaces, the directory, each daemon, a
// sweep of the processes left in each namespace), and cluster.json lists the journal ids.
// Down undoes them newest first: daemons, leftover job steps and ranks, namespaces, the
// directory. After a crash, `faultline cleanup` does the same from the journal.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace faultline::runner {

struct ClusterOptions {
  int hosts = 2;
  int ranks_per_host = 2;
  int rails = 2;
  double rail_gbps = 1.0;
  std::string dir;          // empty: DefaultClusterDir()
  std::string journal_dir;  // empty: Journal::DefaultDir()
  std::string run_id;       // empty: a fresh one
  int64_t ready_timeout_ns = 30'000'000'000;
};

// What `cluster up` made, as cluster.json records it.
struct ClusterInfo {
  std::string dir;
  std::string run_id;
  std::string cluster_name;  // Slurm's ClusterName: "fl<run_id>"
  int hosts = 0;
  int ranks_per_host = 0;
  int rails = 0;
  double rail_gbps = 0;
  std::string partition;     // "fl"
  std::vector<std::string> nodes;       // "h0", "h1", ...
  std::vector<std::string> host_netns;  // by host
  std::string ctl_netns;                // where slurmctld and the client commands run
  std::string slurm_conf;               // its SLURM_CONF
  std::string munge_socket;
  std::string journal_dir;
  std::vector<std::string> journal_ids;  // creation order
  // The environment a Slurm client command needs: SLURM_CONF.
  std::vector<std::string> ClientEnv() const;
  nlohmann::json ToJson() const;
  static Result<ClusterInfo> FromJson(const nlohmann::json& j);
};

inline constexpr const char* kCtlAddress = "198.19.0.254";

// $FAULTLINE_CLUSTER_DIR, else /run/faultline/cluster.
std::string DefaultClusterDir();

// Builds the cluster and waits until every node is idle. FailedPrecondition when Slurm or
// munge is not installed, when a cluster is already up in the directory, or when a daemon
// does not start (the error quotes the end of its log); everything made so far is removed
// again then.
Result<ClusterInfo> ClusterUp(const ClusterOptions& options);
// Reads <dir>/cluster.json. NotFound when no cluster is up there.
Result<ClusterInfo> LoadCluster(const std::string& dir);
// Removes everything the cluster made (see above) and cluster.json. Keeps going after a failed
// step and returns the first failure (left in the journal for `faultline cleanup`).
Status ClusterDown(const ClusterInfo& info);

// Runs a command (argv[0] looked up in $PATH) in network namespace `netns` ("" = here) with
// `env` added to this process's environment, stdin /dev/null; returns its stdout. The error
// carries its stderr; DeadlineExceeded (and the command killed) after `timeout_ns`.
Result<std::string> RunCommandIn(const std::string& netns, const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, int64_t timeout_ns);

// Runs a Slurm client command (argv[0] looked up in $PATH) in the cluster's controller
// namespace with its environment; returns its stdout. The error carries its stderr.
Result<std::string> ClusterCommand(const ClusterInfo& info, const std::vector<std::string>& argv,
                                   int64_t timeout_ns = 10'000'000'000);

// The text of slurm.conf for a cluster (pure; the tests read it).
std::string SlurmConfText(const ClusterInfo& info, const std::string& hostname);

}  // namespace faultline::runner
