// TrainLoop's step boundary: the gathers, the decision and its broadcast, holds, shrinks for
// path faults and fail_stop (train_loop.h). What to do is the policy's (policies/policy.h).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "runner/worker/train_loop.h"

namespace faultline::runner {
namespace {

// The cost model's shrink cost until this group has shrunk once (a labelled default: the
// decision line's input_sources says so).
constexpr double kDefaultShrinkCostS = 0.05;

}  // namespace

// The policy's work between two steps. kWorkerExitOk to run the next step.
int TrainLoop::StepBoundary() {
  const policies::Gather gather = policy_->BoundaryGather();
  if (gather == policies::Gather::kNone) return kWorkerExitOk;
  // Nothing for the boundary on any rank at the last step (its allreduce's flag), and no
  // decision pending: the step runs at once. The first step, and the first after a shrink or
  // resume, always agree.
  if (policy_->Flagged() && !attention_ && !policy_->Pending() && step_ > boundary_from_step_) {
    return kWorkerExitOk;
  }
  policies::GroupView g;
  g.members = rank_.Members();
  g.coordinator = rank_.group_rank() == 0;
  std::vector<int64_t> v;
  if (gather == policies::Gather::kWaitFlags) {
    v = {paths_.AnyPathToWaitFor() ? 1 : 0};
    const Status st = Control(&v, "step boundary");
    if (!st.ok()) return AfterFailedCall("step boundary", NowNs(), st);
    g.any_waiting = v[0] != 0;
    return Act(policy_->AtBoundary(g), &v);
  }
  const Status st = GatherFaultState(&v);
  if (!st.ok()) return AfterFailedCall("step boundary", NowNs(), st);
  g.state = &v;
  g.matrix = &matrix_;
  g.now_ns = NowNs();
  g.base = BaseState(rank_.group_size());
  base_sources_ = InputSources();
  policies::Action action = policy_->AtBoundary(g);
  if (action.kind == policies::Action::kShare) {
    std::optional<policy::RecoveryPolicy> chosen;
    if (action.request) {
      chosen = DecideAndLog(*action.request);
      policy_->Decided(*action.request, chosen.has_value());
    }
    const int code = ShareDecision(&chosen);
    if (code != kWorkerExitOk) return code;
    action = policy_->ApplyAtBoundary(chosen);
  }
  return Act(action, &v);
}

// Carries out a boundary's action.
// A pending decision's action takes effect when the hold begins, the shrunk group is ready,
// the communicator is aborted for the restart, or (failover, no action) now.
int TrainLoop::Act(const policies::Action& action, const std::vector<int64_t>* state) {
  switch (action.kind) {
    case policies::Action::kHold:
      WriteDecision(NowNs());
      return Hold();
    case policies::Action::kShrinkAffected:
      return ShrinkAffected(*state, action.why);
    case policies::Action::kFailStop:
      return FailStop(action.why, paths_.first_fault_ns().value_or(NowNs()));
    default:
      WriteDecision(NowNs());
      return kWorkerExitOk;
  }
}

// Every rank of the group holds until no rank sees a path down or the wait bound has passed
// (on any rank's clock: the ranks agree so that they stop after the same round); the hold
// line either way.
int TrainLoop::Hold() {
  HoldRecord h;
  h.rank = o_.rank;
  h.start_ns = NowNs();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    rank_.DrainEvents();
    std::vector<int64_t> v = {paths_.AnyPathToWaitFor() ? 1 : 0,
                              NowNs() - h.start_ns >= ToNs(o_.wait_bound) ? 1 : 0};
    const Status st = Control(&v, "hold");
    if (!st.ok()) {
      h.end_ns = NowNs();
      rank_.log().Write(WorkerHoldLine(h));
      return AfterFailedCall("hold", h.end_ns, st);
    }
    const policies::HoldStep next = policies::NextHoldStep(v[0] != 0, v[1] != 0);
    if (next == policies::HoldStep::kReturned) {
      h.returned = true;
      break;
    }
    if (next == policies::HoldStep::kWaitedOut) {
      // Waited the whole bound: these outages are the library's to fail over from now on; a
      // path that returns and goes down again is a new outage, held for again.
      paths_.MarkWaitedOut();
      break;
    }
  }
  h.end_ns = NowNs();
  if (!rank_.log().Write(WorkerHoldLine(h))) return rank_.InternalFailure("cannot write the log");
  return kWorkerExitOk;
}

// The group's fault state at a step boundary: every member's slots (FaultMatrix::FillLocal),
// gathered in one small allreduce; this rank's news is handed over with it.
Status TrainLoop::GatherFaultState(std::vector<int64_t>* v) {
  v->assign(matrix_.Size(), 0);
  // Whether this rank's own port went down during the fault: the end a shrink should drop
  // when the down paths alone do not say which end is at fault (a single pair).
  ports_.Look(paths_.AnyPathDown() || paths_.news());
  FaultMatrix::Local local;
  local.rank = o_.rank;
  local.members = rank_.Members();
  local.rails = static_cast<int>(o_.rails.size());
  local.paths = &paths_;
  local.now_ns = NowNs();
  if (paths_.AnyPathDown()) local.damping = rank_.ccl().Damping();
  local.own_port_down = ports_.own_port_down();
  local.ref_rates = ref_rates_;
  local.clean_steps = clean_steps_;
  local.clean_ar_ns = clean_ar_ns_;
  local.last_ar_ns = last_ar_ns_;
  matrix_.FillLocal(local, v);
  paths_.ClearNews();
  return Control(v, "step boundary");
}

