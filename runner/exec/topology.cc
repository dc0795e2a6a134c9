#include "runner/exec/topology.h"

#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <random>

#include "injector/netlink.h"
#include "injector/netns.h"
#include "injector/qdisc.h"
#include "injector/registry.h"

namespace faultline::runner {
namespace {

constexpr int kMaxHosts = 250;  // the last octet of 198.18.<r>.<h+1>
constexpr int kMaxRails = 250;
constexpr int kMaxPorts = 250;  // per-rank NICs: the last octet of 198.18.<r>.<h*rph+l+1>
constexpr size_t kMaxRunIdLen = 8;

Status ValidateOptions(const TopologyOptions& o) {
  if (o.run_id.empty() || o.run_id.size() > kMaxRunIdLen) {
    return InvalidArgument("run id '" + o.run_id + "' must have 1.." +
                           std::to_string(kMaxRunIdLen) + " characters");
  }
  for (char c : o.run_id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'))) {
      return InvalidArgument("run id '" + o.run_id + "' may only contain [0-9a-z]");
    }
  }
  if (o.hosts < 1 || o.hosts > kMaxHosts) {
    return InvalidArgument("hosts must be 1.." + std::to_string(kMaxHosts) + ", not " +
                           std::to_string(o.hosts));
  }
  if (o.rails < 1 || o.rails > kMaxRails) {
    return InvalidArgument("rails must be 1.." + std::to_string(kMaxRails) + ", not " +
                           std::to_string(o.rails));
  }
  if (!(o.rail_gbps >= 0) || !std::isfinite(o.rail_gbps)) {
    return InvalidArgument("rail_gbps must be >= 0 (0: unshaped)");
  }
  if (o.arp_retrans_ms != 0 &&
      (o.arp_retrans_ms < kMinArpRetransMs || o.arp_retrans_ms > kMaxArpRetransMs)) {
    return InvalidArgument("arp_retrans_ms must be " + std::to_string(kMinArpRetransMs) + ".." +
                           std::to_string(kMaxArpRetransMs) + " (0: the kernel's), not " +
                           std::to_string(o.arp_retrans_ms));
  }
  if (o.nics == NicLayout::kPerRank) {
    if (o.ranks_per_host < 1 || o.hosts * o.ranks_per_host > kMaxPorts) {
      return InvalidArgument("nics per_rank: hosts x ranks_per_host must be 1.." +
                             std::to_string(kMaxPorts) + " (one address per rank on each " +
                             "rail's /24), not " + std::to_string(o.hosts) + " x " +
                             std::to_string(o.ranks_per_host));
    }
  }
  return Status::Ok();
}

// Writes `value` to /proc/sys/<key> (a path below it, e.g. "net/ipv4/conf/all/arp_ignore")
// as seen from the namespace `netns`: /proc/sys/net belongs to the opening thread's namespace.
Status WriteSysctl(const std::string& netns, const std::string& key, const std::string& value) {
  FL_ASSIGN_OR_RETURN(ScopedNetns in, ScopedNetns::Enter(netns));
  const std::string path = "/proc/sys/" + key;
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus("open " + path + " in " + netns, errno);
  if (write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    return ErrnoStatus("write " + path + " in " + netns, errno);
  }
  return Status::Ok();
}

// Turns IPv6 off on `dev` in `netns` (net.ipv6.conf.<dev>.disable_ipv6=1) so that it sends no
// router solicitation, MLD report or DAD probe: a rail carries only the traffic of the ranks.
// A kernel without IPv6 (no /proc/sys/net/ipv6) has nothing to turn off.
Status DisableIpv6(const std::string& netns, const std::string& dev) {
  Status st = WriteSysctl(netns, "net/ipv6/conf/" + dev + "/disable_ipv6", "1");
  if (!st.ok()) {
    FL_ASSIGN_OR_RETURN(ScopedNetns in, ScopedNetns::Enter(netns));
    if (access("/proc/sys/net/ipv6", F_OK) != 0 && errno == ENOENT) return Status::Ok();
  }
  return st.WithContext("disable IPv6 on " + dev);
}

// Turns the bridge's multicast snooping off before it comes up (RTM_NEWLINK with
// IFLA_BR_MCAST_SNOOPING = 0). A snooping bridge joins the multicast-router-discovery group
// 224.0.0.106 when it comes up and sends IGMPv3 reports for it out of every port (measured:
// two 54-byte frames on each host's rail port); without snooping it floods multicast like a
// plain switch, which a rail (unicast TCP and ARP) never notices.
Status DisableMcastSnooping(NlSock& sock, const std::string& bridge) {
  FL_ASSIGN_OR_RETURN(LinkState link, GetLink(sock, bridge));
  nl_msg* msg = nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK);
  if (msg == nullptr) return Internal("nlmsg_alloc_simple failed");
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = link.ifindex;
  int err = nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO);
  nlattr* info = err < 0 ? nullptr : nla_nest_start(msg, IFLA_LINKINFO);
  if (info != nullptr) err = nla_put_string(msg, IFLA_INFO_KIND, "bridge");
  nlattr* data = info == nullptr || err < 0 ? nullptr : nla_nest_start(msg, IFLA_INFO_DATA);
  if (data != nullptr) err = nla_put_u8(msg, IFLA_BR_MCAST_SNOOPING, 0);
  if (data == nullptr || err < 0) {
    nlmsg_free(msg);
    return Internal("building the bridge options of " + bridge + " failed");
  }
  nla_nest_end(msg, data);
  nla_nest_end(msg, info);
  err = nl_send_auto(sock.get(), msg);
  nlmsg_free(msg);
  if (err >= 0) err = nl_wait_for_ack(sock.get());
  if (err < 0) return NlStatus("turn off multicast snooping on " + bridge, err);
  return Status::Ok();
}

