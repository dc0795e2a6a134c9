#include "runner/exec/run.h"

#include <net/if.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "base/clock.h"
#include "injector/injection.h"
#include "injector/journal.h"
#include "injector/netns.h"
#include "injector/policy.h"
#include "injector/realtime_scope.h"
#include "injector/registry.h"
#include "reports/verdict.h"
#include "reports/write_reports.h"
#include "runner/core/checks.h"
#include "runner/core/history.h"
#include "runner/core/inventory.h"
#include "runner/core/metrics.h"
#include "runner/core/report_json.h"
#include "runner/core/timeline.h"
#include "runner/core/worker_log.h"
#include "runner/exec/agent_client.h"
#include "runner/exec/fleet_site.h"
#include "runner/exec/launcher.h"
#include "runner/exec/rail_capacity.h"
#include "runner/exec/rail_sampler.h"
#include "runner/exec/requirements.h"
#include "runner/exec/slurm_cluster.h"
#include "runner/exec/slurm_launcher.h"
#include "runner/exec/topology.h"
#include "runner/exec/torch_workload.h"
#include "runner/faults/registry.h"
#include "runner/worker/worker.h"
#include "workload/adapters/ccl_traits.h"

namespace faultline::runner {
namespace {

namespace fs = std::filesystem;

constexpr int kBootstrapPort = 29500;
std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

// Restores the previous SIGINT/SIGTERM handlers when the run ends.
class StopOnSignals final {
 public:
  StopOnSignals() {
    g_stop = false;
    struct sigaction sa{};
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopOnSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_{};
  struct sigaction old_term_{};
};

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

std::string Opt(const std::optional<double>& v, const char* unit) {
  return v ? Fmt("%.1f", *v) + unit : "-";
}

// report.json's "train" object (the training workload): the job's useful work and rate, its
// fault-free twin, restarts, checkpoints, holds and the selector's decisions.
nlohmann::json TrainJson(const History& h, const TrainingMetrics& t, const nlohmann::json& twin) {
  using nlohmann::json;
  auto since = [&](int64_t ns) { return (ns - h.run_start_ns) / 1e9; };
  json restarts = json::array();
  for (const RestartRecord& r : h.restarts) {
    restarts.push_back({{"incarnation", r.incarnation},
                        {"t_s", since(r.detected_ns)},
                        {"why", r.why},
                        {"cost_ms", r.cost_ns ? json(*r.cost_ns / 1e6) : json()},
                        {"resumed_step", r.resumed_step ? json(*r.resumed_step) : json()}});
  }
  std::vector<double> write_ms;
  int64_t newest = 0;
  for (const CheckpointRecord& c : h.checkpoints) {
    write_ms.push_back((c.end_ns - c.start_ns) / 1e6);
    newest = std::max(newest, c.step);
  }
  std::sort(write_ms.begin(), write_ms.end());
  json holds = json::array();
  for (const HoldRecord& r : h.holds) {
    if (r.rank != 0) continue;  // every rank holds together; rank 0's is the group's
    holds.push_back({{"t_s", since(r.start_ns)}, {"duration_ms", (r.end_ns - r.start_ns) / 1e6},
                     {"returned", r.returned}});
  }
  json decisions = json::array();
  std::vector<double> latency_ms;
  for (const DecisionRecord& d : h.decisions) {
    decisions.push_back({{"t_s", since(d.t_ns)}, {"rank", d.rank}, {"chosen", d.chosen},
                         {"latency_ms", d.latency_ns / 1e6},
                         {"fault_class", d.decision.value("inputs", json::object()).value("fault_class", "")}});
    latency_ms.push_back(d.latency_ns / 1e6);
  }
  std::sort(latency_ms.begin(), latency_ms.end());
  auto pct = [](const std::vector<double>& v, double p) -> json {
    if (v.empty()) return nullptr;
    const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
    return v[i];
  };
  return {{"useful_samples", t.useful_samples ? json(*t.useful_samples) : json()},
          {"job_time_s", t.job_time_s ? json(*t.job_time_s) : json()},
          {"samples_per_s", t.samples_per_s ? json(*t.samples_per_s) : json()},
          {"goodput_ratio", t.goodput_ratio ? json(*t.goodput_ratio) : json()},
          {"twin", twin},
          {"restarts", std::move(restarts)},
          {"restarts_given_up",
           h.restarts_given_up.empty() ? json() : json(h.restarts_given_up)},
          {"checkpoints", {{"written", h.checkpoints.size()},
                           {"newest_step", newest},
                           {"write_ms_p50", pct(write_ms, 0.5)},
                           {"write_ms_max", write_ms.empty() ? json() : json(write_ms.back())}}},
          {"holds", std::move(holds)},
          {"decisions", std::move(decisions)},
          {"decision_latency_ms_p99", pct(latency_ms, 0.99)}};
}

std::string ExeDir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "." : self.parent_path().string();
}

// One scenario fault as the executor tracks it.
struct FaultState {
  const FaultSpec* spec = nullptr;
  FaultRecord record;
  std::map<int, std::unique_ptr<Injection>> by_cycle;  // link_flap: one injection per cycle
  // Fleet runs: the cycles applied by the agent of `remote_host` (cycle -> its id there), and
  // which of them it reverted.
  std::map<int, std::string> remote_by_cycle;
  std::set<int> remote_reverted;
  int remote_host = -1;
  int remote_generation = 0;  // of the agent that applied them
};

// `ccl_version`: what the ranks' libraries said (WorkerHeader::ccl_version); null when no
// rank said one.
nlohmann::json Environment(const Scenario& sc, const RunOptions& o, const std::string& run_id,
                           const std::optional<std::string>& ccl_version) {
  utsname u{};
  uname(&u);
  // An inventory's rails are not shaped: their capacity is in environment.topology.
  nlohmann::json knobs = {
      {"op_timeout_ms", o.op_timeout_ms},
      {"rail_gbps",
       sc.topology.is_inventory() ? nlohmann::json() : nlohmann::json(sc.topology.rail_gbps)}};
  if (sc.topology.per_rank_nics()) knobs["nics"] = NicLayoutString(sc.topology.nics);
  return {{"kernel", std::string(u.sysname) + " " + u.release},
          {"machine", u.machine},
          {"versions",
           {{"faultline", FAULTLINE_VERSION},
            {CclNameString(sc.ccl), ccl_version ? nlohmann::json(*ccl_version) : nullptr}}},
          {"run_id", run_id},
          {"knobs", knobs}};
}

class Run final {
 public:
  Run(Scenario sc, RunOptions o) : sc_(std::move(sc)), o_(std::move(o)) {}
  int Execute();

 private:
  Status Setup();
  Status AttachCluster();
  Status LaunchRanks();
  void ChooseHookPaths();
  void RemoveHookPaths();
  void StartRailSampler();
  void StopRailSampler();
  void DriveTimeline();
  void WaitRanks();
  void HealAll();
  int Finish();
  Result<nlohmann::json> FaultParams(const TimelineAction& a) const;
  void DoAction(const TimelineAction& a);
  bool AllRanksExited();

