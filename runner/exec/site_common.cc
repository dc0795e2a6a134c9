#include "runner/exec/site_common.h"

#include <filesystem>
#include <utility>

#include "injector/injection.h"
#include "injector/registry.h"
#include "runner/faults/registry.h"
#include "workload/adapters/ccl_traits.h"

namespace faultline::runner {
namespace {

namespace fs = std::filesystem;

// One cycle of a fault injected here.
class HereFault final : public AppliedFault {
 public:
  HereFault(std::unique_ptr<Injection> inj, std::function<Status()> after_revert)
      : inj_(std::move(inj)), after_revert_(std::move(after_revert)) {}
  bool applied() const override { return inj_->applied(); }
  bool reverted() const override { return inj_->reverted(); }
  RevertResult Revert(int64_t at_ns) override {
    RevertResult r;
    Status st = inj_->RevertAt(at_ns);
    if (inj_->reverted()) r.reverted_ns = inj_->revert_timing().applied;
    if (!st.ok()) r.errors.push_back("revert: " + st.ToString());
    if (after_revert_) {
      Status rt = after_revert_();
      if (!rt.ok()) r.errors.push_back("revert: " + rt.ToString());
    }
    return r;
  }
  HealResult Heal() override {
    HealResult r;
    Status st = inj_->RevertAt(0);
    if (inj_->reverted()) r.reverted_ns = inj_->revert_timing().applied;
    if (!st.ok()) r.problem = ": " + st.ToString();
    return r;
  }

 private:
  std::unique_ptr<Injection> inj_;
  std::function<Status()> after_revert_;
};

}  // namespace

std::string ExeDir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "." : self.parent_path().string();
}

Result<nlohmann::json> ResolveFaultParams(
    const TimelineAction& a, const Scenario& sc, const RankRefs& ranks, const NetTopology* topo,
    const std::string& host_netns, const std::function<Status(int g, nlohmann::json* p)>& rank) {
  nlohmann::json p = a.params;
  const int h = a.target.host;
  const std::vector<std::string>& hook_paths = *ranks.hook_paths;
  switch (faults::DescriptorOf(a.kind).target) {
    case faults::TargetShape::kRankPath: {
      auto g = a.target.GlobalRank(sc.topology);
      if (!g) return Status(Code::kInvalidArgument, "fault " + a.fault_id + ": no rank target");
      if (*g >= static_cast<int>(hook_paths.size()) || hook_paths[*g].empty()) {
        const std::string serving = workload::adapters::CclNamesWhere(
            [](const workload::adapters::CclTraits& c) { return c.serves_fault_hook; });
        return Status(Code::kUnavailable, "fault " + a.fault_id + ": ccl " + CclNameString(sc.ccl) +
                                              " serves no fault hook (" + a.kind +
                                              " needs one; only " + serving + " ranks serve it)");
      }
      p["hook"] = hook_paths[*g];
      return p;
    }
    case faults::TargetShape::kRank: {
      auto g = a.target.GlobalRank(sc.topology);
      if (!g) return Status(Code::kInvalidArgument, "fault " + a.fault_id + ": no rank target");
      FL_RETURN_IF_ERROR(rank(*g, &p));
      return p;
    }
    case faults::TargetShape::kSocketLink: {
      p["netns"] = host_netns;
      if (!topo && a.target.rail && !p.contains("src")) {
        // A real host's rail: its address, or the netdev's, which its agent looks up there.
        const InventoryRail* r = sc.topology.InventoryRailAt(h, *a.target.rail);
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
        const int l = topo->per_rank_nics() ? a.target.rank.value_or(0) : 0;
        const auto& addrs = topo->RankRailAddrs(h, l);
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
  if (!topo) {
    // A real host's rail: its netdev, in the host's own namespace. Its switch port is not
    // ours to touch.
    const InventoryRail* r = sc.topology.InventoryRailAt(h, *a.target.rail);
    if (r == nullptr)
      return Status(Code::kInvalidArgument, "fault " + a.fault_id + ": rail out of range");
    if (a.target.side == LinkSide::kSwitch) {
      return Status(Code::kInvalidArgument,
                    "fault " + a.fault_id +
                        ": side switch: an inventory host's switch port is not reachable from "
                        "its agent");
    }
    p["netns"] = host_netns;
    p["dev"] = r->netdev;
    return p;
  }
  FaultTarget host_side = a.target;
  host_side.side = LinkSide::kHost;
  auto link = topo->Resolve(host_side);
  if (!link.ok()) return link.status();
  p["netns"] = link->netns;
  p["dev"] = link->dev;
  return p;
}

std::function<Status(int g, nlohmann::json* p)> LocalRankTarget(const Launcher& launcher,
                                                                 const RankRefs& ranks,
                                                                 const std::string& kind,
                                                                 const std::string& netns) {
  return [&launcher, &ranks, kind, netns](int g, nlohmann::json* p) -> Status {
    auto pid = launcher.LocalPid((*ranks.handles)[g]);
    if (!pid) {
      return Status(Code::kUnavailable,
                    "rank " + std::to_string(g) + " has no pid on this machine (a rank of a "
                    "Slurm job step, or one its launcher has not started yet): " + kind +
                    " acts on a rank's own process");
    }
    (*p)["pid"] = *pid;
    (*p)["netns"] = netns;
    return Status();
  };
}

Result<TargetPolicy> MakeTargetPolicy(const std::vector<std::string>& allow,
                                      const std::vector<std::string>& extra, Journal* journal) {
  std::vector<std::string> all = allow;
  all.insert(all.end(), extra.begin(), extra.end());
  return TargetPolicy::Create(all, journal);
}

FaultApplyResult ApplyHere(const TimelineAction& a, const nlohmann::json& params, int64_t at_ns,
                           Journal* journal, const TargetPolicy& policy,
                           std::function<Status()> after_revert,
                           std::unique_ptr<AppliedFault>* handle) {
  FaultApplyResult r;
  auto fault = CreateFault(a.injector_kind, params);
  if (!fault.ok()) {
    r.error = fault.status().ToString();
    return r;
  }
  auto inj = Injection::Arm(std::move(fault.value()), journal, policy);
  if (!inj.ok()) {
    r.error = inj.status().ToString();
    return r;
  }
  r.attempted = true;
  Status st = inj.value()->ApplyAt(at_ns);
  const StepTiming& t = inj.value()->apply_timing();
  if (inj.value()->applied()) {
    r.applied = true;
    r.applied_ns = t.applied;
    r.observed_ns = t.observed;
    r.observed = t.observation;
  }
  if (!st.ok()) r.error = st.ToString();
  *handle = std::make_unique<HereFault>(std::move(inj.value()), std::move(after_revert));
  return r;
}

void HereRails::Start(std::vector<RailSamplerPort> ports, const RailSamplerOptions& o,
                      nlohmann::json* note) {
  // Started before the timeline raises its own thread (only that thread) to realtime
  // priority: the sampler keeps the normal policy and never delays a fault.
  auto s = RailSampler::Start(std::move(ports), o);
  if (!s.ok()) {
    (*note)["errors"] = {s.status().ToString()};
    return;
  }
  sampler_ = std::move(s).value();
}

std::optional<RailSeries> HereRails::Stop(nlohmann::json* note) {
  if (!sampler_) return std::nullopt;
  sampler_->Stop();
  std::optional<RailSeries> series = sampler_->series();
  std::vector<std::string> errors = sampler_->errors();
  (*note)["late_samples"] = sampler_->late_samples();
  if (!errors.empty()) (*note)["errors"] = errors;
  return series;
}

}  // namespace faultline::runner
