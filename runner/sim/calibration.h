// Calibration: what `faultline run` measured about each fault, per CCL and fault kind, as the
// simulator's cost samples (`faultline calibrate RUN_DIR...`). Pure functions of report.json
// objects; thread-safe.
//
// Every applied fault of a report is one sample of its (ccl, kind, policy): the recovery
// policy the run was under (report.json `policy`; "failover" where a report has none) keeps
// apart what the same fault cost under different policies (a fail_stop training run's
// restart is not failover's cost). A sample holds whether the run survived
// it (the report's outcome, and no wrong result; a run with several faults gives its outcome
// to each of them), its stall, full convergence, recovery and degraded ratio (nulls
// kept as absent), and the report it came from. Samples keep a fault's figures together, so
// that the simulator draws whole faults, not independent marginals.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace faultline::sim {

inline constexpr char kCalibrationSchema[] = "faultline.calibration/v1";

struct FaultSample {
  bool survived = false;                    // the run's outcome was "survived"
  std::string outcome;                      // the run's outcome as written
  std::optional<double> stall_ms;           // longest gap in completions around the fault
  std::optional<double> convergence_ms;     // full convergence (failover_latency_ms)
  std::optional<double> recovery_ms;        // fault -> throughput back to the expected level
  std::optional<double> degraded_ratio;     // throughput while degraded / baseline
  std::optional<double> fault_for_s;        // how long the fault held (reverted - applied)
  std::string source;                       // the report it came from
  // The test bed's shaped rail speed (report.json environment.knobs.rail_gbps); absent where
  // the report has none (an inventory's rails, or an older report).
  std::optional<double> rail_gbps;
  // Training-loop runs (report.json `train`): the run's goodput_ratio, its restarts and their
  // mean measured cost, and the selector's choices in order (adaptive).
  std::optional<double> goodput_ratio;
  int restarts = 0;
  std::optional<double> restart_cost_ms;
  std::vector<std::string> decisions;
};

struct KindCalibration {
  std::string ccl;
  std::string kind;  // the fault kind ("link_down", "port_drop", ...)
  std::string policy = "failover";  // the recovery policy of the runs
  std::vector<FaultSample> samples;
  int Survived() const;
};

struct Calibration {
  std::vector<KindCalibration> entries;  // sorted by (ccl, kind)
  std::vector<std::string> sources;      // every report read, in order
  std::vector<std::string> skipped;      // "path: why" for reports that gave nothing

  // The entry of (ccl, kind, policy); null when none.
  const KindCalibration* Find(const std::string& ccl, const std::string& kind,
                              const std::string& policy = "failover") const;
  nlohmann::json ToJson() const;
  // kInvalidArgument naming what is wrong.
  static Result<Calibration> FromJson(const nlohmann::json& j);
};

// Adds the applied faults of one report.json object. A report of another schema than
// faultline.report/v2, or one that is not a report, is kInvalidArgument (the caller lists it
// as skipped); a fault-free or skipped run adds nothing.
Status AddReport(const nlohmann::json& report, const std::string& source, Calibration* cal);

}  // namespace faultline::sim
