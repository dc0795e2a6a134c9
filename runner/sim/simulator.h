// The GPU-hour simulator (`faultline simulate`): one data-parallel training job of G GPUs over
// D days of wall-clock time, failures arriving per component class, priced under each recovery
// policy. Pure functions of their inputs and seed; thread-safe.
//
// The model, every term of which the output states:
//  - Failures of class c arrive as a Poisson process of rate rate_c x units_c x rate_scale over
//    wall-clock time (units: GPUs, hosts = ceil(G / gpus_per_host), NIC ports and links =
//    hosts x rails_per_host, other = GPUs). A network failure (nic, network) is transient with
//    probability transient_fraction (an outage of exponential length, mean transient_outage_s)
//    or else permanent (the part is repaired repair_s later, or at the next restart).
//  - Transfer rule, rails: a network failure strikes one rail of its host, uniformly. The CCL
//    uses RailsUsed() of the rails_per_host rails (SimConfig::RailsUsed says which rule gave
//    the number); a failure of a rail it never uses costs it nothing under every policy. So a
//    single-rail library on an R-rail host is hit by 1/R of NIC and link failures.
//  - The job computes; after every checkpoint_interval_s of work it writes a checkpoint taking
//    checkpoint_cost_s. A restart costs restart_cost_s and loses the work since the last
//    completed checkpoint (a failure during a checkpoint loses that interval too). A failure
//    that arrives during a restart (on a rail the CCL uses) starts the restart over (Daly's
//    complete model: the rendezvous of the restart fails with it).
//  - fail_stop: every failure restarts the job. failover: GPU, host and other failures restart
//    it; a network failure takes the cost of a fault of its kind drawn from the calibration
//    for the CCL (a whole measured fault: if that run survived, the job stalls for its stall_ms
//    and then runs degraded at its degraded_ratio for the outage or until the repair; if it did
//    not, the job restarts). A transient failure draws among the faults that were reverted.
//    Without a calibration entry, the config's model (survive, stall model_stall_s, ratio
//    (rails - 1) / rails) is used, and so is that ratio where a surviving run measured none;
//    the output says so. A ratio above 1 (noise) counts as 1. A drawn run that survived
//    without a measured stall is not priced as no stall: the policy's figures are unpriced
//    (null, with the reason).
//  - adaptive: at each failure the selector's cost model (runner/policy/cost_model.h, Decide)
//    chooses, evaluated at the simulated time with what the job knows then: fault class
//    (gpu, host: rank; nic: nic; network: link), world size = G ranks, the job's remaining
//    horizon as steps_remaining x step_time_s (step_time_s = 1 s: with t_s = t the model's
//    costs depend on N and t only through N t), comm_fraction, the drawn failover run's
//    ratio as the surviving bandwidth (0 where that run did not survive, or for a lost rank),
//    the work since the last checkpoint, restart_cost_s, the drawn failover stall as the
//    switch cost, wait_bound_s, and a shrink of shrink_ranks = gpus_per_host ranks (a host,
//    as the shrink is priced) costing the stall of a drawn adaptive run of the class's kinds
//    that ended on shrink. What it expects of the outage is selector_outage: "unknown"
//    (expected_outage_s absent, as for a live selector without a flap history: permanent),
//    "mean" (every network failure's outage expected to be transient_outage_s long, as a
//    history of past outages would say; the selector cannot tell a permanent failure from a
//    transient one) or "exact" (an oracle: a transient failure's true outage, a permanent
//    one's absent). Where the calibration has no such shrink run, shrink is not offered (the CCL has
//    not been measured shrinking): the cheapest other applicable option is taken. The chosen
//    action is priced by the rule of the policy that takes it:
//      fail_stop: a restart;  failover: failover's drawn cost;
//      shrink: the drawn shrink stall, then the job without one host ((G - k) / G of its
//        compute, k = shrink_ranks) until its next restart (a later failure that restarts it;
//        no planned restart is modelled, so at worst until the horizon). Where the CCL can
//        grow its group (SimConfig::GrowCost: the can_grow trait and a grow_cost_s), the
//        shrink instead ends when the part works again (repair, or the outage), at the cost
//        of that stall;
//      wait: held for min(outage, wait_bound_s); an outage longer than the bound then takes the
//        fallback the cost model named, or where it named none (it expected the outage within
//        the bound) the cheapest other option of the same decision, priced by its rule from
//        the end of the wait.
//  - A degraded network slows the communication share of a step: speed = 1 / (comm_fraction /
//    ratio + 1 - comm_fraction); overlapping losses compound (ratio = 1 - the sum of what each
//    took), a shrink multiplies the speed by the compute left, and the slowdown is charged to
//    each window's class by its share.
//  - A run's outcome stands for each of its faults (calibration.h); "hung" is priced as a
//    restart, without the watchdog's wait.
//  - The checkpoint interval is fixed (>= 1 s) or Young/Daly's first order, sqrt(2 x M x C)
//    (>= 1 s), M the policy's mean time between restarts (adaptive: the restarts of a pilot run
//    over the first seed's failures); Daly's higher-order interval is given beside it, with a
//    note where they differ by more than 5 %. A checkpoint cost of 0 means continuous, free
//    checkpoints: nothing is lost at a restart.
//  - A failure arriving during a stall is handled when the stall ends.
//  - The loss is G x (wall time - useful work), in GPU-hours; useful work is what was computed
//    and not lost (work since the last checkpoint at the end of the horizon counts).
//  - Intervals: 95 % of the mean, from the seeds (normal approximation) and, with a
//    calibration, from the calibration's own sampling: `bootstrap` resamples of every entry's
//    samples (with replacement), each run over the same seeds; the variance of their means is
//    added to the seeds'. A difference between two policies is paired: the same failures and
//    the same resample for both, the interval from the per-seed differences the same way.
//
// Closed form of the fail-stop model (Daly 2006, complete form; the unit tests hold the
// simulator to it): with job failure rate L, interval tau, checkpoint cost C and restart cost
// R, a segment of a = tau + C takes E[T] = e^(L R) (e^(L a) - 1) / L on average (restarts
// interrupted by failures included), so the useful share of wall time is tau / E[T].
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "runner/sim/calibration.h"

