// Metrics on synthetic histories with hand-computed answers.
//
// Unless said otherwise, every history below has 2 ranks, one per host, over 2 rails, running
// allreduce on 1,000,000-byte messages. The busbw factor of a 2-rank allreduce is
// 2(n-1)/n = 1, so a collective of D ms has busbw 8e6 bit / (D x 1e6 ns) = 8/D Gbit/s:
// 10 ms -> 0.8, 20 ms -> 0.4, 100 ms -> 0.08.
#include "runner/core/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "reports/metric_table.h"
#include "runner/core/checks.h"
#include "runner/core/scenario.h"

namespace faultline::runner {
namespace {

constexpr int64_t kMs = 1'000'000;

class HistoryBuilder {
 public:
  explicit HistoryBuilder(int world = 2) {
    h_.world_size = world;
    h_.op = CollOp::kAllReduce;
    h_.run_start_ns = 0;
    h_.events_supported = true;
    for (int r = 0; r < world; ++r) h_.ranks.push_back({r, RankExit::kCompleted, std::nullopt, 0});
  }
  // Collective `index` on every rank over [start_ms, end_ms].
  HistoryBuilder& Op(int64_t start_ms, int64_t end_ms) {
    for (int r = 0; r < h_.world_size; ++r) {
      h_.ops.push_back({r, next_, start_ms * kMs, end_ms * kMs, 1'000'000, true, false});
    }
    ++next_;
    return *this;
  }
  // Collective `index` on every rank, failing at end_ms (the library returned an error).
  HistoryBuilder& FailedOp(int64_t start_ms, int64_t end_ms) {
    for (int r = 0; r < h_.world_size; ++r) {
      h_.ops.push_back({r, next_, start_ms * kMs, end_ms * kMs, 1'000'000, false, false});
    }
    ++next_;
    return *this;
  }
  // `n` back-to-back collectives of `d_ms` each, starting at `from_ms`.
  HistoryBuilder& Ops(int n, int64_t from_ms, int64_t d_ms) {
    for (int i = 0; i < n; ++i) Op(from_ms + i * d_ms, from_ms + (i + 1) * d_ms);
    return *this;
  }
  HistoryBuilder& Fault(const std::string& id, const std::string& kind, int rail, int64_t applied_ms,
                        std::optional<int64_t> reverted_ms) {
    FaultRecord f;
    f.id = id;
    f.kind = kind;
    f.target.host = 0;
    f.target.rail = rail;
    f.scheduled_ns = applied_ms * kMs;
    f.applied_ns = applied_ms * kMs;
    if (reverted_ms) f.reverted_ns = *reverted_ms * kMs;
    h_.faults.push_back(f);
    return *this;
  }
  // An event of `rank` about its path `path` to `peer`.
  HistoryBuilder& Event(int64_t t_ms, EventKind kind, int path, int rank = 0, int peer = 1) {
    h_.events.push_back({t_ms * kMs, rank, kind, path, "", peer});
    return *this;
  }
  HistoryBuilder& End(int64_t end_ms) {
    h_.run_end_ns = end_ms * kMs;
    for (auto& r : h_.ranks) r.end_ns = end_ms * kMs;
    return *this;
  }
  History& h() { return h_; }

 private:
  History h_;
  int64_t next_ = 0;
};

MetricsOptions Opts(double pct = 90, int64_t sustain_ms = 50) {
  MetricsOptions o;
  o.topology = Topology{2, 1, 2, 1.0};
  o.recovery_pct = pct;
  o.sustain_ns = sustain_ms * kMs;
  return o;
}

TEST(Metrics, CompleteOpsAndBusBw) {
  HistoryBuilder b;
  b.Ops(2, 0, 10).End(20);
  // A collective only one rank finished is not complete.
  b.h().ops.push_back({0, 2, 20 * kMs, 30 * kMs, 1'000'000, true, false});
  auto ops = CompleteOps(b.h());
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_DOUBLE_EQ(ops[0].busbw_gbps, 0.8);
  EXPECT_EQ(ops[1].start_ns, 10 * kMs);
  // Rank skew: the collective spans the earliest start to the latest end.
  b.h().ops.push_back({1, 2, 22 * kMs, 40 * kMs, 1'000'000, true, false});
  ops = CompleteOps(b.h());
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[2].start_ns, 20 * kMs);
  EXPECT_EQ(ops[2].end_ns, 40 * kMs);
  EXPECT_DOUBLE_EQ(ops[2].busbw_gbps, 0.4);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollOp::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollOp::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollOp::kBroadcast, 4), 1.0);
  // The scenario's collectives that the workload does not run (workload::BusBwFactorOf).
  EXPECT_DOUBLE_EQ(BusBwFactor(CollOp::kReduce, 4), 1.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollOp::kBarrier, 4), 0.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollOp::kReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollOp::kAllToAll, 2), 0.5);
}

// Policy shrink: rank 1 of 4 is killed or stopped, the others shrink without it. The
// collectives of the group of three are complete without rank 1 (killed or not: a stopped rank
// is still running), and their busbw takes the factor of three ranks, not four.
TEST(Metrics, CollectivesOfAShrunkGroupNeedOnlyItsRanksAndUseItsFactor) {
  for (bool killed : {true, false}) {
    HistoryBuilder b(4);
    b.Ops(2, 0, 10);
    if (killed) b.h().ranks[1].exit = RankExit::kKilled;
    for (int r : {0, 2, 3}) {
      OpRecord op{r, 2, 30 * kMs, 40 * kMs, 1'000'000, true, false};
      op.group = 3;
      b.h().ops.push_back(op);
      ShrinkRecord s;
      s.rank = r;
      s.start_ns = 21 * kMs;
      s.end_ns = 29 * kMs;
      s.excluded = {1};
      s.group = 3;
      b.h().shrinks.push_back(s);
    }
    b.End(50);
    auto ops = CompleteOps(b.h());
    ASSERT_EQ(ops.size(), 3u) << "killed " << killed;
    EXPECT_DOUBLE_EQ(ops[0].factor, BusBwFactor(CollOp::kAllReduce, 4));
    EXPECT_DOUBLE_EQ(ops[2].factor, BusBwFactor(CollOp::kAllReduce, 3));
    EXPECT_DOUBLE_EQ(ops[2].busbw_gbps, 1'000'000 * 8.0 / (10 * kMs) * BusBwFactor(CollOp::kAllReduce, 3));
    // A failed shrink leaves nobody out: the collective is not complete without rank 1 then
    // (unless it was killed).
    for (auto& s : b.h().shrinks) s.ok = false;
    EXPECT_EQ(CompleteOps(b.h()).size(), killed ? 3u : 2u) << "killed " << killed;
  }
}

TEST(Metrics, FaultFreeRun) {
  HistoryBuilder b;
  b.Ops(10, 0, 10).End(100);
  RunMetrics m = ComputeMetrics(b.h(), Opts());
  EXPECT_DOUBLE_EQ(*m.overall.baseline_busbw_gbps, 0.8);
  // Measured, not assumed: back to back, the longest gap is one collective's time.
  ASSERT_TRUE(m.overall.stall_ms.has_value());
  EXPECT_DOUBLE_EQ(*m.overall.stall_ms, 0.0);
  ASSERT_TRUE(m.overall.goodput_loss_pct.has_value());
  EXPECT_NEAR(*m.overall.goodput_loss_pct, 0.0, 1e-9);
  EXPECT_FALSE(m.overall.detection_ms.has_value());
  EXPECT_FALSE(m.overall.failover_first_ms.has_value());
  EXPECT_FALSE(m.overall.failover_latency_ms.has_value());
  EXPECT_FALSE(m.overall.recovery_ms.has_value());
  EXPECT_FALSE(m.overall.degraded_ratio.has_value());
  EXPECT_TRUE(m.per_fault.empty());
  EXPECT_EQ(m.outcome, Outcome::kSurvived);
  EXPECT_EQ(m.wrong_results, 0);
  EXPECT_EQ(m.completed_ops, 10);
}

// Transient link_down on rail 0 over [100, 300] ms. Ops 0-9 take 10 ms each (0.8 Gbit/s);
// op 10 stalls over [100, 250] (0.0533 Gbit/s); ops 11-25 run at 10 ms again from 250 ms.
History TransientHistory() {
  HistoryBuilder b;
  b.Ops(10, 0, 10).Op(100, 250).Ops(15, 250, 10).End(400);
  b.Fault("f1", "link_down", 0, 100, 300);
  b.Event(90, EventKind::kPathDown, 0)       // before the fault: ignored
      .Event(120, EventKind::kPathDown, 1)   // another rail: ignored
      .Event(130, EventKind::kPathDown, 0)   // flow 0 -> 1 on rail 0
      .Event(135, EventKind::kPathDown, 0, 1, 0)  // flow 1 -> 0 on rail 0
      .Event(145, EventKind::kResumed, 1)    // 0 -> 1 carries data again (on rail 1)
      .Event(160, EventKind::kResumed, 1, 1, 0)  // 1 -> 0 too: full convergence
      .Event(300, EventKind::kPathUp, 0);
  return b.h();
}

