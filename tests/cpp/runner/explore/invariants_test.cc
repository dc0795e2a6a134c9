// Each invariant over a hand-made run directory: a good run passes every one, and each is
// broken on purpose by the smallest change that a real run could show.
#include "runner/explore/invariants.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "runner/core/worker_log.h"

namespace faultline::runner::explore {
namespace {
namespace fs = std::filesystem;

constexpr int64_t kT0 = 1'000'000'000'000;  // the ranks' clock at time zero
constexpr int64_t kMs = 1'000'000;

// A run of 2 ranks over 4 s with a 500 ms link_down at 1.5 s, written like a real one.
struct HandMadeRun {
  std::string scenario = R"(name: hand
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
workload: {op: allreduce, bytes: 1MiB, duration: 4s, warmup: 200ms}
faults:
  - {id: f0, at: 1500ms, type: link_down, target: {host: 1, rail: 0}, for: 500ms}
)";
  nlohmann::json report = {
      {"schema", "faultline.report/v1"},
      {"ccl", "ftccl"},
      {"outcome", "survived"},
      {"correctness", {{"checked", true}, {"wrong", 0}}},
      {"environment", {{"run_id", "ab12cd"}}},
      {"metrics", {{"baseline_busbw_gbps", 1.0}}},
      {"faults",
       {{{"id", "f0"}, {"type", "link_down"}, {"applied_s", 1.5}, {"reverted_s", 2.0}}}}};
  // busbw per 50 ms slot: 1.0 before the fault, 0.2 during it, `after` from `recover_s` on.
  double after = 0.95;
  double recover_s = 2.3;
  int64_t slow_op_ms = 0;  // one collective of rank 1 takes this long (0: none)
  bool rank1_end = true;
  bool watchdog = false;
  // No collective completes with a start in [gap_from_s, gap_to_s) (a stall).
  double gap_from_s = 0;
  double gap_to_s = 0;
  // The ranks' chunk counters (ftccl's stats line): each rank numbered 100 chunks for the
  // other, which accepted accepted_by1 / accepted_by0 of them and acknowledged cum_by1 of
  // rank 0's; no stats line at all when !stats.
  bool stats = true;
  uint64_t accepted_by1 = 100;
  uint64_t cum_by1 = 100;
  uint64_t acked_at0 = 100;

