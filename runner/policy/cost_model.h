// The recovery-policy selector's cost model: at a fault event during a data-parallel training
// job, the expected GPU-time each recovery policy loses over the rest of the job, and the
// cheapest applicable one. Pure functions of their inputs (no I/O, no clocks, no kernel);
// thread-safe. Linked into the rank process, where the coordinator rank evaluates it from
// measured state at every fault event and logs each decision as one events.jsonl line.
//
// Policies (names shared with the simulator's sim::Policy where they overlap):
//   fail_stop  abort; restart every rank in place on the same hosts from the last checkpoint.
//   failover   keep going over the surviving network paths at reduced bandwidth.
//   wait       hold every rank until the path returns, at most wait_bound_s.
//   shrink     drop the dead or unreachable replica and continue with n - 1 ranks.
//   adaptive   the selector itself (Decide); never an option or a decision.
//
// The model. Notation: n = world_size, N = steps_remaining, t = step_time_s,
// c = comm_fraction, b = surviving_bandwidth_fraction, A = checkpoint_age_s,
// R = restart_cost_s, S = shrink_cost_s, s_w = failover_switch_cost_s, W = wait_bound_s.
//  - Horizon H = N t: the fault-free time the job still has to run. Every cost is the expected
//    GPU-time (GPU-seconds) the job loses relative to the same job without the fault.
//  - The outage is permanent when expected_outage_s is absent, or when it has outlasted its
//    estimate (outage_so_far_s > expected_outage_s; PolicyDecision::outage_outlasted_estimate).
//    Otherwise the expected remaining outage is D = max(0, expected_outage_s - outage_so_far_s).
//  - Degraded step time t_d = t ((1 - c) + c / b): the allreduce share (no overlap with compute)
//    slows by 1 / b, the slowest peer setting the pace.
//  - failover (applicable iff b > 0 and the class is not rank):
//      lost = n (s_w + k (t_d - t)),  k = N if permanent, else min(D / t_d, N)
//    the steps run during the outage; afterwards the path is back and steps take t again.
//  - wait (applicable iff the class is link or nic and the outage is not permanent):
//      lost = n min(D, W) + [D > W] x lost of the cheapest other applicable policy, that one
//    evaluated at the moment the wait gives up (outage_so_far_s + W; nothing else changes, as
//    no step ran). PolicyEstimate::fallback names it.
//  - shrink (applicable iff n >= 2; it drops k = shrink_ranks ranks: the dead one for a rank
//    fault; for link / nic the fewest ranks whose removal leaves no member with an affected
//    path, e.g. every rank of a host whose rail is down, as measured by the caller):
//      lost = n S + N (n t_s - m t),  m = n - k  (the second term at least 0)
//    The global batch shrinks (per-rank batch unchanged), so the numerics per sample are
//    unchanged and each step does m / n of the work. A step of the m survivors takes t_s
//    (shrunk_step_time_s; absent: t, the same as before): the compute share is unchanged, the
//    allreduce share scales with the survivors' ring, which can be faster (fewer ranks, no
//    slow link among them) or slower. Over the N steps the job runs for N t_s and does m/n of
//    each step's work: the GPU-time it loses against the fault-free rate is N (n t_s - m t)
//    (with t_s = t: k H, k GPUs' worth of work for the whole horizon). A transient link / nic
//    fault's ranks could rejoin only at the next restart, so they too are charged the whole
//    horizon.
//  - fail_stop (applicable always, but for a permanent link / nic outage with b = 0, which a
//    restart in place cannot get past):
//      lost = n (R + A) + rest
//    rank class: rest = 0 (the restarted rank is healthy). link / nic: the fault is still there
//    after the restart for D' = D - R (permanent: for good); if D' > 0 the restarted job runs
//    N' = N + A / t steps (the replay included) and
//      b > 0: rest = n k' (t_d - t),  k' = N' if permanent, else min(D' / t_d, N')
//      b = 0: rest = n D' (no progress until the path returns).
//  - chosen = the applicable option of least lost GPU-time; equal costs go to the first in
//    the fixed order failover, wait, shrink, fail_stop (the least disruptive first).
//  - Every cost and breakdown term is capped at kMaxLostGpuSeconds, so no output is NaN or
//    infinite. Below the cap, lost_gpu_seconds = n (stall_s + lost_work_s + degraded_s) +
//    capacity_loss_gpu_s.
//
// The decision's events.jsonl line (DecisionToJson; ValidateDecisionJson checks it):
//   {"kind": "policy_decision",
//    "chosen": "fail_stop" | "failover" | "wait" | "shrink",
//    "outage_outlasted_estimate": bool,
//    "inputs": {"fault_class": "link" | "nic" | "rank", "world_size": int >= 1,
//               "steps_remaining": int >= 0, "step_time_s": number > 0,
//               "comm_fraction": number in [0, 1], "surviving_bandwidth_fraction": number in
//               [0, 1], "outage_so_far_s": number, "expected_outage_s": number | null
//               (null: permanent), "checkpoint_age_s": number, "restart_cost_s": number,
//               "shrink_cost_s": number, "shrink_ranks": int in [1, max(1, world_size - 1)],
//               "shrunk_step_time_s": number > 0 | null (null: step_time_s),
//               "failover_switch_cost_s": number,
//               "wait_bound_s": number},   (numbers finite and >= 0)
//    "options": [{"policy": name, "applicable": bool, "why_not": string ("" iff applicable),
//                 "lost_gpu_s": number, "stall_s": number, "lost_work_s": number,
//                 "degraded_s": number, "capacity_loss_gpu_s": number,   (finite, >= 0)
//                 "fallback": name | null}, ...]}   (each of the four policies once)
// Other top-level keys (a timestamp, the logging rank) are allowed; inputs and options hold
// exactly the keys above.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace faultline::policy {

