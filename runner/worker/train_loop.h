// TrainLoop: the train workload of one rank (worker.h; the model in train_model.h): a
// data-parallel training loop whose steps compute this rank's gradient, sleep out the rest of
// compute_ms, allreduce the gradients (sum, f32), check every element and update the
// parameters; it checkpoints every K steps and can resume from the newest checkpoint every rank
// has. Between steps and after a failed call it asks its recovery policy (policies/policy.h)
// what to do, handing it this rank's path state (PathTracker, from the library's events) and
// the group's gathered fault state (FaultMatrix), and carries out the answer: hold, shrink,
// decide and share a decision, or stop for a restart.
//
// With WorkerOptions::rejoin, ranks a shrink left out for a path fault do not end: each waits
// until its rail ports are all up again, says so in checkpoint_dir/rejoin/, and the group
// grows back (the library's Grow) at its next step (or the next that follows a checkpoint);
// the joiners take the parameters and the step from the group's rank 0, as a replica heals
// from a peer, and the job trains at full size again.
//
// Files: train_loop.cc (the loop, checkpoints, resume, failures), train_boundary.cc (the step
// boundary's mechanics), train_rejoin.cc (the rejoin after repair).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runner/policy/cost_model.h"
#include "runner/worker/fault_matrix.h"
#include "runner/worker/path_tracker.h"
#include "runner/worker/policies/policy.h"
#include "runner/worker/port_watch.h"
#include "runner/worker/rank.h"
#include "runner/worker/train_model.h"

namespace faultline::runner {

class TrainLoop final {
 public:
  // REQUIRES: rank->Open() succeeded; options.policy a policies::MakePolicy name; `rank`
  // outlives the loop.
  explicit TrainLoop(Rank* rank);
  TrainLoop(const TrainLoop&) = delete;
  TrainLoop& operator=(const TrainLoop&) = delete;

  // Runs the workload to its end. Returns the exit code.
  int Run();

 private:
  // train_loop.cc
  uint64_t Params() const { return o_.grad_bytes / 4; }
  uint64_t Elements() const { return Params() + (policy_->Flagged() ? 1 : 0); }
  WorkerHeader Header() const;
  int FreshBuffers();
  void LoadLocalCheckpoints();
  int AgreeOnResume();
  Status Control(std::vector<int64_t>* values, const std::string& what);
  int Loop();
  int WriteCheckpoint();
  int AfterFailedCall(const std::string& what, int64_t failed_ns, const Status& why);
  int ShrinkWithout(const std::vector<int>& lost, const std::string& what, int64_t failed_ns,
                    const Status& why);
  int AgreeOnStep();
  policies::LocalView Local() const;

  // train_rejoin.cc
  // A member's, before each step while the group is short: takes back the left-out ranks
  // that are ready. *again: the group changed (or a failed call was dealt with), so the step
  // starts over.
  int MaybeGrow(bool* again);
  // A rank that a shrink left out (its communicator aborted for `why`): waits for its repair
  // and the group's grow, joins it and takes the state. kWorkerExitOk once it is a member
  // again (rejoined_ set).
  int Rejoin(const std::string& why);
  // Both sides, after the grow: the step and the parameters from the group's rank 0, and the
  // new group's measurements start over.
  int TakeGroupState(bool joiner);
  // The members are done (or failed): left-out ranks still waiting end.
  void CloseRejoin();
  std::string RejoinPath(const std::string& what, int rank = -1) const;
  bool RejoinOn() const { return o_.rejoin != "never"; }

  // train_boundary.cc
  int StepBoundary();
  int Act(const policies::Action& action, const std::vector<int64_t>* state);
  int Hold();
  Status GatherFaultState(std::vector<int64_t>* v);
  policy::PolicyState BaseState(int ranks) const;
  // Where each cost input of BaseState comes from ("measured: ..." or "default: ..."), for
  // the decision line.
  nlohmann::json InputSources() const;
  std::optional<policy::RecoveryPolicy> DecideAndLog(const policies::DecisionRequest& req);
  int ShareDecision(std::optional<policy::RecoveryPolicy>* chosen);
  // Writes the coordinator's pending decision line (DecideAndLog) with the moment its action
  // took effect; nothing when none is pending.
  void WriteDecision(int64_t effect_ns);
  int ShrinkAffected(const std::vector<int64_t>& v, const std::string& by);
  int FailStop(const std::string& why, int64_t first_fault_ns);

  Rank& rank_;
  const WorkerOptions& o_;
  std::unique_ptr<policies::Policy> policy_;
  PathTracker paths_;
  FaultMatrix matrix_;
  PortWatch ports_;
  workload::OpArgs args_;
  std::vector<train::Checkpoint> candidates_;  // --resume: this rank's readable checkpoints
  int64_t resume_start_ns_ = 0;
  std::vector<float> params_;
  int64_t step_ = 0;        // steps done (the next step's global number)
  uint64_t base_ = 0;       // samples done
  uint64_t prev_base_ = 0;  // base_ before the last step (AgreeOnStep undoes that step)
  int64_t last_ckpt_step_ = 0;
  int64_t last_ckpt_write_ns_ = 0;
  int64_t last_shrink_ns_ = 0;
  bool left_out_ = false;  // waiting to rejoin (Rejoin)
  bool rejoined_ = false;  // rejoined during this step's boundary: the step starts over
  // The stall of the step during which the library reported a fault, over the clean steps'
  // mean allreduce: what switching to the surviving paths cost (the cost model's
  // failover_switch_cost_s); unset until measured.
  std::optional<int64_t> switch_ns_;
  // The coordinator's decision, written once its action has taken effect (WriteDecision).
  std::optional<DecisionRecord> pending_decision_;
  std::optional<int64_t> pending_evidence_ns_;
  // InputSources() as of the last BaseState a decision may use.
  nlohmann::json base_sources_;
  int64_t clean_steps_ = 0;  // fault-free steps, their total and allreduce time
  int64_t clean_step_ns_ = 0;
  int64_t clean_ar_ns_ = 0;
  int64_t last_ar_ns_ = 0;
  // The library's measured throughput to each world rank (PeerRates) at the clean steps;
  // empty: the library measures none.
  std::vector<double> ref_rates_;
  bool attention_ = true;            // some rank flagged the boundary in the last step
  int64_t boundary_from_step_ = -1;  // the boundary agrees at least at the step after this
  // Members, not locals: a library may touch them until it is destroyed.
  std::vector<int64_t> ctl_send_;
  std::vector<int64_t> ctl_recv_;
  int64_t bcast_send_ = 0;
  int64_t bcast_recv_ = 0;
};

}  // namespace faultline::runner
