#include "runner/exec/site_netns.h"

#include <utility>

#include "runner/exec/mpi_launcher.h"
#include "runner/exec/rank_specs.h"
#include "runner/faults/registry.h"

namespace faultline::runner {

Status NetnsSite::Prepare(Journal* journal) {
  journal_ = journal;
  auto p = MakeTargetPolicy(ctx_.options->allow, {}, journal);
  if (!p.ok()) return p.status();
  policy_.emplace(std::move(p.value()));
  auto topo = NetTopology::Build(TopologyOptionsFor(sc().topology, ctx_.run_id, true));
  if (!topo.ok()) return topo.status();
  topo_ = std::move(topo.value());
  return Status();
}

Status NetnsSite::OpenLauncher() {
  const auto& ccl = workload::adapters::CclTraitsOf(sc().ccl);
  if (ccl.launch == workload::adapters::LaunchStyle::kMpiLauncher) return OpenMpiLauncher();
  std::vector<std::string> netns;
  for (int h = 0; h < sc().topology.hosts; ++h) netns.push_back(topo_->host(h).netns);
  auto l = LocalNetnsLauncher::Create(netns, ctx_.out_dir + "/ranks");
  if (!l.ok()) return l.status();
  launcher_ = std::move(l.value());
  return Status();
}

Status NetnsSite::OpenMpiLauncher() {
  if (topo_->per_rank_nics()) {
    return InvalidArgument("ccl " + std::string(CclNameString(sc().ccl)) +
                           " runs on shared NICs only (topology.nics: shared)");
  }
  MpiLauncherOptions o;
  o.run_id = ctx_.run_id;
  for (int h = 0; h < topo_->hosts(); ++h) {
    o.hosts.push_back({topo_->host(h).netns, topo_->host(h).mgmt_dev});
  }
  // The rails only: a fault on a rail hits the library's data, and none of it takes the
  // management network.
  for (const std::string& dev : topo_->host(0).rail_devs) {
    o.data_interfaces += (o.data_interfaces.empty() ? "" : ",") + dev;
  }
  const auto opt = [&](const char* key, const char* fallback) {
    auto it = sc().ccl_options.find(key);
    return it == sc().ccl_options.end() ? std::string(fallback) : it->second;
  };
  if (sc().ccl == CclName::kMpich) {
    o.flavour = MpiFlavour::kMpich;
    o.mpirun = "mpiexec.hydra";
    o.pml.clear();
  } else {
    o.pml = opt("pml", "ob1");
  }
  o.errors = opt("errors", "return");
  o.log_dir = ctx_.out_dir + "/ranks";
  auto l = MpiLauncher::Create(std::move(o));
  if (!l.ok()) return l.status();
  mpi_ = l.value().get();
  launcher_ = std::move(l.value());
  return Status();
}

std::vector<std::string> NetnsSite::RankRails(int h, int l) const {
  return topo_->RankRailAddrs(h, l);
}

std::string NetnsSite::BootstrapHost() const { return NetTopology::MgmtAddress(0); }

std::vector<std::string> NetnsSite::RankEnv(int h) const {
  return InventoryRankEnv(sc(), h, /*same_machine=*/false);
}

Result<nlohmann::json> NetnsSite::ResolveTarget(const TimelineAction& a,
                                                const RankRefs& ranks) const {
  const std::string netns = topo_->host(a.target.host).netns;
  return ResolveFaultParams(
      a, sc(), ranks, topo_.get(), netns, LocalRankTarget(*launcher_, ranks, a.kind, netns));
}

FaultApplyResult NetnsSite::Apply(const TimelineAction& a, const nlohmann::json& params,
                                  int64_t at_ns, std::unique_ptr<AppliedFault>* handle) {
  std::function<Status()> after;
  // A port that was down lost its table route with per-rank NICs; put it back.
  if (topo_->per_rank_nics() && !faults::DescriptorOf(a.kind).rank_target()) {
    NetTopology* topo = topo_.get();
    const int host = a.target.host;
    after = [topo, host] { return topo->RestorePortRoutes(host); };
  }
  return ApplyHere(a, params, at_ns, journal_, *policy_, std::move(after), handle);
}

void NetnsSite::StartRails(int64_t start_at_ns, int64_t period_ns, size_t reserve_samples) {
  std::vector<RailSamplerPort> ports;
  for (int h = 0; h < topo_->hosts(); ++h) {
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
  rails_note_ = {{"period_ms", period_ns / 1e6},
                 {"source", "rtnetlink IFLA_STATS64 of each rail port (host side)"},
                 {"rdma", "not sampled: no RDMA device backs a rail of the namespace topology"}};
  RailSamplerOptions o;
  o.period_ns = period_ns;
  o.start_at_ns = start_at_ns;
  o.reserve_samples = reserve_samples;
  rails_.Start(std::move(ports), o, &rails_note_);
}

void NetnsSite::AddEnvironment(nlohmann::json* env) const {
  (*env)["topology"] = topo_->ToJson();
  if (mpi_ == nullptr) {
    (*env)["launcher"] = "local";
    return;
  }
  nlohmann::json mpi;
  if (sc().ccl == CclName::kMpich) {
    (*env)["launcher"] = "mpiexec.hydra";
    mpi = {{"library", "mpich"},
           {"version", MpichInfo("Version")},
           {"device", MpichInfo("Device")},
           {"transport", "ucx tcp on the rails (UCX_TLS=tcp,self)"}};
  } else {
    (*env)["launcher"] = "mpirun";
    mpi = {{"library", "openmpi"}, {"version", OpenMpiVersion()}};
  }
  mpi["command"] = mpi_->command();
  mpi["swept_processes"] = mpi_->swept();
  for (const auto& [k, v] : sc().ccl_options) mpi[k] = v;
  (*env)["mpi"] = std::move(mpi);
}

}  // namespace faultline::runner