// The decision's inputs that do not depend on the fault. `ranks`: the group before it.
policy::PolicyState TrainLoop::BaseState(int ranks) const {
  policy::PolicyState s;
  s.world_size = ranks;
  s.steps_remaining = o_.steps - step_;
  const double compute_s = o_.compute_ms / 1e3;
  double step_s = std::max(compute_s, 1e-3);
  double comm = 0;
  if (clean_steps_ > 0) {
    step_s = std::max(static_cast<double>(clean_step_ns_) / clean_steps_ / 1e9, 1e-6);
    comm = std::clamp(static_cast<double>(clean_ar_ns_) / clean_step_ns_, 0.0, 1.0);
  }
  s.step_time_s = step_s;
  s.comm_fraction = comm;
  s.checkpoint_age_s = static_cast<double>(step_ - last_ckpt_step_) * step_s;
  // Unless the runner measured it: this process's start to ready (launch and rendezvous) plus
  // its last checkpoint write (a restart loads about as much).
  // Unless the runner measured it: the runner's relaunch (detect, kill, reap, start; measured
  // at the run's setup) plus this process's start to ready (rendezvous) plus its last
  // checkpoint write (a restart loads about as much).
  s.restart_cost_s =
      o_.restart_cost
          ? o_.restart_cost->count() / 1e3
          : (o_.relaunch_cost ? o_.relaunch_cost->count() / 1e3 : 0.0) +
                std::max<int64_t>(0, rank_.ready_ns() - rank_.process_start_ns()) / 1e9 +
                last_ckpt_write_ns_ / 1e9;
  s.shrink_cost_s = last_shrink_ns_ > 0 ? last_shrink_ns_ / 1e9 : kDefaultShrinkCostS;
  s.failover_switch_cost_s = switch_ns_ ? *switch_ns_ / 1e9 : 0.0;
  s.wait_bound_s = o_.wait_bound.count() / 1e3;
  return s;
}

nlohmann::json TrainLoop::InputSources() const {
  nlohmann::json j;
  j["step_time_s"] = clean_steps_ > 0 ? "measured: the mean of this group's fault-free steps"
                                      : "default: the compute time (no fault-free step yet)";
  j["comm_fraction"] = clean_steps_ > 0 ? "measured: the fault-free steps' allreduce share"
                                        : "default: 0 (no fault-free step yet)";
  if (o_.restart_cost) {
    j["restart_cost_s"] = "measured: the job's last restart, detect to its first step";
  } else if (o_.relaunch_cost) {
    j["restart_cost_s"] = "estimate: the runner's relaunch measured at setup (" +
                          std::to_string(o_.relaunch_cost->count()) +
                          " ms) + this rank's start to ready + its last checkpoint write";
  } else {
    j["restart_cost_s"] =
        "estimate without the runner's relaunch (not measured): this rank's start to ready + "
        "its last checkpoint write";
  }
  j["shrink_cost_s"] = last_shrink_ns_ > 0 ? "measured: this group's last shrink"
                                           : "default: 0.05 s (no shrink yet)";
  j["failover_switch_cost_s"] =
      switch_ns_ ? "measured: the stall of the step during which the library reported a fault"
                 : "default: 0 (no fault seen during a step yet)";
  j["wait_bound_s"] = "configured";
  return j;
}

// The coordinator's decision: Decide, timed, and the decision line. nullopt when the state is
// not one the model accepts (named on stderr; the ranks go on). The request's trigger and
// shrink set go on the decision line beside the model's own keys.
std::optional<policy::RecoveryPolicy> TrainLoop::DecideAndLog(
    const policies::DecisionRequest& req) {
  const auto t0 = std::chrono::steady_clock::now();
  const Status valid = policy::ValidatePolicyState(req.state);
  if (!valid.ok()) {
    std::fprintf(stderr, "faultline-worker: rank %d: no decision: %s\n", o_.rank,
                 valid.ToString().c_str());
    return std::nullopt;
  }
  const policy::PolicyDecision d = policy::Decide(req.state);
  const auto t1 = std::chrono::steady_clock::now();
  DecisionRecord rec;
  rec.rank = o_.rank;
  rec.t_ns = NowNs();
  rec.latency_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
  rec.chosen = policy::RecoveryPolicyName(d.chosen);
  rec.decision = policy::DecisionToJson(req.state, d);
  rec.decision["trigger"] = req.trigger;
  rec.decision["shrink_set"] = req.shrink_set;
  rec.decision["input_sources"] = base_sources_;
  // Written once the action has taken effect (WriteDecision), with its reaction time.
  pending_decision_ = std::move(rec);
  pending_evidence_ns_ = req.evidence_ns;
  return d.chosen;
}