  std::string Write(const std::string& name) {
    const fs::path d = fs::path(::testing::TempDir()) / ("explore-inv-" + name);
    fs::remove_all(d);
    fs::create_directories(d / "ranks");
    std::ofstream(d / "report.json") << report.dump(2);
    std::ofstream(d / "scenario.yaml") << scenario;
    std::ofstream ts(d / "timeseries.csv");
    ts << "index,start_s,end_s,duration_ms,bytes,busbw_gbps\n";
    for (int i = 0; i < 80; ++i) {
      const double s = i * 0.05, e = s + 0.04;
      if (s >= gap_from_s && s < gap_to_s) continue;
      const double bw = s < 1.5 ? 1.0 : (s < recover_s ? 0.2 : after);
      ts << i << "," << s << "," << e << ",40," << 1048576 << "," << bw << "\n";
    }
    for (int r = 0; r < 2; ++r) {
      WorkerHeader h;
      h.rank = r;
      h.size = 2;
      h.ccl = "ftccl";
      h.op = "allreduce";
      h.dtype = "f32";
      h.redop = "sum";
      h.bytes = 1048576;
      h.count = 262144;
      h.busbw_factor = 1;
      h.rails = {"r0", "r1"};
      h.duration_ns = 4'000'000'000;
      h.timeout_ms = 10000;
      // The rank's other files and a restarted incarnation's log are not its log.
      std::ofstream(d / "ranks" / ("rank" + std::to_string(r) + ".out")) << "";
      std::ofstream(d / "ranks" / ("rank" + std::to_string(r) + ".err")) << "WARN x\n";
      std::ofstream(d / "ranks" / ("rank" + std::to_string(r) + ".i1.jsonl")) << "";
      std::ofstream log(d / "ranks" / ("rank" + std::to_string(r) + ".jsonl"));
      log << WorkerHeaderLine(h) << WorkerReadyLine(kT0 - kMs);
      for (int i = 0; i < 80; ++i) {
        WorkerOp op;
        op.index = i;
        op.start_ns = kT0 + i * 50 * kMs;
        op.end_ns = op.start_ns + 40 * kMs;
        if (r == 1 && i == 40 && slow_op_ms > 0) op.end_ns = op.start_ns + slow_op_ms * kMs;
        op.bytes = 1048576;
        op.wrong = 0;
        log << WorkerOpLine(op);
      }
      if (r == 1 && !rank1_end) continue;
      if (stats && !(r == 1 && watchdog)) {
        const std::string other = std::to_string(1 - r);
        log << WorkerStatsLine(kT0 + 4'050 * kMs,
                               {{"chunks_numbered_to_rank" + other, 100},
                                {"chunks_accepted_from_rank" + other, r == 1 ? accepted_by1 : 100},
                                {"rx_cumulative_from_rank" + other, r == 1 ? cum_by1 : 100},
                                {"tx_acknowledged_to_rank" + other, r == 0 ? acked_at0 : 100},
                                {"data_frames_sent", 100}});
      }
      WorkerEnd end;
      end.ok = !(r == 1 && watchdog);
      end.watchdog = r == 1 && watchdog;
      end.message = end.ok ? "completed 80 collectives" : "watchdog";
      end.t_ns = kT0 + 4'100 * kMs;
      if (!end.ok) end.first_error_ns = kT0 + 4'000 * kMs;
      log << WorkerEndLine(end);
    }
    return d.string();
  }
};

HostState Clean() {
  HostState h;
  h.netns = {"fl-zz99zz-h0", "other"};
  h.root_links = {"lo", "eth0"};
  h.nft_tables = {"table inet filter"};
  h.pid = 4242;
  return h;
}

const InvariantSettings kOn;

TEST(Invariants, AGoodRunPassesEveryOne) {
  HandMadeRun run;
  const RunView v = LoadRunView(run.Write("good"));
  ASSERT_TRUE(v.report);
  ASSERT_EQ(v.ranks.size(), 2u);
  EXPECT_TRUE(v.ranks[0].error.empty()) << v.ranks[0].error;
  const HostState h = Clean();
  const auto results = CheckInvariants(v, kOn, &h);
  ASSERT_EQ(results.size(), 6u);
  for (const auto& r : results) {
    EXPECT_EQ(r.verdict, Verdict::kPass) << r.name << ": " << r.detail;
  }
}

TEST(Invariants, ExactResultsFailsOnAWrongResult) {
  HandMadeRun run;
  run.report["correctness"]["wrong"] = 2;
  const auto r = CheckExactResults(LoadRunView(run.Write("wrong")));
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_NE(r.detail.find("2 collective(s)"), std::string::npos) << r.detail;
}

TEST(Invariants, ExactResultsFailsWhenNothingWasChecked) {
  HandMadeRun run;
  run.report["correctness"] = {{"checked", false}, {"wrong", 0}};
  const auto r = CheckExactResults(LoadRunView(run.Write("unchecked")));
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_NE(r.detail.find("not checked"), std::string::npos) << r.detail;
}

TEST(Invariants, ExactResultsFailsWithoutAReport) {
  HandMadeRun run;
  const std::string d = run.Write("noreport");
  fs::remove(fs::path(d) / "report.json");
  const auto r = CheckExactResults(LoadRunView(d));
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_NE(r.detail.find("no report.json"), std::string::npos);
}

TEST(Invariants, NoSilentHangFailsOnAHungOutcome) {
  HandMadeRun run;
  run.report["outcome"] = "hung";
  EXPECT_EQ(CheckNoSilentHang(LoadRunView(run.Write("hung")), kOn).verdict, Verdict::kFail);
}

TEST(Invariants, NoSilentHangFailsWhenARankNeverEnded) {
  HandMadeRun run;
  run.rank1_end = false;
  const auto r = CheckNoSilentHang(LoadRunView(run.Write("noend")), kOn);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_NE(r.detail.find("rank 1 never wrote its end"), std::string::npos) << r.detail;
}

TEST(Invariants, NoSilentHangFailsOnACollectivePastTheAbortBound) {
  HandMadeRun run;
  run.slow_op_ms = 10'500;
  const auto r = CheckNoSilentHang(LoadRunView(run.Write("slow")), kOn);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_NE(r.detail.find("collective 40 took 10.500 s"), std::string::npos) << r.detail;
  // Within a longer bound the same run is fine.
  InvariantSettings longer;
  longer.abort_within_ns = 11'000'000'000;
  EXPECT_EQ(CheckNoSilentHang(LoadRunView(run.Write("slow")), longer).verdict, Verdict::kPass);
}

TEST(Invariants, NoSilentHangFailsOnAWatchdogEnd) {
  HandMadeRun run;
  run.watchdog = true;
  const auto r = CheckNoSilentHang(LoadRunView(run.Write("watchdog")), kOn);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_NE(r.detail.find("watchdog"), std::string::npos);
}

TEST(Invariants, NoSilentHangFailsWhenTheErrorReachedOnlySomeRanks) {
  HandMadeRun run;
  run.report["outcome"] = "crashed";
  EXPECT_EQ(CheckNoSilentHang(LoadRunView(run.Write("crashed")), kOn).verdict, Verdict::kFail);
}

TEST(Invariants, LivenessFailsWhenThroughputStaysLowAfterTheHeal) {
  HandMadeRun run;
  run.after = 0.3;  // below 50 % of the 1.0 baseline for the rest of the run
  const auto r = CheckLivenessAfterHeal(LoadRunView(run.Write("low")), kOn);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_NE(r.detail.find("best 0.300"), std::string::npos) << r.detail;
}

TEST(Invariants, LivenessFailsWhenRecoveryComesTooLate) {
  HandMadeRun run;
  run.recover_s = 3.5;  // heal at 2.0 s, back only after 1.5 s ...
  InvariantSettings s;
  s.liveness_within_ns = 1'000'000'000;  // ... where 1 s is allowed
  EXPECT_EQ(CheckLivenessAfterHeal(LoadRunView(run.Write("late")), s).verdict, Verdict::kFail);
  s.liveness_within_ns = 2'000'000'000;
  EXPECT_EQ(CheckLivenessAfterHeal(LoadRunView(run.Write("late")), s).verdict, Verdict::kPass);
}

TEST(Invariants, LivenessDoesNotApplyWithoutFailoverOrHeal) {
  HandMadeRun gloo;
  gloo.report["ccl"] = "gloo";
  gloo.after = 0.0;
  EXPECT_EQ(CheckLivenessAfterHeal(LoadRunView(gloo.Write("gloo")), kOn).verdict,
            Verdict::kNotApplicable);
  HandMadeRun drop;
  drop.report["faults"][0]["type"] = "port_drop";
  drop.scenario = R"(name: hand
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
workload: {op: allreduce, bytes: 1MiB, duration: 4s, warmup: 200ms}
faults:
  - {id: f0, at: 1500ms, type: port_drop, target: {host: 1, rail: 0}}
)";
  drop.after = 0.0;
  const auto r = CheckLivenessAfterHeal(LoadRunView(drop.Write("drop")), kOn);
  EXPECT_EQ(r.verdict, Verdict::kNotApplicable) << r.detail;
}

