// The history builder (runner/exec/history_builder.h) over synthetic rank logs and process
// statuses, and the run artefacts (run_artefacts.h) written from a history.
#include "runner/exec/history_builder.h"

#include <gtest/gtest.h>

#include <sstream>

#include "exec_test_util.h"
#include "runner/exec/run_artefacts.h"
#include "runner/worker/worker.h"

namespace faultline::runner {
namespace {

using testing::FakeLauncher;
using testing::ScenarioFrom;

constexpr int64_t kMs = 1'000'000;

Scenario ThreeRanks() {
  return ScenarioFrom(
      "name: t\n"
      "topology: {hosts: 3, ranks_per_host: 1, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 20s}\n");
}

OpRecord Op(int rank, int64_t index, int64_t start_ns) {
  OpRecord op;
  op.rank = rank;
  op.index = index;
  op.start_ns = start_ns;
  op.end_ns = start_ns + 10 * kMs;
  op.bytes = 1 << 20;
  return op;
}

TEST(HistoryBuilder, RankEndsFromLogsAndProcessStatuses) {
  Scenario sc = ThreeRanks();
  HistoryInputs in;
  in.scenario = &sc;
  in.ranks = 3;
  in.t0_ns = 100;
  in.run_end_ns = 5000 * kMs;
  in.exit_status = [](int g) {
    if (g == 1) {
      ExitStatus s;
      s.state = ExitStatus::State::kSignaled;
      s.signal = 9;
      return s;
    }
    return FakeLauncher::Exited(g == 2 ? 77 : 0);
  };
  in.load_log = [](int g, int) -> Result<WorkerLog> {
    WorkerLog log;
    log.header.ccl_version = g == 0 ? "ftccl 1.0" : "ftccl 1.1";
    log.header.ccl_knobs = {{"K", std::to_string(g)}};
    log.ops.push_back(Op(g, 0, 1000 * kMs));
    log.ready_ns = 50 * (g + 1);
    RankEnd end;
    end.exit = RankExit::kCompleted;
    end.end_ns = 4000 * kMs;
    if (g != 1) log.end = end;  // rank 1 was killed before its end line
    return log;
  };
  in.killed_by_fault = {{1, true}};
  FaultRecord f;
  f.id = "k";
  in.faults = {f};
  BuiltHistory b = BuildHistory(in);
  const History& h = b.history;
  EXPECT_EQ(h.world_size, 3);
  EXPECT_EQ(h.run_start_ns, 100);
  ASSERT_EQ(h.ranks.size(), 3u);
  EXPECT_EQ(h.ranks[0].exit, RankExit::kCompleted);
  EXPECT_EQ(h.ranks[0].end_ns, 4000 * kMs);
  EXPECT_EQ(h.ranks[1].exit, RankExit::kKilled);   // killed by the fault, not crashed
  EXPECT_EQ(h.ranks[2].exit, RankExit::kCrashed);  // an end line, but an unknown exit code
  EXPECT_EQ(h.ops.size(), 3u);
  ASSERT_EQ(h.faults.size(), 1u);
  EXPECT_EQ(b.ranks_ready, 3);
  EXPECT_EQ(b.ranks_ready_ns, 150);
  EXPECT_EQ(b.ccl_version, "ftccl 1.0, ftccl 1.1");
  EXPECT_EQ(b.ccl_knobs.at("K"), "0");  // rank 0's
}

TEST(HistoryBuilder, RestartedJobKeepsEveryIncarnationAndCostsItsRestarts) {
  Scenario sc = ThreeRanks();
  HistoryInputs in;
  in.scenario = &sc;
  in.ranks = 1;
  in.incarnation = 1;
  in.exit_status = [](int) { return FakeLauncher::Exited(kWorkerExitOk); };
  in.load_log = [](int g, int k) -> Result<WorkerLog> {
    WorkerLog log;
    if (k == 0) {
      log.ops = {Op(g, 0, 100 * kMs), Op(g, 1, 200 * kMs)};
    } else {
      log.ops = {Op(g, 1, 900 * kMs), Op(g, 2, 950 * kMs)};
      log.end = RankEnd{};
    }
    return log;
  };
  RestartRecord r;
  r.incarnation = 1;
  r.detected_ns = 400 * kMs;
  in.restarts = {r};
  in.restarts_given_up = "";
  BuiltHistory b = BuildHistory(in);
  const History& h = b.history;
  ASSERT_EQ(h.ops.size(), 4u);
  EXPECT_EQ(h.ops[2].incarnation, 1);
  EXPECT_EQ(h.ops[2].index, 1 + kIncarnationIndexStride);
  ASSERT_EQ(h.restarts.size(), 1u);
  EXPECT_EQ(h.restarts[0].cost_ns, 500 * kMs);  // to the first step of incarnation 1
  EXPECT_EQ(h.restarts[0].resumed_step, 1);
  EXPECT_EQ(h.ranks[0].exit, RankExit::kCompleted);
  EXPECT_FALSE(b.ccl_version);
}

TEST(HistoryBuilder, NoLogMeansCrashed) {
  Scenario sc = ThreeRanks();
  HistoryInputs in;
  in.scenario = &sc;
  in.ranks = 3;
  in.load_log = [](int, int) -> Result<WorkerLog> { return Status(Code::kNotFound, "none"); };
  BuiltHistory b = BuildHistory(in);
  for (const RankEnd& e : b.history.ranks) EXPECT_EQ(e.exit, RankExit::kCrashed);
  EXPECT_EQ(b.ranks_ready, 0);
}

TEST(RunArtefacts, TimeseriesAndEventsAreSecondsSinceT0) {
  History h;
  h.world_size = 1;
  h.op = CollOp::kAllReduce;
  h.run_start_ns = 1000 * kMs;
  h.ops = {Op(0, 0, 1500 * kMs)};
  FaultRecord f;
  f.id = "f1";
  f.kind = "link_down";
  f.scheduled_ns = 2000 * kMs;
  f.applied_ns = 2001 * kMs;
  f.error = "x";
  h.faults = {f};
  CclEvent e;
  e.time_ns = 2500 * kMs;
  e.rank = 0;
  e.path = 1;
  e.reason = "carrier";
  h.events = {e};
  std::ostringstream ts, ev;
  WriteTimeseriesCsv(h, 1000 * kMs, ts);
  WriteEventsJsonl(h, 1000 * kMs, ev);
  EXPECT_EQ(ts.str(),
            "index,start_s,end_s,duration_ms,bytes,busbw_gbps\n"
            "0,0.500000,0.510000,10.000,1048576,0.0000\n");
  std::istringstream lines(ev.str());
  std::string l1, l2;
  std::getline(lines, l1);
  std::getline(lines, l2);
  const nlohmann::json j1 = nlohmann::json::parse(l1), j2 = nlohmann::json::parse(l2);
  EXPECT_EQ(j1["type"], "fault");
  EXPECT_EQ(j1["id"], "f1");
  EXPECT_DOUBLE_EQ(j1["scheduled_s"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j1["applied_s"].get<double>(), 1.001);
  EXPECT_TRUE(j1["reverted_s"].is_null());
  EXPECT_EQ(j1["error"], "x");
  EXPECT_EQ(j2["type"], "ccl_event");
  EXPECT_EQ(j2["kind"], "path_down");
  EXPECT_DOUBLE_EQ(j2["t_s"].get<double>(), 1.5);
  EXPECT_EQ(j2["reason"], "carrier");
}

}  // namespace
}  // namespace faultline::runner
