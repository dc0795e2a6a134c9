// The worker: one rank of a run, one process, started by the runner inside the rank's host
// network namespace (build/bin/faultline-worker; command line in worker_main.cc).
//
// It joins the group through a CclAdapter (workload/adapters/ccl_adapter.h), runs the workload loop (warm-up, then --iters
// collectives or collectives until --duration has passed), checks every output against the
// analytically known values (workload/check_values.h) and logs every collective, CCL event and
// how it ended to its per-rank log (worker_log.h).
//
// Ending: the first failed CCL call is logged with its error and ends the loop (a failed
// communicator is not used again), except under policy shrink: a collective that failed
// because the library lost a rank (CclAdapter::LostRank) is followed by a shrink of the group
// without it (a "shrink" log line, timed), and the loop goes on in the smaller group with the
// next index; its inputs and checks are those of this rank's place in the new group. Every CCL call has a deadline; a watchdog thread also ends
// the process if a call outlives its deadline plus a grace period (the library did not honour
// it): it logs the call as failed and exits with kWorkerExitCclError. A crash stays a crash.
//
// Duration-bounded loops end on the same collective on every rank: after the warm-up, each
// iteration is preceded by a one-element allreduce (max) of "this rank's clock passed the end",
// which is not logged as a collective.
//
// The train workload (--workload train) is a data-parallel training loop over the model of
// train_model.h: each step computes this rank's gradient, sleeps out the rest of compute_ms
// (standing in for a model's forward and backward pass), allreduces (sum, f32) the gradients,
// checks every element of the sum against the known value and updates the parameters; it
// checkpoints every K steps and can resume from the newest checkpoint every rank has. Its
// recovery policies (WorkerOptions::policy):
//   failover   the library's own recovery; a failed step ends the rank (kWorkerExitCclError).
//   shrink     a step failed by a lost rank is redone without it in the smaller group.
//   fail_stop  at the first fault seen (a failed call or a fault event) the rank aborts the
//              communicator and exits kWorkerExitRestart: the runner restarts every rank with
//              --resume.
//   wait       the library waits for a lost path up to the wait bound; at each step boundary
//              the ranks hold together while any of them sees a path down, up to the bound.
//   adaptive   at each step boundary the ranks gather their fault state; on news the group's
//              rank 0 asks the cost model (runner/policy/cost_model.h) for the cheapest policy,
//              logs the decision and broadcasts it; every rank applies it.
//
// Units: rank.h (log, watchdog, the library's calls, the group, how a rank ends),
// collective_loop.h, train_loop.h (the steps, checkpoints, resume and the step boundary),
// policies/policy.h (each policy's choices, pure), path_tracker.h and fault_matrix.h (what a
// rank knows of its paths and what the group gathers), port_watch.h (the rank's own ports,
// over base/link_watch.h; ranks do not link the injector's netlink wrappers).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "workload/collective.h"

namespace faultline::runner {

// Exit codes of faultline-worker.
inline constexpr int kWorkerExitOk = 0;         // every collective returned success
inline constexpr int kWorkerExitUsage = 2;      // bad command line; nothing was started
inline constexpr int kWorkerExitInternal = 3;   // the worker itself failed (log, memory)
inline constexpr int kWorkerExitCclError = 10;  // a CCL call failed or outlived its deadline
// This rank stopped so the runner restarts every rank from the last checkpoint (policy
// fail_stop, or adaptive chose fail_stop); train workload only.
inline constexpr int kWorkerExitRestart = 11;

struct WorkerOptions {
  std::string ccl;  // workload::adapters::CreateCclAdapter name
  int rank = 0;
  int size = 0;
  std::string bootstrap;           // ip:port of rank 0 on the management network
  std::vector<std::string> rails;  // this rank's rails; gloo uses the first
  std::string store_dir;           // gloo rendezvous directory, shared by the group
  workload::Coll op = workload::Coll::kAllReduce;
  workload::DType dtype = workload::DType::kF32;
  workload::RedOp redop = workload::RedOp::kSum;
  int root = 0;
  uint64_t bytes = 1 << 20;
  std::optional<int64_t> iters;  // exactly one of iters / duration
  std::optional<std::chrono::nanoseconds> duration;
  int64_t warmup = 0;
  bool check = false;
  std::chrono::milliseconds timeout{60000};       // per collective
  std::chrono::milliseconds init_timeout{30000};  // joining the group
  std::string log_path;
  uint64_t seed = 0;
  // Absolute CLOCK_MONOTONIC time at which the first collective starts (after joining the
  // group), so that every rank and the runner's fault timeline share one time zero; a
  // duration then counts from it. Unset: start as soon as the group is joined.
  std::optional<int64_t> start_at_ns;
  // Where the rank serves the fault-hook protocol (injector/FAULT_HOOK.md); empty: nowhere.
  // Only ftccl serves it.
  std::string fault_hook;
  // Recovery policy: "failover" (the library's own: a failed call ends the loop) or "shrink"
  // (after a collective failed because a rank was lost, the survivors shrink the group
  // without it and go on; libraries that cannot shrink end as under failover). The train
  // workload also takes "fail_stop", "wait" and "adaptive" (see above).
  std::string policy = "failover";

  // "collectives" (the fields above) or "train" (op, bytes, iters... unused; these below).
  std::string workload = "collectives";
  int64_t steps = 0;       // training steps of the whole job
  int64_t batch = 8;       // samples per rank per step
  int64_t compute_ms = 20;  // compute phase of a step
  uint64_t grad_bytes = 0;  // f32 gradient bytes allreduced per step (a multiple of 4)
  int64_t checkpoint_every = 0;  // steps; 0: never
  std::string checkpoint_dir;    // required when checkpoint_every > 0 or resume
  bool resume = false;           // start from the newest checkpoint every rank has
  int64_t incarnation = 0;       // the job's restart count (logged)
  std::chrono::milliseconds wait_bound{5000};  // policies wait and adaptive
  // When ranks a shrink left out for a path fault rejoin the group (ftccl Grow; policies
  // shrink and adaptive): "never" (they end), "on_repair" (once their rail ports are all up
  // again, at the group's next step) or "at_checkpoint" (then, at the next step that follows
  // a checkpoint). A left-out rank waits for the group in checkpoint_dir (rejoin/).
  std::string rejoin = "never";
  // The restart cost the runner measured at the job's last restart (the cost model's input);
  // unset: estimated by the worker.
  std::optional<std::chrono::milliseconds> restart_cost;
  // The runner's part of a restart, measured once at the run's setup: detecting the stopped
  // job (its polling bound), killing and reaping the ranks and starting new ones; unset: not
  // measured (the worker's first restart estimate then lacks it and says so).
  std::optional<std::chrono::milliseconds> relaunch_cost;
};

// How long the watchdog waits past a call's own deadline: 1 s plus a quarter of the deadline.
inline std::chrono::milliseconds WatchdogGrace(std::chrono::milliseconds deadline) {
  return std::chrono::milliseconds(1000) + deadline / 4;
}

// Runs the worker. Returns its exit code.
// REQUIRES: options validated (size >= 1, 0 <= rank < size; collectives: exactly one of
// iters / duration; train: steps >= 1, grad_bytes a positive multiple of 4, a checkpoint_dir
// when needed, steps x size x batch samples at most train::kMaxSamples).
int RunWorker(const WorkerOptions& options);

}  // namespace faultline::runner
