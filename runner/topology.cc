#include "runner/topology.h"

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
  return Status::Ok();
}

// A veth from the switch namespace (`sw_dev`, enslaved to `bridge`) to the host namespace
// (`host_dev` with `cidr`), both ends up, shaped on both ends when `rate_bps` > 0.
Status Wire(NlSock& sw, NlSock& host, int host_netns_fd, const std::string& sw_dev,
            const std::string& host_dev, const std::string& bridge, const std::string& cidr,
            uint64_t rate_bps) {
  // The peer is created directly inside the host namespace: its name never meets the
  // switch's own names.
  FL_RETURN_IF_ERROR(CreateVeth(sw, sw_dev, host_dev, host_netns_fd));
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

Result<std::unique_ptr<NetTopology>> NetTopology::Build(const TopologyOptions& options) {
  FL_RETURN_IF_ERROR(ValidateOptions(options));
  std::unique_ptr<NetTopology> t(new NetTopology(options));
  std::string dir = options.journal_dir.empty() ? Journal::DefaultDir() : options.journal_dir;
  FL_ASSIGN_OR_RETURN(t->journal_, Journal::Open(dir));
  t->switch_netns_ = SwitchNetnsName(options.run_id);
  for (int h = 0; h < options.hosts; ++h) {
    HostNet host;
    host.netns = HostNetnsName(options.run_id, h);
    for (int r = 0; r < options.rails; ++r) {
      host.rail_devs.push_back(RailDev(r));
      host.rail_addrs.push_back(RailAddress(r, h));
    }
    if (options.management) {
      host.mgmt_dev = kMgmtDev;
      host.mgmt_addr = MgmtAddress(h);
    }
    t->hosts_.push_back(std::move(host));
  }
  // On any failure `t` is destroyed here, which removes what was created.
  FL_RETURN_IF_ERROR(t->CreateNamespaces());
  FL_RETURN_IF_ERROR(t->BuildSwitch());
  for (int h = 0; h < options.hosts; ++h) {
    FL_RETURN_IF_ERROR(t->BuildHost(h).WithContext("host " + std::to_string(h)));
  }
  return t;
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
  for (int r = 0; r < options_.rails; ++r) {
    FL_RETURN_IF_ERROR(Wire(sw, hs, host_fd.get(), SwitchRailDev(h, r), host.rail_devs[r],
                            RailBridge(r), host.rail_addrs[r] + "/" + std::to_string(kPrefixLen),
                            rate_bps)
                           .WithContext("rail " + std::to_string(r)));
  }
  if (options_.management) {
    FL_RETURN_IF_ERROR(Wire(sw, hs, host_fd.get(), SwitchMgmtDev(h), host.mgmt_dev, kMgmtDev,
                            host.mgmt_addr + "/" + std::to_string(kPrefixLen), 0)
                           .WithContext("management"));
  }
  return Status::Ok();
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
  if (side == LinkSide::kSwitch) return LinkRef{switch_netns_, SwitchRailDev(host, rail)};
  return LinkRef{hosts_[host].netns, hosts_[host].rail_devs[rail]};
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
  return RailLink(target.host, *target.rail, target.side);
}

nlohmann::json NetTopology::ToJson() const {
  nlohmann::json hosts = nlohmann::json::array();
  for (int h = 0; h < this->hosts(); ++h) {
    const HostNet& hn = hosts_[h];
    nlohmann::json rails = nlohmann::json::array();
    for (int r = 0; r < this->rails(); ++r) {
      rails.push_back({{"dev", hn.rail_devs[r]},
                       {"addr", hn.rail_addrs[r]},
                       {"switch_dev", SwitchRailDev(h, r)}});
    }
    nlohmann::json host = {{"netns", hn.netns}, {"rails", rails}};
    if (options_.management) {
      host["mgmt"] = {
          {"dev", hn.mgmt_dev}, {"addr", hn.mgmt_addr}, {"switch_dev", SwitchMgmtDev(h)}};
    }
    hosts.push_back(std::move(host));
  }
  return {{"run_id", run_id()},         {"switch_netns", switch_netns_}, {"rail_gbps", rail_gbps()},
          {"management", management()}, {"prefix_len", kPrefixLen},      {"hosts", hosts}};
}

}  // namespace faultline::runner
