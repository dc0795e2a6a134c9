#include "runner/exec/site_inventory.h"

#include <net/if.h>

#include <cstdio>
#include <filesystem>
#include <utility>

#include "base/log.h"
#include "injector/netns.h"
#include "runner/exec/rank_specs.h"

namespace faultline::runner {

namespace fs = std::filesystem;

Status InventorySite::Prepare(Journal* journal) {
  journal_ = journal;
  own_netns_ = NameOfOwnNetns();
  FL_RETURN_IF_ERROR(CheckInterfaces());
  // The inventory's rail ports are this run's to fault; nothing else of this namespace.
  std::vector<std::string> extra;
  for (const InventoryHost& h : sc().topology.inventory) {
    for (const InventoryRail& r : h.rails) extra.push_back(own_netns_ + "/" + r.netdev);
  }
  auto p = MakeTargetPolicy(ctx_.options->allow, extra, journal);
  if (!p.ok()) return p.status();
  policy_.emplace(std::move(p.value()));
  // This machine's own interfaces: nothing is built or shaped; each rail's capacity is what
  // this kernel reports.
  rail_capacity_.assign(sc().topology.hosts, {});
  for (int h = 0; h < sc().topology.hosts; ++h) {
    for (const InventoryRail& r : sc().topology.inventory[h].rails)
      rail_capacity_[h].push_back(ReadRailCapacity(r));
  }
  FL_INFO("run", "%d inventory hosts on this machine (network namespace %s)", sc().topology.hosts,
          own_netns_ == kOwnNetns ? "of this process" : own_netns_.c_str());
  std::fflush(stdout);
  return Status();
}

Status InventorySite::CheckInterfaces() const {
  // A rank would otherwise fail its start with a less clear error.
  for (const InventoryHost& h : sc().topology.inventory) {
    for (const InventoryRail& r : h.rails) {
      if (if_nametoindex(r.netdev.c_str()) == 0) {
        return InvalidArgument(
            "inventory host " + h.name + ": no interface " + r.netdev +
            " in this network namespace (" +
            (own_netns_ == kOwnNetns ? std::string("this process's") : own_netns_) +
            "), where its hosts run on this machine");
      }
      std::error_code ec;
      if (r.is_rdma() && !fs::exists("/sys/class/infiniband/" + r.rdma, ec)) {
        return InvalidArgument("inventory host " + h.name + " rail " + r.netdev +
                               ": no RDMA device " + r.rdma +
                               " on this machine "
                               "(/sys/class/infiniband/" +
                               r.rdma + ")");
      }
    }
  }
  return Status();
}

Status InventorySite::OpenLauncher() {
  if (workload::adapters::CclTraitsOf(sc().ccl).launch ==
      workload::adapters::LaunchStyle::kMpiLauncher) {
    return InvalidArgument("ccl " + std::string(CclNameString(sc().ccl)) +
                           " starts through mpirun on the namespace topology only, not on an "
                           "inventory of this machine's interfaces");
  }
  // "" (this process's namespace) for every host.
  std::vector<std::string> netns(sc().topology.hosts, "");
  auto l = LocalNetnsLauncher::Create(netns, ctx_.out_dir + "/ranks");
  if (!l.ok()) return l.status();
  launcher_ = std::move(l.value());
  return Status();
}

std::vector<std::string> InventorySite::RankRails(int h, int) const {
  std::vector<std::string> rails;
  for (const InventoryRail& r : sc().topology.inventory[h].rails)
    rails.push_back(r.addr.empty() ? r.netdev : r.addr);
  return rails;
}

std::vector<std::string> InventorySite::RankEnv(int h) const {
  return InventoryRankEnv(sc(), h, /*same_machine=*/true);
}

Result<nlohmann::json> InventorySite::ResolveTarget(const TimelineAction& a,
                                                    const RankRefs& ranks) const {
  return ResolveFaultParams(
      a, sc(), ranks, nullptr, own_netns_, LocalRankTarget(*launcher_, ranks, a.kind, own_netns_));
}

FaultApplyResult InventorySite::Apply(const TimelineAction& a, const nlohmann::json& params,
                                      int64_t at_ns, std::unique_ptr<AppliedFault>* handle) {
  return ApplyHere(a, params, at_ns, journal_, *policy_, nullptr, handle);
}

std::vector<RailSamplerPort> InventoryRailPorts(const Topology& t, int64_t period_ns,
                                                nlohmann::json* note) {
  // Each host's rail netdevs, and the RDMA port behind a rail where it has one (its traffic
  // passes the netdev's counters by).
  std::vector<RailSamplerPort> ports;
  bool rdma = false;
  for (int h = 0; h < t.hosts; ++h) {
    const auto& rails = t.inventory[h].rails;
    for (int r = 0; r < static_cast<int>(rails.size()); ++r) {
      RailSamplerPort p{{h, r, std::nullopt, false}, kOwnNetns, rails[r].netdev, std::nullopt};
      if (rails[r].is_rdma()) {
        p.rdma = RdmaPortRef{rails[r].rdma, rails[r].port};
        p.port.rdma = true;
        rdma = true;
      }
      ports.push_back(std::move(p));
    }
  }
  *note = {{"period_ms", period_ns / 1e6},
           {"source", "rtnetlink IFLA_STATS64 of each rail netdev"},
           {"rdma", rdma ? nlohmann::json("the RDMA port counters of each rail with one")
                         : nlohmann::json("not sampled: no rail of the inventory names an "
                                          "RDMA device")}};
  return ports;
}

void InventorySite::StartRails(int64_t start_at_ns, int64_t period_ns, size_t reserve_samples) {
  std::vector<RailSamplerPort> ports = InventoryRailPorts(sc().topology, period_ns, &rails_note_);
  RailSamplerOptions o;
  o.period_ns = period_ns;
  o.start_at_ns = start_at_ns;
  o.reserve_samples = reserve_samples;
  rails_.Start(std::move(ports), o, &rails_note_);
}

nlohmann::json InventoryTopologyJson(const Topology& t,
                                     const std::vector<std::vector<RailCapacity>>& capacity,
                                     const std::function<nlohmann::json(int h)>& mgmt_addr) {
  // The inventory's hosts, each rail with the capacity its host's kernel reported.
  nlohmann::json hosts = nlohmann::json::array();
  for (int hh = 0; hh < t.hosts; ++hh) {
    const InventoryHost& ih = t.inventory[hh];
    nlohmann::json rails = nlohmann::json::array();
    for (int r = 0; r < static_cast<int>(ih.rails.size()); ++r) {
      const bool read =
          hh < static_cast<int>(capacity.size()) && r < static_cast<int>(capacity[hh].size());
      nlohmann::json e = RailCapacityJson(ih.rails[r], read ? capacity[hh][r] : RailCapacity{});
      e["addr"] = ih.rails[r].addr.empty() ? nlohmann::json() : nlohmann::json(ih.rails[r].addr);
      rails.push_back(std::move(e));
    }
    hosts.push_back({{"name", ih.name}, {"mgmt_addr", mgmt_addr(hh)}, {"rails", std::move(rails)}});
  }
  return {
      {"kind", "inventory"},
      {"file", t.inventory_file.empty() ? nlohmann::json() : nlohmann::json(t.inventory_file)},
      {"hosts", std::move(hosts)},
      {"rail_gbps_for_metrics", t.rail_gbps > 0 ? nlohmann::json(t.rail_gbps) : nlohmann::json()}};
}

void InventorySite::AddEnvironment(nlohmann::json* env) const {
  const Topology& t = sc().topology;
  (*env)["topology"] = InventoryTopologyJson(
      t, rail_capacity_, [&](int h) { return nlohmann::json(t.inventory[h].addr); });
  (*env)["launcher"] = "local";
}

}  // namespace faultline::runner