namespace faultline::sim {

enum class FaultClass { kGpu = 0, kHost, kNic, kNetwork, kOther };
inline constexpr int kNumClasses = 5;
const char* FaultClassName(FaultClass c);  // "gpu", "host", "nic", "network", "other"

struct ClassModel {
  FaultClass cls = FaultClass::kGpu;
  double rate_per_unit_hour = 0;  // failures per unit per hour
  std::string unit;               // "GPU", "host", "NIC port", "link"
  std::string source;             // where the rate comes from, with the rows it sums
  double transient_fraction = 0;  // network classes: share that heals by itself
  std::string transient_source;
  // Calibration kinds standing for a transient / permanent failure of this class. A class
  // without a transient kind fails stop under fail_stop and failover; its permanent kind, where
  // set (gpu, host: rank_kill), is the runs whose adaptive selector prices it under adaptive.
  std::string transient_kind;
  std::string permanent_kind;
};

enum class Policy { kFailStop = 0, kFailover, kAdaptive };
inline constexpr int kNumPolicies = 3;
const char* PolicyName(Policy p);  // "fail_stop", "failover", "adaptive"

struct SimConfig {
  int64_t gpus = 1024;
  int gpus_per_host = 8;
  int rails_per_host = 8;
  double days = 365;
  double rate_scale = 1;  // multiplies every rate; 0: no failures
  std::vector<ClassModel> classes;
  std::optional<double> checkpoint_interval_s;  // work between checkpoints; absent: Young/Daly
  double checkpoint_cost_s = 60;
  double restart_cost_s = 600;
  double transient_outage_s = 60;
  double repair_s = 4 * 3600.0;
  double comm_fraction = 0.3;
  double model_stall_s = 1;  // failover's stall where the calibration has no entry
  std::string ccl = "ftccl";  // whose calibration prices failover
  // Rails of a host the CCL uses; absent: RailsUsed's rule.
  std::optional<int> ccl_rails;
  // s a shrunk job stalls to take a repaired host back (grow). Absent: no grow has been
  // measured, and a shrunk job runs without the host until its next restart.
  std::optional<double> grow_cost_s;
  double wait_bound_s = 5;  // the longest the wait option holds the job
  // What the selector expects of an outage: "unknown", "mean" or "exact" (simulator.h, top).
  std::string selector_outage = "unknown";
  // Resamples of the calibration for its share of the intervals; 0: seeds only.
  int bootstrap = 20;
  std::vector<std::string> sources;  // "key: source" for the scalar defaults above

