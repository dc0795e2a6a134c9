// The fault executor (runner/exec/fault_executor.h) over a fake Site that records every call:
// apply at the right action, revert, detection of a fault undone early, heal at the end.
#include "runner/exec/fault_executor.h"

#include <gtest/gtest.h>

#include "exec_test_util.h"
#include "reports/verdict.h"

namespace faultline::runner {
namespace {

using testing::ScenarioFrom;

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
  testing::FakeLauncher launcher_;
  nlohmann::json note_;
  std::vector<std::vector<RailCapacity>> cap_;
};

Scenario WithFaults(const std::string& faults) {
  return ScenarioFrom(
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 20s}\n"
      "faults:\n" +
      faults);
}

// Runs the scenario's timeline through the executor, t0 = 0.
void Drive(FaultExecutor& ex, const Scenario& sc) {
  std::vector<std::string> hooks(sc.topology.world_size());
  std::vector<int> handles(sc.topology.world_size());
  ex.Schedule(0);
  for (const TimelineAction& a : BuildTimeline(sc, sc.seed).actions)
    ex.Do(a, a.at_ns, RankRefs{&hooks, &handles});
}

constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kMs = 1'000'000;

TEST(FaultExecutor, AppliesAndRevertsEachCycleAtItsTime) {
  Scenario sc = WithFaults(
      "  - {id: f1, at: 2s, type: link_flap, target: {host: 1, rail: 0}, down: 200ms, up: 300ms, "
      "count: 2}\n");
  Calls c;
  FakeSite site(&c);
  FaultExecutor ex(sc, &site);
  Drive(ex, sc);
  EXPECT_EQ(c.log,
            (std::vector<std::string>{"apply f1#0@" + std::to_string(2 * kS) + " rail0",
                                      "revert f1#0@" + std::to_string(2 * kS + 200 * kMs),
                                      "apply f1#1@" + std::to_string(2 * kS + 500 * kMs) + " rail0",
                                      "revert f1#1@" + std::to_string(2 * kS + 700 * kMs)}));
  std::vector<FaultRecord> r = ex.records();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].scheduled_ns, 2 * kS);
  EXPECT_EQ(r[0].applied_ns, 2 * kS + 1);  // the first cycle's
  EXPECT_EQ(r[0].observed_ns, 2 * kS + 3);
  EXPECT_EQ(r[0].reverted_ns, 2 * kS + 700 * kMs + 2);  // the last cycle's
  EXPECT_EQ(r[0].error, "");
  // Nothing left to heal; the fault service is stopped.
  std::vector<std::string> errors;
  ex.HealAll(&errors);
  EXPECT_EQ(c.log.back(), "stop");
  EXPECT_EQ(c.log.size(), 5u);
  EXPECT_TRUE(errors.empty());
}

TEST(FaultExecutor, HealRevertsWhatIsStillApplied) {
  Scenario sc = WithFaults("  - {id: gone, at: 1s, type: port_drop, target: {host: 0, rail: 1}}\n");
  Calls c;
  FakeSite site(&c);
  FaultExecutor ex(sc, &site);
  Drive(ex, sc);
  std::vector<std::string> errors;
  ex.HealAll(&errors);
  EXPECT_EQ(c.log, (std::vector<std::string>{"apply gone#0@" + std::to_string(kS) + " rail1",
                                             "heal gone#0", "stop"}));
  EXPECT_EQ(ex.records()[0].reverted_ns, 999);
}

TEST(FaultExecutor, FaultUndoneEarlyIsNotRevertedAgainAndSaysSo) {
  Scenario sc =
      WithFaults("  - {id: f1, at: 1s, type: link_down, target: {host: 0, rail: 0}, for: 1s}\n");
  Calls c;
  c.replaced = true;
  FakeSite site(&c);
  FaultExecutor ex(sc, &site);
  Drive(ex, sc);
  std::vector<std::string> errors;
  ex.HealAll(&errors);
  EXPECT_EQ(c.log,
            (std::vector<std::string>{"apply f1#0@" + std::to_string(kS) + " rail0", "stop"}));
  EXPECT_EQ(ex.records()[0].reverted_ns, 555);
  EXPECT_EQ(ex.records()[0].error, "reverted early: replaced");
}

TEST(FaultExecutor, ErrorsAreRecordedAndTheFaultStaysUnappliedUntilItsTime) {
  Scenario sc = WithFaults(
      "  - {id: bad, at: 1s, type: link_down, target: {host: 1, rail: 0}}\n"
      "  - {id: late, at: 15s, type: link_down, target: {host: 0, rail: 0}}\n"
      "  - {id: warn, at: 2s, type: link_down, target: {host: 1, rail: 1}}\n");
  Calls c;
  c.apply_error = "observed late";
  FakeSite site(&c);
  FaultExecutor ex(sc, &site);
  std::vector<std::string> hooks(2);
  std::vector<int> handles(2);
  ex.Schedule(0);
  for (const TimelineAction& a : BuildTimeline(sc, sc.seed).actions) {
    if (a.at_ns < 10 * kS) ex.Do(a, a.at_ns, RankRefs{&hooks, &handles});
  }
  std::vector<FaultRecord> r = ex.records();
  EXPECT_EQ(r[0].error, "INVALID_ARGUMENT: no such host");
  EXPECT_FALSE(r[0].applied_ns);
  EXPECT_EQ(r[1].error, reports::kRanksEndedFirstError);  // its time never came
  EXPECT_EQ(r[2].error, "observed late");
  EXPECT_TRUE(r[2].applied_ns);
}

TEST(FaultExecutor, RankKillMarksItsRankKilled) {
  Scenario sc = WithFaults("  - {id: k, at: 1s, type: rank_kill, target: {host: 1, rank: 0}}\n");
  Calls c;
  c.fail_apply = true;  // even where the kill's result is unknown, the rank may be gone
  FakeSite site(&c);
  FaultExecutor ex(sc, &site);
  Drive(ex, sc);
  EXPECT_EQ(ex.killed_by_fault().count(1), 1u);
  EXPECT_EQ(ex.killed_by_fault().count(0), 0u);
}

}  // namespace
}  // namespace faultline::runner