  Scenario sc_;
  RunOptions o_;
  std::string run_id_;
  std::string out_;
  std::unique_ptr<Journal> journal_;
  std::optional<TargetPolicy> policy_;
  std::unique_ptr<NetTopology> topo_;
  std::unique_ptr<Launcher> launcher_;
  // --launcher slurm: where the ranks run (the one-box cluster's namespaces, or the hosts of an
  // inventory), and the step they ran in.
  std::optional<SlurmSite> site_;
  Status AttachInventory();
  SlurmLauncher* slurm_ = nullptr;  // launcher_ when it is the Slurm one
  // An inventory whose hosts are all this machine (inventory.h IsLocalInventory), run by the
  // local launcher: every rank in this process's namespace, own_netns_ (its /run/netns name
  // where it has one, so that the journal names it for whoever undoes it).
  bool local_inventory_ = false;
  std::string own_netns_;
  Status CheckLocalInventory() const;
  // Host h's namespace as its faults name it: its namespace on this machine, or on a real
  // host of an inventory that host's own (kOwnNetns, which its agent resolves).
  std::string HostNetns(int h) const {
    return topo_ ? topo_->host(h).netns : local_inventory_ ? own_netns_ : kOwnNetns;
  }
  // The rails rank l of host h is given, in rail order: addresses, or on an inventory host a
  // rail's netdev where the inventory gives no address (the rank resolves it on its host).
  std::vector<std::string> RankRails(int h, int l) const;
  // Inventory runs: each rail's capacity as its host's agent read it from the kernel (by host,
  // then rail); the report's topology lists them.
  std::vector<std::vector<RailCapacity>> rail_capacity_;
  std::unique_ptr<AgentFleet> fleet_;  // --launcher slurm: one fault agent per host
  nlohmann::json agent_faults_ = nlohmann::json::array();  // which agent applied what
  Status StartAgents();
  void RemoteAction(FaultState& f, const TimelineAction& a, int64_t when);
  bool RevertedByReplacement(FaultState& f);
  std::vector<int> handles_;  // by global rank (of the job's current incarnation)
  std::string worker_exe_;
  // The training workload under policy fail_stop or adaptive: the runner restarts every rank
  // in place, from the last checkpoint, when the job stops for it (MaybeRestart).
  std::string RankLogPath(int g, int incarnation) const;
  std::vector<LaunchSpec> RankSpecs(int incarnation, const std::string& worker);
  // What a rank of inventory host h is told through its environment (none on a netns topology).
  std::vector<std::string> InventoryRankEnv(int h) const;
  bool Restartable() const;
  void MaybeRestart();
  int incarnation_ = 0;
  int64_t incarnation_start_ns_ = 0;  // t0, then when the runner relaunched the ranks
  std::optional<int64_t> last_restart_cost_ms_;  // measured at the last restart
  std::vector<RestartRecord> restarts_;
  // Where each rank serves its fault hook (where the ccl's traits say it serves one; empty
  // otherwise), by global rank, and what the report says about it.
  std::vector<std::string> hook_paths_;
  nlohmann::json hook_record_;
  // How long before its time an action is prepared: arming a fault fsyncs the journal.
  static constexpr int64_t kArmLeadNs = 30'000'000;
  static constexpr size_t kMaxRestarts = 8;  // then the job's failure stands
  // Restarts in a row whose ranks never reached a step (every rank's start failed: the fault
  // is in the way of the job's start, e.g. a NIC port gone for good): then no more.
  static constexpr int kMaxFruitlessRestarts = 2;
  int fruitless_restarts_ = 0;
  std::string restarts_given_up_;  // why the runner stopped restarting; "" while it has not
  std::string timeline_scheduling_;
  int64_t t0_ = 0;
  int64_t execute_start_ns_ = 0;
  int64_t run_end_ns_ = 0;
  bool watchdog_fired_ = false;
  std::vector<FaultState> faults_;
  std::map<int, bool> killed_by_fault_;  // global rank -> killed by rank_kill
  std::vector<std::string> harness_errors_;
  // Every rail port's counters from just before t0 until the ranks have exited
  // (rail_sampler.h): sampled here, or in a fleet run by each host's agent (which alone can
  // read its host's ports) and merged on this clock; rails_note_ says how, and what failed.
  std::unique_ptr<RailSampler> rail_sampler_;
  std::optional<RailSeries> rail_series_;                // after StopRailSampler
  std::vector<std::vector<RailPort>> agent_rail_ports_;  // by host: what its agent samples
  void StartAgentRails(std::vector<RailSamplerPort> ports, const RailSamplerOptions& o);
  // Rank g's clock against this one: rank clock = runner clock + offset. The offset its host's
  // agent measured before the run (a host's ranks and agent share its clock); 0 when the ranks
  // run on this machine.
  int64_t RankClockOffsetNs(int g) const {
    return fleet_ ? fleet_->ToAgent(g / sc_.topology.ranks_per_host, 0) : 0;
  }
  // Rank g's log of `incarnation`, its times on this clock.
  Result<WorkerLog> LoadRankLog(int g, int incarnation) const {
    auto log = LoadWorkerLog(RankLogPath(g, incarnation));
    if (log.ok()) MapWorkerLogToRunnerClock(&*log, RankClockOffsetNs(g));
    return log;
  }
  void StopAgentRails();
  nlohmann::json rails_note_ = nlohmann::json::object();
  static constexpr int64_t kRailPeriodNs = 20'000'000;
  static constexpr int64_t kRailLeadNs = 200'000'000;  // first sample before t0
};

Status Run::Setup() {
  run_id_ = NewRunId();
  out_ = o_.out_dir.empty() ? "out/" + sc_.name + "-" + run_id_ : o_.out_dir;
  std::error_code ec;
  fs::create_directories(out_ + "/ranks", ec);
  if (ec) return Status(Code::kInvalidArgument, "cannot create " + out_ + ": " + ec.message());
  fs::copy_file(o_.scenario_path, out_ + "/scenario.yaml", fs::copy_options::overwrite_existing, ec);
  FL_ASSIGN_OR_RETURN(journal_, Journal::Open(Journal::DefaultDir()));
  local_inventory_ = o_.launcher == "local" && sc_.topology.is_inventory();
  std::vector<std::string> allow = o_.allow;
  if (local_inventory_) {
    own_netns_ = NameOfOwnNetns();
    FL_RETURN_IF_ERROR(CheckLocalInventory());
    // The inventory's rail ports are this run's to fault; nothing else of this namespace.
    for (const InventoryHost& h : sc_.topology.inventory) {
      for (const InventoryRail& r : h.rails) allow.push_back(own_netns_ + "/" + r.netdev);
    }
  }
  {
    auto p = TargetPolicy::Create(allow, journal_.get());
    if (!p.ok()) return p.status();
    policy_.emplace(std::move(p.value()));
  }
  if (o_.launcher == "slurm" && sc_.topology.is_inventory()) {
    FL_RETURN_IF_ERROR(AttachInventory());
  } else if (o_.launcher == "slurm") {
    FL_RETURN_IF_ERROR(AttachCluster());
  } else if (o_.launcher != "local") {
    return InvalidArgument("unknown launcher '" + o_.launcher + "' (local or slurm)");
  } else if (local_inventory_) {
    // This machine's own interfaces: nothing is built or shaped; each rail's capacity is what
    // this kernel reports.
    rail_capacity_.assign(sc_.topology.hosts, {});
    for (int h = 0; h < sc_.topology.hosts; ++h) {
      for (const InventoryRail& r : sc_.topology.inventory[h].rails)
        rail_capacity_[h].push_back(ReadRailCapacity(r));
    }
    std::printf("faultline run: %d inventory hosts on this machine (network namespace %s)\n",
                sc_.topology.hosts,
                own_netns_ == kOwnNetns ? "of this process" : own_netns_.c_str());
    std::fflush(stdout);
  } else {
    auto topo = NetTopology::Build(TopologyOptionsFor(sc_.topology, run_id_, true));
    if (!topo.ok()) return topo.status();
    topo_ = std::move(topo.value());
  }
  for (const auto& f : sc_.faults) {
    FaultState st;
    st.spec = &f;
    st.record.id = f.id;
    st.record.kind = f.kind;
    st.record.target = f.target;
    st.record.error = reports::kRanksEndedFirstError;
    faults_.push_back(std::move(st));
  }
  return Status();
}

Status Run::CheckLocalInventory() const {
  // Every rail names an interface of this namespace and, where it is RDMA, a device of this
  // machine: a rank would otherwise fail its start with a less clear error.
  for (const InventoryHost& h : sc_.topology.inventory) {
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

Status Run::AttachCluster() {
  const std::string dir = o_.cluster_dir.empty() ? DefaultClusterDir() : o_.cluster_dir;
  auto c = LoadCluster(dir);
  if (!c.ok()) return c.status();
  const Topology& t = sc_.topology;
  // The cluster's namespaces are the scenario's hosts: it must fit in them as built.
  std::string misfit;
  if (t.hosts > c->hosts) {
    misfit = std::to_string(t.hosts) + " hosts, the cluster has " + std::to_string(c->hosts);
  } else if (t.ranks_per_host > c->ranks_per_host) {
    misfit = std::to_string(t.ranks_per_host) + " ranks per host, the cluster's nodes have " +
             std::to_string(c->ranks_per_host) + " CPUs";
  } else if (t.rails != c->rails) {
    misfit = std::to_string(t.rails) + " rails, the cluster's hosts have " +
             std::to_string(c->rails);
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

Status Run::AttachInventory() {
  // Real hosts: nothing is built; the ranks and the agents go where the inventory says.
  auto s = SiteOfInventory(sc_.topology, o_.partition);
  if (!s.ok()) return s.status();
  site_ = std::move(s).value();
  if (!site_->allocation.empty()) site_->partition.clear();  // the allocation's
  std::printf("faultline run: %d inventory hosts through Slurm (%s)\n", sc_.topology.hosts,
              site_->allocation.empty() ? "srun asks for an allocation"
                                        : ("allocation " + site_->allocation).c_str());
  std::fflush(stdout);
  return Status();
}

std::vector<std::string> Run::RankRails(int h, int l) const {
  if (topo_) return topo_->RankRailAddrs(h, l);
  std::vector<std::string> rails;
  for (const InventoryRail& r : sc_.topology.inventory[h].rails)
    rails.push_back(r.addr.empty() ? r.netdev : r.addr);
  return rails;
}

Status Run::StartAgents() {
  AgentFleetOptions ao;
  ao.task_exe = ExeDir() + "/faultline";
  ao.netns = site_->netns;
  ao.client_env = site_->client_env;
  ao.partition = site_->partition;
  ao.in_allocation = !site_->allocation.empty();
  ao.log_dir = fs::absolute(out_ + "/agents").string();
  ao.job_name = "faultline-agents-" + run_id_;
  // A port of this run: two runs on one cluster do not meet.
  ao.port = 20000 + static_cast<int>(std::hash<std::string>{}(run_id_) % 20000);
  for (int h = 0; h < sc_.topology.hosts; ++h) {
    ao.nodes.push_back(site_->nodes[h]);
    ao.addrs.push_back(site_->mgmt_addrs[h]);
    // Each agent acts only on its own host's rail ports.
    if (!topo_) {
      for (const InventoryRail& r : sc_.topology.inventory[h].rails)
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
  for (const std::string& hp : hook_paths_) {
    if (!hp.empty()) ao.hook_dir = fs::path(hp).parent_path().string();
  }
  if (ao.hook_dir.empty()) ao.hook_dir = fs::absolute(out_ + "/ranks").string();
  std::error_code ec;
  fs::create_directories(ao.log_dir, ec);
  auto f = AgentFleet::Start(std::move(ao));
  if (!f.ok()) return f.status().WithContext("starting the fault agents");
  fleet_ = std::move(f).value();
  return Status();
}

Status Run::LaunchRanks() {
  if (site_) {
    SlurmLauncherOptions so;
    so.log_dir = out_ + "/ranks";
    so.task_exe = ExeDir() + "/faultline";
    so.netns = site_->netns;
    so.client_env = site_->client_env;
    so.nodes = site_->nodes;
    so.partition = site_->partition;
    so.job_name = "faultline-" + run_id_;
    auto l = SlurmLauncher::Create(std::move(so));
    if (!l.ok()) return l.status();
    slurm_ = l->get();
    launcher_ = std::move(l.value());
  } else {
    // Each host's namespace; "" (this process's) for an inventory of this machine.
    std::vector<std::string> netns;
    for (int h = 0; h < sc_.topology.hosts; ++h) netns.push_back(topo_ ? topo_->host(h).netns : "");
    auto l = LocalNetnsLauncher::Create(netns, out_ + "/ranks");
    if (!l.ok()) return l.status();
    launcher_ = std::move(l.value());
  }
  const std::string worker = o_.worker_path.empty() ? ExeDir() + "/faultline-worker" : o_.worker_path;
  worker_exe_ = worker;
  if (sc_.workload.kind != WorkloadKind::kTorchDdp && access(worker.c_str(), X_OK) != 0) {
    return Status(Code::kNotFound, "worker binary " + worker + " not found (build faultline-worker)");
  }
  const int world = sc_.topology.world_size();
  ChooseHookPaths();
  if (site_) FL_RETURN_IF_ERROR(StartAgents());
  // Every rank starts its workload at t0 (CLOCK_MONOTONIC is shared by all namespaces), which
  // leaves time to join the group; scenario offsets count from there. A Python rank first
  // loads PyTorch (about 1.5 s of CPU each, the ranks sharing this machine's cores).
  const bool torch = sc_.workload.kind == WorkloadKind::kTorchDdp;
  const int64_t cores = std::max<int64_t>(1, sysconf(_SC_NPROCESSORS_ONLN));
  t0_ = MonoNow() + 2'000'000'000LL + 50'000'000LL * world +
        (torch ? 1'500'000'000LL * world / cores : 0);
  for (auto& f : faults_) f.record.scheduled_ns = t0_ + f.spec->at_ns;
  std::error_code ec;
  // The rendezvous directory of the CCLs that need one (Gloo's file store, NCCL's unique id):
  // always fresh, so nothing of an earlier run in the same --out is picked up.
  fs::remove_all(out_ + "/store", ec);
  fs::create_directories(out_ + "/store", ec);
  if (sc_.workload.kind == WorkloadKind::kTrain) {
    // The job's checkpoints: fresh, so no earlier run's are resumed.
    fs::remove_all(out_ + "/checkpoints", ec);
    fs::create_directories(out_ + "/checkpoints", ec);
  }
  std::vector<LaunchSpec> specs = RankSpecs(0, worker);
  auto handles = launcher_->StartWorld(specs);
  if (!handles.ok()) return handles.status();
  handles_ = std::move(handles).value();
  return Status();
}

std::string Run::RankLogPath(int g, int incarnation) const {
  return out_ + "/ranks/rank" + std::to_string(g) +
         (incarnation > 0 ? ".i" + std::to_string(incarnation) : "") + ".jsonl";
}

std::vector<LaunchSpec> Run::RankSpecs(int incarnation, const std::string& worker) {
  const Workload& w = sc_.workload;
  const Topology& t = sc_.topology;
  const int world = t.world_size();
  const bool torch = w.kind == WorkloadKind::kTorchDdp;
  const bool train = w.kind == WorkloadKind::kTrain;
  // A restarted job (policy fail_stop) meets in a fresh rendezvous of its own, on a port of
  // its own: nothing of the killed incarnation (a socket in TIME_WAIT, a stale store key) is
  // in its way.
  std::string store = fs::absolute(out_ + "/store").string();
  if (incarnation > 0) {
    store += "/i" + std::to_string(incarnation);
    std::error_code ec;
    fs::create_directories(store, ec);
  }
  std::vector<LaunchSpec> specs;
  for (int h = 0; h < t.hosts; ++h) {
    for (int l = 0; l < t.ranks_per_host; ++l) {
      const int g = h * t.ranks_per_host + l;
      std::string rails;
      // The rank's rail addresses in rail order: its own NIC's ports with per-rank NICs.
      for (const auto& a : RankRails(h, l)) rails += (rails.empty() ? "" : ",") + a;
      const std::string log = fs::absolute(RankLogPath(g, incarnation)).string();
      // Rank 0 serves the bootstrap on its host's management address.
      const std::string mgmt0 = site_   ? site_->mgmt_addrs[0]
                                : topo_ ? NetTopology::MgmtAddress(0)
                                        : t.inventory[0].addr;
      const std::string bootstrap = mgmt0 + ":" + std::to_string(kBootstrapPort + incarnation);
      // What every rank is told, whichever program it runs.
      const std::vector<std::string> group = {
          "--ccl", CclNameString(sc_.ccl),
          "--rank", std::to_string(g),
          "--size", std::to_string(world),
          "--bootstrap", bootstrap,
          "--rails", rails,
          "--store-dir", store,
          "--log", log,
          "--seed", std::to_string(sc_.seed),
      };
      // A training script (torch_workload.h), whose steps are the ops, or faultline-worker.
      std::vector<std::string> argv = torch ? TorchScriptArgv(w) : std::vector<std::string>{worker};
      argv.insert(argv.end(), group.begin(), group.end());
      // Every rank of the first incarnation starts its workload at t0; a restarted one as
      // soon as its group has met (the restart's cost is what it takes).
      // On the rank's own clock: its host's in a fleet run.
      if (incarnation == 0) {
        argv.insert(argv.end(), {"--start-at", std::to_string(t0_ + RankClockOffsetNs(g))});
      }
      if (!train) argv.insert(argv.end(), {"--warmup", std::to_string(w.warmup_iters)});
      if (train) {
        const std::string dir = fs::absolute(out_ + "/checkpoints").string();
        argv.insert(argv.end(), {
          "--workload", "train",
          "--steps", std::to_string(w.iters.value_or(1)),
          "--batch", std::to_string(w.batch),
          "--compute-ms", std::to_string(w.compute_ns / 1000000),
          "--grad-bytes", std::to_string(w.bytes) + "B",
          "--checkpoint-every", std::to_string(w.checkpoint_every),
          "--checkpoint-dir", dir,
          "--policy", RecoveryPolicyString(sc_.policy),
          "--wait-bound-ms", std::to_string(w.wait_bound_ns / 1000000),
          "--timeout", std::to_string(o_.op_timeout_ms) + "ms",
          "--incarnation", std::to_string(incarnation),
        });
        if (incarnation > 0) argv.push_back("--resume");
        if (last_restart_cost_ms_) {
          argv.insert(argv.end(), {"--restart-cost-ms", std::to_string(*last_restart_cost_ms_)});
        }
      } else if (torch) {
        argv.insert(argv.end(), {"--steps", std::to_string(w.iters.value_or(1)),
                                 "--timeout", std::to_string(o_.op_timeout_ms)});
      } else {
        argv.insert(argv.end(), {
          "--op", CollOpName(w.op),
          "--dtype", w.dtype,
          "--root", std::to_string(w.root),
          "--bytes", std::to_string(w.bytes) + "B",
          "--timeout", std::to_string(o_.op_timeout_ms) + "ms",
        });
        if (w.op == CollOp::kAllReduce || w.op == CollOp::kReduceScatter ||
            w.op == CollOp::kReduce) {
          argv.insert(argv.end(), {"--redop", w.reduce});
        }
        if (w.duration_ns) {
          argv.insert(argv.end(),
                      {"--duration", std::to_string(*w.duration_ns / 1000000) + "ms"});
        } else {
          argv.insert(argv.end(), {"--iters", std::to_string(w.iters.value_or(1))});
        }
        if (w.check) argv.push_back("--check");
        if (sc_.policy == RecoveryPolicyName::kShrink) argv.insert(argv.end(), {"--policy", "shrink"});
      }
      if (!hook_paths_[g].empty()) argv.insert(argv.end(), {"--fault-hook", hook_paths_[g]});
      if (torch) {
        for (auto& a : TorchScriptOptions(w)) argv.push_back(std::move(a));
      }
      LaunchSpec spec;
      spec.argv = std::move(argv);
      if (torch) spec.env = {"PYTHONPATH=" + TorchPythonPath()};
      for (std::string& e : InventoryRankEnv(h)) spec.env.push_back(std::move(e));
      spec.placement = {h, l, g};
      spec.name = "rank" + std::to_string(g) +
                  (incarnation > 0 ? ".i" + std::to_string(incarnation) : "");
      specs.push_back(std::move(spec));
    }
  }
  return specs;
}

std::vector<std::string> Run::InventoryRankEnv(int h) const {
  std::vector<std::string> env;
  const Topology& t = sc_.topology;
  if (!t.is_inventory()) return env;
  // Ranks of several inventory hosts on this machine share its hostname: ftccl tells its
  // hosts apart (intra-host relay) by the inventory's names instead.
  if (local_inventory_) env.push_back("FTCCL_HOST_ID=" + t.inventory[h].name);
  // RDMA rails carry ftccl's traffic over verbs queue pairs (RoCE/IB), not TCP over the
  // netdev: the transport is the inventory's, all rails or none (ftccl has one per
  // communicator).
  if (sc_.ccl == CclName::kFtccl && InventoryAllRdma(t)) env.push_back("FTCCL_TRANSPORT=verbs");
  return env;
}

void Run::ChooseHookPaths() {
  // Every rank of a ccl whose traits say it serves the fault hook (ftccl) serves it
  // (conn_corrupt, qp_error; also `faultline inject` by hand during a run) at
  // out/ranks/rankN.hook. A Unix socket path holds at most 107 bytes; under a deep --out the
  // sockets go to /run/faultline/hooks instead, and the report says so.
  const int world = sc_.topology.world_size();
  hook_paths_.assign(world, "");
  if (!workload::adapters::CclTraitsOf(sc_.ccl).serves_fault_hook) {
    hook_record_ = {
        {"served", false},
        {"why", std::string("ccl ") + CclNameString(sc_.ccl) + " serves no fault hook"}};
    return;
  }
  constexpr size_t kSunPathMax = 107;
  const std::string ranks_dir = fs::absolute(out_ + "/ranks").lexically_normal().string();
  const std::string fallback_dir = "/run/faultline/hooks";
  std::string why;
  for (int g = 0; g < world; ++g) {
    std::string p = ranks_dir + "/rank" + std::to_string(g) + ".hook";
    if (p.size() > kSunPathMax) {
      why = "'" + p + "' is " + std::to_string(p.size()) + " bytes, more than a Unix socket path " +
            "holds (" + std::to_string(kSunPathMax) + ")";
      p = fallback_dir + "/" + run_id_ + "-rank" + std::to_string(g) + ".hook";
    }
    hook_paths_[g] = p;
  }
  if (!why.empty()) {
    std::error_code ec;
    fs::create_directories(fallback_dir, ec);
    fs::permissions(fallback_dir, fs::perms::owner_all, fs::perm_options::replace, ec);
    std::printf("faultline run: fault hooks under %s: %s\n", fallback_dir.c_str(), why.c_str());
  }
  hook_record_ = {{"served", true}, {"paths", hook_paths_}};
  if (!why.empty()) hook_record_["fallback"] = why;
}

void Run::RemoveHookPaths() {
  // A rank removes its socket when it ends; one that was killed leaves it behind.
  for (const auto& p : hook_paths_) {
    std::error_code ec;
    if (!p.empty() && fs::is_socket(fs::symlink_status(p, ec))) fs::remove(p, ec);
  }
}

Result<nlohmann::json> Run::FaultParams(const TimelineAction& a) const {
  nlohmann::json p = a.params;
  const int h = a.target.host;
  switch (faults::DescriptorOf(a.kind).target) {
    case faults::TargetShape::kRankPath: {
      auto g = a.target.GlobalRank(sc_.topology);
      if (!g) return Status(Code::kInvalidArgument, "fault " + a.fault_id + ": no rank target");
      if (*g >= static_cast<int>(hook_paths_.size()) || hook_paths_[*g].empty()) {
        const std::string serving = workload::adapters::CclNamesWhere(
            [](const workload::adapters::CclTraits& c) { return c.serves_fault_hook; });
        return Status(Code::kUnavailable, "fault " + a.fault_id + ": ccl " +
                                              CclNameString(sc_.ccl) + " serves no fault hook (" +
                                              a.kind + " needs one; only " + serving +
                                              " ranks serve it)");
      }
      p["hook"] = hook_paths_[*g];
      return p;
    }
    case faults::TargetShape::kRank: {
      auto g = a.target.GlobalRank(sc_.topology);
      if (!g) return Status(Code::kInvalidArgument, "fault " + a.fault_id + ": no rank target");
      if (fleet_) {
        // The host's agent finds the rank's process by its Slurm task id.
        auto step = slurm_ ? slurm_->step() : std::nullopt;
        p["procid"] = *g;
        if (step) {
          p["job_id"] = step->job_id;
          p["step_id"] = step->step_id;
        }
        p["netns"] = HostNetns(h);
        return p;
      }
      auto pid = launcher_->LocalPid(handles_[*g]);
      if (!pid) {
        return Status(Code::kUnavailable,
                      "rank " + std::to_string(*g) + " runs in a Slurm job step: " + a.kind +
                          " acts on a rank through its host's agent, which this launcher "
                          "does not have yet");
      }
      p["pid"] = *pid;
      p["netns"] = HostNetns(h);
      return p;
    }
    case faults::TargetShape::kSocketLink: {
      p["netns"] = HostNetns(h);
      if (!topo_ && a.target.rail && !p.contains("src")) {
        // A real host's rail: its address, or the netdev's, which its agent looks up there.
        const InventoryRail* r = sc_.topology.InventoryRailAt(h, *a.target.rail);
        if (r == nullptr)
          return Status(Code::kInvalidArgument, "fault " + a.fault_id + ": rail out of range");
        if (r->addr.empty()) {
          p["src_dev"] = r->netdev;
        } else {
          p["src"] = r->addr;
        }
        return p;
      }
      // The sockets of the rail's port: the host's, or with per-rank NICs the target rank's.
      if (a.target.rail && !p.contains("src")) {
        const int l = topo_->per_rank_nics() ? a.target.rank.value_or(0) : 0;
        const auto& addrs = topo_->RankRailAddrs(h, l);
        if (*a.target.rail < 0 || *a.target.rail >= static_cast<int>(addrs.size())) {
          return Status(Code::kInvalidArgument, "fault " + a.fault_id + ": rail out of range");
        }
        p["src"] = addrs[*a.target.rail];
      }
      return p;
    }
    case faults::TargetShape::kLink:
      break;
  }
  // The injector takes the NIC port (host side) and finds the switch port itself when the
  // fault's side is "switch", so both ends are read back in its observation.
  if (!a.target.rail) return Status(Code::kInvalidArgument, "fault " + a.fault_id + ": no rail");
  if (!topo_) {
    // A real host's rail: its netdev, in the host's own namespace. Its switch port is not
    // ours to touch.
    const InventoryRail* r = sc_.topology.InventoryRailAt(h, *a.target.rail);
    if (r == nullptr)
      return Status(Code::kInvalidArgument, "fault " + a.fault_id + ": rail out of range");
    if (a.target.side == LinkSide::kSwitch) {
      return Status(Code::kInvalidArgument,
                    "fault " + a.fault_id +
                        ": side switch: an inventory host's switch port is not reachable from "
                        "its agent");
    }
    p["netns"] = HostNetns(h);
    p["dev"] = r->netdev;
    return p;
  }
  FaultTarget host_side = a.target;
  host_side.side = LinkSide::kHost;
  auto link = topo_->Resolve(host_side);
  if (!link.ok()) return link.status();
  p["netns"] = link->netns;
  p["dev"] = link->dev;
  return p;
}

bool Run::Restartable() const {
  return sc_.workload.kind == WorkloadKind::kTrain &&
         (sc_.policy == RecoveryPolicyName::kFailStop || sc_.policy == RecoveryPolicyName::kAdaptive);
}

void Run::MaybeRestart() {
  if (!Restartable() || g_stop || restarts_.size() >= kMaxRestarts) return;
  // Under fail_stop the runner is the job's supervisor (as an elastic launcher is): any rank
  // that stops before the job's end stops the job. Under adaptive only a rank that asked for it
  // (its selector chose fail_stop) does; a dead rank is the selector's to decide about.
  // Every rank found stopped is named: which one stopped first is not known from here (a
  // survivor may ask for the restart before the dead rank's exit is seen).
  std::string why;
  bool trigger = false;
  for (size_t g = 0; g < handles_.size(); ++g) {
    auto st = launcher_->Wait(handles_[g], MonoNow() - 1);
    if (!st.ok() || st->running()) continue;
    if (st->success()) return;  // a rank finished its steps: the job is over, not restarted
    const bool asked = st->state == ExitStatus::State::kExited && st->code == kWorkerExitRestart;
    trigger = trigger || asked || sc_.policy == RecoveryPolicyName::kFailStop;
    why += (why.empty() ? "" : "; ") + std::string("rank ") + std::to_string(g) + " " +
           st->ToString() + (asked ? " (stopped for a restart)" : "");
  }
  if (!trigger) return;
  bool stepped = incarnation_ == 0;
  for (size_t g = 0; g < handles_.size() && !stepped; ++g) {
    auto log = LoadRankLog(static_cast<int>(g), incarnation_);
    stepped = log.ok() && !log->ops.empty();
  }
  fruitless_restarts_ = stepped ? 0 : fruitless_restarts_ + 1;
  if (fruitless_restarts_ >= kMaxFruitlessRestarts) {
    if (restarts_given_up_.empty()) {
      restarts_given_up_ = "the last " + std::to_string(fruitless_restarts_) +
                           " restarts in place never reached a step (" + why +
                           "): the fault is in the way of the job's start";
      std::printf("faultline run: no more restarts: %s\n", restarts_given_up_.c_str());
      std::fflush(stdout);
    }
    return;
  }
  RestartRecord r;
  r.incarnation = incarnation_ + 1;
  r.detected_ns = MonoNow();
  r.why = why;
  // The others stop too: they may be waiting out a dead peer, which is the time a restart saves.
  for (int h : handles_) (void)launcher_->Kill(h, SIGKILL);
  for (int h : handles_) (void)launcher_->Wait(h, MonoNow() + 10'000'000'000LL);
  // What the last restart cost, measured from its ranks' logs, for the selector's cost model.
  if (!restarts_.empty()) {
    std::optional<int64_t> first_step;
    for (size_t g = 0; g < handles_.size(); ++g) {
      auto log = LoadRankLog(static_cast<int>(g), incarnation_);
      if (!log.ok() || log->ops.empty()) continue;
      first_step = std::min(first_step.value_or(INT64_MAX), log->ops.front().start_ns);
    }
    if (first_step) last_restart_cost_ms_ = (*first_step - restarts_.back().detected_ns) / 1000000;
  }
  ++incarnation_;
  auto handles = launcher_->StartWorld(RankSpecs(incarnation_, worker_exe_));
  r.relaunched_ns = MonoNow();
  incarnation_start_ns_ = r.relaunched_ns;
  if (!handles.ok()) {
    harness_errors_.push_back("restarting the ranks (incarnation " + std::to_string(incarnation_) +
                              "): " + handles.status().ToString());
    --incarnation_;
    return;
  }
  handles_ = std::move(handles).value();
  restarts_.push_back(std::move(r));
  std::printf("faultline run: restart %zu: %s; every rank restarted from the last checkpoint\n",
              restarts_.size(), restarts_.back().why.c_str());
  std::fflush(stdout);
}

bool Run::AllRanksExited() {
  for (int h : handles_) {
    if (launcher_->status(h).running()) {
      auto st = launcher_->Wait(h, MonoNow());
      if (!st.ok() || st->running()) return false;
    }
  }
  return true;
}

void Run::DoAction(const TimelineAction& a) {
  auto it = std::find_if(faults_.begin(), faults_.end(),
                         [&](const FaultState& f) { return f.record.id == a.fault_id; });
  if (it == faults_.end()) return;
  FaultState& f = *it;
  const int64_t when = t0_ + a.at_ns;
  if (fleet_) {
    RemoteAction(f, a, when);
    return;
  }
  if (a.type == ActionType::kApply) {
    if (f.record.error.rfind("not applied", 0) == 0) f.record.error.clear();
    auto params = FaultParams(a);
    if (!params.ok()) {
      if (f.record.error.empty()) f.record.error = params.status().ToString();
      return;
    }
    auto fault = CreateFault(a.injector_kind, params.value());
    if (!fault.ok()) {
      if (f.record.error.empty()) f.record.error = fault.status().ToString();
      return;
    }
    auto inj = Injection::Arm(std::move(fault.value()), journal_.get(), *policy_);
    if (!inj.ok()) {
      if (f.record.error.empty()) f.record.error = inj.status().ToString();
      return;
    }
    if (faults::DescriptorOf(a.kind).kills_rank) {
      if (auto g = a.target.GlobalRank(sc_.topology)) killed_by_fault_[*g] = true;
    }
    Status st = inj.value()->ApplyAt(when);
    const StepTiming& t = inj.value()->apply_timing();
    if (!f.record.applied_ns && inj.value()->applied()) {
      f.record.applied_ns = t.applied;
      f.record.observed_ns = t.observed;
      f.record.observed = t.observation;
    }
    if (!st.ok() && f.record.error.empty()) f.record.error = st.ToString();
    f.by_cycle[a.cycle] = std::move(inj.value());
  } else {
    auto c = f.by_cycle.find(a.cycle);
    if (c == f.by_cycle.end() || !c->second->applied()) return;
    Status st = c->second->RevertAt(when);
    if (c->second->reverted()) f.record.reverted_ns = c->second->revert_timing().applied;
    if (!st.ok() && f.record.error.empty()) f.record.error = "revert: " + st.ToString();
    // A port that was down lost its table route with per-rank NICs; put it back.
    if (topo_ && topo_->per_rank_nics() && !faults::DescriptorOf(a.kind).rank_target()) {
      Status rt = topo_->RestorePortRoutes(a.target.host);
      if (!rt.ok() && f.record.error.empty()) f.record.error = "revert: " + rt.ToString();
    }
  }
}

bool Run::RevertedByReplacement(FaultState& f) {
  // The agent that applied the fault was lost and replaced: the replacement undid the fault on
  // start, before its time. The run did not get the fault it asked for; the report says so.
  if (f.remote_host < 0 || fleet_->generation(f.remote_host) == f.remote_generation) return false;
  for (const auto& [cycle, id] : f.remote_by_cycle) f.remote_reverted.insert(cycle);
  if (!f.record.reverted_ns) f.record.reverted_ns = fleet_->replaced_at(f.remote_host);
  if (f.record.error.empty()) {
    f.record.error = "reverted early: the agent of " + site_->nodes[f.remote_host] +
                     " that applied it was lost, and its replacement undid it on start";
  }
  return true;
}

void Run::RemoteAction(FaultState& f, const TimelineAction& a, int64_t when) {
  // The fault's host's agent applies it there and reads it back from that host's kernel; its
  // times come back on its clock and are mapped to this one with the measured offset.
  const int h = a.target.host;
  auto to_runner = [&](const nlohmann::json& t, const char* key) -> int64_t {
    const int64_t v = t.value(key, int64_t{0});
    return v == 0 ? 0 : fleet_->FromAgent(h, v);
  };
  if (a.type == ActionType::kApply) {
    if (f.record.error.rfind("not applied", 0) == 0) f.record.error.clear();
    auto params = FaultParams(a);
    if (!params.ok()) {
      if (f.record.error.empty()) f.record.error = params.status().ToString();
      return;
    }
    if (faults::DescriptorOf(a.kind).kills_rank) {
      if (auto g = a.target.GlobalRank(sc_.topology)) killed_by_fault_[*g] = true;
    }
    const std::string id = f.record.id + "#" + std::to_string(a.cycle);
    auto r = fleet_->Call(h, {{"op", "apply"},
                              {"id", id},
                              {"kind", a.injector_kind},
                              {"params", *params},
                              {"at_ns", fleet_->ToAgent(h, when)}});
    if (!r.ok()) {
      if (f.record.error.empty()) f.record.error = r.status().ToString();
      return;
    }
    const nlohmann::json& t = (*r)["timing"];
    if (!f.record.applied_ns && r->value("applied", false)) {
      f.record.applied_ns = to_runner(t, "applied_ns");
      f.record.observed_ns = to_runner(t, "observed_ns");
      f.record.observed = t.value("observed", nlohmann::json());
    }
    if ((*r)["error"].is_string() && f.record.error.empty()) f.record.error = (*r)["error"];
    if (r->value("applied", false)) {
      f.remote_by_cycle[a.cycle] = id;
      f.remote_host = h;
      f.remote_generation = fleet_->generation(h);
    }
    const bool applied = r->value("applied", false);
    agent_faults_.push_back(
        {{"fault", f.record.id},
         {"cycle", a.cycle},
         {"host", h},
         {"node", site_->nodes[h]},
         {"applied", applied},
         {"lateness_us", applied ? nlohmann::json((to_runner(t, "applied_ns") - when) / 1e3)
                                 : nlohmann::json(nullptr)}});
  } else {
    auto c = f.remote_by_cycle.find(a.cycle);
    if (c == f.remote_by_cycle.end() || f.remote_reverted.count(a.cycle)) return;
    if (RevertedByReplacement(f)) return;
    auto r = fleet_->Call(h, {{"op", "revert"}, {"id", c->second}, {"at_ns", fleet_->ToAgent(h, when)}});
    if (!r.ok()) {
      if (f.record.error.empty()) f.record.error = "revert: " + r.status().ToString();
      return;
    }
    if (r->value("reverted", false)) {
      f.remote_reverted.insert(a.cycle);
      f.record.reverted_ns = to_runner((*r)["timing"], "applied_ns");
    }
    if ((*r)["error"].is_string() && f.record.error.empty())
      f.record.error = "revert: " + (*r)["error"].get<std::string>();
  }
}

void Run::StartRailSampler() {
  std::vector<RailSamplerPort> ports;
  if (!topo_) {
    // An inventory: each host's rail netdevs, and the RDMA port behind a rail where it has one
    // (its traffic passes the netdev's counters by).
    bool rdma = false;
    for (int h = 0; h < sc_.topology.hosts; ++h) {
      const auto& rails = sc_.topology.inventory[h].rails;
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
    rails_note_ = {{"period_ms", kRailPeriodNs / 1e6},
                   {"source", "rtnetlink IFLA_STATS64 of each rail netdev"},
                   {"rdma", rdma ? nlohmann::json("the RDMA port counters of each rail with one")
                                 : nlohmann::json("not sampled: no rail of the inventory names an "
                                                  "RDMA device")}};
  }
  for (int h = 0; topo_ && h < topo_->hosts(); ++h) {
    const HostNet& hn = topo_->host(h);
    // By rank (per-rank NICs), then rail: each NIC's ports side by side in rails.csv.
    const int nics = topo_->per_rank_nics() ? topo_->ranks_per_host() : 1;
    for (int l = 0; l < nics; ++l) {
      for (int r = 0; r < topo_->rails(); ++r) {
        if (topo_->per_rank_nics()) {
          ports.push_back({{h, r, l, false}, hn.netns, hn.rank_rail_devs[l][r], std::nullopt});
        } else {
          ports.push_back({{h, r, std::nullopt, false}, hn.netns, hn.rail_devs[r], std::nullopt});
        }
      }
    }
  }
  // The namespace topology builds veth pairs: no RDMA device backs a rail here.
  if (topo_) {
    rails_note_ = {{"period_ms", kRailPeriodNs / 1e6},
                   {"source", "rtnetlink IFLA_STATS64 of each rail port (host side)"},
                   {"rdma", "not sampled: no RDMA device backs a rail of the namespace topology"}};
  }
  const Workload& w = sc_.workload;
  RailSamplerOptions o;
  o.period_ns = kRailPeriodNs;
  o.start_at_ns = t0_ - kRailLeadNs;
  o.reserve_samples = static_cast<size_t>(
      (kRailLeadNs + w.duration_ns.value_or(30'000'000'000LL) + 10'000'000'000LL) / kRailPeriodNs);
  if (fleet_) {
    StartAgentRails(std::move(ports), o);
    return;
  }
  // Started before DriveTimeline raises its own thread (only that thread) to realtime
  // priority: the sampler keeps the normal policy and never delays a fault.
  auto s = RailSampler::Start(std::move(ports), o);
  if (!s.ok()) {
    rails_note_["errors"] = {s.status().ToString()};
    return;
  }
  rail_sampler_ = std::move(s).value();
}

void Run::StopRailSampler() {
  if (fleet_) {
    StopAgentRails();
    return;
  }
  if (!rail_sampler_) return;
  rail_sampler_->Stop();
  rail_series_ = rail_sampler_->series();
  std::vector<std::string> errors = rail_sampler_->errors();
  rails_note_["late_samples"] = rail_sampler_->late_samples();
  if (!errors.empty()) rails_note_["errors"] = errors;
}

// A fleet run: each host's agent samples that host's ports on the same grid of this clock
// (mapped to its own with the offset measured at the start).
void Run::StartAgentRails(std::vector<RailSamplerPort> ports, const RailSamplerOptions& o) {
  rails_note_["source"] =
      "rtnetlink IFLA_STATS64 of each rail port (host side), read by the host's agent on its "
      "own clock and mapped to the runner's with the measured offset";
  agent_rail_ports_.assign(sc_.topology.hosts, {});
  if (!topo_) rail_capacity_.assign(sc_.topology.hosts, {});
  nlohmann::json errors = nlohmann::json::array();
  for (int h = 0; h < sc_.topology.hosts; ++h) {
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
                              {"period_ns", o.period_ns},
                              {"start_at_ns", fleet_->ToAgent(h, o.start_at_ns)},
                              {"reserve", o.reserve_samples}});
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

void Run::StopAgentRails() {
  if (agent_rail_ports_.empty()) return;
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
  MergedRails m = MergeRailSeries(parts, t0_ - kRailLeadNs, kRailPeriodNs);
  rails_note_["late_samples"] = late;
  rails_note_["hosts_max_spread_us"] = m.max_spread_ns / 1e3;
  rails_note_["unmatched_samples"] = m.unmatched;
  if (!errors.empty()) rails_note_["errors"] = errors;
  rail_series_ = std::move(m.series);
}

void Run::DriveTimeline() {
  Timeline tl = BuildTimeline(sc_, sc_.seed);
  // The ranks keep every core busy; a fault must still start within a few ms of its time.
  RealtimeScope priority;
  timeline_scheduling_ = priority.description();
  for (const auto& a : tl.actions) {
    const int64_t when = t0_ + a.at_ns;
    // Coarse wait that notices a stop request or the end of every rank. It ends early enough
    // for the fault to be armed (its undo journalled and fsynced) before its time; the
    // injection then sleeps precisely to that time.
    while (!g_stop && MonoNow() < when - kArmLeadNs) {
      MaybeRestart();
      if (AllRanksExited()) return;
      SleepUntil(std::min(when - kArmLeadNs, MonoNow() + 20'000'000), &g_stop);
    }
    if (g_stop) return;
    DoAction(a);
  }
}

void Run::WaitRanks() {
  const Workload& w = sc_.workload;
  // The watchdog: the workload's own length plus every deadline a worker may still be waiting
  // out, then some slack for joining and leaving the group.
  int64_t budget = w.duration_ns ? *w.duration_ns : 0;
  budget += 2 * o_.op_timeout_ms * 1'000'000 + 15'000'000'000LL;
  if (w.iters) budget += *w.iters * o_.op_timeout_ms * 1'000'000 / 10;
  if (w.kind == WorkloadKind::kTrain && w.iters) budget += *w.iters * w.compute_ns;
  // A restarted job gets the whole budget again from its relaunch.
  auto deadline = [&] { return std::max(t0_, incarnation_start_ns_) + budget; };
  for (;;) {
    MaybeRestart();
    if (g_stop || MonoNow() >= deadline() || AllRanksExited()) break;
    SleepUntil(std::min(deadline(), MonoNow() + 50'000'000), &g_stop);
  }
  WaitAllReport r = launcher_->WaitAll(g_stop ? MonoNow() : deadline());
  watchdog_fired_ = r.hung() && !g_stop;
  run_end_ns_ = MonoNow();
}

void Run::HealAll() {
  // Jepsen-style heal: every fault still in force is reverted, whatever happened before.
  for (auto& f : faults_) {
    for (auto& [cycle, inj] : f.by_cycle) {
      if (inj->applied() && !inj->reverted()) {
        Status st = inj->RevertAt(0);
        if (inj->reverted()) f.record.reverted_ns = inj->revert_timing().applied;
        if (!st.ok()) harness_errors_.push_back("healing fault " + f.record.id + ": " + st.ToString());
      }
    }
    f.by_cycle.clear();
    if (fleet_ && RevertedByReplacement(f)) continue;
    for (const auto& [cycle, id] : f.remote_by_cycle) {
      if (f.remote_reverted.count(cycle) || !fleet_) continue;
      auto r = fleet_->Call(f.remote_host, {{"op", "revert"}, {"id", id}, {"at_ns", 0}});
      if (r.ok() && r->value("reverted", false)) {
        f.remote_reverted.insert(cycle);
        f.record.reverted_ns = fleet_->FromAgent(f.remote_host, (*r)["timing"].value("applied_ns", int64_t{0}));
      } else {
        harness_errors_.push_back("healing fault " + f.record.id + " through its agent: " +
                                  (r.ok() ? std::string("not reverted") : r.status().ToString()));
      }
    }
  }
  // The agents measure their clocks once more, heal whatever is left and exit.
  if (fleet_) {
    Status st = fleet_->Stop();
    if (!st.ok()) harness_errors_.push_back("stopping the fault agents: " + st.ToString());
  }
}

int Run::Finish() {
  // Collect the history from the rank logs and the process statuses.
  std::optional<int64_t> ranks_ready_ns;
  int ranks_ready = 0;
  History h;
  h.world_size = sc_.topology.world_size();
  h.op = sc_.workload.op;
  h.run_start_ns = t0_;
  h.run_end_ns = run_end_ns_;
  h.watchdog_fired = watchdog_fired_;
  std::set<std::string> ccl_versions;  // one, unless hosts run different builds
  std::map<std::string, std::string> ccl_knobs;  // rank 0's (WorkerHeader::ccl_knobs)
  for (int g = 0; g < static_cast<int>(handles_.size()); ++g) {
    RankEnd end;
    end.rank = g;
    end.end_ns = run_end_ns_;
    ExitStatus es = launcher_ ? launcher_->status(handles_[g]) : ExitStatus{};
    // Every incarnation's log (a restarted training job); the rank's end is its last one's.
    Result<WorkerLog> log = Status(Code::kNotFound, "no log");
    for (int k = 0; k <= incarnation_; ++k) {
      log = LoadRankLog(g, k);
      if (!log.ok()) continue;
      for (OpRecord op : log->ops) {
        op.incarnation = k;
        op.index += k * kIncarnationIndexStride;
        h.ops.push_back(op);
      }
      h.events.insert(h.events.end(), log->events.begin(), log->events.end());
      h.events_supported = h.events_supported || log->header.events;
      h.syncs.insert(h.syncs.end(), log->syncs.begin(), log->syncs.end());
      h.shrinks.insert(h.shrinks.end(), log->shrinks.begin(), log->shrinks.end());
      if (log->result && k == incarnation_) h.results.push_back(*log->result);
      for (CheckpointRecord c : log->checkpoints) {
        c.incarnation = k;
        h.checkpoints.push_back(c);
      }
      for (ResumeRecord r : log->resumes) {
        r.incarnation = k;
        h.resumes.push_back(r);
      }
      h.holds.insert(h.holds.end(), log->holds.begin(), log->holds.end());
      h.decisions.insert(h.decisions.end(), log->decisions.begin(), log->decisions.end());
      // The launch figure is the first incarnation's.
      if (log->ready_ns && k == 0) {
        ranks_ready_ns = std::max(ranks_ready_ns.value_or(0), *log->ready_ns);
        ++ranks_ready;
      }
      if (g == 0) h.rails_used = log->header.rails_used;
      if (!log->header.ccl_version.empty()) ccl_versions.insert(log->header.ccl_version);
      if (g == 0 && k == 0) ccl_knobs = log->header.ccl_knobs;
    }
    if (killed_by_fault_.count(g) && es.state == ExitStatus::State::kSignaled) {
      end.exit = RankExit::kKilled;
    } else if (log.ok() && log->end) {
      end = *log->end;
      end.rank = g;
      if (es.state != ExitStatus::State::kExited ||
          (es.code != kWorkerExitOk && es.code != kWorkerExitCclError &&
           es.code != kWorkerExitRestart)) {
        end.exit = RankExit::kCrashed;
      }
    } else {
      end.exit = RankExit::kCrashed;
    }
    h.ranks.push_back(end);
  }
  for (auto& f : faults_) h.faults.push_back(f.record);
  // Each restart's cost: until the first step of the incarnation it started.
  for (RestartRecord r : restarts_) {
    for (const OpRecord& op : h.ops) {
      if (op.incarnation != r.incarnation) continue;
      const int64_t c = op.start_ns - r.detected_ns;
      if (!r.cost_ns || c < *r.cost_ns) {
        r.cost_ns = c;
        r.resumed_step = op.index - op.incarnation * kIncarnationIndexStride;
      }
    }
    h.restarts.push_back(std::move(r));
  }
  h.restarts_given_up = restarts_given_up_;

  if (sc_.topology.is_inventory()) {
    // A real rail's capacity is what its host's kernel reported, never a default: the slowest
    // rail's, for the capacity a bandwidth fault leaves; 0 (unknown) unless every rail's is known.
    std::optional<double> slowest;
    bool all = static_cast<int>(rail_capacity_.size()) == sc_.topology.hosts;
    for (const std::vector<RailCapacity>& host : rail_capacity_) {
      all = all && static_cast<int>(host.size()) == sc_.topology.rails;
      for (const RailCapacity& c : host) {
        all = all && c.bps.has_value();
        if (c.bps) slowest = std::min(slowest.value_or(*c.bps), *c.bps);
      }
    }
    sc_.topology.rail_gbps = all && slowest ? *slowest / 1e9 : 0;
  }
  RunMetrics m = ComputeMetrics(h, MetricsOptionsFor(sc_, h.rails_used));
  // A replay on the library the incident's `reproduce:` names is judged by it: did it
  // reproduce the incident; every other run by `expect:`.
  const bool judged_by_reproduce = sc_.JudgedByReproduce(sc_.ccl);
  std::vector<CheckResult> checks = judged_by_reproduce ? CheckReproduce(*sc_.reproduce, m, h)
                                                        : CheckExpectations(sc_.expect, m);

  // Files.
  ReportFiles files;
  files.timeseries = "timeseries.csv";
  files.events = "events.jsonl";
  {
    std::ofstream ts(out_ + "/timeseries.csv");
    ts << "index,start_s,end_s,duration_ms,bytes,busbw_gbps\n";
    for (const auto& op : CompleteOps(h)) {
      ts << op.index << "," << Fmt("%.6f", (op.start_ns - t0_) / 1e9) << ","
         << Fmt("%.6f", (op.end_ns - t0_) / 1e9) << ","
         << Fmt("%.3f", (op.end_ns - op.start_ns) / 1e6) << "," << op.bytes << ","
         << Fmt("%.4f", op.busbw_gbps) << "\n";
    }
  }
  {
    std::ofstream ev(out_ + "/events.jsonl");
    for (const auto& f : h.faults) {
      nlohmann::json j = {{"type", "fault"}, {"id", f.id}, {"kind", f.kind},
                          {"target", f.target.ToJson()}};
      j["scheduled_s"] = (f.scheduled_ns - t0_) / 1e9;
      j["applied_s"] = f.applied_ns ? nlohmann::json((*f.applied_ns - t0_) / 1e9) : nullptr;
      j["reverted_s"] = f.reverted_ns ? nlohmann::json((*f.reverted_ns - t0_) / 1e9) : nullptr;
      if (!f.error.empty()) j["error"] = f.error;
      ev << j.dump() << "\n";
    }
    for (const auto& e : h.events) {
      ev << nlohmann::json{{"type", "ccl_event"}, {"t_s", (e.time_ns - t0_) / 1e9}, {"rank", e.rank},
                           {"kind", EventKindName(e.kind)}, {"path", e.path}, {"reason", e.reason}}
                .dump()
         << "\n";
    }
    // The training workload: the selector's decisions (each with its inputs and every
    // option's estimate, policy::ValidateDecisionJson), restarts, checkpoints, holds.
    for (const auto& d : h.decisions) {
      nlohmann::json j = d.decision;
      j["type"] = "policy_decision";
      j["kind"] = "policy_decision";
      j["t_s"] = (d.t_ns - t0_) / 1e9;
      j["rank"] = d.rank;
      j["latency_ms"] = d.latency_ns / 1e6;
      ev << j.dump() << "\n";
    }
    for (const auto& r : h.restarts) {
      ev << nlohmann::json{{"type", "restart"},
                           {"t_s", (r.detected_ns - t0_) / 1e9},
                           {"incarnation", r.incarnation},
                           {"why", r.why},
                           {"relaunched_s", (r.relaunched_ns - t0_) / 1e9},
                           {"cost_ms", r.cost_ns ? nlohmann::json(*r.cost_ns / 1e6) : nlohmann::json()},
                           {"resumed_step", r.resumed_step ? nlohmann::json(*r.resumed_step) : nlohmann::json()}}
                .dump()
         << "\n";
    }
    for (const auto& c : h.checkpoints) {
      ev << nlohmann::json{{"type", "checkpoint"},  {"t_s", (c.start_ns - t0_) / 1e9},
                           {"rank", c.rank},        {"incarnation", c.incarnation},
                           {"step", c.step},        {"samples", c.samples},
                           {"write_ms", (c.end_ns - c.start_ns) / 1e6}, {"bytes", c.bytes}}
                .dump()
         << "\n";
    }
    for (const auto& r : h.holds) {
      ev << nlohmann::json{{"type", "hold"}, {"t_s", (r.start_ns - t0_) / 1e9}, {"rank", r.rank},
                           {"duration_ms", (r.end_ns - r.start_ns) / 1e6}, {"returned", r.returned}}
                .dump()
         << "\n";
    }
    // Policy shrink: one line per surviving rank's shrink, with its duration.
    for (const auto& s : h.shrinks) {
      nlohmann::json j = {{"type", "shrink"},
                          {"t_s", (s.start_ns - t0_) / 1e9},
                          {"rank", s.rank},
                          {"duration_ms", (s.end_ns - s.start_ns) / 1e6},
                          {"excluded", s.excluded},
                          {"group", s.group},
                          {"ok", s.ok}};
      if (!s.ok) j["error"] = s.error;
      ev << j.dump() << "\n";
    }
  }
  std::string scenario_text;
  {
    std::ifstream in(o_.scenario_path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    scenario_text = ss.str();
  }
  // Per-rail throughput from the sampled counters.
  std::vector<FaultRails> fault_rails;
  if (rail_series_) {
    const RailSeries& rs = *rail_series_;
    rails_note_["samples"] = rs.samples();
    if (rs.samples() >= 2) {
      std::ofstream(out_ + "/rails.csv") << RailsCsv(rs, t0_);
      files.rails = "rails.csv";
      RailWindowOptions ro;
      // The baseline window starts where the metrics' does: the first measured collective.
      ro.baseline_from_ns = m.measured_from_ns.value_or(t0_ + sc_.workload.warmup_ns);
      ro.window_end_ns = WindowEndNs(h);
      fault_rails = RailWindows(rs, h.faults, ro);
    } else {
      rails_note_["why_no_file"] = "fewer than two samples were taken";
    }
  }
  rails_note_["sampled"] = files.rails.has_value();
  ReportInputs in;
  in.fault_rails = &fault_rails;
  in.rails_note = rails_note_;
  in.scenario = &sc_;
  in.scenario_file = o_.scenario_path;
  in.scenario_sha256 = Sha256Hex(scenario_text);
  in.seed = sc_.seed;
  std::optional<std::string> ccl_version;
  for (const std::string& v : ccl_versions) {
    ccl_version = ccl_version ? *ccl_version + ", " + v : v;
  }
  in.environment = Environment(sc_, o_, run_id_, ccl_version);
  // The library's own settings in force (NCCL's interface choice and resiliency knobs), as
  // rank 0 read them; null for unset.
  if (!ccl_knobs.empty()) {
    nlohmann::json ck = nlohmann::json::object();
    for (const auto& [k, v] : ccl_knobs) ck[k] = v.empty() ? nlohmann::json() : nlohmann::json(v);
    in.environment["knobs"]["ccl"] = std::move(ck);
  }
  if (topo_) {
    in.environment["topology"] = topo_->ToJson();
  } else if (sc_.topology.is_inventory()) {
    // The inventory's hosts, each rail with the capacity its host's kernel reported.
    nlohmann::json hosts = nlohmann::json::array();
    for (int hh = 0; hh < sc_.topology.hosts; ++hh) {
      const InventoryHost& ih = sc_.topology.inventory[hh];
      nlohmann::json rails = nlohmann::json::array();
      for (int r = 0; r < static_cast<int>(ih.rails.size()); ++r) {
        const bool read = hh < static_cast<int>(rail_capacity_.size()) &&
                          r < static_cast<int>(rail_capacity_[hh].size());
        nlohmann::json e =
            RailCapacityJson(ih.rails[r], read ? rail_capacity_[hh][r] : RailCapacity{});
        e["addr"] = ih.rails[r].addr.empty() ? nlohmann::json() : nlohmann::json(ih.rails[r].addr);
        rails.push_back(std::move(e));
      }
      hosts.push_back({{"name", ih.name},
                       {"mgmt_addr", site_              ? nlohmann::json(site_->mgmt_addrs[hh])
                                     : local_inventory_ ? nlohmann::json(ih.addr)
                                                        : nlohmann::json()},
                       {"rails", std::move(rails)}});
    }
    in.environment["topology"] = {
        {"kind", "inventory"},
        {"file", sc_.topology.inventory_file.empty() ? nlohmann::json()
                                                     : nlohmann::json(sc_.topology.inventory_file)},
        {"hosts", std::move(hosts)},
        {"rail_gbps_for_metrics",
         sc_.topology.rail_gbps > 0 ? nlohmann::json(sc_.topology.rail_gbps) : nlohmann::json()}};
  } else {
    in.environment["topology"] = nullptr;
  }
  in.environment["launcher"] = site_ ? "slurm" : "local";
  // From `faultline run` (its start) to the last rank ready (joined, prepared): null unless
  // every rank said when it was ready.
  in.environment["launch"] = {
      {"ranks", sc_.topology.world_size()},
      {"all_ready_ms", ranks_ready == sc_.topology.world_size() && ranks_ready_ns
                           ? nlohmann::json((*ranks_ready_ns - execute_start_ns_) / 1e6)
                           : nlohmann::json(nullptr)}};
  if (site_) {
    nlohmann::json slurm = site_->ToJson();
    slurm["job_id"] = nullptr;
    slurm["step_id"] = nullptr;
    if (auto step = slurm_ ? slurm_->step() : std::nullopt) {
      slurm["job_id"] = step->job_id;
      slurm["step_id"] = step->step_id;
    }
    in.environment["slurm"] = slurm;
    // Each host's agent clock against this one (a 4-timestamp exchange before and after).
    in.environment["clock_offsets"] = fleet_ ? fleet_->ClockOffsetsJson() : nlohmann::json();
    in.environment["agents"] = {{"faults", agent_faults_},
                                {"events", fleet_ ? fleet_->events() : std::vector<std::string>{}}};
  }
  in.environment["fault_hook"] = hook_record_;
  in.environment["timeline_scheduling"] = timeline_scheduling_;
  in.history = &h;
  in.metrics = &m;
  in.checks = &checks;
  in.files = files;
  std::optional<TrainingMetrics> training;
  const bool train = sc_.workload.kind == WorkloadKind::kTrain;
  nlohmann::json twin;
  if (sc_.workload.kind == WorkloadKind::kTorchDdp || train) {
    training = ComputeTraining(h, sc_.workload.warmup_iters, train);
    in.training = &*training;
  }
  if (train) {
    // goodput_ratio: this job's useful samples per second over its fault-free twin's.
    if (sc_.faults.empty()) {
      twin = {{"self", true}};
      if (training->samples_per_s) training->goodput_ratio = 1.0;
    } else if (!o_.twin_report.empty()) {
      twin = {{"report", o_.twin_report}, {"reused", o_.twin_reused}};
      try {
        std::ifstream tin(o_.twin_report);
        const nlohmann::json tj = nlohmann::json::parse(tin);
        const double rate = tj["train"]["samples_per_s"].get<double>();
        twin["samples_per_s"] = rate;
        twin["job_time_s"] = tj["train"]["job_time_s"];
        if (rate > 0 && training->samples_per_s) training->goodput_ratio = *training->samples_per_s / rate;
      } catch (const nlohmann::json::exception& e) {
        twin["error"] = std::string("unreadable twin report: ") + e.what();
      }
    } else {
      twin = {{"error", o_.twin_error.empty() ? "no fault-free twin was run" : o_.twin_error}};
    }
  }
  nlohmann::json report = BuildReportJson(in);
  if (sc_.reproduce) {
    const Reproduce& r = *sc_.reproduce;
    // A replay whose harness failed, or whose faults were not all applied, reproduced nothing.
    bool reproduced = judged_by_reproduce && harness_errors_.empty();
    for (const auto& c : checks) reproduced = reproduced && c.pass;
    for (const auto& f : h.faults) reproduced = reproduced && f.applied_ns && f.error.empty();
    report["reproduce"] = {{"ccl", CclNameString(r.ccl)},
                           {"outcome", r.outcome},
                           {"ranks", r.ranks},
                           {"within_ms", static_cast<double>(r.within_ns) / 1e6},
                           {"judged", judged_by_reproduce},
                           // null on a run of another library: it says nothing about this
                           {"reproduced", judged_by_reproduce ? nlohmann::json(reproduced)
                                                              : nlohmann::json(nullptr)}};
  }
  report["judged_by"] = judged_by_reproduce ? "reproduce" : "expect";
  if (train) {
    report["restarts"] = h.restarts.size();
    report["train"] = TrainJson(h, *training, twin);
  }
  if (!harness_errors_.empty()) report["harness_errors"] = harness_errors_;
  std::ofstream(out_ + "/report.json") << report.dump(2) << "\n";
  // junit.xml, report.html and summary.md from the files just written; report.json then names
  // them under "files". A failure is the harness's: exit 3, said on stderr below.
  if (Status st = reports::WriteReports(out_); !st.ok()) {
    harness_errors_.push_back("writing the reports: " + st.ToString());
    report["harness_errors"] = harness_errors_;
  }

  // Summary.
  std::printf("\nfaultline run: %s  (ccl %s, seed %llu, run %s)\n", sc_.name.c_str(),
              CclNameString(sc_.ccl), static_cast<unsigned long long>(sc_.seed), run_id_.c_str());
  std::printf("  collectives completed: %lld, wrong results: %s, baseline busbw: %s\n",
              static_cast<long long>(m.completed_ops),
              m.wrong_results ? std::to_string(*m.wrong_results).c_str() : "not checked",
              Opt(m.overall.baseline_busbw_gbps, " Gbps").c_str());
  std::printf("  %-8s %-12s %-14s %10s %10s %10s %10s %10s %10s %9s\n", "fault", "kind",
              "target", "applied_s", "stall", "detect", "first", "full", "recovery", "degraded");
  for (size_t i = 0; i < h.faults.size(); ++i) {
    const FaultRecord& f = h.faults[i];
    const MetricValues& v = i < m.per_fault.size() ? m.per_fault[i].values : MetricValues{};
    std::string target = "h" + std::to_string(f.target.host);
    if (f.target.rail) target += "/r" + std::to_string(*f.target.rail);
    if (f.target.rank) target += (f.target.port ? "/n" : "/k") + std::to_string(*f.target.rank);
    if (f.target.side == LinkSide::kSwitch) target += "/sw";
    const bool never = i < m.per_fault.size() && m.per_fault[i].never_converged;
    std::printf("  %-8s %-12s %-14s %10s %10s %10s %10s %10s %10s %9s\n", f.id.c_str(),
                f.kind.c_str(), target.c_str(),
                f.applied_ns ? Fmt("%.3f", (*f.applied_ns - t0_) / 1e9).c_str() : "FAILED",
                Opt(v.stall_ms, "ms").c_str(), Opt(v.detection_ms, "ms").c_str(),
                Opt(v.failover_first_ms, "ms").c_str(),
                never ? "never" : Opt(v.failover_latency_ms, "ms").c_str(),
                Opt(v.recovery_ms, "ms").c_str(),
                v.degraded_ratio ? Fmt("%.3f", *v.degraded_ratio).c_str() : "-");
    if (!f.error.empty()) std::printf("           error: %s\n", f.error.c_str());
  }
  std::printf("  outcome: %s (%s)\n", OutcomeName(m.outcome), m.outcome_reason.c_str());
  for (const auto& c : checks) {
    std::printf("  %s %-20s limit %-28s value %s\n", c.pass ? "PASS" : "FAIL", c.name.c_str(),
                c.limit.dump().c_str(), c.value.dump().c_str());
  }
  // The exit code is the verdict of the report just written (reports/verdict.h), so that it
  // and junit.xml, report.html and summary.md cannot disagree.
  const reports::Verdict verdict = reports::VerdictOf(report);
  for (const auto& e : harness_errors_) std::fprintf(stderr, "faultline run: %s\n", e.c_str());
  if (!reports::FaultErrors(report).empty()) {
    std::fprintf(stderr, "faultline run: a fault could not be injected (see above)\n");
  }
  if (judged_by_reproduce) {
    std::printf("  incident replay on %s: %s\n", CclNameString(sc_.ccl),
                report["reproduce"].value("reproduced", false) ? "REPRODUCED" : "NOT REPRODUCED");
  }
  const int code = reports::VerdictExitCode(verdict);
  std::printf("  verdict: %s (exit %d); report: %s/report.json\n", reports::VerdictName(verdict),
              code, out_.c_str());
  std::fflush(stdout);
  return code;
}

int Run::Execute() {
  execute_start_ns_ = MonoNow();
  StopOnSignals signals;
  Status st = Setup();
  if (st.ok()) st = LaunchRanks();
  if (!st.ok()) {
    std::fprintf(stderr, "faultline run: %s\n", st.ToString().c_str());
    launcher_.reset();
    RemoveHookPaths();
    if (topo_) (void)topo_->Teardown();
    return st.code() == Code::kInvalidArgument ? 2 : 3;
  }
  StartRailSampler();
  DriveTimeline();
  WaitRanks();
  StopRailSampler();
  HealAll();
  // The runner stopped the ranks itself: say so in the report, or a reader would take the
  // outcome (the stopped ranks look crashed) for the CCL's.
  if (g_stop) harness_errors_.push_back("interrupted by a signal: the ranks were stopped early");
  int code = Finish();
  // Ranks first (a live process keeps its namespace alive), then the network.
  launcher_.reset();
  // The training job's checkpoints are its state, not results: the report has what they cost.
  if (sc_.workload.kind == WorkloadKind::kTrain) {
    std::error_code ec;
    fs::remove_all(out_ + "/checkpoints", ec);
  }
  RemoveHookPaths();
  Status td = topo_ ? topo_->Teardown() : Status();
  if (!td.ok()) {
    std::fprintf(stderr, "faultline run: tearing down the topology: %s\n", td.ToString().c_str());
    code = 3;
  }
  if (g_stop) {
    std::fprintf(stderr, "faultline run: interrupted; every fault healed and the topology removed\n");
    return 3;
  }
  return code;
}

}  // namespace

int RunScenario(const RunOptions& options) {
  std::optional<InventoryPlacement> placement;
  if (!options.inventory_file.empty()) {
    InventoryOutcome inv = ParseInventoryFile(options.inventory_file);
    if (!inv.ok()) {
      for (const auto& d : inv.diagnostics) std::fprintf(stderr, "%s\n", d.ToString().c_str());
      return 2;
    }
    placement = InventoryPlacement{
        std::move(inv.hosts), fs::absolute(options.inventory_file).lexically_normal().string()};
  }
  ParseOutcome parsed;
  {
    ExpandOutcome e = ExpandScenarioFile(options.scenario_path, placement ? &*placement : nullptr);
    parsed.diagnostics = std::move(e.diagnostics);
    if (parsed.diagnostics.empty() && e.runs.size() == 1) {
      parsed.scenario = std::move(e.runs.front());
    } else if (parsed.diagnostics.empty()) {
      parsed.diagnostics.push_back({options.scenario_path,
                                    {0, 0},
                                    "the matrix expands to " + std::to_string(e.runs.size()) +
                                        " runs where one scenario is expected",
                                    "run the file with faultline run, which expands it"});
    }
  }
  if (!parsed.ok()) {
    for (const auto& d : parsed.diagnostics) std::fprintf(stderr, "%s\n", d.ToString().c_str());
    if (parsed.diagnostics.empty()) {
      std::fprintf(stderr, "%s: not a valid scenario\n", options.scenario_path.c_str());
    }
    return 2;
  }
  return RunParsedScenario(std::move(*parsed.scenario), options);
}

bool RunInterrupted() { return g_stop; }

std::optional<std::string> LocalRunRefusal(const Scenario& sc) {
  // The local launcher builds namespaces on one machine; real hosts are reached through Slurm,
  // which starts the ranks and a fault agent on each of them.
  if (!sc.topology.is_inventory() || IsLocalInventory(sc.topology)) return std::nullopt;
  return "an inventory topology names real hosts, which the local launcher (namespaces on this "
         "machine) cannot reach: run it with --launcher slurm (inside an allocation of its "
         "hosts, or with --partition P); only an inventory whose every host is this machine "
         "(addr: 127.0.0.1) runs locally; 'faultline validate' checks the file and its host "
         "file";
}

namespace {

// What makes two training runs twins: everything that sets the fault-free rate, less the
// policy (the twin runs policy failover whatever the run's is: FindOrRunTwin).
std::string TwinKey(const Scenario& sc, const RunOptions& o) {
  const Topology& t = sc.topology;
  const Workload& w = sc.workload;
  std::string k = "hosts=" + std::to_string(t.hosts) + ";rph=" + std::to_string(t.ranks_per_host) +
                  ";rails=" + std::to_string(t.rails) + ";gbps=" + std::to_string(t.rail_gbps) +
                  ";nics=" + std::to_string(t.per_rank_nics()) + ";ccl=" + CclNameString(sc.ccl) +
                  ";seed=" + std::to_string(sc.seed) +
                  ";steps=" + std::to_string(w.iters.value_or(0)) + ";batch=" + std::to_string(w.batch) +
                  ";compute=" + std::to_string(w.compute_ns) + ";grad=" + std::to_string(w.bytes) +
                  ";ckpt=" + std::to_string(w.checkpoint_every) + ";wait=" + std::to_string(w.wait_bound_ns) +
                  ";timeout=" + std::to_string(o.op_timeout_ms);
  // Where it runs: the same counts on namespaces and on an inventory's interfaces (one placed
  // with --inventory, say) run at different rates, as do two inventories.
  k += std::string(";kind=") + TopologyKindString(t.kind);
  for (const InventoryHost& h : t.inventory) {
    k += ";host=" + h.name + "@" + h.addr;
    for (const InventoryRail& r : h.rails) k += "," + r.netdev + "/" + r.rdma + ":" + r.addr;
  }
  // A rebuilt worker may run at another rate: its size and time are part of the key.
  struct stat st{};
  const std::string worker = o.worker_path.empty() ? ExeDir() + "/faultline-worker" : o.worker_path;
  if (stat(worker.c_str(), &st) == 0) {
    k += ";worker=" + std::to_string(st.st_size) + "@" + std::to_string(st.st_mtime);
  }
  return Sha256Hex(k).substr(0, 16);
}

// Runs (or finds) the fault-free twin of `sc` and says where its report is.
void FindOrRunTwin(const Scenario& sc, RunOptions* o) {
  fs::path out = o->out_dir.empty() ? fs::path("out") : fs::path(o->out_dir).parent_path();
  if (out.empty()) out = ".";
  const fs::path dir = out / "twins" / TwinKey(sc, *o);
  const fs::path report = dir / "report.json";
  auto usable = [&]() -> bool {
    std::ifstream in(report);
    if (!in) return false;
    try {
      nlohmann::json j = nlohmann::json::parse(in);
      return j.value("outcome", "") == "survived" && j.contains("train") &&
             j["train"].value("samples_per_s", nlohmann::json()).is_number();
    } catch (const nlohmann::json::exception&) {
      return false;
    }
  };
  if (usable()) {
    o->twin_report = report.string();
    o->twin_reused = true;
    return;
  }
  Scenario twin = sc;
  twin.faults.clear();
  // One denominator for every policy: the job with no recovery machinery at all (fault-free,
  // failover never acts), so what a policy costs without a fault (adaptive's and wait's
  // per-step agreement) counts against it.
  twin.policy = RecoveryPolicyName::kFailover;
  twin.expect = Expectations{};
  twin.reproduce.reset();
  twin.name += " (fault-free twin)";
  RunOptions to = *o;
  to.out_dir = dir.string();
  to.report_only = true;
  std::printf("faultline run: %s: running its fault-free twin first -> %s\n", sc.name.c_str(),
              dir.c_str());
  std::fflush(stdout);
  const int code = RunParsedScenario(std::move(twin), to);
  if (g_stop) return;
  if (usable()) {
    o->twin_report = report.string();
  } else {
    o->twin_error = "the fault-free twin (" + dir.string() + ") did not finish its steps (exit " +
                    std::to_string(code) + ")";
  }
}

}  // namespace

int RunParsedScenario(Scenario sc, const RunOptions& options) {
  if (options.seed) sc.seed = *options.seed;
  if (options.ccl && *options.ccl != sc.ccl) {
    // The file was validated for its own ccl; expectations the override cannot measure are
    // bad input, said at their place in the file.
    const auto bad = ExpectationsUnmeasurable(sc, *options.ccl, options.scenario_path);
    for (const auto& d : bad) std::fprintf(stderr, "%s (--ccl %s)\n", d.ToString().c_str(), CclNameString(*options.ccl));
    if (!bad.empty()) return 2;
    sc.ccl = *options.ccl;
  }
  if (auto why = options.launcher == "slurm" ? std::nullopt : LocalRunRefusal(sc)) {
    std::fprintf(stderr, "%s: %s\n", options.scenario_path.c_str(), why->c_str());
    return 2;
  }
  // What the CCL traits table says this build and machine cannot run (a library not built
  // here, a GPU per rank where fewer are visible) is bad input, refused before anything starts.
  if (auto why = CclRunRefusal(workload::adapters::CclTraitsOf(sc.ccl),
                               sc.topology.world_size(), options.launcher != "slurm")) {
    std::fprintf(stderr, "%s: %s\n", options.scenario_path.c_str(), why->c_str());
    return 2;
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "faultline run: needs root (network namespaces, netlink, nftables)\n");
    return 3;
  }
  RunOptions o = options;
  if (sc.workload.kind == WorkloadKind::kTrain && !sc.faults.empty() && o.twin_report.empty()) {
    FindOrRunTwin(sc, &o);
    if (g_stop) return 3;
  }
  Run run(std::move(sc), o);
  return run.Execute();
}

}  // namespace faultline::runner