TEST(Invariants, NothingLeftBehindFailsOnEachKindOfLeftover) {
  HandMadeRun run;
  const RunView v = LoadRunView(run.Write("left"));
  const std::string dir = fs::absolute(v.dir).lexically_normal().string();
  std::vector<HostState> broken(5, Clean());
  broken[0].netns.push_back("fl-ab12cd-h1");
  broken[1].journal_entries.push_back(R"({"undo": {"netns": "fl-ab12cd-sw"}})");
  broken[2].process_cmdlines.push_back("/b/faultline-worker --log " + dir + "/ranks/rank0.jsonl");
  broken[3].root_links.push_back("fl-ab12cd-m");
  broken[4].nft_tables.push_back("table netdev faultline_blackhole_4242_0");
  for (size_t i = 0; i < broken.size(); ++i) {
    const auto r = CheckNothingLeftBehind(v, broken[i]);
    EXPECT_EQ(r.verdict, Verdict::kFail) << i;
    EXPECT_NE(r.detail.find("run ab12cd left 1 thing"), std::string::npos) << r.detail;
  }
  // Another process's table is not this run's.
  HostState other = Clean();
  other.nft_tables.push_back("table netdev faultline_blackhole_99_0");
  EXPECT_EQ(CheckNothingLeftBehind(v, other).verdict, Verdict::kPass);
}

TEST(Invariants, SwitchedOffInvariantsAreNotChecked) {
  HandMadeRun run;
  run.report["correctness"]["wrong"] = 1;
  InvariantSettings s;
  s.exact_results = false;
  s.nothing_left_behind = false;
  s.lossless = false;
  const auto results = CheckInvariants(LoadRunView(run.Write("off")), s, nullptr);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].name, "no_silent_hang");
  EXPECT_EQ(results[1].name, "liveness_after_heal");
  EXPECT_EQ(results[2].name, "ccl_sequence");
}

// The stall bound: 100 ms + 2 x the 40 ms baseline collective = 180 ms.
InvariantSettings StallBound() {
  InvariantSettings s;
  s.stall_x = 2;
  s.stall_plus_ns = 100 * kMs;
  return s;
}

