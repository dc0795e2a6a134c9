// The executor of a scenario's fault timeline: each action (apply or revert one cycle of a
// fault) goes through the run's Site (runner/exec/site.h), whichever site it is, and what
// happened is recorded in the fault's FaultRecord (applied, observed and reverted times on the
// runner's clock, the first error). HealAll reverts every cycle still in force at the end of
// the run (Jepsen's heal), also where an action never came.
//
// Not thread-safe: the run driver's thread calls it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runner/core/history.h"
#include "runner/core/scenario.h"
#include "runner/core/timeline.h"
#include "runner/exec/site.h"

namespace faultline::runner {

class FaultExecutor final {
 public:
  // `sc` and `site` outlive the executor. Every fault starts as "the ranks ended first" (not
  // applied), the reports' words for a fault whose time never came.
  FaultExecutor(const Scenario& sc, Site* site);
  FaultExecutor(const FaultExecutor&) = delete;
  FaultExecutor& operator=(const FaultExecutor&) = delete;

  // Every fault's scheduled time from the run's t0.
  // A fault's time is t0 plus its offset, except that a fault at offset 0 is applied
  // kAtStartLeadNs before t0: it is then in force when the ranks start their first collective
  // (at t0) instead of racing it, and its applied_s reads a little below 0.
  static constexpr int64_t kAtStartLeadNs = 2'000'000;
  static int64_t ActionTime(int64_t t0_ns, int64_t at_ns) {
    return at_ns == 0 ? t0_ns - kAtStartLeadNs : t0_ns + at_ns;
  }
  void Schedule(int64_t t0_ns);
  // Carries out `a` at `at_ns` (runner clock). Errors go to the fault's record.
  void Do(const TimelineAction& a, int64_t at_ns, const RankRefs& ranks);
  // Reverts everything still in force; what could not be is a harness error. Then stops the
  // site's fault service.
  void HealAll(std::vector<std::string>* harness_errors);

  std::vector<FaultRecord> records() const;
  // Global ranks a fault killed (rank_kill): their end is the fault's, not a crash.
  const std::map<int, bool>& killed_by_fault() const { return killed_; }

 private:
  struct State {
    FaultRecord record;
    std::map<int, std::unique_ptr<AppliedFault>> by_cycle;
    AppliedFault* newest = nullptr;  // the cycle applied last
  };
  // When whoever applied the fault lost it early, marks every cycle reverted and says so in
  // the record; true then.
  bool RevertedEarly(State& f);

  const Scenario& sc_;
  Site* site_;
  std::vector<State> faults_;
  std::map<int, bool> killed_;
};

}  // namespace faultline::runner
