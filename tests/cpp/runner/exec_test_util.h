// Shared by the run driver's unit tests: scenarios from YAML text, a launcher whose ranks
// are table entries (no process is started), and a Site over it that records its fault calls.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "runner/core/scenario.h"
#include "runner/exec/launcher.h"
#include "runner/exec/site.h"

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
  static ExitStatus Killed(int sig) {
    ExitStatus s;
    s.state = ExitStatus::State::kSignaled;
    s.signal = sig;
    return s;
  }

  std::vector<std::vector<LaunchSpec>> worlds;
  std::map<int, ExitStatus> statuses;
  std::vector<int> killed;
  bool fail_next_start = false;

 private:
  int next_ = 0;
};

// A Site that starts nothing and records every fault call in Calls::log.
struct Calls {
  std::vector<std::string> log;  // "apply f1#0@T", "revert f1#0@T", "heal f1#0"
  bool replaced = false;         // every applied fault reports being undone early
  std::string apply_error;       // the next apply's error
  bool fail_apply = false;       // the next apply is not applied
};

class FakeFault final : public AppliedFault {
 public:
  FakeFault(Calls* c, std::string id) : c_(c), id_(std::move(id)) {}
  bool applied() const override { return true; }
  bool reverted() const override { return reverted_; }
  void MarkReverted() override { reverted_ = true; }
  RevertResult Revert(int64_t at_ns) override {
    c_->log.push_back("revert " + id_ + "@" + std::to_string(at_ns));
    reverted_ = true;
    return {at_ns + 2, {}};
  }
  HealResult Heal() override {
    c_->log.push_back("heal " + id_);
    reverted_ = true;
    return {999, ""};
  }
  std::optional<Replacement> ReplacedEarly() const override {
    if (!c_->replaced) return std::nullopt;
    return Replacement{555, "reverted early: replaced"};
  }

 private:
  Calls* c_;
  std::string id_;
  bool reverted_ = false;
};

class FakeSite final : public Site {
 public:
  explicit FakeSite(Calls* c) : c_(c) {}
  Status Prepare(Journal*) override { return Status(); }
  Status OpenLauncher() override { return Status(); }
  Status StartFaultService(const std::vector<std::string>&) override { return Status(); }
  Launcher& launcher() override { return launcher_; }
  bool has_launcher() const override { return true; }
  void CloseLauncher() override {}
  std::vector<std::string> RankRails(int, int) const override { return {}; }
  std::string BootstrapHost() const override { return ""; }
  std::vector<std::string> RankEnv(int) const override { return {}; }
  int64_t ClockOffsetNs(int) const override { return 0; }
  Result<nlohmann::json> ResolveTarget(const TimelineAction& a, const RankRefs&) const override {
    if (a.fault_id == "bad") return Status(Code::kInvalidArgument, "no such host");
    return nlohmann::json{{"dev", "rail" + std::to_string(a.target.rail.value_or(-1))}};
  }
  FaultApplyResult Apply(const TimelineAction& a, const nlohmann::json& params, int64_t at_ns,
                         std::unique_ptr<AppliedFault>* handle) override {
    const std::string id = a.fault_id + "#" + std::to_string(a.cycle);
    c_->log.push_back("apply " + id + "@" + std::to_string(at_ns) + " " +
                      params.value("dev", std::string()));
    FaultApplyResult r;
    r.attempted = true;
    r.error = c_->apply_error;
    if (c_->fail_apply) return r;
    r.applied = true;
    r.applied_ns = at_ns + 1;
    r.observed_ns = at_ns + 3;
    r.observed = {{"state", "down"}};
    *handle = std::make_unique<FakeFault>(c_, id);
    return r;
  }
  std::string StopFaultService() override {
    c_->log.push_back("stop");
    return "";
  }
  void StartRails(int64_t, int64_t, size_t) override {}
  std::optional<RailSeries> StopRails() override { return std::nullopt; }
  nlohmann::json& rails_note() override { return note_; }
  const std::vector<std::vector<RailCapacity>>& rail_capacity() const override { return cap_; }
  void AddEnvironment(nlohmann::json*) const override {}
  Status Teardown() override { return Status(); }

 private:
  Calls* c_;
  FakeLauncher launcher_;
  nlohmann::json note_;
  std::vector<std::vector<RailCapacity>> cap_;
};

}  // namespace faultline::runner::testing
