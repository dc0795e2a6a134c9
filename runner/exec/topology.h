// NetTopology: the embedded default fabric of a run, built from network namespaces on one
// machine (DESIGN.md, "Topology on one machine").
//
// A host is a namespace `fl-<runid>-h<i>`; the switch is one namespace `fl-<runid>-sw`. Rail r
// of host h is a veth pair: `r<r>` in the host namespace (198.18.<r>.<h+1>/24, up) to
// `h<h>r<r>` in the switch namespace, enslaved to bridge `rail<r>`. The management network is
// built the same way: `mgmt` (198.19.0.<h+1>/24) to `h<h>m` on bridge `mgmt`. lo is up in every
// namespace. Every rail is shaped to rail_gbps by a root tbf with the project's shaping handle
// (kShapingHandle) on both ends of its veth, so the fabric and not the CPU is the bottleneck;
// the management network is never shaped. IPv6 is off (disable_ipv6=1) on both ends of every
// rail veth and on every rail bridge, and the rail bridges do no multicast snooping (a snooping
// bridge sends IGMP reports of its own), all set before they come up, so that no router
// solicitation, MLD or IGMP report or DAD probe travels on a rail: a rail carries the ranks'
// traffic (and ARP).
//
// With `nics` = kPerRank every rank owns a NIC with one port per rail instead: in host
// namespace h, rank l's port on rail r is `n<l>r<r>` (198.18.<r>.<h*ranks_per_host+l+1>/24) to
// `h<h>n<l>r<r>` on bridge `rail<r>`, shaped like a shared rail port. As several ports of one
// namespace share a rail's subnet, each port's traffic is kept on that port: a rule `from
// <addr> lookup <table>` (priority kPortRulePriority, table PortTable(l, r)) whose table holds
// `198.18.<r>.0/24 dev n<l>r<r> src <addr>` and `unreachable 198.18.0.0/15`, so that a port that
// is down or gone fails its traffic instead of leaking it through a neighbour's port; and
// arp_ignore=1, arp_announce=2, rp_filter=0 (all, default and every port) so that each port
// answers ARP only for its own address and the rules, not the machine's reverse-path default,
// decide. The kernel drops a device's routes (in every table) when the device goes down and
// restores only the main table's: RestorePortRoutes puts the port tables back after a link
// comes up again.
//
// Everything is created through rtnetlink (libnl). Each namespace is recorded in the undo
// journal before it is created; deleting a namespace takes its links, bridges and qdiscs with
// it. Teardown deletes the namespaces in reverse creation order (hosts, then the switch) and
// removes their journal entries; the destructor tears down as well. A topology whose process
// was SIGKILLed is removed by CleanupJournal (`faultline cleanup`), which undoes "netns"
// entries.
// Processes still running in a host namespace keep that namespace (and its links) alive after
// teardown, unreachable by name: stop the ranks first (destroy the Launcher before the
// NetTopology).
//
// Thread-compatible: one thread builds, queries and tears down a NetTopology. The accessors
// are pure and may be called from any thread while no teardown runs.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "injector/journal.h"
#include "runner/core/scenario.h"

namespace faultline::runner {

struct TopologyOptions {
  std::string run_id;       // 1..8 chars of [0-9a-z]; see NewRunId()
  int hosts = 0;            // 1..250
  int rails = 0;            // 1..250
  double rail_gbps = 1.0;   // shaped capacity of every rail; 0: unshaped
  bool management = true;   // build the management network
  std::string journal_dir;  // empty: Journal::DefaultDir()
  int ranks_per_host = 1;   // kPerRank: one NIC per rank; hosts x ranks_per_host <= 250
  NicLayout nics = NicLayout::kShared;
  // net.ipv4.neigh.<port>.retrans_time_ms of every rail port in the host namespaces (the
  // interval between ARP requests for an unresolved neighbour); 0: the kernel's default.
  int arp_retrans_ms = 0;
};

// The options for a scenario's topology.
TopologyOptions TopologyOptionsFor(const Topology& t, std::string run_id, bool management = true);
// A fresh random run id: 6 lowercase hex characters.
std::string NewRunId();

// Where a fault acts: a device inside a namespace.
struct LinkRef {
  std::string netns;
  std::string dev;
};

// One host as the runner and the ranks see it.
struct HostNet {
  std::string netns;  // fl-<runid>-h<i>
  // Shared NICs: the host's rail ports, "r0", "r1", ... and "198.18.<r>.<h+1>" (no prefix
  // length). Empty with per-rank NICs (the host has no shared port).
  std::vector<std::string> rail_devs;
  std::vector<std::string> rail_addrs;
  // Per-rank NICs: by local rank, then rail, "n<l>r<r>" and
  // "198.18.<r>.<h*ranks_per_host+l+1>". Empty with shared NICs.
  std::vector<std::vector<std::string>> rank_rail_devs;
  std::vector<std::vector<std::string>> rank_rail_addrs;
  std::string mgmt_dev;   // "mgmt"; empty without a management network
  std::string mgmt_addr;  // "198.19.0.<h+1>"; empty without one
};

class NetTopology final {
 public:
  static constexpr int kPrefixLen = 24;

  // Builds the whole topology. On failure everything created so far is removed again (and
  // its journal entries too) and the error says which step failed. AlreadyExists when a
  // namespace of this run id is present; InvalidArgument for bad options.
  static Result<std::unique_ptr<NetTopology>> Build(const TopologyOptions& options);

