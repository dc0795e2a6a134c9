#include "runner/exec/site_slurm_fleet.h"

#include <cstdio>
#include <filesystem>
#include <functional>
#include <utility>

#include "base/log.h"
#include "runner/exec/rank_specs.h"
#include "runner/exec/site_inventory.h"
#include "runner/exec/slurm_cluster.h"

namespace faultline::runner {
namespace {

namespace fs = std::filesystem;

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// One cycle of a fault applied by the agent of `host`.
class AgentFault final : public AppliedFault {
 public:
  AgentFault(AgentFleet* fleet, const SlurmSite* site, int host, std::string id)
      : fleet_(fleet),
        site_(site),
        host_(host),
        id_(std::move(id)),
        generation_(fleet->generation(host)) {}
  bool applied() const override { return true; }
  bool reverted() const override { return reverted_; }
  void MarkReverted() override { reverted_ = true; }
  std::optional<Replacement> ReplacedEarly() const override {
    // The agent that applied the fault was lost and replaced: the replacement undid the fault
    // on start, before its time. The run did not get the fault it asked for.
    if (fleet_->generation(host_) == generation_) return std::nullopt;
    return Replacement{fleet_->replaced_at(host_),
                       "reverted early: the agent of " + site_->nodes[host_] +
                           " that applied it was lost, and its replacement undid it on start"};
  }
  RevertResult Revert(int64_t at_ns) override {
    RevertResult res;
    auto r = fleet_->Call(
        host_, {{"op", "revert"}, {"id", id_}, {"at_ns", fleet_->ToAgent(host_, at_ns)}});
    if (!r.ok()) {
      res.errors.push_back("revert: " + r.status().ToString());
      return res;
    }
    if (r->value("reverted", false)) {
      reverted_ = true;
      const int64_t v = (*r)["timing"].value("applied_ns", int64_t{0});
      res.reverted_ns = v == 0 ? 0 : fleet_->FromAgent(host_, v);
    }
    if ((*r)["error"].is_string())
      res.errors.push_back("revert: " + (*r)["error"].get<std::string>());
    return res;
  }
  HealResult Heal() override {
    HealResult res;
    auto r = fleet_->Call(host_, {{"op", "revert"}, {"id", id_}, {"at_ns", 0}});
    if (r.ok() && r->value("reverted", false)) {
      reverted_ = true;
      res.reverted_ns = fleet_->FromAgent(host_, (*r)["timing"].value("applied_ns", int64_t{0}));
    } else {
      res.problem =
          " through its agent: " + (r.ok() ? std::string("not reverted") : r.status().ToString());
    }
    return res;
  }

