// The history of a run (runner/core/history.h) from what the run recorded: each rank's logs of
// every incarnation, each rank's process status, the fault records, the restarts. Pure over
// its inputs (the logs come through a callback), so that it is unit-tested on synthetic logs
// (tests/cpp/runner/history_builder_test.cc). Also the report's "train" object.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "runner/core/history.h"
#include "runner/core/metrics.h"
#include "runner/core/scenario.h"
#include "runner/core/worker_log.h"
#include "runner/exec/launcher.h"

namespace faultline::runner {

struct HistoryInputs {
  const Scenario* scenario = nullptr;
  int ranks = 0;        // processes, by global rank
  int incarnation = 0;  // the last incarnation of the job
  int64_t t0_ns = 0;
  int64_t run_end_ns = 0;
  bool watchdog_fired = false;
  std::function<ExitStatus(int g)> exit_status;                       // the rank's last process
  std::function<Result<WorkerLog>(int g, int incarnation)> load_log;  // on the runner's clock
  std::map<int, bool> killed_by_fault;
  std::vector<FaultRecord> faults;
  std::vector<RestartRecord> restarts;
  std::string restarts_given_up;
};

struct BuiltHistory {
  History history;
  // The last rank ready of the first incarnation, and how many ranks said when they were.
  std::optional<int64_t> ranks_ready_ns;
  int ranks_ready = 0;
  // The ranks' libraries' versions (one, unless hosts run different builds), joined by ", ";
  // nullopt when no rank said one.
  std::optional<std::string> ccl_version;
  std::map<std::string, std::string> ccl_knobs;  // rank 0's (WorkerHeader::ccl_knobs)
};

BuiltHistory BuildHistory(const HistoryInputs& in);

// report.json's "train" object (the training workload): the job's useful work and rate, its
// fault-free twin, restarts, checkpoints, holds and the selector's decisions.
nlohmann::json TrainJson(const History& h, const TrainingMetrics& t, const nlohmann::json& twin);

}  // namespace faultline::runner