// The namespaces of a wire's two ends, for settings made inside them.
struct WireNetns {
  const std::string* sw = nullptr;
  const std::string* host = nullptr;
};

// A veth from the switch namespace (`sw_dev`, enslaved to `bridge`) to the host namespace
// (`host_dev` with `cidr`), both ends up, shaped on both ends when `rate_bps` > 0. With
// `ipv6_off` set (rails), IPv6 is off on both ends before they come up.
Status Wire(NlSock& sw, NlSock& host, int host_netns_fd, const std::string& sw_dev,
            const std::string& host_dev, const std::string& bridge, const std::string& cidr,
            uint64_t rate_bps, const WireNetns& ipv6_off = {}) {
  // The peer is created directly inside the host namespace: its name never meets the
  // switch's own names.
  FL_RETURN_IF_ERROR(CreateVeth(sw, sw_dev, host_dev, host_netns_fd));
  if (ipv6_off.sw != nullptr) {
    FL_RETURN_IF_ERROR(DisableIpv6(*ipv6_off.sw, sw_dev));
    FL_RETURN_IF_ERROR(DisableIpv6(*ipv6_off.host, host_dev));
  }
  FL_RETURN_IF_ERROR(SetMaster(sw, sw_dev, bridge));
  FL_ASSIGN_OR_RETURN(LinkState sw_link, GetLink(sw, sw_dev));
  FL_ASSIGN_OR_RETURN(LinkState host_link, GetLink(host, host_dev));
  FL_RETURN_IF_ERROR(AddAddress(host, host_link.ifindex, cidr));
  if (rate_bps > 0) {
    TbfConfig tbf;
    tbf.rate_bits_per_s = rate_bps;
    FL_RETURN_IF_ERROR(CreateRootTbf(host, host_link.ifindex, kShapingHandle, tbf)
                           .WithContext("shape " + host_dev));
    FL_RETURN_IF_ERROR(
        CreateRootTbf(sw, sw_link.ifindex, kShapingHandle, tbf).WithContext("shape " + sw_dev));
  }
  FL_RETURN_IF_ERROR(SetLinkUp(sw, sw_dev, true));
  FL_RETURN_IF_ERROR(SetLinkUp(host, host_dev, true));
  return Status::Ok();
}