TEST(Invariants, LivenessFailsOnAStallWhileAPathWorked) {
  HandMadeRun run;
  // Nothing completes from 1.59 s to 1.99 s while rail 1 works: a 400 ms stall (the planted
  // stuck acknowledgement: the sender waits for the whole outage of rail 0).
  run.gap_from_s = 1.6;
  run.gap_to_s = 1.95;
  const auto r = CheckLivenessAfterHeal(LoadRunView(run.Write("stall")), StallBound());
  EXPECT_EQ(r.verdict, Verdict::kFail) << r.detail;
  EXPECT_NE(r.detail.find("for 400 ms from 1.590 s"), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("bound of 180 ms"), std::string::npos) << r.detail;
  // Without the bound only recovery is judged, and that holds.
  EXPECT_EQ(CheckLivenessAfterHeal(LoadRunView(run.Write("stall")), kOn).verdict, Verdict::kPass);
  // A stall of 150 ms is within the bound.
  run.gap_to_s = 1.7;
  const auto ok = CheckLivenessAfterHeal(LoadRunView(run.Write("short-stall")), StallBound());
  EXPECT_EQ(ok.verdict, Verdict::kPass) << ok.detail;
  EXPECT_NE(ok.detail.find("longest stall with a path 150 ms"), std::string::npos) << ok.detail;
}

TEST(Invariants, LivenessStallBoundSkipsTimesWithoutAPath) {
  HandMadeRun run;
  run.gap_from_s = 1.6;
  run.gap_to_s = 1.95;
  // Rail 1 of host 0 is down too from 1.55 s to 1.9 s: no rail joins the hosts, the wait is
  // the network's, not the library's.
  run.scenario +=
      "  - {id: f1, at: 1550ms, type: link_down, target: {host: 0, rail: 1}, for: 350ms}\n";
  run.report["faults"][0]["target"] = {{"host", 1}, {"rail", 0}, {"side", "host"}};
  run.report["faults"].push_back({{"id", "f1"},
                                  {"type", "link_down"},
                                  {"target", {{"host", 0}, {"rail", 1}, {"side", "host"}}},
                                  {"applied_s", 1.55},
                                  {"reverted_s", 1.9}});
  const auto r = CheckLivenessAfterHeal(LoadRunView(run.Write("nopath")), StallBound());
  EXPECT_EQ(r.verdict, Verdict::kPass) << r.detail;
  // [1.54, 1.59] and [1.59, 1.99] s overlap the time without a path; what is left of them with
  // a path (10 and 90 ms) is within the bound.
  EXPECT_NE(r.detail.find("2 interval(s) with a time without a path"), std::string::npos)
      << r.detail;
  EXPECT_NE(r.detail.find("longest stall with a path 90 ms"), std::string::npos) << r.detail;
  // Rail 1 of host 0 is back at 1.7 s: the collective that waited out the time without a path
  // still has not completed 290 ms after the path returned, past the bound.
  run.scenario.replace(run.scenario.find("for: 350ms"), 10, "for: 150ms");
  run.report["faults"][1]["reverted_s"] = 1.7;
  const auto late = CheckLivenessAfterHeal(LoadRunView(run.Write("nopath-late")), StallBound());
  EXPECT_EQ(late.verdict, Verdict::kFail) << late.detail;
  EXPECT_NE(late.detail.find("for 290 ms from 1.700 s"), std::string::npos) << late.detail;
}