TEST(Metrics, TransientLinkDown) {
  RunMetrics m = ComputeMetrics(TransientHistory(), Opts(90, 50));
  ASSERT_EQ(m.per_fault.size(), 1u);
  const MetricValues& v = m.per_fault[0].values;
  EXPECT_EQ(m.per_fault[0].id, "f1");
  EXPECT_DOUBLE_EQ(*v.baseline_busbw_gbps, 0.8);
  // Longest gap overlapping [100, 300]: (100, 250) = 150 ms, minus the 10 ms median op.
  EXPECT_DOUBLE_EQ(*v.stall_ms, 140);
  EXPECT_DOUBLE_EQ(*v.detection_ms, 30);
  EXPECT_DOUBLE_EQ(*v.failover_first_ms, 45);
  EXPECT_DOUBLE_EQ(*v.failover_latency_ms, 60);
  EXPECT_EQ(m.per_fault[0].convergence, "path_events");
  EXPECT_FALSE(m.per_fault[0].never_converged);
  ASSERT_EQ(m.per_fault[0].flows.size(), 2u);
  EXPECT_EQ(m.per_fault[0].flows[1].rank, 1);
  EXPECT_EQ(*m.per_fault[0].flows[1].resumed_ns, 160 * kMs);
  // Collective progress, for every CCL alike: op 10 started at 100 and ended at 250.
  EXPECT_DOUBLE_EQ(*m.per_fault[0].progress_ms, 150);
  // Op 10 (starting at 100) is below 0.72; from op 11 (250) every op up to 300 is 0.8.
  EXPECT_DOUBLE_EQ(*v.recovery_ms, 150);
  EXPECT_FALSE(v.degraded_ratio.has_value());  // transient
  // Delivered over [100, 300]: 0.05333 x 150 + 5 x 0.8 x 10 = 48 Gbit/s.ms of 0.8 x 200 = 160.
  EXPECT_NEAR(*v.goodput_loss_pct, 70.0, 1e-9);
  // One fault: the overall values are its values.
  EXPECT_EQ(m.overall.stall_ms, v.stall_ms);
  EXPECT_EQ(m.overall.recovery_ms, v.recovery_ms);
  EXPECT_EQ(m.overall.goodput_loss_pct, v.goodput_loss_pct);
}

TEST(Metrics, RecoveryNeedsTheWholeSustainWindow) {
  // With a 200 ms sustain, a window starting at 250 would need ops up to 450: the run ends
  // at 400, so recovery is never shown.
  RunMetrics m = ComputeMetrics(TransientHistory(), Opts(90, 200));
  EXPECT_FALSE(m.per_fault[0].values.recovery_ms.has_value());
  EXPECT_FALSE(m.overall.recovery_ms.has_value());
  // A 150 ms sustain fits: [250, 400].
  m = ComputeMetrics(TransientHistory(), Opts(90, 150));
  EXPECT_DOUBLE_EQ(*m.overall.recovery_ms, 150);
}

TEST(Metrics, RecoveryJudgesRollingThroughputNotOneCollective) {
  // After the fault every collective takes 10 ms again, except one at 300 ms that takes 14 ms
  // (0.571 Gbit/s, below 90 % of 0.8): scheduling jitter. Over 100 ms the throughput stays at
  // 0.77 Gbit/s, so the job recovered at 250 ms all the same.
  HistoryBuilder b;
  b.Ops(10, 0, 10).Op(100, 250).Ops(5, 250, 10).Op(300, 314).Ops(30, 314, 10).End(700);
  b.Fault("f1", "link_down", 0, 100, 200);
  EXPECT_DOUBLE_EQ(*ComputeMetrics(b.h(), Opts(90, 300)).per_fault[0].values.recovery_ms, 150);
  // A real dip is not averaged away: four slow collectives (40 ms at a quarter of the rate)
  // keep every window that holds them below 90 %.
  HistoryBuilder c;
  c.Ops(10, 0, 10).Op(100, 250).Ops(5, 250, 10).Ops(4, 300, 40).Ops(40, 460, 10).End(900);
  c.Fault("f1", "link_down", 0, 100, 200);
  EXPECT_DOUBLE_EQ(*ComputeMetrics(c.h(), Opts(90, 300)).per_fault[0].values.recovery_ms, 360);
}

TEST(Metrics, RecoveryAveragesAtLeastSixCollectives) {
  // Collectives of 30 ms, so that 100 ms holds only three; after the fault one of them takes
  // 45 ms (scheduling jitter). Three collectives with it run at 90 / 105 = 86 % of the rate, six
  // at 180 / 195 = 92 %: the job recovered at 400 ms, as six collectives show.
  HistoryBuilder b;
  b.Ops(10, 0, 30).Op(300, 400).Ops(3, 400, 30).Op(490, 535).Ops(20, 535, 30).End(1135);
  b.Fault("f1", "link_down", 0, 300, 350);
  EXPECT_DOUBLE_EQ(*ComputeMetrics(b.h(), Opts(90, 300)).per_fault[0].values.recovery_ms, 100);
}

TEST(Metrics, RecoveryIsJudgedAgainstTheBaselineRateNotItsMedian) {
  // Before and after the fault the collectives repeat one pattern: four of 2 ms (4 Gbit/s) and
  // one of 8 ms (1 Gbit/s). The median rate is 4, the rate the job sustains 5 x 8 / 16 = 2.5
  // (no 100 ms window of the pattern holds less than 2.38). Once the pattern resumes at 400 ms
  // the job is where it was: recovered there, not never (90 % of the median, 3.6, is above
  // anything the pattern sustains).
  HistoryBuilder b;
  auto pattern = [&b](int64_t from_ms, int times) {
    for (int t = 0; t < times; ++t) b.Ops(4, from_ms + t * 16, 2).Op(from_ms + t * 16 + 8,
                                                                     from_ms + t * 16 + 16);
  };
  pattern(0, 18);  // 0 .. 288
  b.Op(288, 400);
  pattern(400, 30);  // 400 .. 880
  b.End(880);
  b.Fault("f1", "link_down", 0, 300, 350);
  const MetricValues v = ComputeMetrics(b.h(), Opts(90, 200)).per_fault[0].values;
  EXPECT_DOUBLE_EQ(*v.baseline_busbw_gbps, 4.0);
  ASSERT_TRUE(v.recovery_ms.has_value());
  EXPECT_DOUBLE_EQ(*v.recovery_ms, 100);
}

// Permanent port_drop at 100 ms that halves the capacity: op 10 stalls over [100, 200]
// (0.08 Gbit/s), then 20 ms ops (0.4 Gbit/s) until 400.
History PermanentHistory() {
  HistoryBuilder b;
  b.Ops(10, 0, 10).Op(100, 200).Ops(10, 200, 20).End(400);
  b.Fault("drop", "port_drop", 1, 100, std::nullopt);
  return b.h();
}

TEST(Metrics, PermanentFaultRecoversToTheSurvivingCapacity) {
  MetricsOptions o = Opts(90, 50);
  o.faults.push_back({"drop", true, 0.5});
  RunMetrics m = ComputeMetrics(PermanentHistory(), o);
  const MetricValues& v = m.per_fault[0].values;
  EXPECT_DOUBLE_EQ(*v.stall_ms, 90);  // gap (100, 200) minus 10
  // Expected level 0.8 x 0.5 = 0.4, threshold 0.36: op 11 at 200 and every op to 260 pass.
  EXPECT_DOUBLE_EQ(*v.recovery_ms, 100);
  // Ops starting at or after 100 + 300/2 = 250: 260, 280, ..., 380, all 0.4.
  EXPECT_DOUBLE_EQ(*v.degraded_ratio, 0.5);
  // Delivered over [100, 400]: 0.08 x 100 + 10 x 0.4 x 20 = 88 of 0.8 x 300 = 240.
  EXPECT_NEAR(*v.goodput_loss_pct, 100.0 * (1.0 - 88.0 / 240.0), 1e-9);
  EXPECT_DOUBLE_EQ(*m.overall.degraded_ratio, 0.5);
  // No path event was logged: detection and first-path are null, not zero, and full
  // convergence comes from collective progress (op 10, [100, 200]).
  EXPECT_FALSE(v.detection_ms.has_value());
  EXPECT_FALSE(v.failover_first_ms.has_value());
  EXPECT_DOUBLE_EQ(*v.failover_latency_ms, 100);
  EXPECT_EQ(m.per_fault[0].convergence, "collective_progress");
}

TEST(Metrics, PermanentFaultAgainstFullCapacityOrUnknownCapacityDoesNotRecover) {
  MetricsOptions full = Opts(90, 50);
  full.faults.push_back({"drop", true, 1.0});
  EXPECT_FALSE(ComputeMetrics(PermanentHistory(), full).overall.recovery_ms.has_value());
  MetricsOptions unknown = Opts(90, 50);
  unknown.faults.push_back({"drop", true, std::nullopt});
  RunMetrics m = ComputeMetrics(PermanentHistory(), unknown);
  EXPECT_FALSE(m.overall.recovery_ms.has_value());
  EXPECT_DOUBLE_EQ(*m.overall.degraded_ratio, 0.5);  // needs no capacity model
}