void TrainLoop::WriteDecision(int64_t effect_ns) {
  if (!pending_decision_) return;
  DecisionRecord rec = std::move(*pending_decision_);
  pending_decision_.reset();
  // From the first evidence of the fault to the action in effect: the gathers, any deferral,
  // the decision, its broadcast and the action itself.
  nlohmann::json reaction = {{"effect_ns", effect_ns}};
  if (effect_ns < 0) reaction["effect_ns"] = nullptr;
  if (pending_evidence_ns_ && effect_ns >= 0) {
    reaction["evidence_ns"] = *pending_evidence_ns_;
    reaction["ms"] = std::max<int64_t>(0, effect_ns - *pending_evidence_ns_) / 1e6;
  } else {
    reaction["evidence_ns"] =
        pending_evidence_ns_ ? nlohmann::json(*pending_evidence_ns_) : nlohmann::json(nullptr);
    reaction["ms"] = nullptr;
  }
  pending_evidence_ns_.reset();
  rec.decision["reaction"] = std::move(reaction);
  rank_.log().Write(WorkerDecisionLine(rec));
}

// Group rank 0's decision (or none) to every rank of the group: a 1-element broadcast.
int TrainLoop::ShareDecision(std::optional<policy::RecoveryPolicy>* chosen) {
  bcast_send_ = *chosen ? static_cast<int64_t>(**chosen) : -1;
  bcast_recv_ = -2;
  workload::OpArgs a;
  a.coll = workload::Coll::kBroadcast;
  a.send = &bcast_send_;
  a.recv = &bcast_recv_;
  a.count = 1;
  a.dtype = workload::DType::kI64;
  a.root = 0;
  const Status st = rank_.RunCall("decision broadcast", a);
  rank_.DrainEvents();
  if (!st.ok()) {
    WriteDecision(-1);  // never took effect: the broadcast failed
    return AfterFailedCall("decision broadcast", NowNs(), st);
  }
  if (bcast_recv_ < -1 || bcast_recv_ > static_cast<int64_t>(policy::RecoveryPolicy::kShrink)) {
    return rank_.Fail("decision broadcast: wrong value " + std::to_string(bcast_recv_), NowNs());
  }
  if (bcast_recv_ < 0) {
    chosen->reset();
  } else {
    *chosen = static_cast<policy::RecoveryPolicy>(bcast_recv_);
  }
  return kWorkerExitOk;
}

// A shrink for a link / nic fault (adaptive's choice, or policy shrink): the group goes on
// without the ranks whose paths are affected (FaultMatrix::AffectedCover). `by` names who
// shrank.
int TrainLoop::ShrinkAffected(const std::vector<int64_t>& v, const std::string& by) {
  // A pending decision line is written before any end line of this rank (the log ends there):
  // when it leaves the group, when the shrunk group is ready. A shrink that fails ends the
  // rank before it could take effect, and its decision line is not written (said on stderr).
  const std::vector<int> cover = matrix_.AffectedCover(v, rank_.Members());
  if (cover.empty()) {
    WriteDecision(NowNs());
    return kWorkerExitOk;  // only the coordinator is affected: go on
  }
  if (std::find(cover.begin(), cover.end(), o_.rank) != cover.end()) {
    const std::string why = "left out by " + by + "'s shrink (a path of this rank is affected)";
    rank_.Abort(why);
    WriteDecision(NowNs());
    if (RejoinOn()) return Rejoin(why);
    return rank_.Fail(why, paths_.first_fault_ns().value_or(NowNs()));
  }
  const int code = ShrinkWithout(cover, by + " (a path fault)", NowNs(), Status::Ok());
  if (code != kWorkerExitOk) {
    if (pending_decision_) {
      std::fprintf(stderr,
                   "faultline-worker: rank %d: the %s decision's shrink failed; its line is not "
                   "logged (the log has ended)\n",
                   o_.rank, pending_decision_->chosen.c_str());
      pending_decision_.reset();
    }
    return code;
  }
  WriteDecision(NowNs());
  const Status st = rank_.Prepare(args_);
  if (!st.ok()) return rank_.Fail("prepare after the shrink: " + st.ToString(), NowNs());
  return kWorkerExitOk;
}

// Policy fail_stop (or adaptive's choice): abort the communicator so that the peers fail
// their next call too, then the end line asking for a restart of every rank.
int TrainLoop::FailStop(const std::string& why, int64_t first_fault_ns) {
  rank_.Abort("fail_stop: " + why);
  WriteDecision(NowNs());
  WorkerEnd end;
  end.ok = false;
  end.message = "fail_stop at step " + std::to_string(step_) + ": " + why +
                " (every rank restarts from the last checkpoint)";
  end.t_ns = NowNs();
  end.first_error_ns = first_fault_ns;
  end.restart = true;
  rank_.log().Write(WorkerEndLine(end));
  std::fprintf(stderr, "faultline-worker: rank %d: %s\n", o_.rank, end.message.c_str());
  return kWorkerExitRestart;
}

}  // namespace faultline::runner
