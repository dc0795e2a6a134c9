#include "runner/exec/restart_supervisor.h"

#include <signal.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <utility>

#include "base/clock.h"
#include "base/log.h"
#include "runner/worker/worker.h"

namespace faultline::runner {

RestartSupervisor::RestartSupervisor(const Scenario& sc, Launcher* launcher, SpecsFn specs,
                                     LogFn log, const std::atomic<bool>* stop,
                                     std::vector<std::string>* harness_errors)
    : sc_(sc),
      launcher_(launcher),
      specs_(std::move(specs)),
      log_(std::move(log)),
      stop_(stop),
      harness_errors_(harness_errors),
      restartable_(Restartable(sc)) {}

bool RestartSupervisor::Restartable(const Scenario& sc) {
  return sc.workload.kind == WorkloadKind::kTrain;
}

bool RestartSupervisor::ContinuesWithoutLostRanks(RecoveryPolicyName p) {
  return p == RecoveryPolicyName::kShrink || p == RecoveryPolicyName::kAdaptive;
}

void RestartSupervisor::Started(std::vector<int> handles, int64_t start_ns) {
  handles_ = std::move(handles);
  incarnation_start_ns_ = start_ns;
}

void RestartSupervisor::Check() {
  if (!restartable_ || *stop_ || restarts_.size() >= kMaxRestarts) return;
  // Every rank found stopped is named: which one stopped first is not known from here (a
  // survivor may ask for the restart before the dead rank's exit is seen).
  std::string why;
  bool trigger = false;
  bool any_running = false;
  const bool goes_on = ContinuesWithoutLostRanks(sc_.policy);
  for (size_t g = 0; g < handles_.size(); ++g) {
    auto st = launcher_->Wait(handles_[g], MonoNow() - 1);
    if (!st.ok() || st->running()) {
      any_running = true;
      continue;
    }
    if (st->success()) return;  // a rank finished its steps: the job is over, not restarted
    const bool asked = st->state == ExitStatus::State::kExited && st->code == kWorkerExitRestart;
    trigger = trigger || asked || !goes_on;
    why += (why.empty() ? "" : "; ") + std::string("rank ") + std::to_string(g) + " " +
           st->ToString() + (asked ? " (stopped for a restart)" : "");
  }
  // A policy that goes on without a lost rank: the job stopped when nobody is left running.
  if (goes_on && !why.empty() && !any_running) trigger = true;
  if (!trigger) return;
  bool stepped = incarnation_ == 0;
  for (size_t g = 0; g < handles_.size() && !stepped; ++g) {
    auto log = log_(static_cast<int>(g), incarnation_);
    stepped = log.ok() && !log->ops.empty();
  }
  fruitless_restarts_ = stepped ? 0 : fruitless_restarts_ + 1;
  if (fruitless_restarts_ >= kMaxFruitlessRestarts) {
    if (given_up_.empty()) {
      given_up_ = "the last " + std::to_string(fruitless_restarts_) +
                  " restarts in place never reached a step (" + why +
                  "): the fault is in the way of the job's start";
      FL_INFO("run", "no more restarts: %s", given_up_.c_str());
      std::fflush(stdout);
    }
    return;
  }
  RestartRecord r;
  r.incarnation = incarnation_ + 1;
  r.detected_ns = MonoNow();
  r.why = why;
  // The others stop too: they may be waiting out a dead peer, which is the time a restart saves.
  for (int h : handles_) (void)launcher_->Kill(h, SIGKILL);
  for (int h : handles_) (void)launcher_->Wait(h, MonoNow() + 10'000'000'000LL);
  // What the last restart cost, measured from its ranks' logs, for the selector's cost model.
  if (!restarts_.empty()) {
    std::optional<int64_t> first_step;
    for (size_t g = 0; g < handles_.size(); ++g) {
      auto log = log_(static_cast<int>(g), incarnation_);
      if (!log.ok() || log->ops.empty()) continue;
      first_step = std::min(first_step.value_or(INT64_MAX), log->ops.front().start_ns);
    }
    if (first_step) last_restart_cost_ms_ = (*first_step - restarts_.back().detected_ns) / 1000000;
  }
  ++incarnation_;
  auto handles = launcher_->StartWorld(specs_(incarnation_, last_restart_cost_ms_));
  r.relaunched_ns = MonoNow();
  incarnation_start_ns_ = r.relaunched_ns;
  if (!handles.ok()) {
    harness_errors_->push_back("restarting the ranks (incarnation " + std::to_string(incarnation_) +
                               "): " + handles.status().ToString());
    --incarnation_;
    return;
  }
  handles_ = std::move(handles).value();
  restarts_.push_back(std::move(r));
  FL_INFO("run", "restart %zu: %s; every rank restarted from the last checkpoint", restarts_.size(),
          restarts_.back().why.c_str());
  std::fflush(stdout);
}

}  // namespace faultline::runner