  // The topology of these options as it already exists (built and Released by another
  // process: the one-box cluster of `faultline cluster up`): names and addresses only; it owns
  // nothing, so Teardown and the destructor leave it in place. NotFound naming the first
  // namespace that does not exist.
  static Result<std::unique_ptr<NetTopology>> Attach(const TopologyOptions& options);

  NetTopology(const NetTopology&) = delete;
  NetTopology& operator=(const NetTopology&) = delete;
  // Tears down (noexcept; failures are printed to stderr and left for `faultline cleanup`).
  ~NetTopology();

  // Deletes every namespace this topology created, newest first, and the journal entry of
  // each one that is gone. Keeps going after a failed step and returns the first failure
  // (whose entry stays in the journal). Idempotent: a second call is a no-op.
  Status Teardown();
  // Gives up ownership: the namespaces stay after this object is gone, and their journal
  // entries (returned, in creation order) are the caller's to undo.
  std::vector<std::string> Release();

  // Names and addresses (pure; valid also for a host index that is out of range).
  static std::string HostNetnsName(std::string_view run_id, int host);
  static std::string SwitchNetnsName(std::string_view run_id);
  static std::string RailDev(int rail);                  // "r<r>" (host side)
  static std::string SwitchRailDev(int host, int rail);  // "h<h>r<r>"
  static std::string SwitchMgmtDev(int host);            // "h<h>m"
  static std::string RailBridge(int rail);               // "rail<r>"
  static constexpr const char* kMgmtDev = "mgmt";        // host side and the bridge
  static std::string RailAddress(int rail, int host);    // "198.18.<r>.<h+1>"
  static std::string MgmtAddress(int host);              // "198.19.0.<h+1>"
  // Per-rank NICs.
  static std::string PortDev(int rank, int rail);                  // "n<l>r<r>"
  static std::string SwitchPortDev(int host, int rank, int rail);  // "h<h>n<l>r<r>"
  // "198.18.<r>.<h*ranks_per_host+l+1>"
  static std::string PortAddress(int rail, int host, int rank, int ranks_per_host);
  static constexpr uint32_t kPortRulePriority = 1000;
  static constexpr uint32_t kPortTableBase = 1000;
  // The routing table of rank l's port on rail r: kPortTableBase + l * rails + r.
  uint32_t PortTable(int rank, int rail) const;

  const std::string& run_id() const { return options_.run_id; }
  int hosts() const { return options_.hosts; }
  int rails() const { return options_.rails; }
  double rail_gbps() const { return options_.rail_gbps; }
  bool management() const { return options_.management; }
  int ranks_per_host() const { return options_.ranks_per_host; }
  NicLayout nics() const { return options_.nics; }
  bool per_rank_nics() const { return options_.nics == NicLayout::kPerRank; }
  // The rail addresses local rank `rank` of host `host` uses, in rail order: its own NIC's
  // with per-rank NICs, the host's otherwise. REQUIRES: both in range.
  const std::vector<std::string>& RankRailAddrs(int host, int rank) const;
  const std::string& switch_netns() const { return switch_netns_; }
  // REQUIRES: 0 <= h < hosts().
  const HostNet& host(int h) const { return hosts_[h]; }
  // Every namespace of the topology, in creation order (switch first).
  std::vector<std::string> AllNetns() const;

  // A link fault target {host, rail, side} as (netns, dev): the host side is `r<r>` in the
  // host's namespace, the switch side `h<h>r<r>` in the switch namespace. InvalidArgument
  // when host or rail is out of range, or with per-rank NICs (use PortLink).
  Result<LinkRef> RailLink(int host, int rail, LinkSide side) const;
  // Per-rank NICs: rank `rank`'s port on `rail`, `n<l>r<r>` in the host's namespace or
  // `h<h>n<l>r<r>` in the switch namespace. InvalidArgument when out of range or with shared
  // NICs.
  Result<LinkRef> PortLink(int host, int rank, int rail, LinkSide side) const;
  // Per-rank NICs: re-adds the table route of every port of `host` that is up (the kernel
  // removed it when the port went down); a no-op with shared NICs. Call after a link comes
  // back up. Returns the first failure.
  Status RestorePortRoutes(int host);
  // The management link of a host, either side. InvalidArgument without a management network.
  Result<LinkRef> MgmtLink(int host, LinkSide side) const;
  // A scenario's fault target (a link fault: `rail` must be set; with per-rank NICs `rank`
  // too).
  Result<LinkRef> Resolve(const FaultTarget& target) const;

  // {run_id, switch_netns, rail_gbps, management, nics, hosts: [{netns, rails: [{dev, addr,
  // switch_dev}], mgmt: {dev, addr, switch_dev}}]} for the report; with per-rank NICs each
  // host has `ports: [{rank, rail, dev, addr, switch_dev, table}]` instead of `rails`.
  nlohmann::json ToJson() const;

 private:
  struct Created {
    std::string netns;
    std::string journal_id;
  };
  explicit NetTopology(TopologyOptions options) : options_(std::move(options)) {}
  void Describe();  // fills the names and addresses from options_
  Status CreateNamespaces();
  Status BuildSwitch();
  Status BuildHost(int h);
  Status IsolatePorts(int h);

  TopologyOptions options_;
  std::unique_ptr<Journal> journal_;
  std::string switch_netns_;
  std::vector<HostNet> hosts_;
  std::vector<Created> created_;  // creation order
};

}  // namespace faultline::runner
