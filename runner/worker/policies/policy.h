// The train workload's recovery policies behind one step-boundary interface.
//
// The training loop (train_loop.h) owns the mechanics: the steps, the small control
// collectives that gather the group's state, the decision broadcast, holds, shrinks, aborts
// and the log. A Policy owns only the choices: between steps and after a failed call the loop
// hands it what it observed (this rank's path state, the group's gathered fault state, the
// failure) and the policy answers with the Action the loop carries out. A policy never calls
// the library, the clock or the log, so every choice is unit-tested on synthetic observations.
//
//   failover   the library's own recovery; a failed step ends the rank (and the runner's
//              supervisor restarts the job from its last checkpoint, as under every policy
//              that has no way on without a lost rank: runner/exec/restart_supervisor.h).
//   shrink     a step failed by a lost rank is redone without it; while a path is down at a
//              boundary the group goes on without the ranks behind the down paths.
//   fail_stop  at the first fault seen (a failed call or a fault event) the rank aborts and
//              asks the runner to restart every rank from the last checkpoint.
//   wait       the ranks hold together at a boundary while any of them sees a path down, up
//              to the wait bound; the library waits for a lost peer as long.
//   adaptive   on news, the group's rank 0 asks the cost model (runner/policy/cost_model.h)
//              for the cheapest policy, and every rank applies the shared decision.
//
// A Policy object belongs to one rank's training loop; not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runner/policy/cost_model.h"
#include "runner/worker/fault_matrix.h"

namespace faultline::runner::policies {

// What this rank saw of its own paths (PathTracker) before a step.
struct LocalView {
  bool news = false;              // a fault event since the last boundary
  bool any_path_down = false;     // a path down now
  bool path_to_wait_for = false;  // a path down that no hold has waited out yet
};

// What the boundary gathers from every rank of the group.
enum class Gather {
  kNone,        // no boundary work
  kWaitFlags,   // one flag: some rank has a path to wait for
  kFaultState,  // the FaultMatrix vector
};

// The group's state at a step boundary, after the gather.
struct GroupView {
  bool any_waiting = false;  // Gather::kWaitFlags
  // Gather::kFaultState: the gathered vector and its layout.
  const std::vector<int64_t>* state = nullptr;
  const FaultMatrix* matrix = nullptr;
  std::vector<int> members;  // the group's world ranks, in order
  bool coordinator = false;  // this rank is the group's rank 0
  int64_t now_ns = 0;
  // The decision's inputs that do not depend on the fault (the loop's measurements).
  policy::PolicyState base;
};

// A failed step or control call after which the group shrank without the lost rank.
struct RankLossView {
  int lost = -1;             // world rank
  int group_before = 0;      // ranks before the shrink
  int group_after = 0;       // and after
  bool coordinator = false;  // this rank is the new group's rank 0
  double outage_so_far_s = 0;
  policy::PolicyState before;  // base state measured before the shrink
  int64_t evidence_ns = 0;     // the first evidence of the loss this rank saw
};

// The coordinator's question to the cost model, and what the decision line carries with it.
struct DecisionRequest {
  policy::PolicyState state;
  std::string trigger;          // "path_down", "path_fault_over", "rank_lost"
  std::vector<int> shrink_set;  // world ranks a shrink would drop
  int64_t now_ns = 0;
  bool fault_over = false;  // the paths came back before this boundary
  // The first evidence of what is decided on that any rank of the group saw (a path event,
  // a failed call; the moment an outage outlasted the last decision's estimate), on the
  // ranks' clock; unset when not known. The decision's reaction time counts from here.
  std::optional<int64_t> evidence_ns;
};

struct Action {
  enum Kind {
    kContinue,        // run the next step (or go on in the smaller group)
    kFail,            // end the rank with the failed call's error
    kFailStop,        // abort, end asking for a restart of every rank
    kHold,            // hold with the group until no path is down or the wait bound passed
    kShrinkLostRank,  // shrink without the rank the library lost, redo the step
    kShrinkAffected,  // shrink without the ranks behind the down paths (FaultMatrix cover)
    kShare,           // share the coordinator's decision (request) with every rank, then Apply
  };
  Kind kind = kContinue;
  std::string why;                         // kFailStop: the reason; kShrinkAffected: who shrank
  std::optional<DecisionRequest> request;  // kShare, on the coordinator: what to decide
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual const char* Name() const = 0;

  // Each step's allreduce carries one more f32: every rank's "I have something for the
  // boundary" (Flag), summed; the boundary then runs only when some rank flagged the last
  // step, a decision is Pending(), or the group is new.
  virtual bool Flagged() const { return false; }
  virtual bool Flag(const LocalView&) const { return false; }
  // The library waits for a lost peer up to the wait bound (CclInit::peer_loss_timeout).
  virtual bool WaitsForLostPeers() const { return false; }
  // Faults the library reported while joining are the incarnation's starting state, not news.
  virtual bool ForgetsStartupFaults() const { return false; }
  // The library's per-peer throughput at fault-free steps is recorded (the matrix's rates).
  virtual bool MeasuresPeerRates() const { return false; }

  // Before every step and after every completed one: kContinue or kFailStop.
  virtual Action AtStepEdge(const LocalView&) const { return {}; }

  virtual Gather BoundaryGather() const { return Gather::kNone; }
  // A decision is pending: the boundary runs whatever the flags say.
  virtual bool Pending() const { return false; }
  // REQUIRES: BoundaryGather() != kNone; view filled as it says.
  virtual Action AtBoundary(const GroupView&) { return {}; }
  // The coordinator's request of AtBoundary was answered (`chosen`: a decision was made).
  virtual void Decided(const DecisionRequest&, bool /*chosen*/) {}
  // The group's shared decision at a boundary (none: nullopt) -> what to do.
  virtual Action ApplyAtBoundary(std::optional<policy::RecoveryPolicy>) const { return {}; }

  // A step or control call failed; `can_shrink`: the library can shrink.
  // kFail, kFailStop or kShrinkLostRank.
  virtual Action OnFailedCall(bool can_shrink) const = 0;
  // After the shrink of kShrinkLostRank: kContinue, or kShare (on every rank).
  virtual Action AfterRankLoss(const RankLossView&) const { return {}; }
  // The group's shared decision after a rank loss -> kContinue or kFailStop.
  virtual Action ApplyAfterRankLoss(std::optional<policy::RecoveryPolicy>, int /*lost*/) const {
    return {};
  }
};

std::unique_ptr<Policy> MakeFailoverPolicy();
std::unique_ptr<Policy> MakeFailStopPolicy();
std::unique_ptr<Policy> MakeWaitPolicy();
std::unique_ptr<Policy> MakeShrinkPolicy();
std::unique_ptr<Policy> MakeAdaptivePolicy();
// The policy of that name ("failover", "shrink", "fail_stop", "wait", "adaptive"); nullptr
// for any other.
std::unique_ptr<Policy> MakePolicy(std::string_view name);

// One round of a hold: every rank's "a path to wait for" and "the wait bound passed", gathered.
enum class HoldStep {
  kHold,       // hold another round
  kReturned,   // no rank waits any more: the paths came back
  kWaitedOut,  // the bound passed: the outages are the library's to fail over from now on
};
HoldStep NextHoldStep(bool any_waiting, bool bound_passed);

}  // namespace faultline::runner::policies