// One NIC per rank: rank 0 of host 0 loses both its ports while rank 1 of its host keeps its
// own. ftccl relays through rank 1, so the pair still has a path and a stall is the library's;
// with rank 1's NIC down too, or with the two ranks left on different rails (neither without
// ports: no relay), the wait is the network's.
TEST(Invariants, LivenessStallBoundCountsARelayAsAPath) {
  HandMadeRun run;
  run.gap_from_s = 1.6;
  run.gap_to_s = 1.95;
  run.scenario = R"(name: hand
topology: {hosts: 2, ranks_per_host: 2, rails: 2, nics: per_rank}
workload: {op: allreduce, bytes: 1MiB, duration: 4s, warmup: 200ms}
faults:
)";
  run.report["faults"] = nlohmann::json::array();
  auto down = [&](const std::string& id, int host, int rank, int rail) {
    run.scenario +=
        "  - {id: " + id + ", at: 1500ms, type: link_down, target: {host: " + std::to_string(host) +
        ", rank: " + std::to_string(rank) + ", rail: " + std::to_string(rail) + "}, for: 500ms}\n";
    run.report["faults"].push_back(
        {{"id", id},
         {"type", "link_down"},
         {"target", {{"host", host}, {"rank", rank}, {"rail", rail}, {"side", "host"}}},
         {"applied_s", 1.5},
         {"reverted_s", 2.0}});
  };
  down("p0", 0, 0, 0);
  down("p1", 0, 0, 1);
  const auto r = CheckLivenessAfterHeal(LoadRunView(run.Write("relay")), StallBound());
  EXPECT_EQ(r.verdict, Verdict::kFail) << r.detail;
  EXPECT_NE(r.detail.find("while every pair of ranks had a path"), std::string::npos) << r.detail;
  // The neighbour's NIC is down as well: no rank of host 0 has a port.
  const HandMadeRun saved = run;
  down("p2", 0, 1, 0);
  down("p3", 0, 1, 1);
  const auto b = CheckLivenessAfterHeal(LoadRunView(run.Write("relay-both")), StallBound());
  EXPECT_EQ(b.verdict, Verdict::kPass) << b.detail;
  EXPECT_NE(b.detail.find("with a time without a path"), std::string::npos) << b.detail;
  // Rank 0 of host 0 keeps rail 1 only, rank 0 of host 1 rail 0 only: no common rail, and
  // neither is without ports.
  run = saved;
  run.scenario = run.scenario.substr(0, run.scenario.find("  - {id: p0"));
  run.report["faults"] = nlohmann::json::array();
  down("p0", 0, 0, 0);
  down("p1", 1, 0, 1);
  const auto c = CheckLivenessAfterHeal(LoadRunView(run.Write("relay-cross")), StallBound());
  EXPECT_EQ(c.verdict, Verdict::kPass) << c.detail;
  EXPECT_NE(c.detail.find("with a time without a path"), std::string::npos) << c.detail;
}

TEST(Invariants, LosslessFailsOnAChunkTakenTwiceOrLost) {
  HandMadeRun good;
  const auto ok = CheckLossless(LoadRunView(good.Write("lossless")));
  EXPECT_EQ(ok.verdict, Verdict::kPass) << ok.detail;
  EXPECT_NE(ok.detail.find("200 chunks"), std::string::npos) << ok.detail;
  HandMadeRun twice;
  twice.accepted_by1 = 101;
  twice.cum_by1 = 101;
  const auto t = CheckLossless(LoadRunView(twice.Write("twice")));
  EXPECT_EQ(t.verdict, Verdict::kFail);
  EXPECT_NE(t.detail.find("rank 1 accepted 101 chunks from rank 0, which numbered 100: 1 taken "
                          "twice"),
            std::string::npos)
      << t.detail;
  HandMadeRun lost;
  lost.accepted_by1 = 98;
  lost.cum_by1 = 98;
  const auto l = CheckLossless(LoadRunView(lost.Write("lost")));
  EXPECT_EQ(l.verdict, Verdict::kFail);
  EXPECT_NE(l.detail.find("2 lost"), std::string::npos) << l.detail;
}

TEST(Invariants, LosslessNeedsCountersOfACompletedRun) {
  HandMadeRun none;
  none.stats = false;
  EXPECT_EQ(CheckLossless(LoadRunView(none.Write("nostats"))).verdict, Verdict::kNotApplicable);
  EXPECT_EQ(CheckCclSequence(LoadRunView(none.Write("nostats"))).verdict, Verdict::kNotApplicable);
  HandMadeRun aborted;
  aborted.report["outcome"] = "aborted_clean";
  EXPECT_EQ(CheckLossless(LoadRunView(aborted.Write("aborted"))).verdict, Verdict::kNotApplicable);
}

TEST(Invariants, CclSequenceFailsOnAHoleOrAnAcknowledgementNotGiven) {
  HandMadeRun good;
  const auto ok = CheckCclSequence(LoadRunView(good.Write("seq")));
  EXPECT_EQ(ok.verdict, Verdict::kPass) << ok.detail;
  HandMadeRun hole;
  hole.cum_by1 = 97;  // accepted 100, but the cumulative acknowledgement stops at 97
  const auto h = CheckCclSequence(LoadRunView(hole.Write("hole")));
  EXPECT_EQ(h.verdict, Verdict::kFail);
  EXPECT_NE(h.detail.find("rank 1's cumulative acknowledgement of rank 0 is 97 but it accepted "
                          "100"),
            std::string::npos)
      << h.detail;
  HandMadeRun ahead;
  ahead.acked_at0 = 101;  // rank 0 believes more acknowledged than it ever numbered
  EXPECT_EQ(CheckCclSequence(LoadRunView(ahead.Write("ahead"))).verdict, Verdict::kFail);
}

}  // namespace
}  // namespace faultline::runner::explore
