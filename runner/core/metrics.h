// Metrics: pure functions from a recorded History to the metric keys of the report. No clock,
// no I/O; the same history always gives the same numbers. A metric that does not apply or
// cannot be measured is std::nullopt (null in the report), never a made-up value.
//
// Definitions (all from the history; see scenarios/README.md, "Metrics"):
//  - A collective i is complete when every rank that was not killed recorded it and all of
//    its records are ok. Its interval is [min start, max end] over ranks, its busbw is
//    bytes*8/duration (Gbit/s) times the nccl-tests factor of the op.
//  - Measured collectives: complete, index >= warm-up count, start >= run start + warm-up.
//  - baseline_busbw_gbps: median busbw of the measured collectives that end before the first
//    fault is applied (all of them in a fault-free run); null when there are none.
//  - Per fault, with `a` its applied time and `e` its reverted time (the run end for permanent
//    and one-shot faults):
//    stall_ms: the longest gap between consecutive completions (run start and run end count
//      as completions) that overlaps [a, e], minus the baseline median collective time,
//      floored at 0. Null without a baseline.
//    detection_ms: a -> the first path_down event at or after a (on the fault's rail for link
//      faults). failover_latency_ms: a -> the first resumed event at or after a (on another
//      rail for link faults). A fault on one rank's port (nics: per_rank) only counts events
//      of paths that end at that rank: logged by it, or by a peer about its path to it. Both null
//      when the CCL emits no events or none happened.
//    recovery_ms: a -> the start of the first measured collective, starting at or after a,
//      from which, for every collective up to the first one ending at or after start + sustain,
//      the rolling busbw there is >= pct% of the expected level (baseline x capacity left by
//      permanent faults). Rolling busbw: bytes over the collectives' own times (as each
//      collective's busbw, without the gaps between them), over the collectives from that one
//      on that together
//      span at least kRollingWindowNs, taken back from the window's last collective where the
//      rest of the window is shorter, and never outside the window.
//      Null without a baseline, when the capacity left is unknown, or when it never happens.
//    degraded_ratio (permanent faults only): median busbw of the measured collectives that
//      start in the second half of [a, run end], over the baseline.
//    goodput_loss_pct: 100 x (1 - sum(busbw_i x overlap of collective i with [a, e]) /
//      (baseline x (e - a))); not clamped.
//  - Overall: the worst over faults (max; min for degraded_ratio), ignoring nulls, except
//    recovery_ms, which is null when any applied fault did not recover.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runner/core/history.h"
#include "runner/core/scenario.h"

namespace faultline::runner {

// The span of the rolling busbw that recovery_ms judges (see above).
inline constexpr int64_t kRollingWindowNs = 100'000'000;

// Facts about the scenario that the metrics need beside the history.
struct MetricsOptions {
  int64_t warmup_ns = 0;
  int64_t warmup_iters = 0;
  double recovery_pct = 90;
  int64_t sustain_ns = 500'000'000;
  // A clean abort: every surviving rank returned an error within this bound of the first
  // fault (or of the first error when no fault was applied).
  int64_t abort_bound_ns = 10'000'000'000;
  struct FaultModel {
    std::string id;
    bool permanent = false;
    // Fraction of the fault-free capacity left while the fault holds (permanent faults up to
    // and including this one); nullopt when the model cannot say (loss, delay, rank faults).
    std::optional<double> capacity = 1.0;
    // A link fault on one rank's NIC port (nics: per_rank): that rank's global index; its
    // path events are the ones on the port's rail of that rank or of its peers towards it.
    int port_rank = -1;
  };
  std::vector<FaultModel> faults;  // by id; a fault without a model counts as transient
};

// Derives the options from a validated scenario: warm-up, the recovery expectation's pct and
// sustain (90% / 500 ms when absent) and the capacity model of every fault.
MetricsOptions MetricsOptionsFor(const Scenario& scenario);

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
std::optional<double> CapacityLeft(const Topology& topology,
                                   const std::vector<const FaultSpec*>& faults);

struct MetricValues {
  std::optional<double> baseline_busbw_gbps;
  std::optional<double> stall_ms;
  std::optional<double> detection_ms;
  std::optional<double> failover_latency_ms;
  std::optional<double> recovery_ms;
  std::optional<double> degraded_ratio;
  std::optional<double> goodput_loss_pct;
  // The metric keys of DESIGN.md, nulls included.
  nlohmann::json ToJson() const;
};

enum class Outcome { kSurvived, kAbortedClean, kHung, kCrashed };
const char* OutcomeName(Outcome o);  // "survived", "aborted_clean", "hung", "crashed"

struct FaultMetrics {
  std::string id;
  MetricValues values;
};

struct RunMetrics {
  MetricValues overall;
  std::vector<FaultMetrics> per_fault;  // in the order of History::faults
  Outcome outcome = Outcome::kCrashed;
  std::string outcome_reason;  // one line saying why
  int64_t wrong_results = 0;   // distinct collectives with a wrong output on any rank
  int64_t completed_ops = 0;   // complete collectives, warm-up included
};

// A complete collective, for plots and tests.
struct CompletedOp {
  int64_t index = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t bytes = 0;
  double busbw_gbps = 0;
};
std::vector<CompletedOp> CompleteOps(const History& history);

// The end of every metric window: the last rank's last collective (its end, ok or not), never
// the library's teardown after it; the runner's run_end_ns when no collective was recorded.
int64_t WindowEndNs(const History& history);

RunMetrics ComputeMetrics(const History& history, const MetricsOptions& options);

}  // namespace faultline::runner
