// Metrics: pure functions from a recorded History to the metric keys of the report. No clock,
// no I/O; the same history always gives the same numbers. A metric that does not apply or
// cannot be measured is std::nullopt (null in the report), never a made-up value. One rule
// for every CCL: the inputs are what every library exposes (each rank's collective times,
// taken around the library call only, and its end), plus path events where a library emits
// them; scenarios/README.md "Metrics" states every definition in one place.
//
// Definitions:
//  - A collective i is complete when every rank that was not killed recorded it and all of
//    its records are ok. Its interval is [min start, max end] over ranks, its busbw is
//    bytes*8/duration (Gbit/s) times the nccl-tests factor of the op.
//  - The window ends at WindowEndNs: the last rank's last collective, never the library's
//    teardown after it. Measured collectives: complete, index >= warm-up count, start >= run
//    start + warm-up.
//  - Cycle of complete collective i: from the previous complete collective's end to its end
//    (the first collective has none), so it holds the time between collectives too (result
//    checks, the timed stop agreement): cycle busbw = bytes*8/cycle x factor.
//  - baseline_busbw_gbps: median busbw of the measured collectives that end before the first
//    fault is applied (all of them in a fault-free run); null when there are none.
//  - Per fault, with `a` its applied time and `e` its reverted time (the window end for
//    permanent and one-shot faults):
//    stall_ms: the longest gap between consecutive completions (run start and window end
//      count as completions) that overlaps [a, e], minus the baseline median collective time,
//      floored at 0. In a fault-free run (overall only): the longest gap at all from the first
//      measured collective's start to the window end, by the same rule. Where no collective
//      of any rank ended (completed or failed) after a, the gap runs to the first error a
//      rank reported after a, else to the run's end: a hang until the watchdog stalls to the
//      end, it is not 0. Null without a baseline.
//    Affected flows (RFC 6412 "affected traffic"): the flows (rank, peer, path) whose path
//      crosses the fault's target (FlowCrosses) and which the rank reported down at or after
//      a and by e. A flow carries data again at its rank's first `resumed` event for that peer
//      after its down. A flow that had not resumed by e is left out as idle when a collective
//      started after its down and completed by e without it (the library did not need it while
//      the fault held); otherwise it counts, and never resuming means never converging.
//      The exclusion is the path-event form of what progress_ms does for every library: a
//      peer the library stopped sending to does not hold convergence back. all_flows_ms is
//      the same figure with no flow excluded, reported beside it.
//    detection_ms: a -> the first down of a flow crossing the target (path events only).
//    failover_first_ms: a -> the first counted flow carries data again (path events only).
//    failover_latency_ms: full convergence, a -> the last counted flow carries data again.
//      Where the library emits no path events, or reported no crossing flow down, it comes
//      from collective progress instead (progress_ms). Null, and never_converged, when a
//      counted flow never resumed.
//    progress_ms (every CCL, the library-neutral figure): a -> the time every affected rank
//      (the ranks on the target; all survivors when none survives there) has completed a
//      collective it started at or after a. An upper bound, within one collective's time.
//    recovery_ms: a -> the start of the first measured collective, starting at or after a,
//      from which, for every collective up to the first one ending at or after start + sustain,
//      the rolling busbw there is >= pct% of the expected level (the baseline rate x the share
//      of the capacity, over the rails the library actually uses, left by permanent faults;
//      baseline rate: the baseline collectives' bytes over their own times, the rolling busbw's
//      own estimator, not the median, which sits above it when collective times spread). Rolling
//      busbw: bytes over the collectives' own times, over the collectives from that one on
//      that together span at least kRollingWindowNs and number at least kRollingMinOps (taken
//      back from the window's last one
//      where the rest is shorter, never outside the window). Null without a baseline, when the
//      capacity left is unknown, or when it never happens.
//    degraded_ratio (permanent faults only): median busbw of the measured collectives that
//      start in the second half of [a, window end], over the baseline.
//    goodput_loss_pct: 100 x (1 - delivered / (baseline cycle busbw x (e - a))), delivered =
//      sum over complete collectives of cycle busbw x the overlap of its cycle with [a, e];
//      baseline cycle busbw: delivered over elapsed time across the baseline collectives'
//      cycles. In a fault-free run (overall only) as a fault that changes nothing would read
//      it at mid-run: baseline from the first half of the measured window, loss over the
//      second half; it reads the metric's own noise. Not clamped.
//  - Overall: the worst over the applied faults (max; min for degraded_ratio over the permanent
//    ones), and null when any of those faults' own figure is null: a worst case that leaves
//    out an unmeasured fault is not the worst case. recovery_ms and failover_latency_ms are
//    null when an applied fault never got there. In a fault-free run, stall_ms and
//    goodput_loss_pct read the run's noise (above) and the rest are null.
//  - Outcome: hung when the runner's watchdog fired or a rank's own watchdog ended it (a
//    library call that never returned is a hang, never a clean abort); aborted_clean when
//    every surviving rank returned an error within the abort bound of the fault.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runner/core/history.h"
#include "runner/core/scenario.h"

