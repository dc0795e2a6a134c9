// What the sites share: the injector's parameters for a fault whose target is a link, a rail's
// sockets or a rank's fault hook (ResolveFaultParams), a fault applied here through the
// injector and the journal (ApplyHere), the target policy every site creates, and the rail
// sampler that runs in this process (HereRails).
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "injector/policy.h"
#include "runner/core/rails.h"
#include "runner/core/scenario.h"
#include "runner/core/timeline.h"
#include "runner/exec/rail_sampler.h"
#include "runner/exec/site.h"
#include "runner/exec/topology.h"

namespace faultline::runner {

// The directory of this executable (where faultline-worker and faultline are).
std::string ExeDir();

// The injector's parameters for `a`. A rank target (rank_pause, rank_kill) is `rank`'s to fill
// in (given the global rank); `topo` is null on an inventory, whose rails the scenario names.
// `host_netns`: the target host's namespace as its faults name it.
Result<nlohmann::json> ResolveFaultParams(
    const TimelineAction& a, const Scenario& sc, const RankRefs& ranks, const NetTopology* topo,
    const std::string& host_netns, const std::function<Status(int g, nlohmann::json* p)>& rank);

// The `rank` callback of ResolveFaultParams for ranks this process launched (as children in
// `netns`): global rank g's pid and namespace; kUnavailable naming `kind` when the launcher has
// no local pid for it (a rank in a Slurm job step is reached through its host's agent).
std::function<Status(int g, nlohmann::json* p)> LocalRankTarget(const Launcher& launcher,
                                                                 const RankRefs& ranks,
                                                                 const std::string& kind,
                                                                 const std::string& netns);

// The target policy of a run: options.allow plus `extra` entries, over `journal`.
Result<TargetPolicy> MakeTargetPolicy(const std::vector<std::string>& allow,
                                      const std::vector<std::string>& extra, Journal* journal);

// Applies one cycle of a fault in this process through the injector. `after_revert`, when set,
// runs after each timeline revert and returns a further error (e.g. restoring routes).
FaultApplyResult ApplyHere(const TimelineAction& a, const nlohmann::json& params, int64_t at_ns,
                           Journal* journal, const TargetPolicy& policy,
                           std::function<Status()> after_revert,
                           std::unique_ptr<AppliedFault>* handle);

// The rail sampler of a site whose rail ports this process can read.
class HereRails final {
 public:
  // Starts sampling `ports`; a failure is recorded in `note`'s errors.
  void Start(std::vector<RailSamplerPort> ports, const RailSamplerOptions& o, nlohmann::json* note);
  // Stops it; the series, or nullopt when it never started.
  std::optional<RailSeries> Stop(nlohmann::json* note);

 private:
  std::unique_ptr<RailSampler> sampler_;
};

}  // namespace faultline::runner
