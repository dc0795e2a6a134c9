// A fleet run (`--launcher slurm`): the ranks are one srun job step, each host's faults are
// applied by that host's fault agent (runner/exec/agent_client.h) through its injector and
// journal, the agents sample their hosts' rail ports, and every time an agent reports is
// mapped to the runner's clock with the offset measured at the start. Its hosts are those of
// the one-box cluster of `faultline cluster up` (a scenario of kind netns, which must fit the
// cluster as built) or the real hosts of an inventory (runner/exec/fleet_site.h).
#pragma once

#include <memory>
#include <optional>

#include "injector/netns.h"
#include "runner/exec/agent_client.h"
#include "runner/exec/fleet_site.h"
#include "runner/exec/site.h"
#include "runner/exec/site_common.h"
#include "runner/exec/slurm_launcher.h"

namespace faultline::runner {

class SlurmFleetSite final : public Site {
 public:
  explicit SlurmFleetSite(SiteContext ctx) : ctx_(std::move(ctx)) {}

  Status Prepare(Journal* journal) override;
  Status OpenLauncher() override;
  Status StartFaultService(const std::vector<std::string>& hook_paths) override;
  Launcher& launcher() override { return *launcher_; }
  bool has_launcher() const override { return launcher_ != nullptr; }
  void CloseLauncher() override {
    slurm_ = nullptr;
    launcher_.reset();
  }
  std::vector<std::string> RankRails(int h, int l) const override;
  std::string BootstrapHost() const override { return site_.mgmt_addrs[0]; }
  std::vector<std::string> RankEnv(int h) const override;
  int64_t ClockOffsetNs(int h) const override { return fleet_ ? fleet_->ToAgent(h, 0) : 0; }
  Result<nlohmann::json> ResolveTarget(const TimelineAction& a,
                                       const RankRefs& ranks) const override;
  FaultApplyResult Apply(const TimelineAction& a, const nlohmann::json& params, int64_t at_ns,
                         std::unique_ptr<AppliedFault>* handle) override;
  std::string StopFaultService() override;
  void StartRails(int64_t start_at_ns, int64_t period_ns, size_t reserve_samples) override;
  std::optional<RailSeries> StopRails() override;
  nlohmann::json& rails_note() override { return rails_note_; }
  const std::vector<std::vector<RailCapacity>>& rail_capacity() const override {
    return rail_capacity_;
  }
  void AddEnvironment(nlohmann::json* environment) const override;
  Status Teardown() override { return topo_ ? topo_->Teardown() : Status(); }

 private:
  const Scenario& sc() const { return *ctx_.scenario; }
  Status AttachCluster();
  Status AttachInventory();
  std::string HostNetns(int h) const { return topo_ ? topo_->host(h).netns : kOwnNetns; }

  SiteContext ctx_;
  std::optional<TargetPolicy> policy_;
  std::unique_ptr<NetTopology> topo_;  // the cluster's namespaces; null on an inventory
  SlurmSite site_;
  std::unique_ptr<Launcher> launcher_;
  SlurmLauncher* slurm_ = nullptr;                         // launcher_
  std::unique_ptr<AgentFleet> fleet_;                      // one fault agent per host
  nlohmann::json agent_faults_ = nlohmann::json::array();  // which agent applied what
  std::vector<std::vector<RailCapacity>> rail_capacity_;
  std::vector<std::vector<RailPort>> agent_rail_ports_;  // by host: what its agent samples
  int64_t rails_start_ns_ = 0;
  int64_t rails_period_ns_ = 0;
  nlohmann::json rails_note_ = nlohmann::json::object();
};

}  // namespace faultline::runner