enum class RecoveryPolicy { kFailStop = 0, kFailover, kWait, kShrink, kAdaptive };
// "fail_stop", "failover", "wait", "shrink", "adaptive".
const char* RecoveryPolicyName(RecoveryPolicy p);
// The policy of that name; nullopt for any other text.
std::optional<RecoveryPolicy> ParseRecoveryPolicy(std::string_view name);

// What failed, as the selector sees it.
//   link  one rail path between two hosts degraded or down.
//   nic   a rank's NIC port(s) gone.
//   rank  a rank process dead or paused: no path to it at all.
enum class FaultClassKind { kLink = 0, kNic, kRank };
const char* FaultClassKindName(FaultClassKind k);  // "link", "nic", "rank"
std::optional<FaultClassKind> ParseFaultClassKind(std::string_view name);

// The measured inputs of one decision.
struct PolicyState {
  FaultClassKind fault_class = FaultClassKind::kLink;  // from the CCL's error / suspicion
  int world_size = 1;                                  // ranks (= GPUs) in the job before the fault
  int64_t steps_remaining = 0;  // training steps still to run (the training loop's count)
  double step_time_s = 0;       // s, fault-free step time (the loop's mean before the fault)
  // 0..1: share of the fault-free step spent in the gradient allreduce at full bandwidth
  // (the loop's timing of its allreduce / its step, before the fault).
  double comm_fraction = 0;
  // 0..1: the slowest peer's surviving bandwidth / its fault-free bandwidth, from the CCL's
  // per-peer rate estimates; 0 = no path to some peer.
  double surviving_bandwidth_fraction = 0;
  double outage_so_far_s = 0;  // s since the CCL first saw the fault (its monotonic clock)
  // s, the expected length of the whole outage from the path's flap history (mean length of
  // its past outages; a path flapping under a library's damping: FlappingOutageRemaining);
  // nullopt = permanent (no history of coming back).
  std::optional<double> expected_outage_s;
  double checkpoint_age_s = 0;  // s of work since the last checkpoint, lost on a restart
  // s, process restart + rendezvous + checkpoint load, measured at the job's last restart.
  double restart_cost_s = 0;
  double shrink_cost_s = 0;  // s, revoke + the survivors' communicator (measured or default)
  // Ranks a shrink drops (k above): 1 for a rank fault; for a link / nic fault the size of the
  // smallest set of ranks whose removal leaves no member with an affected path. 1 ..
  // max(1, world_size - 1): a shrink that would drop every rank but none is not one.
  int shrink_ranks = 1;
  // s, the expected step time of the group a shrink leaves (t_s above), estimated by the
  // caller from measured state (the compute share as before; the allreduce share from the
  // survivors' ring and the measured throughput between them); nullopt = step_time_s.
  std::optional<double> shrunk_step_time_s;
  double failover_switch_cost_s = 0;  // s of stall while traffic moves to surviving paths
  double wait_bound_s = 0;            // s, the longest the wait policy holds (configured)
};

