#include "transport/engine/path_health.h"

#include <gtest/gtest.h>

namespace ftccl::transport::engine {
namespace {

using std::chrono::milliseconds;

PathHealth::Params TestParams() {
  PathHealth::Params p;
  p.suspect_floor = Millis(50);
  p.suspect_ceiling = Millis(2000);
  p.flap_window = Millis(10000);
  p.holddown = Millis(100);
  p.holddown_max = Millis(1000);
  return p;
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

TEST(PathHealthTest, FirstRttSampleSetsSrttAndHalfOfItAsVariance) {
  PathHealth h;
  EXPECT_FALSE(h.have_rtt());
  h.RttSample(40);
  EXPECT_TRUE(h.have_rtt());
  EXPECT_DOUBLE_EQ(h.srtt_ms(), 40);
  EXPECT_DOUBLE_EQ(h.rttvar_ms(), 20);
}

TEST(PathHealthTest, LaterSamplesFollowRfc6298Weights) {
  PathHealth h;
  h.RttSample(40);
  h.RttSample(80);
  // rttvar = 3/4 * 20 + 1/4 * |40 - 80| = 25; srtt = 7/8 * 40 + 1/8 * 80 = 45.
  EXPECT_DOUBLE_EQ(h.rttvar_ms(), 25);
  EXPECT_DOUBLE_EQ(h.srtt_ms(), 45);
  h.RttSample(-1);  // ignored
  EXPECT_DOUBLE_EQ(h.srtt_ms(), 45);
}

TEST(PathHealthTest, SuspectTimeoutIsRtoClampedToFloorAndCeiling) {
  const auto p = TestParams();
  PathHealth h;
  EXPECT_DOUBLE_EQ(Ms(h.SuspectTimeout(p, 0)), 50);  // nothing known: the floor
  h.RttSample(100);                                 // srtt 100 + 4 x 50 = 300
  EXPECT_NEAR(Ms(h.SuspectTimeout(p, 0)), 300, 1e-6);
  EXPECT_NEAR(Ms(h.SuspectTimeout(p, 10)), 340, 1e-6);  // + 4 x the thread's own lateness
  h.RttSample(5000);
  EXPECT_DOUBLE_EQ(Ms(h.SuspectTimeout(p, 0)), 2000);  // the ceiling
}

TEST(PathHealthTest, OvertakenTimeoutLeavesOutTheLongestWait) {
  // A flapping link's path taken back after a down: its last waits for progress were long
  // (the down), which stretches the suspicion timeout to ~500 ms, while its round trip is
  // 11 ms. Once another path has overtaken it, only the round trip (and the floor) count.
  const auto p = TestParams();
  PathHealth h;
  h.RttSample(11);
  const Clock::time_point t0{};
  const auto start = t0 + milliseconds(1000);
  h.Progress(start, Clock::time_point{});
  h.Progress(start + milliseconds(250), start);  // busy and silent for 250 ms
  EXPECT_NEAR(Ms(h.SuspectTimeout(p, 0)), 500, 1e-6);
  EXPECT_DOUBLE_EQ(Ms(h.OvertakenTimeout(p, 0)), 50);       // 11 + 4 x 5.5 = 33: the floor
  EXPECT_NEAR(Ms(h.OvertakenTimeout(p, 10)), 73, 1e-6);     // + 4 x the thread's lateness
  h.RttSample(5000);
  EXPECT_DOUBLE_EQ(Ms(h.OvertakenTimeout(p, 0)), 2000);     // the ceiling
}

TEST(PathHealthTest, LongestWaitForProgressWhileBusyWidensTheTimeoutAndDecays) {
  const auto p = TestParams();
  PathHealth h;
  const Clock::time_point t0{} ;
  const auto start = t0 + milliseconds(1000);
  h.Progress(start, Clock::time_point{});  // idle: no gap is measured
  EXPECT_DOUBLE_EQ(h.max_gap_ms(), 0);
  // Busy since start + 10 ms; the next progress 400 ms after that.
  h.Progress(start + milliseconds(410), start + milliseconds(10));
  EXPECT_NEAR(h.max_gap_ms(), 400, 1e-6);
  EXPECT_NEAR(Ms(h.SuspectTimeout(p, 0)), 800, 1e-6);  // twice the longest wait
  h.DecayGap();
  EXPECT_NEAR(h.max_gap_ms(), 320, 1e-6);
}

TEST(PathHealthTest, HoldDownDoublesPerDownWithinTheWindowUpToTheMaximum) {
  const auto p = TestParams();
  PathHealth h;
  const auto t = Clock::time_point{} + std::chrono::seconds(100);
  h.RecordDown(t, p);
  EXPECT_EQ(h.downs_in_window(), 1u);
  EXPECT_EQ(h.hold_until(), t + milliseconds(100));
  h.RecordDown(t + milliseconds(10), p);
  EXPECT_EQ(h.hold_until(), t + milliseconds(10) + milliseconds(200));
  h.RecordDown(t + milliseconds(20), p);
  EXPECT_EQ(h.hold_until(), t + milliseconds(20) + milliseconds(400));
  for (int i = 3; i < 8; ++i) h.RecordDown(t + milliseconds(10 * i), p);
  EXPECT_EQ(h.hold_until(), t + milliseconds(70) + milliseconds(1000));  // capped
}

TEST(PathHealthTest, DownsOutsideTheFlapWindowAreForgotten) {
  const auto p = TestParams();
  PathHealth h;
  const auto t = Clock::time_point{} + std::chrono::seconds(100);
  h.RecordDown(t, p);
  h.RecordDown(t + milliseconds(1), p);
  h.RecordDown(t + std::chrono::seconds(20), p);  // 20 s later: the first two are gone
  EXPECT_EQ(h.downs_in_window(), 1u);
  EXPECT_EQ(h.hold_until(), t + std::chrono::seconds(20) + milliseconds(100));
}

TEST(PathHealthTest, HeldDownPathIsReadmittedAtOnceOnlyWhenNoOtherPathWorks) {
  // Rail 0 flapped twice (downs at t and t + 200 ms: held down until t + 400 ms) and answers
  // again at t + 350 ms. While rail 1 works it stays out; once rail 1 is down too it is the
  // peer's only path and is taken back at once instead of stalling until t + 400 ms.
  const auto p = TestParams();
  PathHealth h;
  const auto t = Clock::time_point{} + std::chrono::seconds(100);
  h.RecordDown(t, p);
  h.RecordDown(t + milliseconds(200), p);
  const auto answer = t + milliseconds(350);
  EXPECT_TRUE(h.Held(answer));
  EXPECT_FALSE(h.Readmit(answer, /*only_path=*/false));
  EXPECT_TRUE(h.Readmit(answer, /*only_path=*/true));
  // After its hold-down, any answer returns it, whatever the other paths do.
  EXPECT_FALSE(h.Held(t + milliseconds(400)));
  EXPECT_TRUE(h.Readmit(t + milliseconds(400), /*only_path=*/false));
}

TEST(PathHealthTest, PathReadmittedDuringItsHoldDownIsDampedAgainWhenItFlapsAgain) {
  // Released early as the only path (as above), it keeps its downs: the next down within the
  // flap window holds it down for 400 ms, longer than the last hold-down, and it stays out
  // while another path works.
  const auto p = TestParams();
  PathHealth h;
  const auto t = Clock::time_point{} + std::chrono::seconds(100);
  h.RecordDown(t, p);
  h.RecordDown(t + milliseconds(200), p);
  ASSERT_TRUE(h.Readmit(t + milliseconds(350), /*only_path=*/true));
  const auto again = t + milliseconds(500);
  h.RecordDown(again, p);
  EXPECT_EQ(h.downs_in_window(), 3u);
  EXPECT_EQ(h.hold_until(), again + milliseconds(400));
  EXPECT_FALSE(h.Readmit(again + milliseconds(300), /*only_path=*/false));
  EXPECT_TRUE(h.Readmit(again + milliseconds(300), /*only_path=*/true));
  EXPECT_TRUE(h.Readmit(again + milliseconds(400), /*only_path=*/false));
}

// The peer reset a connection to replace it (its socket backed off through an outage): the
// down that reset counted is taken back, and the path is held only as long as its outage
// earned. Only the latest down can be taken back.
TEST(PathHealthTest, TheLatestDownCanBeTakenBack) {
  const auto p = TestParams();
  PathHealth h;
  const auto t = Clock::time_point{} + std::chrono::seconds(100);
  h.RecordDown(t, p);  // the port went down: held 100 ms
  const auto reset = t + milliseconds(1500);
  h.RecordDown(reset, p);  // the peer's reset as the port returns: 200 ms more
  ASSERT_TRUE(h.Held(reset + milliseconds(150)));
  EXPECT_FALSE(h.WithdrawDown(t));  // not the latest
  EXPECT_TRUE(h.WithdrawDown(reset));
  EXPECT_EQ(h.downs_in_window(), 1u);
  EXPECT_EQ(h.hold_until(), t + milliseconds(100));
  EXPECT_FALSE(h.Held(reset + milliseconds(1)));
  EXPECT_FALSE(h.WithdrawDown(reset));  // once
  // A later real down is damped as the second one.
  h.RecordDown(t + milliseconds(2000), p);
  EXPECT_EQ(h.hold_until(), t + milliseconds(2000) + milliseconds(200));
}

TEST(PathHealthTest, OnlyTheLatestProbeCountsAsAnswered) {
  PathHealth h;
  const auto t = Clock::time_point{} + std::chrono::seconds(5);
  const uint64_t first = h.ProbeSent(t);
  EXPECT_EQ(h.probe_outstanding_since(), t);
  const uint64_t second = h.ProbeSent(t + milliseconds(100));
  EXPECT_NE(first, second);
  EXPECT_EQ(h.probe_outstanding_since(), t);  // the oldest unanswered probe
  EXPECT_FALSE(h.ProbeAnswered(first, t + milliseconds(120)));
  EXPECT_EQ(h.probe_outstanding_since(), t);
  EXPECT_TRUE(h.ProbeAnswered(second, t + milliseconds(130)));
  EXPECT_EQ(h.probe_outstanding_since(), Clock::time_point{});
  EXPECT_NEAR(h.srtt_ms(), 30, 1e-6);  // from the latest probe's send time
}

}  // namespace
}  // namespace ftccl::transport::engine
