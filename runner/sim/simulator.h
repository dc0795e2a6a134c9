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
//  - The job computes; after every checkpoint_interval_s of work it writes a checkpoint taking
//    checkpoint_cost_s. A restart costs restart_cost_s and loses the work since the last
//    completed checkpoint (a failure during a checkpoint loses that interval too). Failures that
//    arrive during a restart are absorbed by it.
//  - fail_stop: every failure restarts the job. failover: GPU, host and other failures restart
//    it; a network failure takes the cost of a fault of its kind drawn from the calibration
//    for the CCL (a whole measured fault: if that run survived, the job stalls for its stall_ms
//    and then runs degraded at its degraded_ratio for the outage or until the repair; if it did
//    not, the job restarts). A transient failure draws among the faults that were reverted.
//    Without a calibration entry, the config's model (survive, stall model_stall_s, ratio
//    (rails - 1) / rails) is used, and so is that ratio where a surviving run measured none;
//    the output says so. A ratio above 1 (noise) counts as 1. adaptive: where the calibration
//    has training runs of the kind under policy adaptive, the action a drawn run's selector
//    ended on, priced by the rule of the policy that takes it: a restart; failover's drawn
//    cost; a shrink: the run's stall, then the job without the failed part's host ((hosts - 1)
//    / hosts of its compute) until the part works again and the host rejoins; a wait: held for
//    the outage. Elsewhere a model, not a measurement: the cheaper of failover's drawn cost and
//    a restart, as an idealised greedy selector with exact estimates of that failure's costs
//    would choose. Either is said. A GPU or host failure restarts the job under fail_stop and
//    failover; under adaptive, where the calibration has adaptive runs that lost a rank
//    (rank_kill), a drawn run's selector decides: a shrink costs its stall and the host until
//    it is replaced, anything else a restart.
//  - A degraded network slows the communication share of a step: speed = 1 / (comm_fraction /
//    ratio + 1 - comm_fraction); overlapping losses compound (ratio = 1 - the sum of what each
//    took), a shrink multiplies the speed by the compute left, and the slowdown is charged to
//    each window's class by its share.
//  - A run's outcome stands for each of its faults (calibration.h); "hung" is priced as a
//    restart, without the watchdog's wait.
//  - The checkpoint interval is fixed (>= 1 s) or Young/Daly's first order, sqrt(2 x M x C)
//    (>= 1 s), M the policy's mean time between restarts; Daly's higher-order interval is given
//    beside it, with a note where they differ by more than 5 %. A checkpoint cost of 0 means
//    continuous, free checkpoints: nothing is lost at a restart.
//  - A failure arriving during a stall is handled when the stall ends.
//  - The loss is G x (wall time - useful work), in GPU-hours; useful work is what was computed
//    and not lost (work since the last checkpoint at the end of the horizon counts).
//
// Closed form of the fail-stop model (the unit tests hold the simulator to it): with job
// failure rate L, interval tau, checkpoint cost C and restart cost R, a segment of
// a = tau + C takes E[T] = (e^(L a) - 1) (1/L + R) on average, so the useful share of wall
// time is tau / E[T].
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
  std::vector<std::string> sources;  // "key: source" for the scalar defaults above

  // Llama 3 405B's 54-day run on 16,384 H100s (419 unexpected interruptions), its table's
  // rows summed per class with count and share as printed; assumptions named as such.
  static SimConfig Defaults();
  // Overrides from a YAML config file's text; `name` names it in errors. Unknown keys and bad
  // values are kInvalidArgument with line:column.
  Status ApplyYaml(const std::string& text, const std::string& name);
  nlohmann::json ToJson() const;  // every input with its source
  int64_t Hosts() const;
  double Units(FaultClass c) const;
  double JobRatePerSecond() const;  // every class, scaled
};

struct Interval {
  double mean = 0;
  double lo = 0;  // 95 % confidence interval of the mean over seeds (normal approximation)
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
};

struct ScaleResult {
  int64_t gpus = 0;
  int64_t hosts = 0;
  double failures_per_day = 0;
  double mtbf_h = 0;  // the job's mean time between failures
  std::vector<PolicyResult> policies;  // in Policy order
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