// Concatenation by appending (GCC 12 warns falsely on `"r" + std::to_string(n)` at -O3).
std::string Join(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out.append(p);
  return out;
}

}  // namespace

TopologyOptions TopologyOptionsFor(const Topology& t, std::string run_id, bool management) {
  TopologyOptions o;
  o.run_id = std::move(run_id);
  o.hosts = t.hosts;
  o.rails = t.rails;
  o.rail_gbps = t.rail_gbps;
  o.management = management;
  o.ranks_per_host = t.ranks_per_host;
  o.nics = t.nics;
  o.arp_retrans_ms = t.arp_retrans_ms.value_or(0);
  return o;
}

std::string NewRunId() {
  std::random_device rd;
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%06x", static_cast<unsigned>(rd()) & 0xFFFFFFu);
  return buf;
}

std::string NetTopology::HostNetnsName(std::string_view run_id, int host) {
  return Join({kProjectNetnsPrefix, run_id, "-h", std::to_string(host)});
}
std::string NetTopology::SwitchNetnsName(std::string_view run_id) {
  return Join({kProjectNetnsPrefix, run_id, "-sw"});
}
std::string NetTopology::RailDev(int rail) { return Join({"r", std::to_string(rail)}); }
std::string NetTopology::SwitchRailDev(int host, int rail) {
  return Join({"h", std::to_string(host), "r", std::to_string(rail)});
}
std::string NetTopology::SwitchMgmtDev(int host) { return Join({"h", std::to_string(host), "m"}); }
std::string NetTopology::RailBridge(int rail) { return Join({"rail", std::to_string(rail)}); }
std::string NetTopology::RailAddress(int rail, int host) {
  return Join({"198.18.", std::to_string(rail), ".", std::to_string(host + 1)});
}
std::string NetTopology::MgmtAddress(int host) {
  return Join({"198.19.0.", std::to_string(host + 1)});
}
std::string NetTopology::PortDev(int rank, int rail) {
  return Join({"n", std::to_string(rank), "r", std::to_string(rail)});
}
std::string NetTopology::SwitchPortDev(int host, int rank, int rail) {
  return Join({"h", std::to_string(host), "n", std::to_string(rank), "r", std::to_string(rail)});
}
std::string NetTopology::PortAddress(int rail, int host, int rank, int ranks_per_host) {
  return Join(
      {"198.18.", std::to_string(rail), ".", std::to_string(host * ranks_per_host + rank + 1)});
}
uint32_t NetTopology::PortTable(int rank, int rail) const {
  return kPortTableBase + static_cast<uint32_t>(rank * options_.rails + rail);
}

void NetTopology::Describe() {
  const TopologyOptions& options = options_;
  switch_netns_ = SwitchNetnsName(options.run_id);
  for (int h = 0; h < options.hosts; ++h) {
    HostNet host;
    host.netns = HostNetnsName(options.run_id, h);
    if (options.nics == NicLayout::kPerRank) {
      for (int l = 0; l < options.ranks_per_host; ++l) {
        host.rank_rail_devs.emplace_back();
        host.rank_rail_addrs.emplace_back();
        for (int r = 0; r < options.rails; ++r) {
          host.rank_rail_devs.back().push_back(PortDev(l, r));
          host.rank_rail_addrs.back().push_back(PortAddress(r, h, l, options.ranks_per_host));
        }
      }
    } else {
      for (int r = 0; r < options.rails; ++r) {
        host.rail_devs.push_back(RailDev(r));
        host.rail_addrs.push_back(RailAddress(r, h));
      }
    }
    if (options.management) {
      host.mgmt_dev = kMgmtDev;
      host.mgmt_addr = MgmtAddress(h);
    }
    hosts_.push_back(std::move(host));
  }
}

