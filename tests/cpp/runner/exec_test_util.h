// Shared by the run driver's unit tests: scenarios from YAML text, and a launcher whose ranks
// are table entries (no process is started).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "runner/core/scenario.h"
#include "runner/exec/launcher.h"

namespace faultline::runner::testing {

inline Scenario ScenarioFrom(const std::string& yaml) {
  ParseOutcome r = ParseScenario(yaml, "t.yaml");
  for (const auto& d : r.diagnostics) ADD_FAILURE() << d.ToString();
  return r.scenario.value_or(Scenario{});
}

// Every StartWorld hands out fresh handles; a handle's status is whatever the test sets.
class FakeLauncher final : public Launcher {
 public:
  Result<std::vector<int>> StartWorld(const std::vector<LaunchSpec>& specs) override {
    worlds.push_back(specs);
    if (fail_next_start) {
      fail_next_start = false;
      return Status(Code::kUnavailable, "no room");
    }
    std::vector<int> h;
    for (size_t i = 0; i < specs.size(); ++i) {
      h.push_back(next_++);
      statuses[h.back()] = ExitStatus{};
    }
    return h;
  }
  Result<ExitStatus> Wait(int handle, int64_t) override { return statuses[handle]; }
  Status Kill(int handle, int sig) override {
    killed.push_back(handle);
    ExitStatus s;
    s.state = ExitStatus::State::kSignaled;
    s.signal = sig;
    if (statuses[handle].running()) statuses[handle] = s;
    return Status();
  }
  WaitAllReport WaitAll(int64_t) override { return {}; }
  int size() const override { return next_; }
  ExitStatus status(int handle) const override {
    auto it = statuses.find(handle);
    return it == statuses.end() ? ExitStatus{} : it->second;
  }
  std::optional<pid_t> LocalPid(int handle) const override { return 1000 + handle; }
  std::string StdoutPath(int) const override { return ""; }
  std::string StderrPath(int) const override { return ""; }
  int ChannelFd(int) const override { return -1; }

  static ExitStatus Exited(int code) {
    ExitStatus s;
    s.state = ExitStatus::State::kExited;
    s.code = code;
    return s;
  }

  std::vector<std::vector<LaunchSpec>> worlds;
  std::map<int, ExitStatus> statuses;
  std::vector<int> killed;
  bool fail_next_start = false;

 private:
  int next_ = 0;
};

}  // namespace faultline::runner::testing
