// The restart supervisor (runner/exec/restart_supervisor.h) over a fake launcher and fake rank
// logs: who triggers a restart under each policy, fruitless restarts, the cap.
#include "runner/exec/restart_supervisor.h"

#include <gtest/gtest.h>

#include <atomic>

#include "exec_test_util.h"
#include "runner/worker/worker.h"

namespace faultline::runner {
namespace {

using testing::FakeLauncher;
using testing::ScenarioFrom;

Scenario Train(const std::string& policy) {
  return ScenarioFrom(
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
      "policy: " +
      policy +
      "\n"
      "workload: {kind: train, steps: 50, batch: 8, compute: 30ms, grad_bytes: 4MiB,\n"
      "           checkpoint_every: 10, wait_bound: 3s}\n");
}

struct Harness {
  explicit Harness(const Scenario& sc)
      : sup(
            sc, &launcher,
            [this](int k, std::optional<int64_t> cost) {
              spec_calls.push_back({k, cost});
              return std::vector<LaunchSpec>(2);
            },
            [this](int, int k) -> Result<WorkerLog> {
              WorkerLog log;
              if (k < static_cast<int>(stepped.size()) && stepped[k]) {
                OpRecord op;
                op.start_ns = 1;
                log.ops.push_back(op);
              }
              return log;
            },
            &stop, &errors) {
    sup.Started(*launcher.StartWorld(std::vector<LaunchSpec>(2)), 0);
  }
  FakeLauncher launcher;
  std::atomic<bool> stop{false};
  std::vector<std::string> errors;
  std::vector<std::pair<int, std::optional<int64_t>>> spec_calls;
  std::vector<bool> stepped = {true, true, true, true, true, true, true, true, true, true};
  RestartSupervisor sup;
};

TEST(RestartSupervisor, FailStopRestartsEveryRankWhenOneDies) {
  Scenario sc = Train("fail_stop");
  Harness t(sc);
  t.sup.Check();
  EXPECT_TRUE(t.sup.restarts().empty());  // every rank still running
  t.launcher.statuses[1] = FakeLauncher::Exited(3);
  t.sup.Check();
  ASSERT_EQ(t.sup.restarts().size(), 1u);
  EXPECT_EQ(t.sup.incarnation(), 1);
  EXPECT_EQ(t.sup.restarts()[0].incarnation, 1);
  EXPECT_EQ(t.sup.restarts()[0].why, "rank 1 exited 3");
  EXPECT_EQ(t.launcher.killed, (std::vector<int>{0, 1}));  // the survivor is stopped too
  EXPECT_EQ(t.sup.handles(), (std::vector<int>{2, 3}));
  ASSERT_EQ(t.spec_calls.size(), 1u);
  EXPECT_EQ(t.spec_calls[0].first, 1);
}

TEST(RestartSupervisor, FinishedRankMeansTheJobIsOver) {
  Scenario sc = Train("fail_stop");
  Harness t(sc);
  t.launcher.statuses[0] = FakeLauncher::Exited(0);
  t.launcher.statuses[1] = FakeLauncher::Exited(3);
  t.sup.Check();
  EXPECT_TRUE(t.sup.restarts().empty());
}

TEST(RestartSupervisor, AdaptiveRestartsOnlyWhenAsked) {
  Scenario sc = Train("adaptive");
  Harness t(sc);
  t.launcher.statuses[1] = FakeLauncher::Exited(3);  // dead: the selector's to decide about
  t.sup.Check();
  EXPECT_TRUE(t.sup.restarts().empty());
  t.launcher.statuses[0] = FakeLauncher::Exited(kWorkerExitRestart);
  t.sup.Check();
  ASSERT_EQ(t.sup.restarts().size(), 1u);
  EXPECT_NE(t.sup.restarts()[0].why.find("rank 0 exited " + std::to_string(kWorkerExitRestart) +
                                         " (stopped for a restart)"),
            std::string::npos);
}

// Library failover (or waiting) plus the supervisor's restart when a rank dies: the job a
// production team runs, not one left to end with its dead rank.
TEST(RestartSupervisor, FailoverAndWaitRestartTheJobWhenARankDies) {
  for (const char* policy : {"failover", "wait"}) {
    SCOPED_TRACE(policy);
    Scenario sc = Train(policy);
    Harness t(sc);
    EXPECT_TRUE(RestartSupervisor::Restartable(sc));
    t.sup.Check();
    EXPECT_TRUE(t.sup.restarts().empty());
    t.launcher.statuses[1] = FakeLauncher::Killed(9);
    t.sup.Check();
    ASSERT_EQ(t.sup.restarts().size(), 1u);
    EXPECT_EQ(t.launcher.killed, (std::vector<int>{0, 1}));
    EXPECT_EQ(t.sup.handles(), (std::vector<int>{2, 3}));
  }
}

// Shrink goes on without a dead rank; only a job with no rank left running is restarted.
TEST(RestartSupervisor, ShrinkRestartsOnlyWhenNoRankIsLeft) {
  Scenario sc = Train("shrink");
  Harness t(sc);
  t.launcher.statuses[1] = FakeLauncher::Killed(9);
  t.sup.Check();
  EXPECT_TRUE(t.sup.restarts().empty());
  t.launcher.statuses[0] = FakeLauncher::Exited(3);
  t.sup.Check();
  ASSERT_EQ(t.sup.restarts().size(), 1u);
}

TEST(RestartSupervisor, AdaptiveRestartsWhenNoRankIsLeft) {
  Scenario sc = Train("adaptive");
  Harness t(sc);
  t.launcher.statuses[0] = FakeLauncher::Exited(3);
  t.launcher.statuses[1] = FakeLauncher::Exited(3);
  t.sup.Check();
  ASSERT_EQ(t.sup.restarts().size(), 1u);
}

TEST(RestartSupervisor, GivesUpAfterFruitlessRestarts) {
  Scenario sc = Train("fail_stop");
  Harness t(sc);
  t.stepped = {true, false, false, false};
  for (int i = 0; i < 5; ++i) {
    for (int h : t.sup.handles()) t.launcher.statuses[h] = FakeLauncher::Exited(3);
    t.sup.Check();
  }
  // Incarnation 1 never stepped: one fruitless restart is tried (incarnation 2), then no more.
  EXPECT_EQ(t.sup.restarts().size(), 2u);
  EXPECT_NE(t.sup.given_up().find("the last 2 restarts in place never reached a step"),
            std::string::npos);
}

TEST(RestartSupervisor, StopsAtTheCap) {
  Scenario sc = Train("fail_stop");
  Harness t(sc);
  for (int i = 0; i < 20; ++i) {
    for (int h : t.sup.handles()) t.launcher.statuses[h] = FakeLauncher::Exited(3);
    t.sup.Check();
  }
  EXPECT_EQ(t.sup.restarts().size(), RestartSupervisor::kMaxRestarts);
  EXPECT_TRUE(t.sup.given_up().empty());
  // From the second restart on, the last one's measured cost is handed to the ranks.
  EXPECT_FALSE(t.spec_calls[0].second.has_value());
  EXPECT_TRUE(t.spec_calls[1].second.has_value());
}

TEST(RestartSupervisor, FailedRelaunchIsAHarnessErrorAndNoRestart) {
  Scenario sc = Train("fail_stop");
  Harness t(sc);
  t.launcher.statuses[1] = FakeLauncher::Exited(3);
  t.launcher.fail_next_start = true;
  t.sup.Check();
  EXPECT_TRUE(t.sup.restarts().empty());
  EXPECT_EQ(t.sup.incarnation(), 0);
  ASSERT_EQ(t.errors.size(), 1u);
  EXPECT_NE(t.errors[0].find("restarting the ranks (incarnation 1)"), std::string::npos);
}

TEST(RestartSupervisor, CollectiveWorkloadAndStopRequestNeverRestart) {
  Scenario coll = ScenarioFrom(
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1MiB, iters: 10}\n");
  EXPECT_FALSE(RestartSupervisor::Restartable(coll));
  Harness a(coll);
  a.launcher.statuses[1] = FakeLauncher::Exited(3);
  a.sup.Check();
  EXPECT_TRUE(a.sup.restarts().empty());
  Scenario sc = Train("fail_stop");
  Harness b(sc);
  b.stop = true;
  b.launcher.statuses[1] = FakeLauncher::Exited(3);
  b.sup.Check();
  EXPECT_TRUE(b.sup.restarts().empty());
}

}  // namespace
}  // namespace faultline::runner