Result<std::unique_ptr<NetTopology>> NetTopology::Build(const TopologyOptions& options) {
  FL_RETURN_IF_ERROR(ValidateOptions(options));
  std::unique_ptr<NetTopology> t(new NetTopology(options));
  std::string dir = options.journal_dir.empty() ? Journal::DefaultDir() : options.journal_dir;
  FL_ASSIGN_OR_RETURN(t->journal_, Journal::Open(dir));
  t->Describe();
  // On any failure `t` is destroyed here, which removes what was created.
  FL_RETURN_IF_ERROR(t->CreateNamespaces());
  FL_RETURN_IF_ERROR(t->BuildSwitch());
  for (int h = 0; h < options.hosts; ++h) {
    FL_RETURN_IF_ERROR(t->BuildHost(h).WithContext("host " + std::to_string(h)));
  }
  return t;
}

Result<std::unique_ptr<NetTopology>> NetTopology::Attach(const TopologyOptions& options) {
  FL_RETURN_IF_ERROR(ValidateOptions(options));
  std::unique_ptr<NetTopology> t(new NetTopology(options));
  t->Describe();
  for (const std::string& name : t->AllNetns()) {
    if (!NetnsExists(name)) {
      return NotFound("network namespace '" + name + "' of topology '" + options.run_id +
                      "' does not exist");
    }
  }
  return t;
}

std::vector<std::string> NetTopology::Release() {
  std::vector<std::string> ids;
  for (const Created& c : created_) ids.push_back(c.journal_id);
  created_.clear();
  return ids;
}

Status NetTopology::CreateNamespaces() {
  std::vector<std::string> names = AllNetns();
  // Refuse before creating anything when the run id is taken.
  for (const std::string& name : names) {
    if (NetnsExists(name)) {
      return AlreadyExists("network namespace '" + name + "' exists (run id '" + options_.run_id +
                           "' is in use)");
    }
  }
  for (const std::string& name : names) {
    FL_ASSIGN_OR_RETURN(std::string id, JournalNetns(*journal_, name));
    Status st = CreateNetns(name);
    if (!st.ok()) {
      journal_->Remove(id).IgnoreError();
      return st;
    }
    created_.push_back({name, id});
  }
  return Status::Ok();
}

Status NetTopology::BuildSwitch() {
  FL_ASSIGN_OR_RETURN(NlSock sw, NlSock::ConnectInNetns(switch_netns_));
  FL_RETURN_IF_ERROR(SetLinkUp(sw, "lo", true));
  for (int r = 0; r < options_.rails; ++r) {
    FL_RETURN_IF_ERROR(CreateBridge(sw, RailBridge(r)));
    // The bridge's own IPv6 (router solicitations, MLD) and IGMP would flood to every port of
    // the rail.
    FL_RETURN_IF_ERROR(DisableIpv6(switch_netns_, RailBridge(r)));
    FL_RETURN_IF_ERROR(DisableMcastSnooping(sw, RailBridge(r)));
    FL_RETURN_IF_ERROR(SetLinkUp(sw, RailBridge(r), true));
  }
  if (options_.management) {
    FL_RETURN_IF_ERROR(CreateBridge(sw, kMgmtDev));
    FL_RETURN_IF_ERROR(SetLinkUp(sw, kMgmtDev, true));
  }
  return Status::Ok();
}