namespace faultline::runner {

// The span of the rolling busbw that recovery_ms judges (see above), and the fewest collectives
// it averages: where a collective takes a third of the span, three collectives' jitter (one
// slow one is -10 %) would otherwise decide when a job counts as recovered.
inline constexpr int64_t kRollingWindowNs = 100'000'000;
inline constexpr size_t kRollingMinOps = 6;

// Facts about the scenario that the metrics need beside the history.
struct MetricsOptions {
  int64_t warmup_ns = 0;
  int64_t warmup_iters = 0;
  double recovery_pct = 90;
  int64_t sustain_ns = 500'000'000;
  // A clean abort: every surviving rank returned an error within this bound of the first
  // fault (or of the first error when no fault was applied).
  int64_t abort_bound_ns = 10'000'000'000;
  bool check = true;  // results are checked; false: wrong_results is null
  Topology topology;  // hosts and ranks of the flows
  struct FaultModel {
    std::string id;
    bool permanent = false;
    // Fraction of the fault-free capacity left while the fault holds (permanent faults up to
    // and including this one); nullopt when the model cannot say (loss, delay, rank faults).
    std::optional<double> capacity = 1.0;
    // A link fault on one rank's NIC port (nics: per_rank): that rank's global index; its
    // path events are the ones on the port's rail of that rank or of its peers towards it.
    int port_rank = -1;
    // A fault on one rank's connection to one peer (qp_error, conn_corrupt): that peer's
    // global rank; -1 otherwise.
    int peer = -1;
  };
  std::vector<FaultModel> faults;  // by id; a fault without a model counts as transient
};

// Derives the options from a validated scenario: warm-up, the recovery expectation's pct and
// sustain (90% / 500 ms when absent), the abort bound (expect.abort_within) and the capacity
// model of every fault over `rails_used`, the rails the library carries data on (absent: not
// known, and then a fault that takes capacity leaves an unknown share).
MetricsOptions MetricsOptionsFor(const Scenario& scenario,
                                 const std::optional<std::vector<int>>& rails_used);

// Fraction of the rail capacity left by a set of faults, as the weakest host's share of its
// fault-free capacity. Each kind's descriptor says what it leaves (runner/faults/
// fault_descriptor.h CapacityEffect): a rail taken down (link_down, port_drop, blackhole)
// counts 0, a bandwidth fault min(rate, rail rate) / rail rate. nullopt when a fault's effect
// on capacity is unknown (loss, delay, jitter, corrupt, reorder, rank faults). Link flaps and
// one-shot faults are ignored.
// With per-rank NICs (topology.nics: per_rank) the unit is a port instead of a rail: a host's
// share is the sum over its ranks_per_host x rails ports over their count, since a rank that
// lost its own ports relays through a neighbour's on the same host and the host keeps the
// capacity of the ports it has left.
// Only ports on `rails_used` count: a fault on a rail the library does not use leaves its
// capacity whole. `rails_used` absent: any fault that takes capacity gives nullopt.
std::optional<double> CapacityLeft(const Topology& topology,
                                   const std::vector<const FaultSpec*>& faults,
                                   const std::optional<std::vector<int>>& rails_used);

struct MetricValues {
  std::optional<double> baseline_busbw_gbps;
  std::optional<double> stall_ms;
  std::optional<double> detection_ms;
  std::optional<double> failover_first_ms;
  std::optional<double> failover_latency_ms;
  std::optional<double> recovery_ms;
  std::optional<double> degraded_ratio;
  std::optional<double> goodput_loss_pct;
  // The metric keys of DESIGN.md, nulls included.
  nlohmann::json ToJson() const;
};

enum class Outcome { kSurvived, kAbortedClean, kHung, kCrashed };
const char* OutcomeName(Outcome o);  // "survived", "aborted_clean", "hung", "crashed"

// One affected flow of a fault: `rank`'s path `path` to `peer`.
struct Flow {
  int rank = 0;
  int peer = 0;
  int path = 0;
  int64_t down_ns = 0;
  std::optional<int64_t> resumed_ns;  // absent: never carried data again in the window
  bool counted = true;                // false: idle while down (see above)
};

struct FaultMetrics {
  std::string id;
  MetricValues values;
  std::optional<double> progress_ms;
  // Path events only: full convergence with no flow left out as idle, a -> the last flow
  // reported down carries data again; null when one never did within the window, or when no
  // crossing flow was reported down. Shown beside failover_latency_ms so that a reader sees
  // what the idle exclusion changed.
  std::optional<double> all_flows_ms;
  // "path_events" or "collective_progress": where failover_latency_ms came from; "" when the
  // fault was not applied.
  std::string convergence;
  bool never_converged = false;  // applied, and full convergence never happened
  std::vector<Flow> flows;       // reported down, by down time
};

// Whether flow (rank -> peer on `path`) crosses the target of `fault` (a FaultRecord with its
// model): a link or socket fault crosses the flows on its rail with an end on its host (on its
// rank's port with per-rank NICs); a rank fault every flow of that rank; a fault on one
// connection (model.peer) only the flows between that rank and that peer.
bool FlowCrosses(const FaultRecord& fault, const MetricsOptions::FaultModel* model,
                 const Topology& topology, int rank, int peer, int path);

struct RunMetrics {
  MetricValues overall;
  std::vector<FaultMetrics> per_fault;  // in the order of History::faults
  Outcome outcome = Outcome::kCrashed;
  std::string outcome_reason;  // one line saying why
  // Distinct collectives with a wrong output on any rank; absent when results are not checked.
  std::optional<int64_t> wrong_results;
  int64_t completed_ops = 0;  // complete collectives, warm-up included
  // The first measured collective's start: where the baseline window begins; absent when no
  // collective was measured.
  std::optional<int64_t> measured_from_ns;
  // The baseline's median collective time, which stall_ms subtracts from a gap; absent where
  // there is no baseline (report.json window.baseline_op_ms).
  std::optional<double> baseline_op_ms;
};

// A complete collective, for plots and tests.
struct CompletedOp {
  int64_t index = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t bytes = 0;
  double busbw_gbps = 0;
  // busbw / algbw of the group it ran in: the world's, or a shrunk group's (policy shrink).
  double factor = 0;
};
// Collectives that every rank of their group completed: the world, less the ranks killed by
// the scenario, less the ranks a shrink left out before it (policy shrink).
std::vector<CompletedOp> CompleteOps(const History& history);

// The end of every metric window: the last rank's last collective (its end, ok or not), never
// the library's teardown after it; the runner's run_end_ns when no collective was recorded.
int64_t WindowEndNs(const History& history);

RunMetrics ComputeMetrics(const History& history, const MetricsOptions& options);

// A training workload's own figures (torch_ddp): from its steps (the ops) and the ranks'
// result lines (History::results).
struct TrainingMetrics {
  int64_t steps_completed = 0;  // steps past the warm-up that completed on every rank
  // Those steps over [the first one's start, the last one's end]; absent with fewer than one.
  std::optional<double> steps_per_s;
  int ranks_reported = 0;  // ranks that wrote a result (finished training)
  // The hash every reporting rank gave; absent when none reported or they differ.
  std::optional<std::string> param_sha256;
  bool param_sha256_agree = true;  // false: two ranks ended with different parameters
  std::optional<double> final_loss;  // mean of the reporting ranks' last-step losses
  // faultline-worker's train workload (absent for torch_ddp, whose script does not say):
  // Samples that count toward training: those in the final parameters' lineage when the job
  // finished (every reporting rank's count; the least if they differ), else those in the
  // newest checkpoint every rank of its group wrote (what a resubmitted job would keep); 0
  // when neither.
  std::optional<uint64_t> useful_samples;
  // From the workload's time zero to the end of the job's last step (WindowEndNs): restarts,
  // holds and stalls included; for a job that did not finish, to its last rank's end plus
  // resubmission_s.
  std::optional<double> job_time_s;
  // A job that did not finish has to be resubmitted to go on from its checkpoint: it is
  // charged the restart this run measured (RestartRecord::cost_ns, their mean). Absent for a
  // finished job, and for an unfinished one without a measured restart, whose job_time_s and
  // samples_per_s are then absent too (its rate is not comparable with a finished job's).
  std::optional<double> resubmission_s;
  bool finished = false;  // train: every reporting rank completed its steps
  std::optional<double> samples_per_s;  // useful_samples / job_time_s
  // samples_per_s / the fault-free twin's samples_per_s (RunOptions::twin_report); set by the
  // runner, absent when there was no twin.
  std::optional<double> goodput_ratio;
  // {"steps_completed", "steps_per_s", "param_sha256", "param_sha256_agree",
  //  "ranks_reported", "final_loss", "goodput_ratio"}; nulls where absent.
  nlohmann::json ToJson() const;
};
// `train`: the workload is faultline-worker's train (its samples and job time are computed).
TrainingMetrics ComputeTraining(const History& history, int64_t warmup_iters, bool train = false);

}  // namespace faultline::runner