TEST(Metrics, FaultBeforeWarmupEndsLeavesNoBaseline) {
  HistoryBuilder b;
  b.Ops(10, 0, 10).Op(100, 250).Ops(15, 250, 10).End(400);
  b.Fault("early", "link_down", 0, 50, 150);
  b.Event(80, EventKind::kPathDown, 0);
  MetricsOptions o = Opts();
  o.warmup_ns = 200 * kMs;
  RunMetrics m = ComputeMetrics(b.h(), o);
  const MetricValues& v = m.per_fault[0].values;
  EXPECT_FALSE(m.overall.baseline_busbw_gbps.has_value());
  EXPECT_FALSE(m.baseline_op_ms.has_value());
  EXPECT_FALSE(v.stall_ms.has_value());
  EXPECT_FALSE(v.recovery_ms.has_value());
  EXPECT_FALSE(v.goodput_loss_pct.has_value());
  EXPECT_FALSE(m.overall.recovery_ms.has_value());
  // Event metrics do not need a baseline.
  EXPECT_DOUBLE_EQ(*v.detection_ms, 30);
}

TEST(Metrics, WarmupByCountExcludesTheFirstCollectives) {
  HistoryBuilder b;
  b.Ops(6, 0, 40).Ops(4, 240, 10).End(280);  // 6 slow (0.2) then 4 fast (0.8)
  RunMetrics no_warmup = ComputeMetrics(b.h(), Opts());
  EXPECT_DOUBLE_EQ(*no_warmup.overall.baseline_busbw_gbps, 0.2);
  MetricsOptions o = Opts();
  o.warmup_iters = 6;
  EXPECT_DOUBLE_EQ(*ComputeMetrics(b.h(), o).overall.baseline_busbw_gbps, 0.8);
  EXPECT_EQ(*ComputeMetrics(b.h(), o).measured_from_ns, 240 * kMs);  // the baseline's start
  // The baseline's median collective time (what stall_ms subtracts): 10 ms after the six slow
  // ones, (40 + 40) / 2 with them.
  EXPECT_DOUBLE_EQ(*ComputeMetrics(b.h(), o).baseline_op_ms, 10);
  EXPECT_DOUBLE_EQ(*no_warmup.baseline_op_ms, 40);
  o.warmup_iters = 5;  // 0.2 and four 0.8: odd count, median 0.8
  EXPECT_DOUBLE_EQ(*ComputeMetrics(b.h(), o).overall.baseline_busbw_gbps, 0.8);
  o.warmup_iters = 4;  // 0.2, 0.2, 0.8 x 4: even count, median (0.8 + 0.8) / 2
  EXPECT_DOUBLE_EQ(*ComputeMetrics(b.h(), o).overall.baseline_busbw_gbps, 0.8);
  o.warmup_iters = 2;  // 0.2 x 4, 0.8 x 4: median (0.2 + 0.8) / 2
  EXPECT_DOUBLE_EQ(*ComputeMetrics(b.h(), o).overall.baseline_busbw_gbps, 0.5);
}

TEST(Metrics, NoCollectiveAfterTheFault) {
  HistoryBuilder b;
  b.Ops(10, 0, 10).FailedOp(100, 500).End(600);  // the 11th times out at 500
  b.Fault("f1", "link_down", 0, 100, std::nullopt);
  MetricsOptions o = Opts();
  o.faults.push_back({"f1", true, 0.5});
  RunMetrics m = ComputeMetrics(b.h(), o);
  const MetricValues& v = m.per_fault[0].values;
  EXPECT_DOUBLE_EQ(*v.stall_ms, 390);  // (100, 500) minus 10
  EXPECT_FALSE(v.recovery_ms.has_value());
  EXPECT_FALSE(v.degraded_ratio.has_value());  // no collective in the steady half
  EXPECT_DOUBLE_EQ(*v.goodput_loss_pct, 100);
  EXPECT_FALSE(m.overall.recovery_ms.has_value());
  // Never converged: no collective started after the fault completed.
  EXPECT_TRUE(m.per_fault[0].never_converged);
  EXPECT_FALSE(v.failover_latency_ms.has_value());
  EXPECT_FALSE(m.overall.failover_latency_ms.has_value());
}

TEST(Metrics, AHangWithNothingEndedAfterTheFaultStallsToTheRunsEnd) {
  // Ten collectives, then a fault at 105 and nothing more: no collective completes or fails
  // (the ranks hang until the runner's watchdog ends the run at 5000). The stall is measured
  // to that end, (100, 5000) minus the 10 ms median collective, not read as none.
  HistoryBuilder b;
  b.Ops(10, 0, 10).End(5000);
  b.Fault("f1", "link_down", 0, 105, std::nullopt);
  b.h().watchdog_fired = true;
  RunMetrics m = ComputeMetrics(b.h(), Opts());
  EXPECT_DOUBLE_EQ(*m.per_fault[0].values.stall_ms, 4890);
  EXPECT_DOUBLE_EQ(*m.overall.stall_ms, 4890);
  EXPECT_EQ(m.outcome, Outcome::kHung);
  // A transient fault reverted at 2000 still overlaps the same open gap.
  HistoryBuilder c;
  c.Ops(10, 0, 10).End(5000);
  c.Fault("f1", "link_down", 0, 105, 2000);
  c.h().watchdog_fired = true;
  EXPECT_DOUBLE_EQ(*ComputeMetrics(c.h(), Opts()).per_fault[0].values.stall_ms, 4890);
  // A rank that reported an error at 3000 (outside any measured collective: the ranks' stop
  // agreement) ends the gap there, as a failed collective would.
  HistoryBuilder d;
  d.Ops(10, 0, 10).End(5000);
  d.Fault("f1", "link_down", 0, 105, std::nullopt);
  d.h().ranks[0].exit = RankExit::kError;
  d.h().ranks[0].first_error_ns = 3000 * kMs;
  d.h().watchdog_fired = true;
  EXPECT_DOUBLE_EQ(*ComputeMetrics(d.h(), Opts()).per_fault[0].values.stall_ms, 2890);
}

TEST(Metrics, AHangAfterTheCollectiveInFlightAtTheFaultStallsToTheFirstError) {
  // Ten 10 ms collectives, the last (90, 100) in flight at a fault at 95 and ending after it;
  // nothing completes after them, and the run ends at 5000.
  auto hang = [](const char* kind, std::optional<int64_t> reverted) {
    HistoryBuilder b;
    b.Ops(10, 0, 10).End(5000);
    b.Fault("f1", kind, 0, 95, reverted);
    return b;
  };
  auto stall = [](HistoryBuilder& b) {
    return *ComputeMetrics(b.h(), Opts()).per_fault[0].values.stall_ms;
  };
  // Both ranks report an error at 3000 from their stop agreement (no measured collective).
  // The stall runs from 100 to 3000, minus the 10 ms median: the collective that ended 5 ms
  // after the fault does not make the hang a stall of none.
  HistoryBuilder b = hang("port_drop", std::nullopt);
  for (int g = 0; g < 2; ++g) {
    b.h().ranks[g].exit = RankExit::kError;
    b.h().ranks[g].first_error_ns = 3000 * kMs;
  }
  RunMetrics m = ComputeMetrics(b.h(), Opts());
  EXPECT_DOUBLE_EQ(*m.per_fault[0].values.stall_ms, 2890);
  EXPECT_DOUBLE_EQ(*m.overall.stall_ms, 2890);
  // The same when the runner's watchdog ended ranks that never said a word.
  HistoryBuilder c = hang("port_drop", std::nullopt);
  c.h().watchdog_fired = true;
  EXPECT_DOUBLE_EQ(stall(c), 4890);
  // A fault reverted at 97, before the last collective ended, is not charged with a hang
  // that began after it was over.
  HistoryBuilder d = hang("link_down", 97);
  d.h().watchdog_fired = true;
  EXPECT_DOUBLE_EQ(stall(d), 0);
  // A run whose ranks all completed keeps its teardown out of the stall; so does one whose
  // rank died without a word after the last collective (its workload may have been done).
  HistoryBuilder f = hang("port_drop", std::nullopt);
  EXPECT_DOUBLE_EQ(stall(f), 0);
  f.h().ranks[1].exit = RankExit::kCrashed;
  f.h().ranks[1].end_ns = 4000 * kMs;
  EXPECT_DOUBLE_EQ(stall(f), 0);
}

TEST(Metrics, PeerWithoutEventsHasNullEventMetrics) {
  History h = TransientHistory();
  h.events_supported = false;
  h.events.clear();
  RunMetrics m = ComputeMetrics(h, Opts(90, 50));
  EXPECT_FALSE(m.per_fault[0].values.detection_ms.has_value());
  EXPECT_FALSE(m.per_fault[0].values.failover_first_ms.has_value());
  EXPECT_FALSE(m.overall.detection_ms.has_value());
  // Full convergence from collective progress: rank 0 (on host 0) completed op 10, started
  // at the fault, at 250.
  EXPECT_DOUBLE_EQ(*m.per_fault[0].values.failover_latency_ms, 150);
  EXPECT_EQ(m.per_fault[0].convergence, "collective_progress");
  const nlohmann::json j = m.overall.ToJson();
  EXPECT_TRUE(j.at("detection_ms").is_null());
  EXPECT_TRUE(j.at("failover_first_ms").is_null());
  EXPECT_DOUBLE_EQ(j.at("failover_latency_ms").get<double>(), 150);
  EXPECT_DOUBLE_EQ(j.at("stall_ms").get<double>(), 140);
}