Status NetTopology::BuildHost(int h) {
  const HostNet& host = hosts_[h];
  FL_ASSIGN_OR_RETURN(NlSock sw, NlSock::ConnectInNetns(switch_netns_));
  FL_ASSIGN_OR_RETURN(NlSock hs, NlSock::ConnectInNetns(host.netns));
  FL_ASSIGN_OR_RETURN(UniqueFd host_fd, OpenNetns(host.netns));
  FL_RETURN_IF_ERROR(SetLinkUp(hs, "lo", true));
  auto rate_bps = static_cast<uint64_t>(std::llround(options_.rail_gbps * 1e9));
  for (size_t r = 0; r < host.rail_devs.size(); ++r) {
    const int rail = static_cast<int>(r);
    FL_RETURN_IF_ERROR(Wire(sw, hs, host_fd.get(), SwitchRailDev(h, rail), host.rail_devs[r],
                            RailBridge(rail), host.rail_addrs[r] + "/" + std::to_string(kPrefixLen),
                            rate_bps, {&switch_netns_, &host.netns})
                           .WithContext("rail " + std::to_string(r)));
  }
  for (size_t l = 0; l < host.rank_rail_devs.size(); ++l) {
    for (int r = 0; r < options_.rails; ++r) {
      FL_RETURN_IF_ERROR(
          Wire(sw, hs, host_fd.get(), SwitchPortDev(h, static_cast<int>(l), r),
               host.rank_rail_devs[l][r], RailBridge(r),
               host.rank_rail_addrs[l][r] + "/" + std::to_string(kPrefixLen), rate_bps,
               {&switch_netns_, &host.netns})
              .WithContext("rank " + std::to_string(l) + " rail " + std::to_string(r)));
    }
  }
  if (options_.arp_retrans_ms > 0) {
    // Per port: a namespace other than the first has no neigh/default of its own to inherit.
    std::vector<std::string> ports = host.rail_devs;
    for (const auto& devs : host.rank_rail_devs) ports.insert(ports.end(), devs.begin(), devs.end());
    for (const std::string& dev : ports) {
      FL_RETURN_IF_ERROR(WriteSysctl(host.netns, "net/ipv4/neigh/" + dev + "/retrans_time_ms",
                                     std::to_string(options_.arp_retrans_ms)));
    }
  }
  if (per_rank_nics()) FL_RETURN_IF_ERROR(IsolatePorts(h).WithContext("port isolation"));
  if (options_.management) {
    FL_RETURN_IF_ERROR(Wire(sw, hs, host_fd.get(), SwitchMgmtDev(h), host.mgmt_dev, kMgmtDev,
                            host.mgmt_addr + "/" + std::to_string(kPrefixLen), 0)
                           .WithContext("management"));
  }
  return Status::Ok();
}

Status NetTopology::IsolatePorts(int h) {
  const HostNet& host = hosts_[h];
  // ARP: answer only for the receiving port's own address, and announce the address of the
  // sending port. Reverse-path filtering is off: the rules below decide where traffic goes.
  // Two ranks of the host talk over the fabric too (each socket is tied to its own port), so
  // a port must accept packets whose source is another port's address of this namespace.
  std::vector<std::string> confs = {"all", "default"};
  for (const auto& devs : host.rank_rail_devs) confs.insert(confs.end(), devs.begin(), devs.end());
  for (const std::string& c : confs) {
    const std::string base = "net/ipv4/conf/" + c + "/";
    FL_RETURN_IF_ERROR(WriteSysctl(host.netns, base + "arp_ignore", "1"));
    FL_RETURN_IF_ERROR(WriteSysctl(host.netns, base + "arp_announce", "2"));
    FL_RETURN_IF_ERROR(WriteSysctl(host.netns, base + "rp_filter", "0"));
    FL_RETURN_IF_ERROR(WriteSysctl(host.netns, base + "accept_local", "1"));
  }
  FL_ASSIGN_OR_RETURN(NlSock hs, NlSock::ConnectInNetns(host.netns));
  for (size_t l = 0; l < host.rank_rail_devs.size(); ++l) {
    for (int r = 0; r < options_.rails; ++r) {
      const uint32_t table = PortTable(static_cast<int>(l), r);
      const std::string& addr = host.rank_rail_addrs[l][r];
      FL_ASSIGN_OR_RETURN(LinkState port, GetLink(hs, host.rank_rail_devs[l][r]));
      FL_RETURN_IF_ERROR(AddLinkRoute(hs, Join({"198.18.", std::to_string(r), ".0/24"}),
                                      port.ifindex, addr, table, /*replace=*/false));
      // Nothing from this address falls through to the main table (and a neighbour's port).
      FL_RETURN_IF_ERROR(AddUnreachableRoute(hs, "198.18.0.0/15", table));
      FL_RETURN_IF_ERROR(AddSourceRule(hs, addr + "/32", table, kPortRulePriority));
    }
  }
  return Status::Ok();
}

