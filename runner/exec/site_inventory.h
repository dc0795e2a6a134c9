// The hosts of an inventory whose every host is this machine (inventory.h IsLocalInventory):
// nothing is built or shaped; every rank runs in this process's network namespace on the
// interfaces the inventory names, and only those are this run's to fault. Each rail's capacity
// is what this kernel reports (rail_capacity.h).
#pragma once

#include <memory>
#include <optional>

#include "runner/exec/site.h"
#include "runner/exec/site_common.h"

namespace faultline::runner {

class InventorySite final : public Site {
 public:
  explicit InventorySite(SiteContext ctx) : ctx_(std::move(ctx)) {}

  Status Prepare(Journal* journal) override;
  Status OpenLauncher() override;
  Status StartFaultService(const std::vector<std::string>&) override { return Status(); }
  Launcher& launcher() override { return *launcher_; }
  bool has_launcher() const override { return launcher_ != nullptr; }
  void CloseLauncher() override { launcher_.reset(); }
  std::vector<std::string> RankRails(int h, int l) const override;
  std::string BootstrapHost() const override { return sc().topology.inventory[0].addr; }
  std::vector<std::string> RankEnv(int h) const override;
  int64_t ClockOffsetNs(int) const override { return 0; }
  Result<nlohmann::json> ResolveTarget(const TimelineAction& a,
                                       const RankRefs& ranks) const override;
  FaultApplyResult Apply(const TimelineAction& a, const nlohmann::json& params, int64_t at_ns,
                         std::unique_ptr<AppliedFault>* handle) override;
  std::string StopFaultService() override { return ""; }
  void StartRails(int64_t start_at_ns, int64_t period_ns, size_t reserve_samples) override;
  std::optional<RailSeries> StopRails() override { return rails_.Stop(&rails_note_); }
  nlohmann::json& rails_note() override { return rails_note_; }
  const std::vector<std::vector<RailCapacity>>& rail_capacity() const override {
    return rail_capacity_;
  }
  void AddEnvironment(nlohmann::json* environment) const override;
  Status Teardown() override { return Status(); }

 private:
  const Scenario& sc() const { return *ctx_.scenario; }
  // Every rail names an interface of this namespace and, where it is RDMA, a device of this
  // machine.
  Status CheckInterfaces() const;

  SiteContext ctx_;
  Journal* journal_ = nullptr;
  std::optional<TargetPolicy> policy_;
  std::string own_netns_;  // /run/netns name of this namespace where it has one, else kOwnNetns
  std::unique_ptr<Launcher> launcher_;
  HereRails rails_;
  nlohmann::json rails_note_ = nlohmann::json::object();
  std::vector<std::vector<RailCapacity>> rail_capacity_;
};

// The environment's topology object of an inventory: each host with `mgmt_addr(h)` and each
// rail with the capacity in `capacity` (by host, then rail; missing ones unknown).
nlohmann::json InventoryTopologyJson(const Topology& t,
                                     const std::vector<std::vector<RailCapacity>>& capacity,
                                     const std::function<nlohmann::json(int h)>& mgmt_addr);

// The rail ports of an inventory, sampled in each host's own namespace, and the rails note
// saying how (period `period_ns`).
std::vector<RailSamplerPort> InventoryRailPorts(const Topology& t, int64_t period_ns,
                                                nlohmann::json* note);

}  // namespace faultline::runner
