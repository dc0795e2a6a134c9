// The supervisor of a training job: when the job stops for a restart it kills what is left of
// it and starts every rank again in place, from the last checkpoint (as an elastic launcher
// does). Every policy's job has one, as a production job has one whatever its library does on
// a fault: the policy decides what the ranks do about a fault, the supervisor restarts a job
// that lost a rank it cannot go on without.
//   - A rank that asked for it (exit code kWorkerExitRestart: fail_stop, adaptive's choice)
//     stops the job under any policy.
//   - Under a policy that has no way on without a lost rank (fail_stop, failover, wait), any
//     rank that stops before the job's end stops the job.
//   - Under one that goes on without it (shrink, adaptive: ContinuesWithoutLostRanks), the job
//     stops when no rank is left running and none finished.
// At most kMaxRestarts restarts; after kMaxFruitlessRestarts in a row whose ranks never
// reached a step the fault is in the way of the job's start and the failure stands
// (given_up() says why).
//
// Not thread-safe: the run driver's thread calls Check between its waits.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "runner/core/history.h"
#include "runner/core/scenario.h"
#include "runner/core/worker_log.h"
#include "runner/exec/launcher.h"

namespace faultline::runner {

class RestartSupervisor final {
 public:
  static constexpr size_t kMaxRestarts = 8;  // then the job's failure stands
  static constexpr int kMaxFruitlessRestarts = 2;
  // The run driver calls Check at least this often while the ranks run (a stopped job is seen
  // at most this late).
  static constexpr int64_t kCheckPeriodNs = 50'000'000;

  // The launch specs of `incarnation`, told what the last restart cost (nullopt before one).
  using SpecsFn =
      std::function<std::vector<LaunchSpec>(int incarnation, std::optional<int64_t> last_cost_ms)>;
  // Rank g's log of `incarnation`, its times on the runner's clock.
  using LogFn = std::function<Result<WorkerLog>(int g, int incarnation)>;

  // `launcher`, `stop` and `harness_errors` outlive the supervisor. `stop`: a stop was asked
  // for (no more restarts).
  RestartSupervisor(const Scenario& sc, Launcher* launcher, SpecsFn specs, LogFn log,
                    const std::atomic<bool>* stop, std::vector<std::string>* harness_errors);
  RestartSupervisor(const RestartSupervisor&) = delete;
  RestartSupervisor& operator=(const RestartSupervisor&) = delete;

  // True when the scenario's job is restarted by the runner at all: every training job.
  static bool Restartable(const Scenario& sc);
  // True for the policies whose ranks go on in a smaller group after losing one.
  static bool ContinuesWithoutLostRanks(RecoveryPolicyName p);

  // The handles of the first incarnation, started at `start_ns`.
  void Started(std::vector<int> handles, int64_t start_ns);
  // Restarts the job when it stopped for it (see above); otherwise does nothing.
  void Check();

  const std::vector<int>& handles() const { return handles_; }
  int incarnation() const { return incarnation_; }
  int64_t incarnation_start_ns() const { return incarnation_start_ns_; }
  std::optional<int64_t> last_restart_cost_ms() const { return last_restart_cost_ms_; }
  const std::vector<RestartRecord>& restarts() const { return restarts_; }
  const std::string& given_up() const { return given_up_; }

 private:
  const Scenario& sc_;
  Launcher* launcher_;
  SpecsFn specs_;
  LogFn log_;
  const std::atomic<bool>* stop_;
  std::vector<std::string>* harness_errors_;
  bool restartable_;
  std::vector<int> handles_;  // by global rank, of the current incarnation
  int incarnation_ = 0;
  int64_t incarnation_start_ns_ = 0;
  std::optional<int64_t> last_restart_cost_ms_;
  std::vector<RestartRecord> restarts_;
  int fruitless_restarts_ = 0;
  std::string given_up_;  // why the runner stopped restarting; "" while it has not
};

}  // namespace faultline::runner