Status NetTopology::RestorePortRoutes(int host) {
  if (!per_rank_nics()) return Status::Ok();
  if (host < 0 || host >= hosts()) {
    return InvalidArgument("host " + std::to_string(host) + " out of range");
  }
  const HostNet& hn = hosts_[host];
  FL_ASSIGN_OR_RETURN(NlSock hs, NlSock::ConnectInNetns(hn.netns));
  Status first;
  for (size_t l = 0; l < hn.rank_rail_devs.size(); ++l) {
    for (int r = 0; r < options_.rails; ++r) {
      auto port = GetLink(hs, hn.rank_rail_devs[l][r]);
      if (!port.ok() || !port->admin_up) continue;  // dropped or down: nothing to route
      Status st = AddLinkRoute(hs, Join({"198.18.", std::to_string(r), ".0/24"}), port->ifindex,
                               hn.rank_rail_addrs[l][r], PortTable(static_cast<int>(l), r),
                               /*replace=*/true);
      if (!st.ok() && first.ok()) first = st;
    }
  }
  return first;
}

Status NetTopology::Teardown() {
  Status first;
  while (!created_.empty()) {
    const Created& c = created_.back();
    Status st = DeleteNetns(c.netns);
    if (st.ok() || st.code() == Code::kNotFound) {
      st = journal_->Remove(c.journal_id);
      if (st.code() == Code::kNotFound) st = Status::Ok();
    }
    if (!st.ok() && first.ok()) first = st.WithContext("teardown of " + c.netns);
    // A failed step stays in the journal for `faultline cleanup`; the rest is still removed.
    created_.pop_back();
  }
  return first;
}

NetTopology::~NetTopology() {
  Status st = Teardown();
  if (!st.ok()) {
    std::fprintf(stderr, "faultline: topology %s: %s (run `faultline cleanup`)\n",
                 options_.run_id.c_str(), st.ToString().c_str());
  }
}

std::vector<std::string> NetTopology::AllNetns() const {
  std::vector<std::string> out;
  out.push_back(switch_netns_);
  for (const HostNet& h : hosts_) out.push_back(h.netns);
  return out;
}

Result<LinkRef> NetTopology::RailLink(int host, int rail, LinkSide side) const {
  if (host < 0 || host >= hosts()) {
    return InvalidArgument("host " + std::to_string(host) + " out of range (topology has " +
                           std::to_string(hosts()) + ")");
  }
  if (rail < 0 || rail >= rails()) {
    return InvalidArgument("rail " + std::to_string(rail) + " out of range (topology has " +
                           std::to_string(rails()) + ")");
  }
  if (per_rank_nics()) {
    return InvalidArgument("the topology has one NIC per rank: a link target names its rank");
  }
  if (side == LinkSide::kSwitch) return LinkRef{switch_netns_, SwitchRailDev(host, rail)};
  return LinkRef{hosts_[host].netns, hosts_[host].rail_devs[rail]};
}