// An estimate of shrunk_step_time_s: the step time of a group of `m` ranks that replaces one of
// `n` whose step takes `step_time_s` with `comm_fraction` of it in the allreduce. The compute
// share is unchanged (each rank keeps its batch); the allreduce share scales as a ring
// allreduce's time, (m - 1) / m of the data over the ring's slowest link, with `speedup` =
// the new ring's slowest link throughput / the old one's. One rank alone has no allreduce.
// A model: per-message latency and the algorithm a library picks for m ranks are not in it.
// REQUIRES: step_time_s > 0, comm_fraction in [0, 1], speedup > 0, 1 <= m <= n. At least 1 us.
double RingStepTimeEstimate(double step_time_s, double comm_fraction, int n, int m, double speedup);

// The expected remaining outage (s) of a path that is down now and flapping, under a library's
// flap damping: it went down `downs` >= 2 times within the flap window, the first of them
// `flapping_s` ago, and its hold-down so far ends `held_s` from now. As with an outage of
// unknown length, the flapping is expected to go on as long again as it has so far (as many
// downs again); the library then keeps the path out for the hold-down those downs earn,
// min(holddown_s x 2^(2 downs - 1), holddown_max_s). At least held_s. This is what the path's
// flap history says of the outage the job sees: the library does not use the path before the
// flapping has stopped and the hold-down has run out.
// REQUIRES: downs >= 2; the times finite and >= 0.
double FlappingOutageRemaining(int downs, double flapping_s, double held_s, double holddown_s,
                               double holddown_max_s);

// kInvalidArgument, naming the field, for: world_size < 1; steps_remaining < 0; step_time_s
// not > 0; a fraction outside [0, 1]; any time negative or not finite; a fault_class outside
// the enum; a link or nic fault with world_size < 2 (a path needs two ranks); shrink_ranks
// outside [1, max(1, world_size - 1)]; a shrunk_step_time_s not finite and > 0.
Status ValidatePolicyState(const PolicyState& s);

// Upper bound of every cost and breakdown term (GPU-seconds / seconds): ~3e10 GPU-years.
inline constexpr double kMaxLostGpuSeconds = 1e18;

struct PolicyEstimate {
  RecoveryPolicy policy = RecoveryPolicy::kFailStop;
  bool applicable = false;
  std::string why_not;  // empty iff applicable
  // Expected GPU-seconds lost over the horizon; 0 when not applicable.
  double lost_gpu_seconds = 0;
  // Breakdown (0 when not applicable):
  double stall_s = 0;      // s every rank stands still (switch, wait, restart, shrink, no path)
  double lost_work_s = 0;  // s of work redone (the checkpoint's age)
  double degraded_s = 0;   // s added by steps run at degraded bandwidth
  double capacity_loss_gpu_s = 0;  // GPU-s of work a dropped replica no longer does
  // wait only: the policy it falls back to when the expected outage exceeds the wait bound.
  std::optional<RecoveryPolicy> fallback;
};

struct PolicyDecision {
  RecoveryPolicy chosen = RecoveryPolicy::kFailStop;
  // One per policy in enum order (fail_stop, failover, wait, shrink).
  std::vector<PolicyEstimate> options;
  bool outage_outlasted_estimate = false;  // then treated as permanent
};

// The model above. There is always an applicable option (fail_stop for a rank fault, shrink
// for a link / nic one). REQUIRES: ValidatePolicyState(s).ok() (checked; aborts otherwise).
PolicyDecision Decide(const PolicyState& s);

// The events.jsonl line body described above. REQUIRES: d == Decide(s).
nlohmann::json DecisionToJson(const PolicyState& s, const PolicyDecision& d);

// The "inputs" object back into a state: kInvalidArgument naming the key for a missing,
// unknown or mistyped key or a value ValidatePolicyState rejects.
Result<PolicyState> PolicyStateFromJson(const nlohmann::json& inputs);

// Checks one decision line against the schema above, and that: inputs are valid; every
// option's costs are finite and >= 0; why_not is empty iff applicable; chosen is applicable
// and no applicable option costs less; outage_outlasted_estimate agrees with the inputs.
// kInvalidArgument naming the first violation. Never throws.
Status ValidateDecisionJson(const nlohmann::json& line);

}  // namespace faultline::policy