TEST(Metrics, UnappliedFaultHasOnlyTheBaseline) {
  History h = TransientHistory();
  h.faults[0].applied_ns.reset();
  h.faults[0].error = "kernel refused";
  RunMetrics m = ComputeMetrics(h, Opts(90, 50));
  const MetricValues& v = m.per_fault[0].values;
  EXPECT_DOUBLE_EQ(*v.baseline_busbw_gbps, 0.8);  // every op counts as pre-fault now
  EXPECT_FALSE(v.stall_ms.has_value());
  EXPECT_FALSE(v.detection_ms.has_value());
  EXPECT_FALSE(m.overall.recovery_ms.has_value());
}

TEST(Metrics, OverallIsTheWorstOverFaults) {
  HistoryBuilder b;
  b.Ops(10, 0, 10).Op(100, 150).Ops(10, 150, 10).Op(250, 450).Ops(5, 450, 10).End(500);
  b.Fault("a", "link_down", 0, 100, 150);
  b.Fault("b", "link_down", 1, 250, 300);
  b.Event(110, EventKind::kPathDown, 0).Event(300, EventKind::kPathDown, 1);
  RunMetrics m = ComputeMetrics(b.h(), Opts(90, 30));
  EXPECT_DOUBLE_EQ(*m.per_fault[0].values.stall_ms, 40);
  EXPECT_DOUBLE_EQ(*m.per_fault[1].values.stall_ms, 190);
  EXPECT_DOUBLE_EQ(*m.overall.stall_ms, 190);
  EXPECT_DOUBLE_EQ(*m.per_fault[0].values.detection_ms, 10);
  EXPECT_DOUBLE_EQ(*m.per_fault[1].values.detection_ms, 50);
  EXPECT_DOUBLE_EQ(*m.overall.detection_ms, 50);
  EXPECT_DOUBLE_EQ(*m.per_fault[0].values.recovery_ms, 50);
  EXPECT_DOUBLE_EQ(*m.per_fault[1].values.recovery_ms, 200);
  EXPECT_DOUBLE_EQ(*m.overall.recovery_ms, 200);
}

// The overall figure is the worst over the applied faults; when one fault's figure is null
// the worst is unknown, so the overall figure is null too (not the other faults' worst).
TEST(Metrics, OverallIsNullWhenAnAppliedFaultsFigureIsNull) {
  HistoryBuilder b;
  b.Ops(10, 0, 10).Op(100, 150).Ops(10, 150, 10).Op(250, 450).Ops(5, 450, 10).End(500);
  b.Fault("a", "link_down", 0, 100, 150);
  b.Fault("b", "link_down", 1, 250, 300);
  // Fault a is detected and its flow resumes; no path event crosses fault b's target.
  b.Event(110, EventKind::kPathDown, 0).Event(120, EventKind::kResumed, 1);
  RunMetrics m = ComputeMetrics(b.h(), Opts(90, 30));
  EXPECT_DOUBLE_EQ(*m.per_fault[0].values.detection_ms, 10);
  EXPECT_DOUBLE_EQ(*m.per_fault[0].values.failover_first_ms, 20);
  EXPECT_FALSE(m.per_fault[1].values.detection_ms.has_value());
  EXPECT_FALSE(m.per_fault[1].values.failover_first_ms.has_value());
  EXPECT_FALSE(m.overall.detection_ms.has_value());
  EXPECT_FALSE(m.overall.failover_first_ms.has_value());
  // Figures every fault has stay the worst over them.
  EXPECT_DOUBLE_EQ(*m.overall.stall_ms, 190);

  // An expectation on a null figure fails and says which fault has none.
  Expectations e;
  e.detection_ms_max = 1000;
  e.failover_first_ms_max = 1000;
  e.stall_ms_max = 1000;
  const std::vector<CheckResult> checks = CheckExpectations(e, m);
  ASSERT_EQ(checks.size(), 3u);
  for (const CheckResult& c : checks) {
    if (c.name == "stall_ms") {
      EXPECT_TRUE(c.pass);
      EXPECT_EQ(c.reason, "");
      EXPECT_FALSE(c.ToJson().contains("reason"));
      continue;
    }
    EXPECT_FALSE(c.pass) << c.name;
    EXPECT_TRUE(c.value.is_null()) << c.name;
    EXPECT_EQ(c.reason,
              "null: fault b has none (no path event of the library crossed its target)")
        << c.name;
    EXPECT_EQ(c.ToJson().at("reason"), c.reason);
  }
}

TEST(Metrics, OverallGoodputLossIsNullWhenAFaultHasNone) {
  // Fault late is applied after the last collective: its window [a, e] is empty, so it has no
  // goodput loss, and the run's worst loss is not known.
  HistoryBuilder b;
  b.Ops(10, 0, 10).Op(100, 250).Ops(15, 250, 10).End(500);
  b.Fault("f1", "link_down", 0, 100, 300);
  b.Fault("late", "link_down", 1, 450, 480);
  RunMetrics m = ComputeMetrics(b.h(), Opts(90, 50));
  EXPECT_NEAR(*m.per_fault[0].values.goodput_loss_pct, 70.0, 1e-9);
  EXPECT_FALSE(m.per_fault[1].values.goodput_loss_pct.has_value());
  EXPECT_FALSE(m.overall.goodput_loss_pct.has_value());
  Expectations e;
  e.goodput_loss_pct_max = 90;
  const std::vector<CheckResult> checks = CheckExpectations(e, m);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_FALSE(checks[0].pass);
  EXPECT_EQ(checks[0].reason, "null: fault late has none");
}

TEST(Metrics, OverallDegradedRatioIsOverThePermanentFaultsOnly) {
  // A transient fault has no degraded_ratio by definition; the permanent one's is the run's.
  HistoryBuilder b;
  b.Ops(10, 0, 10).Op(100, 200).Ops(10, 200, 20).End(400);
  b.Fault("drop", "port_drop", 1, 100, std::nullopt);
  b.Fault("blip", "link_down", 0, 120, 130);
  MetricsOptions o = Opts(90, 50);
  o.faults.push_back({"drop", true, 0.5});
  RunMetrics m = ComputeMetrics(b.h(), o);
  EXPECT_FALSE(m.per_fault[1].values.degraded_ratio.has_value());
  ASSERT_TRUE(m.per_fault[0].values.degraded_ratio.has_value());
  ASSERT_TRUE(m.overall.degraded_ratio.has_value());
  EXPECT_DOUBLE_EQ(*m.overall.degraded_ratio, 0.5);
  // Without a permanent fault there is no degraded_ratio, and an expectation on it fails.
  m = ComputeMetrics(TransientHistory(), Opts(90, 50));
  EXPECT_FALSE(m.overall.degraded_ratio.has_value());
  Expectations e;
  e.degraded_ratio_min = 0.1;
  const std::vector<CheckResult> checks = CheckExpectations(e, m);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_FALSE(checks[0].pass);
  EXPECT_NE(checks[0].reason.find("permanent faults only"), std::string::npos) << checks[0].reason;
}

TEST(Metrics, WrongResultsCountDistinctCollectives) {
  HistoryBuilder b;
  b.Ops(5, 0, 10).End(50);
  b.h().ops[2].wrong = true;  // op 1, rank 0
  b.h().ops[3].wrong = true;  // op 1, rank 1
  b.h().ops[8].wrong = true;  // op 4, rank 0
  EXPECT_EQ(ComputeMetrics(b.h(), Opts()).wrong_results, 2);
  // Not checked: null, not 0.
  MetricsOptions unchecked = Opts();
  unchecked.check = false;
  EXPECT_FALSE(ComputeMetrics(b.h(), unchecked).wrong_results.has_value());
}

History WithExits(std::vector<RankEnd> ends) {
  HistoryBuilder b;
  b.Ops(5, 0, 10).End(1000);
  b.Fault("f", "link_down", 0, 100, std::nullopt);
  b.h().ranks = std::move(ends);
  return b.h();
}