Result<LinkRef> NetTopology::PortLink(int host, int rank, int rail, LinkSide side) const {
  if (!per_rank_nics()) {
    return InvalidArgument("the topology's NICs are shared: a link target names no rank");
  }
  if (host < 0 || host >= hosts()) {
    return InvalidArgument("host " + std::to_string(host) + " out of range (topology has " +
                           std::to_string(hosts()) + ")");
  }
  if (rank < 0 || rank >= ranks_per_host()) {
    return InvalidArgument("rank " + std::to_string(rank) + " out of range (topology has " +
                           std::to_string(ranks_per_host()) + " per host)");
  }
  if (rail < 0 || rail >= rails()) {
    return InvalidArgument("rail " + std::to_string(rail) + " out of range (topology has " +
                           std::to_string(rails()) + ")");
  }
  if (side == LinkSide::kSwitch) return LinkRef{switch_netns_, SwitchPortDev(host, rank, rail)};
  return LinkRef{hosts_[host].netns, hosts_[host].rank_rail_devs[rank][rail]};
}

const std::vector<std::string>& NetTopology::RankRailAddrs(int host, int rank) const {
  const HostNet& h = hosts_[host];
  return per_rank_nics() ? h.rank_rail_addrs[rank] : h.rail_addrs;
}

Result<LinkRef> NetTopology::MgmtLink(int host, LinkSide side) const {
  if (!options_.management) return InvalidArgument("the topology has no management network");
  if (host < 0 || host >= hosts()) {
    return InvalidArgument("host " + std::to_string(host) + " out of range (topology has " +
                           std::to_string(hosts()) + ")");
  }
  if (side == LinkSide::kSwitch) return LinkRef{switch_netns_, SwitchMgmtDev(host)};
  return LinkRef{hosts_[host].netns, hosts_[host].mgmt_dev};
}

Result<LinkRef> NetTopology::Resolve(const FaultTarget& target) const {
  if (!target.rail.has_value()) {
    return InvalidArgument("fault target has no rail (not a link target)");
  }
  if (per_rank_nics()) {
    if (!target.rank) return InvalidArgument("fault target has no rank (one NIC per rank)");
    return PortLink(target.host, *target.rank, *target.rail, target.side);
  }
  return RailLink(target.host, *target.rail, target.side);
}

nlohmann::json NetTopology::ToJson() const {
  nlohmann::json hosts = nlohmann::json::array();
  for (int h = 0; h < this->hosts(); ++h) {
    const HostNet& hn = hosts_[h];
    nlohmann::json host = {{"netns", hn.netns}};
    if (per_rank_nics()) {
      nlohmann::json ports = nlohmann::json::array();
      for (int l = 0; l < ranks_per_host(); ++l) {
        for (int r = 0; r < this->rails(); ++r) {
          ports.push_back({{"rank", l},
                           {"rail", r},
                           {"dev", hn.rank_rail_devs[l][r]},
                           {"addr", hn.rank_rail_addrs[l][r]},
                           {"switch_dev", SwitchPortDev(h, l, r)},
                           {"table", PortTable(l, r)}});
        }
      }
      host["ports"] = std::move(ports);
    } else {
      nlohmann::json rails = nlohmann::json::array();
      for (int r = 0; r < this->rails(); ++r) {
        rails.push_back({{"dev", hn.rail_devs[r]},
                         {"addr", hn.rail_addrs[r]},
                         {"switch_dev", SwitchRailDev(h, r)}});
      }
      host["rails"] = std::move(rails);
    }
    if (options_.management) {
      host["mgmt"] = {
          {"dev", hn.mgmt_dev}, {"addr", hn.mgmt_addr}, {"switch_dev", SwitchMgmtDev(h)}};
    }
    hosts.push_back(std::move(host));
  }
  nlohmann::json out = {{"run_id", run_id()},       {"switch_netns", switch_netns_},
                        {"rail_gbps", rail_gbps()}, {"management", management()},
                        {"prefix_len", kPrefixLen}, {"hosts", hosts}};
  if (options_.arp_retrans_ms > 0) out["arp_retrans_ms"] = options_.arp_retrans_ms;
  // Shared-NIC reports stay exactly as they were; per-rank ones say so.
  if (per_rank_nics()) {
    out["nics"] = NicLayoutString(options_.nics);
    out["ranks_per_host"] = ranks_per_host();
  }
  return out;
}

}  // namespace faultline::runner
