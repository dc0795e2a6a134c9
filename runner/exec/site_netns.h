// The embedded default site: every host a network namespace of this machine, its rails veth
// pairs into one bridge per rail, shaped to the scenario's rail_gbps (runner/exec/topology.h).
// The ranks are children of this process in their host's namespace; faults are injected here
// through the journal; the rail ports are sampled here; every host shares this clock. A
// library started by its own launcher (LaunchStyle::kMpiLauncher) gets an MpiLauncher
// (mpi_launcher.h): mpirun in host 0, its daemons in the others, bound to the rails.
#pragma once

#include <memory>
#include <optional>

#include "runner/exec/site.h"
#include "runner/exec/mpi_launcher.h"
#include "runner/exec/site_common.h"

namespace faultline::runner {

class NetnsSite final : public Site {
 public:
  explicit NetnsSite(SiteContext ctx) : ctx_(std::move(ctx)) {}

  Status Prepare(Journal* journal) override;
  Status OpenLauncher() override;
  Status StartFaultService(const std::vector<std::string>&) override { return Status(); }
  Launcher& launcher() override { return *launcher_; }
  bool has_launcher() const override { return launcher_ != nullptr; }
  void CloseLauncher() override {
    mpi_ = nullptr;
    launcher_.reset();
  }
  std::vector<std::string> RankRails(int h, int l) const override;
  std::string BootstrapHost() const override;
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
    return no_capacity_;
  }
  void AddEnvironment(nlohmann::json* environment) const override;
  Status Teardown() override { return topo_ ? topo_->Teardown() : Status(); }

 private:
  const Scenario& sc() const { return *ctx_.scenario; }
  // The launcher of a library started by its own mpirun (LaunchStyle::kMpiLauncher).
  Status OpenMpiLauncher();

  SiteContext ctx_;
  Journal* journal_ = nullptr;
  std::optional<TargetPolicy> policy_;
  std::unique_ptr<NetTopology> topo_;
  std::unique_ptr<Launcher> launcher_;
  MpiLauncher* mpi_ = nullptr;  // launcher_, when it is one
  HereRails rails_;
  nlohmann::json rails_note_ = nlohmann::json::object();
  std::vector<std::vector<RailCapacity>> no_capacity_;
};

}  // namespace faultline::runner