TEST(Metrics, Outcomes) {
  auto outcome = [](const History& h) { return ComputeMetrics(h, Opts()).outcome; };
  EXPECT_EQ(
      outcome(WithExits({{0, RankExit::kCompleted, {}, 0}, {1, RankExit::kCompleted, {}, 0}})),
      Outcome::kSurvived);
  EXPECT_EQ(outcome(WithExits(
                {{0, RankExit::kError, 200 * kMs, 0}, {1, RankExit::kError, 900 * kMs, 0}})),
            Outcome::kAbortedClean);
  // One rank errs 11 s after the fault: beyond the 10 s abort bound.
  EXPECT_EQ(outcome(WithExits(
                {{0, RankExit::kError, 200 * kMs, 0}, {1, RankExit::kError, 11'100 * kMs, 0}})),
            Outcome::kHung);
  EXPECT_EQ(
      outcome(WithExits({{0, RankExit::kCompleted, {}, 0}, {1, RankExit::kError, 200 * kMs, 0}})),
      Outcome::kCrashed);
  EXPECT_EQ(outcome(WithExits({{0, RankExit::kCompleted, {}, 0}, {1, RankExit::kCrashed, {}, 0}})),
            Outcome::kCrashed);
  // A rank killed by the scenario does not count against survival.
  EXPECT_EQ(outcome(WithExits({{0, RankExit::kCompleted, {}, 0}, {1, RankExit::kKilled, {}, 0}})),
            Outcome::kSurvived);
  History hung = WithExits({{0, RankExit::kCompleted, {}, 0}, {1, RankExit::kCompleted, {}, 0}});
  hung.watchdog_fired = true;
  EXPECT_EQ(outcome(hung), Outcome::kHung);
  EXPECT_EQ(outcome(WithExits({})), Outcome::kCrashed);
  // Every rank "returned an error" within the bound, but one of them only because its own
  // watchdog ended a call that never returned: a hang, not a clean abort.
  History watchdog = WithExits(
      {{0, RankExit::kError, 200 * kMs, 0}, {1, RankExit::kError, 900 * kMs, 0, true}});
  EXPECT_EQ(outcome(watchdog), Outcome::kHung);
  // The abort bound is the scenario's (expect.abort_within): 500 ms makes the same run hung.
  MetricsOptions tight = Opts();
  tight.abort_bound_ns = 500 * kMs;
  History late = WithExits(
      {{0, RankExit::kError, 200 * kMs, 0}, {1, RankExit::kError, 900 * kMs, 0}});
  EXPECT_EQ(ComputeMetrics(late, tight).outcome, Outcome::kHung);
  EXPECT_STREQ(OutcomeName(Outcome::kAbortedClean), "aborted_clean");
}

// Policy shrink: a stopped rank that the others shrank without wakes up to an error; the job
// survived all the same. Without a successful shrink that error is the job's (crashed).
TEST(Metrics, ARankLeftOutByAShrinkDoesNotCountAgainstSurvival) {
  auto outcome = [](const History& h) { return ComputeMetrics(h, Opts()).outcome; };
  History h = WithExits({{0, RankExit::kCompleted, {}, 0}, {1, RankExit::kError, 900 * kMs, 0}});
  EXPECT_EQ(outcome(h), Outcome::kCrashed);
  ShrinkRecord s;
  s.rank = 0;
  s.start_ns = 200 * kMs;
  s.end_ns = 210 * kMs;
  s.excluded = {1};
  s.group = 1;
  s.ok = false;
  h.shrinks.push_back(s);
  EXPECT_EQ(outcome(h), Outcome::kCrashed);
  h.shrinks[0].ok = true;
  EXPECT_EQ(outcome(h), Outcome::kSurvived);
  EXPECT_NE(ComputeMetrics(h, Opts()).outcome_reason.find("1 left out by a shrink"), std::string::npos)
      << ComputeMetrics(h, Opts()).outcome_reason;
}

TEST(Metrics, AbortBoundCountsFromTheLastFaultBeforeTheFirstError) {
  // A link fault the job survived at 0.1 s, then a rank kill at 12 s on which every rank
  // errs within a second: an aborted_clean run, not one that hung for 12 s.
  HistoryBuilder b;
  b.Ops(5, 0, 10).End(20'000);
  b.Fault("flap", "link_down", 0, 100, 400);
  b.Fault("kill", "rank_kill", 0, 12'000, std::nullopt);
  b.h().ranks = {{0, RankExit::kError, 12'200 * kMs, 0}, {1, RankExit::kError, 12'900 * kMs, 0}};
  EXPECT_EQ(ComputeMetrics(b.h(), Opts()).outcome, Outcome::kAbortedClean);
  // The first error before the later fault: the bound counts from the earlier one, and the
  // last rank's error 11.8 s after it is beyond the 10 s bound.
  b.h().ranks = {{0, RankExit::kError, 5'000 * kMs, 0}, {1, RankExit::kError, 11'900 * kMs, 0}};
  EXPECT_EQ(ComputeMetrics(b.h(), Opts()).outcome, Outcome::kHung);
}

const std::optional<std::vector<int>> kBoth = std::vector<int>{0, 1};

// A fault of `kind` on `host`'s `rail`.
FaultSpec RailFault(const char* kind, int host, int rail) {
  FaultSpec f;
  f.kind = kind;
  f.target.host = host;
  f.target.rail = rail;
  return f;
}

// An inventory whose kernels did not say what its rails carry (rail_gbps 0): the capacity a
// bandwidth fault leaves is unknown, never computed against a default; a port that is down
// leaves none of its rate whatever that rate is.
TEST(Metrics, UnknownRailCapacityLeavesABandwidthFaultsShareUnknown) {
  Topology t{2, 1, 2, 0.0};
  FaultSpec bw = RailFault("bandwidth", 1, 0);
  bw.params.rate_bps = 250'000'000;
  EXPECT_FALSE(CapacityLeft(t, {&bw}, kBoth).has_value());
  const FaultSpec down = RailFault("link_down", 0, 1);
  EXPECT_DOUBLE_EQ(*CapacityLeft(t, {&down}, kBoth), 0.5);
  t.rail_gbps = 1.0;  // known: the same fault leaves its share
  EXPECT_DOUBLE_EQ(*CapacityLeft(t, {&bw}, kBoth), 0.625);
}

TEST(Metrics, CapacityModel) {
  Topology t{2, 2, 2, 1.0};
  const FaultSpec down = RailFault("link_down", 0, 1);
  EXPECT_DOUBLE_EQ(*CapacityLeft(t, {&down}, kBoth), 0.5);
  FaultSpec bw = RailFault("bandwidth", 1, 0);
  bw.params.rate_bps = 250'000'000;
  EXPECT_DOUBLE_EQ(*CapacityLeft(t, {&bw}, kBoth), 0.625);
  EXPECT_DOUBLE_EQ(*CapacityLeft(t, {&bw, &down}, kBoth), 0.5);
  FaultSpec loss;
  loss.kind = "loss";
  loss.target.rail = 0;
  EXPECT_FALSE(CapacityLeft(t, {&loss}, kBoth).has_value());
  EXPECT_DOUBLE_EQ(*CapacityLeft(t, {}, kBoth), 1.0);
  // The library's real rail set: one that carries data on rail 0 only (Gloo's TCP pair) keeps
  // all of it under a fault on rail 1 and none under one on rail 0.
  const std::optional<std::vector<int>> rail0 = std::vector<int>{0};
  EXPECT_DOUBLE_EQ(*CapacityLeft(t, {&down}, rail0), 1.0);
  FaultSpec down0 = down;
  down0.target.rail = 0;
  EXPECT_DOUBLE_EQ(*CapacityLeft(t, {&down0}, rail0), 0.0);
  EXPECT_DOUBLE_EQ(*CapacityLeft(t, {&bw}, rail0), 0.25);
  // Rails not known (a library that picks its interfaces itself): no model.
  EXPECT_FALSE(CapacityLeft(t, {&down}, std::nullopt).has_value());
  EXPECT_DOUBLE_EQ(*CapacityLeft(t, {}, std::nullopt), 1.0);
}

// nics: per_rank: the unit is a port; a host keeps the share of its ports that survive.
TEST(Metrics, CapacityModelPerRankPorts) {
  Topology t{2, 2, 2, 1.0, NicLayout::kPerRank};
  auto port_down = [](int host, int rank, int rail) {
    FaultSpec f;
    f.kind = "port_drop";
    f.target.host = host;
    f.target.rank = rank;
    f.target.rail = rail;
    f.target.port = true;
    return f;
  };
  FaultSpec a = port_down(0, 1, 0);
  FaultSpec b = port_down(0, 1, 1);
  EXPECT_DOUBLE_EQ(*CapacityLeft(t, {&a}, kBoth), 0.75);     // 3 of host 0's 4 ports
  EXPECT_DOUBLE_EQ(*CapacityLeft(t, {&a, &b}, kBoth), 0.5);  // rank 1's NIC dead: relay over rank 0's
  FaultSpec bw = port_down(1, 0, 0);
  bw.kind = "bandwidth";
  bw.params.rate_bps = 250'000'000;
  EXPECT_DOUBLE_EQ(*CapacityLeft(t, {&bw}, kBoth), 0.8125);    // (0.25 + 3) / 4
  EXPECT_DOUBLE_EQ(*CapacityLeft(t, {&bw, &a}, kBoth), 0.75);  // the weaker host
  FaultSpec no_rank = port_down(0, 0, 0);
  no_rank.target.rank.reset();
  EXPECT_FALSE(CapacityLeft(t, {&no_rank}, kBoth).has_value());
  // The same faults with shared NICs count rails (rank ignored): the old numbers.
  Topology shared{2, 2, 2, 1.0};
  EXPECT_DOUBLE_EQ(*CapacityLeft(shared, {&a}, kBoth), 0.5);
}

// A fault on global rank 1's port on rail 0: only events of paths ending at rank 1 count (its
// own, or a peer's towards it); the same history without the port model takes the first
// events on the rail from anyone.
TEST(Metrics, PerRankPortFaultMatchesEventsOfItsRank) {
  HistoryBuilder b;
  b.Ops(10, 0, 10).Op(100, 150).Ops(10, 150, 10).End(300);
  b.Fault("p", "link_down", 0, 100, 200);
  History h = b.h();
  auto ev = [&](int64_t t_ms, EventKind kind, int rank, int path, int peer) {
    CclEvent e;
    e.time_ns = t_ms * kMs;
    e.kind = kind;
    e.rank = rank;
    e.path = path;
    e.peer = peer;
    h.events.push_back(e);
  };
  h.world_size = 4;  // ranks 2 and 3 only in events: their collectives are not the point here
  h.ranks.push_back({2, RankExit::kKilled, std::nullopt, 0});
  h.ranks.push_back({3, RankExit::kKilled, std::nullopt, 0});
  ev(105, EventKind::kPathDown, 0, 0, 2);  // rank 0 <-> rank 2 on rail 0: not this port
  ev(120, EventKind::kPathDown, 0, 0, 1);  // rank 0's path to rank 1 on rail 0
  ev(125, EventKind::kResumed, 0, 1, 2);   // not this port
  ev(130, EventKind::kResumed, 1, 0, 0);   // rank 1 -> 0 was never reported down
  ev(140, EventKind::kResumed, 0, 1, 1);   // rank 0 -> 1 again, on rail 1
  MetricsOptions o = Opts();
  MetricsOptions::FaultModel m;
  m.id = "p";
  m.port_rank = 1;
  o.faults.push_back(m);
  RunMetrics r = ComputeMetrics(h, o);
  ASSERT_EQ(r.per_fault.size(), 1u);
  EXPECT_DOUBLE_EQ(*r.per_fault[0].values.detection_ms, 20);
  EXPECT_DOUBLE_EQ(*r.per_fault[0].values.failover_first_ms, 40);
  EXPECT_DOUBLE_EQ(*r.per_fault[0].values.failover_latency_ms, 40);
  EXPECT_EQ(r.per_fault[0].flows.size(), 1u);
  // Without the port model every flow on rail 0 at host 0 counts: 0 -> 2 went down first and
  // resumed first, 0 -> 1 last.
  o.faults[0].port_rank = -1;
  RunMetrics any = ComputeMetrics(h, o);
  EXPECT_DOUBLE_EQ(*any.per_fault[0].values.detection_ms, 5);
  EXPECT_DOUBLE_EQ(*any.per_fault[0].values.failover_first_ms, 25);
  EXPECT_DOUBLE_EQ(*any.per_fault[0].values.failover_latency_ms, 40);
}

// Four ranks, two per host, two rails; a link_down on host 0's rail 0 over [100, 300] ms.
// Collectives: ten of 10 ms, one slowed to [100, 140], then 10 ms ones to 400.
HistoryBuilder FourRanks() {
  HistoryBuilder b(4);
  b.Ops(10, 0, 10).Op(100, 140).Ops(26, 140, 10).End(400);
  b.Fault("f", "link_down", 0, 100, 300);
  return b;
}
MetricsOptions FourRankOpts() {
  MetricsOptions o = Opts();
  o.topology = Topology{2, 2, 2, 1.0};
  return o;
}

TEST(Metrics, FullConvergenceIsTheLastAffectedFlow) {
  HistoryBuilder b = FourRanks();
  b.Event(102, EventKind::kPathDown, 0, 0, 2)
      .Event(103, EventKind::kPathDown, 0, 0, 3)
      .Event(104, EventKind::kPathDown, 0, 1, 2)
      .Event(105, EventKind::kPathDown, 0, 2, 0)
      .Event(106, EventKind::kPathDown, 0, 3, 1)
      .Event(107, EventKind::kPathDown, 0, 2, 3)  // host 1 to host 1: not behind the fault
      .Event(110, EventKind::kResumed, 1, 0, 2)   // first path
      .Event(115, EventKind::kResumed, 1, 1, 2)
      .Event(130, EventKind::kResumed, 1, 2, 0)
      .Event(190, EventKind::kResumed, 1, 3, 1)   // the last affected flow: full convergence
      .Event(380, EventKind::kResumed, 0, 0, 3);  // 0 -> 3 only after the repair
  RunMetrics m = ComputeMetrics(b.h(), FourRankOpts());
  const FaultMetrics& f = m.per_fault[0];
  EXPECT_DOUBLE_EQ(*f.values.detection_ms, 2);
  EXPECT_DOUBLE_EQ(*f.values.failover_first_ms, 10);
  EXPECT_DOUBLE_EQ(*f.values.failover_latency_ms, 90);
  EXPECT_GE(*f.values.failover_latency_ms, *f.values.failover_first_ms);
  EXPECT_EQ(f.convergence, "path_events");
  EXPECT_FALSE(f.never_converged);
  ASSERT_EQ(f.flows.size(), 5u);
  // 0 -> 3 did not carry data until after the repair, yet collectives completed while it was
  // down ([140, 150] and on): the job did not need it, so it is idle, not the last to converge.
  EXPECT_EQ(f.flows[1].rank, 0);
  EXPECT_EQ(f.flows[1].peer, 3);
  EXPECT_FALSE(f.flows[1].counted);
  EXPECT_EQ(*f.flows[1].resumed_ns, 380 * kMs);
  for (size_t i = 0; i < f.flows.size(); ++i) {
    if (i != 1) {
      EXPECT_TRUE(f.flows[i].counted) << i;
    }
  }
  EXPECT_DOUBLE_EQ(*m.overall.failover_latency_ms, 90);
  EXPECT_DOUBLE_EQ(*m.overall.failover_first_ms, 10);
  // Beside it, convergence with no flow left out: 0 -> 3 resumed at 380.
  ASSERT_TRUE(f.all_flows_ms.has_value());
  EXPECT_DOUBLE_EQ(*f.all_flows_ms, 280);
}

TEST(Metrics, AFlowThatNeverResumesWhileTheJobStallsNeverConverges) {
  HistoryBuilder b(4);
  b.Ops(10, 0, 10).FailedOp(100, 600).End(700);
  b.Fault("f", "link_down", 0, 100, std::nullopt);
  b.Event(102, EventKind::kPathDown, 0, 0, 2)
      .Event(103, EventKind::kPathDown, 0, 2, 0)
      .Event(110, EventKind::kResumed, 1, 0, 2);  // 2 -> 0 never carries data again
  MetricsOptions o = FourRankOpts();
  o.faults.push_back({"f", true, 0.5});
  RunMetrics m = ComputeMetrics(b.h(), o);
  const FaultMetrics& f = m.per_fault[0];
  EXPECT_DOUBLE_EQ(*f.values.failover_first_ms, 10);
  EXPECT_FALSE(f.values.failover_latency_ms.has_value());
  EXPECT_TRUE(f.never_converged);
  EXPECT_TRUE(f.flows[1].counted);
  EXPECT_FALSE(f.flows[1].resumed_ns.has_value());
  EXPECT_FALSE(m.overall.failover_latency_ms.has_value());
  EXPECT_FALSE(f.progress_ms.has_value());
  EXPECT_FALSE(f.all_flows_ms.has_value());
}

TEST(Metrics, ProgressConvergenceIsTheLastAffectedRank) {
  // No path events (a library like Gloo): every rank on host 0 (ranks 0 and 1) must complete
  // a collective it started at or after the fault. Rank 1 is the slower: its op 11 ends at 180.
  HistoryBuilder b = FourRanks();
  History h = b.h();
  h.events_supported = false;
  for (OpRecord& r : h.ops) {
    if (r.index == 11 && r.rank == 1) r.end_ns = 180 * kMs;
    if (r.index == 11 && r.rank == 0) r.end_ns = 160 * kMs;
  }
  RunMetrics m = ComputeMetrics(h, FourRankOpts());
  const FaultMetrics& f = m.per_fault[0];
  EXPECT_FALSE(f.values.detection_ms.has_value());
  EXPECT_FALSE(f.values.failover_first_ms.has_value());
  // Op 10 started at the fault (100) and ended on ranks 0 and 1 at 140.
  EXPECT_DOUBLE_EQ(*f.values.failover_latency_ms, 40);
  EXPECT_DOUBLE_EQ(*f.progress_ms, 40);
  // A fault at 101: the first op started after it is op 11 (from 140): rank 1 ends it at 180.
  h.faults[0].applied_ns = 101 * kMs;
  m = ComputeMetrics(h, FourRankOpts());
  EXPECT_DOUBLE_EQ(*m.per_fault[0].values.failover_latency_ms, 79);
  EXPECT_EQ(m.per_fault[0].convergence, "collective_progress");
}

TEST(Metrics, WindowEndsAtTheLastCollectiveNotAtTeardown) {
  // The ranks left at 1400 ms (a library's slow teardown); the last collective ended at 400.
  HistoryBuilder b;
  b.Ops(20, 0, 10).Ops(10, 200, 20).End(1400);
  b.Fault("p", "port_drop", 1, 200, std::nullopt);
  MetricsOptions o = Opts();
  o.faults.push_back({"p", true, 0.5});
  RunMetrics m = ComputeMetrics(b.h(), o);
  EXPECT_EQ(WindowEndNs(b.h()), 400 * kMs);
  const MetricValues& v = m.per_fault[0].values;
  // The gap to the window end is one collective, not 1000 ms of teardown.
  EXPECT_DOUBLE_EQ(*v.stall_ms, 10);
  // Every collective after the fault ran at half the rate, over [200, 400]: 50% lost.
  EXPECT_NEAR(*v.goodput_loss_pct, 50.0, 1e-9);
  // The steady half is [300, 400], all at 0.4.
  EXPECT_DOUBLE_EQ(*v.degraded_ratio, 0.5);
  // No collective at all: the runner's end.
  History empty;
  empty.run_end_ns = 77;
  EXPECT_EQ(WindowEndNs(empty), 77);
}

TEST(Metrics, FaultFreeStallAndGoodputAreMeasuredByTheSameRule) {
  // 10 ms collectives with 2 ms between them (checking results, the stop agreement), and one
  // pause of 40 ms before the collective at 100 ms: no fault, but the job did stall.
  HistoryBuilder b;
  int64_t t = 0;
  for (int i = 0; i < 20; ++i) {
    if (i == 8) t += 38;  // 40 ms instead of 2 before this one
    b.Op(t, t + 10);
    t += 12;
  }
  b.End(t + 500);
  RunMetrics m = ComputeMetrics(b.h(), Opts());
  // Completion to completion: 12 ms as a rule, 50 ms once; minus the 10 ms median collective.
  EXPECT_DOUBLE_EQ(*m.overall.stall_ms, 40);
  // Goodput as a fault that changes nothing at mid-run (0 + 276 / 2 = 138) would read it:
  // baseline from the cycles ending by then (collectives 1-7, 12 ms each: 8 units per 12 ms),
  // over [138, 276]: 6 ms of the 50 ms cycle of collective 8 and the whole 12 ms cycles of
  // collectives 9-19, where 138 ms at the baseline would have carried 92 units.
  EXPECT_NEAR(*m.overall.goodput_loss_pct,
              100.0 * (1.0 - (11 * 8.0 + 6 * 8.0 / 50.0) / (138 * 8.0 / 12.0)), 1e-9);
  // Evenly spaced collectives read 0: the time between them is part of the baseline cycle.
  HistoryBuilder even;
  for (int i = 0; i < 20; ++i) even.Op(i * 12, i * 12 + 10);
  even.End(1000);
  RunMetrics e = ComputeMetrics(even.h(), Opts());
  EXPECT_NEAR(*e.overall.goodput_loss_pct, 0.0, 1e-9);
  EXPECT_DOUBLE_EQ(*e.overall.stall_ms, 2);
}

TEST(Metrics, GoodputOfAFaultOnAnUnusedPathIsNotALoss) {
  // Collectives with 5 ms between them run on unchanged through a fault: no loss, whatever
  // the spacing (the old rule charged the time between collectives to the fault).
  HistoryBuilder b;
  for (int i = 0; i < 40; ++i) b.Op(i * 15, i * 15 + 10);
  b.End(600);
  b.Fault("f", "link_down", 1, 300, 450);
  RunMetrics m = ComputeMetrics(b.h(), Opts());
  EXPECT_NEAR(*m.per_fault[0].values.goodput_loss_pct, 0.0, 1e-9);
}

TEST(Metrics, OptionsFromScenarioPerRank) {
  const std::string yaml =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 2, rails: 2, nics: per_rank}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 10s}\n"
      "faults:\n"
      "  - {id: a, at: 1s, type: port_drop, target: {host: 1, rank: 1, rail: 0}}\n"
      "  - {id: b, at: 1s, type: port_drop, target: {host: 1, rank: 1, rail: 1}}\n"
      "  - {id: c, at: 2s, type: rank_pause, target: {host: 0, rank: 1}, for: 1s}\n";
  ParseOutcome r = ParseScenario(yaml, "t.yaml");
  ASSERT_TRUE(r.ok());
  MetricsOptions o = MetricsOptionsFor(*r.scenario, kBoth);
  ASSERT_EQ(o.faults.size(), 3u);
  EXPECT_EQ(o.faults[0].port_rank, 3);
  EXPECT_EQ(o.faults[1].port_rank, 3);
  EXPECT_DOUBLE_EQ(*o.faults[1].capacity, 0.5);  // rank 3's NIC is gone: host 1 keeps 2 of 4
  EXPECT_EQ(o.faults[2].port_rank, -1);          // a rank fault
}

TEST(Metrics, OptionsFromScenario) {
  const std::string yaml =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 10s, warmup: 500ms}\n"
      "faults:\n"
      "  - {id: t1, at: 1s, type: link_down, target: {host: 0, rail: 0}, for: 1s}\n"
      "  - {id: p1, at: 3s, type: port_drop, target: {host: 1, rail: 1}}\n"
      "  - {id: t2, at: 5s, type: link_down, target: {host: 0, rail: 0}, for: 1s}\n"
      "expect:\n"
      "  recovery: {pct: 80, within_ms: 900, sustain_ms: 250}\n";
  ParseOutcome r = ParseScenario(yaml, "t.yaml");
  ASSERT_TRUE(r.ok());
  MetricsOptions o = MetricsOptionsFor(*r.scenario, kBoth);
  EXPECT_EQ(o.warmup_ns, 500 * kMs);
  EXPECT_DOUBLE_EQ(o.recovery_pct, 80);
  EXPECT_EQ(o.sustain_ns, 250 * kMs);
  ASSERT_EQ(o.faults.size(), 3u);
  EXPECT_FALSE(o.faults[0].permanent);
  EXPECT_DOUBLE_EQ(*o.faults[0].capacity, 1.0);  // transient, nothing permanent yet
  EXPECT_TRUE(o.faults[1].permanent);
  EXPECT_DOUBLE_EQ(*o.faults[1].capacity, 0.5);
  EXPECT_DOUBLE_EQ(*o.faults[2].capacity, 0.5);  // recovers to what the drop left
}

// A training workload: steps are the ops; the ranks' result lines give the hash and loss.
TEST(Metrics, TrainingStepsPerSecondCountsOnlyMeasuredStepsOnEveryRank) {
  HistoryBuilder b(2);
  b.Ops(2, 0, 500);    // warm-up steps 0, 1
  b.Ops(10, 1000, 100);  // steps 2..11: 10 steps over [1000, 2000] ms
  b.FailedOp(2000, 2100);  // step 12 failed: not a completed step
  b.End(2200);
  const std::string sha(64, 'a');
  b.h().results = {{0, sha, 2.0, {}, {}}, {1, sha, 3.0, {}, {}}};
  TrainingMetrics t = ComputeTraining(b.h(), 2);
  EXPECT_EQ(t.steps_completed, 10);
  ASSERT_TRUE(t.steps_per_s.has_value());
  EXPECT_NEAR(*t.steps_per_s, 10.0, 1e-9);
  EXPECT_EQ(t.ranks_reported, 2);
  ASSERT_TRUE(t.param_sha256.has_value());
  EXPECT_EQ(*t.param_sha256, sha);
  EXPECT_TRUE(t.param_sha256_agree);
  ASSERT_TRUE(t.final_loss.has_value());
  EXPECT_DOUBLE_EQ(*t.final_loss, 2.5);
}

TEST(Metrics, TrainingHashIsNullWhenReplicasDisagreeOrNoneFinished) {
  HistoryBuilder b(2);
  b.Ops(3, 0, 100).End(300);
  b.h().results = {{0, std::string(64, 'a'), 1.0, {}, {}}, {1, std::string(64, 'b'), std::nan(""), {}, {}}};
  TrainingMetrics t = ComputeTraining(b.h(), 0);
  EXPECT_FALSE(t.param_sha256.has_value());
  EXPECT_FALSE(t.param_sha256_agree);
  ASSERT_TRUE(t.final_loss.has_value());
  EXPECT_DOUBLE_EQ(*t.final_loss, 1.0);  // a NaN loss is left out, not averaged in
  EXPECT_TRUE(t.ToJson()["param_sha256"].is_null());

  HistoryBuilder none(2);
  none.Ops(1, 0, 100).End(100);
  TrainingMetrics u = ComputeTraining(none.h(), 5);  // every step was warm-up
  EXPECT_EQ(u.steps_completed, 0);
  EXPECT_FALSE(u.steps_per_s.has_value());
  EXPECT_FALSE(u.param_sha256.has_value());
  EXPECT_FALSE(u.final_loss.has_value());
  EXPECT_TRUE(u.ToJson()["steps_per_s"].is_null());
}

// The metric table (reports/metric_table.h) against what metrics.cc writes: every key of a
// run's metrics, of each fault's and of a training run's has its row, and every row of the
// per-fault table is written.
std::set<std::string> Keys(const nlohmann::json& obj) {
  std::set<std::string> out;
  for (const auto& [k, v] : obj.items()) out.insert(k);
  return out;
}

TEST(MetricTable, EveryMetricWrittenHasARowAndEveryRowIsWritten) {
  std::set<std::string> rows;
  for (const auto& r : reports::kMetricTable) rows.insert(r.name);
  for (const History& h : {TransientHistory(), PermanentHistory()}) {
    const RunMetrics m = ComputeMetrics(h, Opts(90, 50));
    EXPECT_EQ(Keys(m.overall.ToJson()), rows);
    ASSERT_FALSE(m.per_fault.empty());
    for (const auto& pf : m.per_fault) EXPECT_EQ(Keys(pf.values.ToJson()), rows);
  }
  std::set<std::string> training_rows;
  for (const auto& r : reports::kTrainingMetricTable) training_rows.insert(r.name);
  HistoryBuilder b;
  b.Ops(10, 0, 10).End(200);
  EXPECT_EQ(Keys(ComputeTraining(b.h(), 0, true).ToJson()), training_rows);
  for (const auto& k : Keys(ComputeTraining(b.h(), 0, true).ToJson())) {
    EXPECT_NE(reports::FindMetric(k), nullptr) << k;
  }
}

// Every expect: key the scenario parser accepts (runner/core/scenario.cc, ParseExpect) maps
// to a metric row or is one of the run-wide keys, and each row's expectation parses and gives
// a check named by the row's key with the row's limit key.
TEST(MetricTable, EveryExpectationKeyMapsToARow) {
  // The keys ParseExpect accepts, in its order.
  const std::vector<std::string> accepted = {
      "outcome",      "wrong_results", "stall_ms",       "failover_latency_ms", "failover_first_ms",
      "detection_ms", "recovery",      "degraded_ratio", "goodput_loss_pct",    "abort_within"};
  std::set<std::string> run_wide(reports::kRunExpectations.begin(),
                                 reports::kRunExpectations.end());
  for (const auto& k : accepted) {
    EXPECT_TRUE(run_wide.count(k) == 1 || reports::MetricForExpectation(k) != nullptr) << k;
  }
  // Each row with an expectation: the parser accepts it, and the check is the row's.
  const std::string yaml = R"(name: t
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
workload: {op: allreduce, bytes: 1MiB, duration: 2s, check: true}
faults:
  - {id: f1, at: 1s, type: link_down, target: {host: 0, rail: 0}}
expect:
  outcome: survive
  wrong_results: 0
  stall_ms: {max: 500}
  detection_ms: {max: 50}
  failover_first_ms: {max: 60}
  failover_latency_ms: {max: 100}
  recovery: {pct: 90, within_ms: 1000}
  degraded_ratio: {min: 0.4}
  goodput_loss_pct: {max: 50}
)";
  ParseOutcome r = ParseScenario(yaml, "t.yaml");
  ASSERT_TRUE(r.ok()) << (r.diagnostics.empty() ? "" : r.diagnostics[0].ToString());
  const RunMetrics m = ComputeMetrics(PermanentHistory(), Opts(90, 50));
  const std::vector<CheckResult> checks = CheckExpectations(r.scenario->expect, m);
  std::set<std::string> checked;
  for (const CheckResult& c : checks) {
    checked.insert(c.name);
    if (c.name == "outcome" || c.name == "wrong_results") continue;
    const reports::MetricRow* row = reports::FindMetric(c.name);
    ASSERT_NE(row, nullptr) << c.name;
    ASSERT_NE(row->expectation, nullptr) << c.name;
    EXPECT_EQ(reports::MetricForExpectation(row->expectation), row);
    EXPECT_TRUE(c.limit.contains(row->limit)) << c.name << " " << c.limit.dump();
  }
  for (const auto& row : reports::kMetricTable) {
    if (row.expectation != nullptr) {
      EXPECT_EQ(checked.count(row.name), 1u) << row.name;
    }
  }
  EXPECT_EQ(checked.size(), 9u);
  // What report.json's expectations say comes from the table: pin it (DESIGN.md, "Report").
  const std::map<std::string, nlohmann::json> limits = {
      {"stall_ms", {{"max", 500.0}}},
      {"detection_ms", {{"max", 50.0}}},
      {"failover_first_ms", {{"max", 60.0}}},
      {"failover_latency_ms", {{"max", 100.0}}},
      {"recovery_ms", nullptr},  // {pct, within_ms, sustain_ms}: checked below
      {"degraded_ratio", {{"min", 0.4}}},
      {"goodput_loss_pct", {{"max", 50.0}}}};
  for (const CheckResult& c : checks) {
    if (limits.count(c.name) == 0) continue;
    if (c.name == "recovery_ms") {
      EXPECT_TRUE(c.limit.contains("within_ms") && c.limit.contains("pct")) << c.limit.dump();
      continue;
    }
    EXPECT_EQ(c.limit, limits.at(c.name)) << c.name;
  }
  EXPECT_EQ(reports::MetricForExpectation("outcome"), nullptr);
  EXPECT_EQ(reports::MetricForExpectation("recovery")->name, std::string("recovery_ms"));
}

}  // namespace
}  // namespace faultline::runner

