// Where a run happens. A Site owns everything of a run that depends on where its ranks run:
// the network the ranks use (built, attached or found), the launcher that starts the whole
// world from per-rank launch specs and kills and waits for rank handles, the resolution of a
// fault's target to what the injector needs (namespace, device, addresses, process), applying
// and reverting a fault (here through the injector and its journal, or through the fault agent
// of the target's host: one call either way), sampling the rail ports' counters, the clock
// offset of each host and the site's part of report.json's `environment`.
//
// Implementations, one file pair each: NetnsSite (runner/exec/site_netns.h, the embedded
// default: namespaces on this machine), InventorySite (site_inventory.h: this machine's own
// interfaces) and SlurmFleetSite (site_slurm_fleet.h: ranks through srun, faults through one
// agent per host). MakeSite picks one from the scenario and the options; the run driver
// (runner/exec/run.cc) never asks which one it has.
//
// Thread-safety: a Site is used by the run driver's thread only. Ownership: the Site owns its
// launcher, topology, sampler and agents; it keeps pointers to the scenario and options, which
// must outlive it.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "runner/core/rails.h"
#include "runner/core/scenario.h"
#include "runner/core/timeline.h"
#include "runner/exec/launcher.h"
#include "runner/exec/rail_capacity.h"
#include "runner/exec/run.h"

namespace faultline {
class Journal;
}

namespace faultline::runner {

// What a fault's target resolution may need of the run: each rank's fault hook path ("" where
// none is served) and its launcher handle (of the current incarnation), by global rank.
struct RankRefs {
  const std::vector<std::string>* hook_paths = nullptr;
  const std::vector<int>* handles = nullptr;
};

// What applying one cycle of a fault at a site did. `attempted`: the fault was handed to
// whatever applies it (the rank of a rank_kill may be gone from then on), even where that
// failed. Times are on the runner's clock.
struct FaultApplyResult {
  bool attempted = false;
  bool applied = false;
  std::optional<int64_t> applied_ns;
  std::optional<int64_t> observed_ns;
  nlohmann::json observed;
  std::string error;  // "" when none
};

// The undo of one applied (or armed) cycle of a fault.
class AppliedFault {
 public:
  virtual ~AppliedFault() = default;
  // True once the site applied it (and it may need a revert).
  virtual bool applied() const = 0;
  // True once reverted (also when found undone by the site itself, MarkReverted).
  virtual bool reverted() const = 0;
  // Reverts at `at_ns` on the runner's clock. `reverted_ns` is set when it was reverted;
  // `errors` are in the report's words ("revert: ..."), the first one counts.
  struct RevertResult {
    std::optional<int64_t> reverted_ns;
    std::vector<std::string> errors;
  };
  virtual RevertResult Revert(int64_t at_ns) = 0;
  // The heal at the end of the run: reverts now. `problem` is "" on success, else the tail of
  // the harness error "healing fault ID<problem>".
  struct HealResult {
    std::optional<int64_t> reverted_ns;
    std::string problem;
  };
  virtual HealResult Heal() = 0;
  // Where whoever applied it was lost and its replacement undid it early: when that happened
  // and why, in the report's words. nullopt while it was not.
  struct Replacement {
    int64_t at_ns = 0;
    std::string why;
  };
  virtual std::optional<Replacement> ReplacedEarly() const { return std::nullopt; }
  virtual void MarkReverted() {}
};

class Site {
 public:
  virtual ~Site() = default;
  Site(const Site&) = delete;
  Site& operator=(const Site&) = delete;

  // Builds, attaches or checks the site's network and creates the injector's target policy
  // from options.allow and the site's own entries. InvalidArgument: the scenario does not fit
  // the site (exit code 2); any other error is the harness's (3).
  virtual Status Prepare(Journal* journal) = 0;
  // Creates the launcher (no rank is started yet).
  virtual Status OpenLauncher() = 0;
  // Starts whatever applies faults where the ranks run (the fault agents); `hook_paths` by
  // global rank. Nothing to do on a site that injects here.
  virtual Status StartFaultService(const std::vector<std::string>& hook_paths) = 0;
  // REQUIRES: OpenLauncher succeeded.
  virtual Launcher& launcher() = 0;
  virtual bool has_launcher() const = 0;
  // Stops every rank process the launcher still has (a live process keeps a namespace alive).
  virtual void CloseLauncher() = 0;

  // Placement of the ranks. Rank l of host h's rails in rail order (addresses, or a netdev the
  // rank resolves on its host), the management address rank 0 serves the bootstrap on, what
  // a rank of host h is told through its environment, and host h's clock against the
  // runner's (rank clock = runner clock + offset).
  virtual std::vector<std::string> RankRails(int h, int l) const = 0;
  virtual std::string BootstrapHost() const = 0;
  virtual std::vector<std::string> RankEnv(int h) const = 0;
  virtual int64_t ClockOffsetNs(int h) const = 0;

  // The injector's parameters for `a` (its target resolved here), or why it cannot be.
  virtual Result<nlohmann::json> ResolveTarget(const TimelineAction& a,
                                               const RankRefs& ranks) const = 0;
  // Applies one cycle of a fault at `at_ns` (runner clock) with resolved `params`. `handle`
  // is what reverts it; null when there is nothing to revert.
  virtual FaultApplyResult Apply(const TimelineAction& a, const nlohmann::json& params,
                                 int64_t at_ns, std::unique_ptr<AppliedFault>* handle) = 0;
  // After every fault is healed: stops the fault service (the agents heal what is left).
  // The harness error to report, or "" when none.
  virtual std::string StopFaultService() = 0;

  // Rail sampling from `start_at_ns`, every period, until StopRails; the series (on the
  // runner's clock) is nullopt where none was taken. rails_note() is report.json's rails note.
  virtual void StartRails(int64_t start_at_ns, int64_t period_ns, size_t reserve_samples) = 0;
  virtual std::optional<RailSeries> StopRails() = 0;
  virtual nlohmann::json& rails_note() = 0;
  // Each rail's capacity as the kernel of its host reported it (by host, then rail); empty
  // where the site shapes its rails itself.
  virtual const std::vector<std::vector<RailCapacity>>& rail_capacity() const = 0;

  // The site's part of `environment`: topology, launcher, and where it has them slurm,
  // clock_offsets and agents. Reads the scenario as it is then (rail_gbps for metrics).
  virtual void AddEnvironment(nlohmann::json* environment) const = 0;
  // Removes what Prepare built. An error is the harness's.
  virtual Status Teardown() = 0;

 protected:
  Site() = default;
};

// Everything a site is made from. `scenario` and `options` outlive the site; the driver may
// change scenario.topology.rail_gbps before AddEnvironment.
struct SiteContext {
  const Scenario* scenario = nullptr;
  const RunOptions* options = nullptr;
  std::string run_id;
  std::string out_dir;
};

// The site for `ctx`: SlurmFleetSite for --launcher slurm, InventorySite for an inventory of
// this machine under the local launcher, NetnsSite otherwise. InvalidArgument for an unknown
// launcher.
Result<std::unique_ptr<Site>> MakeSite(const SiteContext& ctx);

}  // namespace faultline::runner
