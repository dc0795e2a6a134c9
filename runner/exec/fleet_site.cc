#include "runner/exec/fleet_site.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace faultline::runner {

nlohmann::json SlurmSite::ToJson() const {
  return {{"cluster", cluster_name.empty() ? nlohmann::json() : nlohmann::json(cluster_name)},
          {"nodes", nodes},
          {"mgmt_addrs", mgmt_addrs},
          {"allocation", allocation.empty() ? nlohmann::json() : nlohmann::json(allocation)}};
}

SlurmSite SiteOfCluster(const ClusterInfo& c, int hosts) {
  SlurmSite s;
  s.netns = c.ctl_netns;
  s.client_env = c.ClientEnv();
  s.partition = c.partition;
  s.cluster_name = c.cluster_name;
  for (int h = 0; h < hosts && h < static_cast<int>(c.nodes.size()); ++h) {
    s.nodes.push_back(c.nodes[h]);
    s.mgmt_addrs.push_back("198.19.0." + std::to_string(h + 1));
  }
  return s;
}

Result<std::string> ResolveIpv4(const std::string& name) {
  in_addr a{};
  if (::inet_pton(AF_INET, name.c_str(), &a) == 1) return name;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return NotFound("'" + name + "' does not resolve to an IPv4 address (" + ::gai_strerror(rc) + ")");
  }
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof buf);
  ::freeaddrinfo(res);
  return std::string(buf);
}

Result<SlurmSite> SiteOfInventory(const Topology& t, const std::string& partition) {
  if (!t.is_inventory() || t.inventory.empty()) {
    return InvalidArgument("not an inventory topology");
  }
  SlurmSite s;
  s.partition = partition;
  const char* job = std::getenv("SLURM_JOB_ID");
  s.allocation = job ? job : "";
  for (const InventoryHost& h : t.inventory) {
    s.nodes.push_back(h.name);
    in_addr v4{};
    if (!h.addr.empty() && ::inet_pton(AF_INET, h.addr.c_str(), &v4) != 1) {
      return InvalidArgument("inventory host '" + h.name + "': its addr " + h.addr +
                             " is not an IPv4 address: the fault agents and the job's bootstrap "
                             "are reached over IPv4");
    }
    auto addr = ResolveIpv4(h.addr.empty() ? h.name : h.addr);
    if (!addr.ok()) {
      return InvalidArgument("inventory host '" + h.name + "': " + addr.status().message() +
                             ": give its management address as 'addr'");
    }
    s.mgmt_addrs.push_back(*addr);
  }
  if (!s.allocation.empty()) {
    const char* list = std::getenv("SLURM_JOB_NODELIST");
    if (list == nullptr || *list == '\0') {
      return InvalidArgument("inside allocation " + s.allocation +
                             " but SLURM_JOB_NODELIST is not set: which nodes it holds is unknown");
    }
    auto out = RunCommandIn("", {"scontrol", "show", "hostnames", list}, {}, 10'000'000'000);
    if (!out.ok()) return out.status().WithContext("expanding SLURM_JOB_NODELIST " + std::string(list));
    std::vector<std::string> held;
    std::istringstream in(*out);
    for (std::string n; in >> n;) held.push_back(n);
    for (const std::string& n : s.nodes) {
      if (std::find(held.begin(), held.end(), n) == held.end()) {
        return InvalidArgument("inventory host '" + n + "' is not a node of allocation " +
                               s.allocation + " (" + list + "): ask for the inventory's hosts, "
                               "e.g. sbatch --nodelist");
      }
    }
  }
  return s;
}

}  // namespace faultline::runner