  // Llama 3 405B's 54-day run on 16,384 H100s (419 unexpected interruptions), its table's
  // rows summed per class with count and share as printed; assumptions named as such.
  static SimConfig Defaults();
  // Overrides from a YAML config file's text; `name` names it in errors. Unknown keys and bad
  // values are kInvalidArgument with line:column.
  Status ApplyYaml(const std::string& text, const std::string& name);
  nlohmann::json ToJson() const;  // every input with its source
  int64_t Hosts() const;
  // Rails of a host the CCL uses: ccl_rails where set (at most rails_per_host); else every rail
  // for a library that stripes over all (ftccl, nccl), one for the others. `why` (optional)
  // gets the rule's text.
  int RailsUsed(std::string* why = nullptr) const;
  // The grow cost a shrink is priced with: grow_cost_s where the CCL can grow its group (the
  // `can_grow` trait); absent otherwise, and a shrunk job then runs without the host until its
  // next restart.
  std::optional<double> GrowCost() const;
  double Units(FaultClass c) const;
  double JobRatePerSecond() const;  // every class, scaled
};

struct Interval {
  double mean = 0;
  double lo = 0;  // 95 % interval of the mean: seeds and calibration (simulator.h, top)
  double hi = 0;
  nlohmann::json ToJson() const;  // {"mean", "ci95": [lo, hi]}
};

struct PolicyResult {
  Policy policy = Policy::kFailStop;
  double checkpoint_interval_s = 0;  // infinite: no checkpoints (no failures)
  std::optional<double> daly_interval_s;  // Daly's higher-order interval (Young/Daly runs)
  Interval gpu_hours_lost;
  Interval effective_ratio;  // useful work / wall time
  double restarts_mean = 0;
  double failures_mean = 0;
  // Mean GPU-hours lost per cause: each class (its restarts' time and lost work, its stalls,
  // its degraded running) and "checkpoint". They sum to gpu_hours_lost.
  std::vector<std::pair<std::string, double>> breakdown;
  std::vector<std::string> notes;  // what was modelled rather than measured
  // Non-empty: a cost it needed was not measured; the figures above mean nothing.
  std::string unpriced;
  // adaptive: mean count per run of each action the cost model chose ("failover", ...).
  std::vector<std::pair<std::string, double>> actions;
};

// policy `a` minus policy `b`, paired (same failures, same calibration resample).
struct PolicyDifference {
  Policy a = Policy::kFailover;
  Policy b = Policy::kFailStop;
  Interval gpu_hours_lost;
  std::string unpriced;  // either side's
};

struct ScaleResult {
  int64_t gpus = 0;
  int64_t hosts = 0;
  double failures_per_day = 0;
  double mtbf_h = 0;  // the job's mean time between failures
  std::vector<PolicyResult> policies;  // in Policy order
  // failover - fail_stop, adaptive - fail_stop, adaptive - failover.
  std::vector<PolicyDifference> differences;
  int bootstrap = 0;  // calibration resamples behind the intervals (0: seeds only)
};

// kInvalidArgument when the inputs cannot be simulated: days or rate-scale not finite, a
// checkpoint cost in (0, 1 s), an interval under 1 s, or more failures per run than it takes.
Status CheckSimulable(const SimConfig& config, int seeds);

// Simulates `seeds` independent runs of the job at config.gpus under every policy (the same
// failure arrivals for each policy of a seed). `calibration` may be null (the model is used).
// REQUIRES: CheckSimulable(config, seeds) is ok.
ScaleResult Simulate(const SimConfig& config, const Calibration* calibration, int seeds,
                     uint64_t base_seed = 1);

// Analytic fail-stop useful share for the closed form above.
double FailStopUsefulShare(double rate_per_s, double tau_s, double checkpoint_s,
                           double restart_s);

}  // namespace faultline::sim