namespace faultline::runner {
namespace {

// The train workload: useful samples are the finished job's lineage, else the newest
// checkpoint every rank wrote; the rate is over the job's whole time, restarts included; a
// step re-run after a restart is another collective.
TEST(Metrics, TrainUsefulSamplesRateAndRestartedSteps) {
  HistoryBuilder b(2);
  b.Ops(4, 0, 100);  // steps 0..3 over [0, 400] ms (incarnation 0)
  // Incarnation 1 re-runs steps 2..3 after a restart at 500 ms, over [900, 1100] ms.
  for (int r = 0; r < 2; ++r) {
    for (int s = 2; s < 4; ++s) {
      OpRecord op;
      op.rank = r;
      op.incarnation = 1;
      op.index = s + kIncarnationIndexStride;
      op.start_ns = (900 + (s - 2) * 100) * 1'000'000LL;
      op.end_ns = op.start_ns + 100'000'000LL;
      op.bytes = 1 << 20;
      b.h().ops.push_back(op);
    }
  }
  b.End(1200);
  // Same step indices, different incarnations: six collectives, not four.
  EXPECT_EQ(CompleteOps(b.h()).size(), 6u);
  const std::string sha(64, 'c');
  b.h().results = {{0, sha, 1.0, 4, 64}, {1, sha, 1.0, 4, 64}};
  TrainingMetrics t = ComputeTraining(b.h(), 0, /*train=*/true);
  ASSERT_TRUE(t.useful_samples && t.job_time_s && t.samples_per_s);
  EXPECT_TRUE(t.finished);
  EXPECT_FALSE(t.resubmission_s.has_value());  // a finished job pays no resubmission
  EXPECT_EQ(*t.useful_samples, 64u);
  EXPECT_NEAR(*t.job_time_s, 1.1, 1e-9);  // time zero to the last step's end
  EXPECT_NEAR(*t.samples_per_s, 64 / 1.1, 1e-9);
  EXPECT_FALSE(t.goodput_ratio.has_value());  // the runner's, from the twin

  // Unfinished: the newest checkpoint both ranks wrote counts, not one only rank 0 wrote.
  b.h().results.clear();
  CheckpointRecord c;
  c.rank = 0;
  c.step = 2;
  c.samples = 32;
  b.h().checkpoints.push_back(c);
  c.rank = 1;
  b.h().checkpoints.push_back(c);
  c.rank = 0;
  c.step = 4;
  c.samples = 64;
  b.h().checkpoints.push_back(c);
  t = ComputeTraining(b.h(), 0, true);
  ASSERT_TRUE(t.useful_samples.has_value());
  EXPECT_EQ(*t.useful_samples, 32u);
  EXPECT_FALSE(t.finished);
  // No restart measured in this run: the resubmission it needs has no price, and its rate is
  // not put beside a finished job's.
  EXPECT_FALSE(t.resubmission_s.has_value());
  EXPECT_FALSE(t.job_time_s.has_value());
  EXPECT_FALSE(t.samples_per_s.has_value());
  // With measured restarts (their mean, 400 ms; one never reached a step and has no cost): the
  // time until its last rank gave up (End: 1200 ms), not its last step's end, plus that.
  RestartRecord r;
  r.incarnation = 1;
  r.cost_ns = 300'000'000;
  b.h().restarts.push_back(r);
  r.cost_ns = 500'000'000;
  b.h().restarts.push_back(r);
  r.cost_ns.reset();
  b.h().restarts.push_back(r);
  t = ComputeTraining(b.h(), 0, true);
  ASSERT_TRUE(t.resubmission_s && t.job_time_s && t.samples_per_s);
  EXPECT_NEAR(*t.resubmission_s, 0.4, 1e-9);
  EXPECT_NEAR(*t.job_time_s, 1.6, 1e-9);
  EXPECT_NEAR(*t.samples_per_s, 32 / 1.6, 1e-9);
  // Torch logs say nothing of samples: no rate is made up.
  EXPECT_FALSE(ComputeTraining(b.h(), 0, false).samples_per_s.has_value());
}

}  // namespace
}  // namespace faultline::runner
