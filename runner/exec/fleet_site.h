// Where a fleet run (`--launcher slurm`) runs: which Slurm its commands talk to, from where, and
// which node and management address each host of the scenario is. Two sources:
//   - the one-box cluster of `faultline cluster up` (slurm_cluster.h) for a scenario of kind
//     netns: its hosts are the cluster's namespaces, reached from its controller namespace;
//   - the real hosts a scenario of kind inventory names: this machine's Slurm (SLURM_CONF or
//     /etc/slurm as the client commands find it), reached from here. Inside an allocation
//     (salloc, sbatch: SLURM_JOB_ID set) the steps run in it, and every host must be one of its
//     nodes; outside one, srun asks for one per step (in `partition` when given).
// A host's management address is where its agent listens and where rank 0 of the job serves
// the bootstrap: the inventory's `addr`, else the host name resolved to IPv4 here.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "runner/core/scenario.h"
#include "runner/exec/slurm_cluster.h"

namespace faultline::runner {

struct SlurmSite {
  std::string netns;                    // where srun/scancel run and the sockets live; "" here
  std::vector<std::string> client_env;  // added to the client commands' environment
  std::string partition;                // "" = the default (ignored inside an allocation)
  std::vector<std::string> nodes;       // Slurm node name by host
  std::vector<std::string> mgmt_addrs;  // IPv4 management address by host
  std::string cluster_name;             // "" when not known
  std::string allocation;               // SLURM_JOB_ID the runner runs in; "" outside one
  nlohmann::json ToJson() const;        // {cluster, nodes, mgmt_addrs, allocation}
};

// The one-box cluster's first `hosts` hosts.
SlurmSite SiteOfCluster(const ClusterInfo& cluster, int hosts);

// The hosts of an inventory topology, inside the allocation of this process's SLURM_JOB_ID
// if it has one. InvalidArgument naming the host when its name does not resolve (and it has
// no addr) or, inside an allocation, when it is not one of its nodes (SLURM_JOB_NODELIST, as
// `scontrol show hostnames` expands it).
Result<SlurmSite> SiteOfInventory(const Topology& topology, const std::string& partition);

// `name` as an IPv4 address: itself when it is one, else its first A record. NotFound saying so.
Result<std::string> ResolveIpv4(const std::string& name);

}  // namespace faultline::runner
