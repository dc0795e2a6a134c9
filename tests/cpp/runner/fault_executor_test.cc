// The fault executor (runner/exec/fault_executor.h) over a fake Site that records every call:
// apply at the right action, revert, detection of a fault undone early, heal at the end.
#include "runner/exec/fault_executor.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "exec_test_util.h"
#include "reports/verdict.h"

namespace faultline::runner {
namespace {

using testing::ScenarioFrom;

using testing::Calls;
using testing::FakeSite;

Scenario WithFaults(const std::string& faults) {
  return ScenarioFrom(
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 20s}\n"
      "faults:\n" +
      faults);
}

// Runs the scenario's timeline through the executor, t0 = 0: the actions before `until` (the
// ranks ended then; a later action's time never comes).
void Drive(FaultExecutor& ex, const Scenario& sc, int64_t until = INT64_MAX) {
  std::vector<std::string> hooks(sc.topology.world_size());
  std::vector<int> handles(sc.topology.world_size());
  ex.Schedule(0);
  for (const TimelineAction& a : BuildTimeline(sc, sc.seed).actions) {
    if (a.at_ns < until) ex.Do(a, a.at_ns, RankRefs{&hooks, &handles});
  }
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
  // Each cycle as played, beside its scheduled times (the fake site applies 1 ns and reverts
  // 2 ns after the time it is given).
  ASSERT_EQ(r[0].cycles.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const FaultRecord::Cycle& cy = r[0].cycles[i];
    const int64_t down_at = 2 * kS + i * 500 * kMs;
    EXPECT_EQ(cy.down_scheduled_ns, down_at) << "cycle " << i;
    EXPECT_EQ(cy.down_ns, down_at + 1) << "cycle " << i;
    EXPECT_EQ(cy.up_scheduled_ns, down_at + 200 * kMs) << "cycle " << i;
    EXPECT_EQ(cy.up_ns, down_at + 200 * kMs + 2) << "cycle " << i;
  }
  // Nothing left to heal; the fault service is stopped.
  std::vector<std::string> errors;
  ex.HealAll(&errors);
  EXPECT_EQ(c.log.back(), "stop");
  EXPECT_EQ(c.log.size(), 5u);
  EXPECT_TRUE(errors.empty());
}

TEST(FaultExecutor, AFlapCutShortRecordsTheCyclesWhoseTimeCame) {
  Scenario sc = WithFaults(
      "  - {id: f1, at: 2s, type: link_flap, target: {host: 1, rail: 0}, down: 200ms, up: 300ms, "
      "count: 3}\n"
      "  - {id: f2, at: 1s, type: link_down, target: {host: 0, rail: 1}, for: 100ms}\n");
  Calls c;
  FakeSite site(&c);
  FaultExecutor ex(sc, &site);
  // The ranks end 2.6 s in: the second cycle's down came, its up did not; the heal brings the
  // port up.
  Drive(ex, sc, 2 * kS + 600 * kMs);
  std::vector<std::string> errors;
  ex.HealAll(&errors);
  std::vector<FaultRecord> r = ex.records();
  ASSERT_EQ(r.size(), 2u);
  ASSERT_EQ(r[0].cycles.size(), 2u);
  EXPECT_EQ(r[0].cycles[0].up_ns, 2 * kS + 200 * kMs + 2);
  EXPECT_EQ(r[0].cycles[1].down_ns, 2 * kS + 500 * kMs + 1);
  EXPECT_FALSE(r[0].cycles[1].up_scheduled_ns);
  EXPECT_FALSE(r[0].cycles[1].up_ns);  // the heal's, not the cycle's
  EXPECT_TRUE(r[1].cycles.empty()) << "a link_down is not played in cycles";
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
  Drive(ex, sc, 10 * kS);
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