 private:
  AgentFleet* fleet_;
  const SlurmSite* site_;
  int host_;
  std::string id_;
  int generation_;
  bool reverted_ = false;
};

}  // namespace

Status SlurmFleetSite::Prepare(Journal* journal) {
  auto p = MakeTargetPolicy(ctx_.options->allow, {}, journal);
  if (!p.ok()) return p.status();
  policy_.emplace(std::move(p.value()));
  return sc().topology.is_inventory() ? AttachInventory() : AttachCluster();
}

Status SlurmFleetSite::AttachCluster() {
  const RunOptions& o = *ctx_.options;
  const std::string dir = o.cluster_dir.empty() ? DefaultClusterDir() : o.cluster_dir;
  auto c = LoadCluster(dir);
  if (!c.ok()) return c.status();
  const Topology& t = sc().topology;
  // The cluster's namespaces are the scenario's hosts: it must fit in them as built.
  std::string misfit;
  if (t.hosts > c->hosts) {
    misfit = std::to_string(t.hosts) + " hosts, the cluster has " + std::to_string(c->hosts);
  } else if (t.ranks_per_host > c->ranks_per_host) {
    misfit = std::to_string(t.ranks_per_host) + " ranks per host, the cluster's nodes have " +
             std::to_string(c->ranks_per_host) + " CPUs";
  } else if (t.rails != c->rails) {
    misfit =
        std::to_string(t.rails) + " rails, the cluster's hosts have " + std::to_string(c->rails);
  } else if (t.rail_gbps != c->rail_gbps) {
    misfit = "rails of " + Fmt("%g", t.rail_gbps) + " Gb/s, the cluster's are shaped to " +
             Fmt("%g", c->rail_gbps);
  } else if (t.per_rank_nics()) {
    misfit = "per-rank NICs, the cluster's hosts share theirs";
  } else if (t.arp_retrans_ms) {
    misfit = "arp_retrans_ms, which the cluster was built without";
  }
  if (!misfit.empty()) {
    return InvalidArgument("the scenario does not fit the cluster in " + dir + ": it wants " +
                           misfit + " (`faultline cluster up` with matching options)");
  }
  auto topo = NetTopology::Attach(TopologyOptionsFor(t, c->run_id, true));
  if (!topo.ok()) return topo.status().WithContext("the cluster in " + dir);
  topo_ = std::move(topo.value());
  site_ = SiteOfCluster(*c, t.hosts);
  return Status();
}

Status SlurmFleetSite::AttachInventory() {
  // Real hosts: nothing is built; the ranks and the agents go where the inventory says.
  auto s = SiteOfInventory(sc().topology, ctx_.options->partition);
  if (!s.ok()) return s.status();
  site_ = std::move(s).value();
  if (!site_.allocation.empty()) site_.partition.clear();  // the allocation's
  FL_INFO("run", "%d inventory hosts through Slurm (%s)", sc().topology.hosts,
          site_.allocation.empty() ? "srun asks for an allocation"
                                   : ("allocation " + site_.allocation).c_str());
  std::fflush(stdout);
  return Status();
}

Status SlurmFleetSite::OpenLauncher() {
  SlurmLauncherOptions so;
  so.log_dir = ctx_.out_dir + "/ranks";
  so.task_exe = ExeDir() + "/faultline";
  so.netns = site_.netns;
  so.client_env = site_.client_env;
  so.nodes = site_.nodes;
  so.partition = site_.partition;
  so.job_name = "faultline-" + ctx_.run_id;
  auto l = SlurmLauncher::Create(std::move(so));
  if (!l.ok()) return l.status();
  slurm_ = l->get();
  launcher_ = std::move(l.value());
  return Status();
}

Status SlurmFleetSite::StartFaultService(const std::vector<std::string>& hook_paths) {
  AgentFleetOptions ao;
  ao.task_exe = ExeDir() + "/faultline";
  ao.netns = site_.netns;
  ao.client_env = site_.client_env;
  ao.partition = site_.partition;
  ao.in_allocation = !site_.allocation.empty();
  ao.log_dir = fs::absolute(ctx_.out_dir + "/agents").string();
  ao.job_name = "faultline-agents-" + ctx_.run_id;
  // A port of this run: two runs on one cluster do not meet.
  ao.port = 20000 + static_cast<int>(std::hash<std::string>{}(ctx_.run_id) % 20000);
  for (int h = 0; h < sc().topology.hosts; ++h) {
    ao.nodes.push_back(site_.nodes[h]);
    ao.addrs.push_back(site_.mgmt_addrs[h]);
    // Each agent acts only on its own host's rail ports.
    if (!topo_) {
      for (const InventoryRail& r : sc().topology.inventory[h].rails)
        ao.allow.push_back(std::to_string(h) + "=" + kOwnNetns + "/" + r.netdev);
      continue;
    }
    for (const std::string& dev : topo_->host(h).rail_devs)
      ao.allow.push_back(std::to_string(h) + "=" + topo_->host(h).netns + "/" + dev);
    for (const auto& nic : topo_->host(h).rank_rail_devs) {  // per-rank NICs
      for (const std::string& dev : nic)
        ao.allow.push_back(std::to_string(h) + "=" + topo_->host(h).netns + "/" + dev);
    }
  }
  for (const std::string& hp : hook_paths) {
    if (!hp.empty()) ao.hook_dir = fs::path(hp).parent_path().string();
  }
  if (ao.hook_dir.empty()) ao.hook_dir = fs::absolute(ctx_.out_dir + "/ranks").string();
  std::error_code ec;
  fs::create_directories(ao.log_dir, ec);
  auto f = AgentFleet::Start(std::move(ao));
  if (!f.ok()) return f.status().WithContext("starting the fault agents");
  fleet_ = std::move(f).value();
  return Status();
}

std::vector<std::string> SlurmFleetSite::RankRails(int h, int l) const {
  if (topo_) return topo_->RankRailAddrs(h, l);
  std::vector<std::string> rails;
  for (const InventoryRail& r : sc().topology.inventory[h].rails)
    rails.push_back(r.addr.empty() ? r.netdev : r.addr);
  return rails;
}

std::vector<std::string> SlurmFleetSite::RankEnv(int h) const {
  return InventoryRankEnv(sc(), h, /*same_machine=*/false);
}

Result<nlohmann::json> SlurmFleetSite::ResolveTarget(const TimelineAction& a,
                                                     const RankRefs& ranks) const {
  const int h = a.target.host;
  return ResolveFaultParams(a, sc(), ranks, topo_.get(), HostNetns(h),
                            [&](int g, nlohmann::json* p) -> Status {
                              // The host's agent finds the rank's process by its Slurm task id.
                              auto step = slurm_ ? slurm_->step() : std::nullopt;
                              (*p)["procid"] = g;
                              if (step) {
                                (*p)["job_id"] = step->job_id;
                                (*p)["step_id"] = step->step_id;
                              }
                              (*p)["netns"] = HostNetns(h);
                              return Status();
                            });
}

FaultApplyResult SlurmFleetSite::Apply(const TimelineAction& a, const nlohmann::json& params,
                                       int64_t when, std::unique_ptr<AppliedFault>* handle) {
  // The fault's host's agent applies it there and reads it back from that host's kernel; its
  // times come back on its clock and are mapped to this one with the measured offset.
  const int h = a.target.host;
  auto to_runner = [&](const nlohmann::json& t, const char* key) -> int64_t {
    const int64_t v = t.value(key, int64_t{0});
    return v == 0 ? 0 : fleet_->FromAgent(h, v);
  };
  FaultApplyResult res;
  res.attempted = true;
  const std::string id = a.fault_id + "#" + std::to_string(a.cycle);
  auto r = fleet_->Call(h, {{"op", "apply"},
                            {"id", id},
                            {"kind", a.injector_kind},
                            {"params", params},
                            {"at_ns", fleet_->ToAgent(h, when)}});
  if (!r.ok()) {
    res.error = r.status().ToString();
    return res;
  }
  const nlohmann::json& t = (*r)["timing"];
  const bool applied = r->value("applied", false);
  if (applied) {
    res.applied = true;
    res.applied_ns = to_runner(t, "applied_ns");
    res.observed_ns = to_runner(t, "observed_ns");
    res.observed = t.value("observed", nlohmann::json());
  }
  if ((*r)["error"].is_string()) res.error = (*r)["error"];
  if (applied) *handle = std::make_unique<AgentFault>(fleet_.get(), &site_, h, id);
  agent_faults_.push_back(
      {{"fault", a.fault_id},
       {"cycle", a.cycle},
       {"host", h},
       {"node", site_.nodes[h]},
       {"applied", applied},
       {"lateness_us", applied ? nlohmann::json((to_runner(t, "applied_ns") - when) / 1e3)
                               : nlohmann::json(nullptr)}});
  return res;
}

std::string SlurmFleetSite::StopFaultService() {
  // The agents measure their clocks once more, heal whatever is left and exit.
  if (!fleet_) return "";
  Status st = fleet_->Stop();
  return st.ok() ? "" : "stopping the fault agents: " + st.ToString();
}

void SlurmFleetSite::StartRails(int64_t start_at_ns, int64_t period_ns, size_t reserve_samples) {
  std::vector<RailSamplerPort> ports;
  if (!topo_) {
    ports = InventoryRailPorts(sc().topology, period_ns, &rails_note_);
  } else {
    for (int h = 0; h < topo_->hosts(); ++h) {
      const HostNet& hn = topo_->host(h);
      for (int r = 0; r < topo_->rails(); ++r)
        ports.push_back({{h, r, std::nullopt, false}, hn.netns, hn.rail_devs[r], std::nullopt});
    }
    rails_note_ = {{"period_ms", period_ns / 1e6},
                   {"source", "rtnetlink IFLA_STATS64 of each rail port (host side)"},
                   {"rdma", "not sampled: no RDMA device backs a rail of the namespace topology"}};
  }
  rails_start_ns_ = start_at_ns;
  rails_period_ns_ = period_ns;
  // Each host's agent samples that host's ports on the same grid of this clock (mapped to its
  // own with the offset measured at the start).
  rails_note_["source"] =
      "rtnetlink IFLA_STATS64 of each rail port (host side), read by the host's agent on its "
      "own clock and mapped to the runner's with the measured offset";
  agent_rail_ports_.assign(sc().topology.hosts, {});
  if (!topo_) rail_capacity_.assign(sc().topology.hosts, {});
  nlohmann::json errors = nlohmann::json::array();
  for (int h = 0; h < sc().topology.hosts; ++h) {
    nlohmann::json list = nlohmann::json::array();
    for (const RailSamplerPort& p : ports) {
      if (p.port.host != h) continue;
      agent_rail_ports_[h].push_back(p.port);
      nlohmann::json e = {{"host", h}, {"rail", p.port.rail}, {"netns", p.netns}, {"dev", p.dev}};
      if (p.port.rank) e["rank"] = *p.port.rank;
      if (p.rdma) e["rdma"] = {{"device", p.rdma->device}, {"port", p.rdma->port}};
      list.push_back(e);
    }
    auto r = fleet_->Call(h, {{"op", "rails_start"},
                              {"ports", list},
                              {"period_ns", period_ns},
                              {"start_at_ns", fleet_->ToAgent(h, start_at_ns)},
                              {"reserve", reserve_samples}});
    if (!r.ok()) {
      errors.push_back("host " + std::to_string(h) + ": " + r.status().ToString());
      continue;
    }
    // Each port's capacity as the host's kernel reports it, in the order asked.
    if (!topo_) {
      for (const nlohmann::json& c : r->value("capacity", nlohmann::json::array())) {
        RailCapacity rc;
        if (c.is_object() && c.value("bps", nlohmann::json()).is_number() &&
            c["bps"].get<double>() > 0) {
          rc.bps = c["bps"].get<double>();
          rc.source = c.value("source", "");
        }
        rail_capacity_[h].push_back(rc);
      }
    }
  }
  if (!errors.empty()) rails_note_["errors"] = errors;
}

std::optional<RailSeries> SlurmFleetSite::StopRails() {
  if (agent_rail_ports_.empty()) return std::nullopt;
  std::vector<RailSeries> parts;
  nlohmann::json errors = rails_note_.value("errors", nlohmann::json::array());
  size_t late = 0;
  for (int h = 0; h < static_cast<int>(agent_rail_ports_.size()); ++h) {
    RailSeries part;
    part.ports = agent_rail_ports_[h];  // a host whose samples are lost keeps empty columns
    auto r = fleet_->Call(h, {{"op", "rails_stop"}});
    std::string why;
    std::optional<RailSeries> got;
    if (!r.ok()) {
      why = r.status().ToString();
    } else if (!(got = RailSeriesFromJson(r->value("series", nlohmann::json()), &why))) {
      why = "its series: " + why;
    } else if (got->ports.size() != part.ports.size()) {
      why = "its series has " + std::to_string(got->ports.size()) + " ports, not " +
            std::to_string(part.ports.size());
    } else {
      for (int64_t& t : got->t_ns) t = fleet_->FromAgent(h, t);
      got->ports = std::move(part.ports);  // the ports are the ones asked for, not its word
      part = std::move(*got);
      late += r->value("late_samples", size_t{0});
      for (const auto& e : r->value("errors", nlohmann::json::array())) {
        if (e.is_string())
          errors.push_back("host " + std::to_string(h) + ": " + e.get<std::string>());
      }
    }
    if (!why.empty()) {
      errors.push_back("host " + std::to_string(h) + ": no samples (" + why + ")");
    }
    parts.push_back(std::move(part));
  }
  MergedRails m = MergeRailSeries(parts, rails_start_ns_, rails_period_ns_);
  rails_note_["late_samples"] = late;
  rails_note_["hosts_max_spread_us"] = m.max_spread_ns / 1e3;
  rails_note_["unmatched_samples"] = m.unmatched;
  if (!errors.empty()) rails_note_["errors"] = errors;
  return std::move(m.series);
}

void SlurmFleetSite::AddEnvironment(nlohmann::json* env) const {
  if (topo_) {
    (*env)["topology"] = topo_->ToJson();
  } else {
    (*env)["topology"] = InventoryTopologyJson(
        sc().topology, rail_capacity_, [&](int h) { return nlohmann::json(site_.mgmt_addrs[h]); });
  }
  (*env)["launcher"] = "slurm";
  nlohmann::json slurm = site_.ToJson();
  slurm["job_id"] = nullptr;
  slurm["step_id"] = nullptr;
  if (auto step = slurm_ ? slurm_->step() : std::nullopt) {
    slurm["job_id"] = step->job_id;
    slurm["step_id"] = step->step_id;
  }
  (*env)["slurm"] = slurm;
  // Each host's agent clock against this one (a 4-timestamp exchange before and after).
  (*env)["clock_offsets"] = fleet_ ? fleet_->ClockOffsetsJson() : nlohmann::json();
  (*env)["agents"] = {{"faults", agent_faults_},
                      {"events", fleet_ ? fleet_->events() : std::vector<std::string>{}}};
}

}  // namespace faultline::runner
