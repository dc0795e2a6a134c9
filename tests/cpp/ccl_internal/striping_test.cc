#include "transport/engine/striping.h"

#include <gtest/gtest.h>

namespace ftccl::transport::engine {
namespace {

using std::chrono::milliseconds;
const Clock::time_point kT0 = Clock::time_point{} + std::chrono::seconds(10);

// A path whose first period, from kT0, was saturated: `bytes` delivered over `busy`, all of it
// busy; the next period starts at kT0 + busy.
PathRate Measured(uint64_t bytes, milliseconds busy) {
  PathRate r;
  r.Sample(kT0, true, false);
  r.Add(100, kT0);
  r.MarkSaturated();
  r.Delivered(bytes);
  r.Remove(100, kT0 + busy);
  r.Sample(kT0 + busy, true, false);
  return r;
}

TEST(PathRateTest, WindowIsUnlimitedUntilMeasured) {
  PathRate r;
  EXPECT_EQ(r.Window(Millis(20), 1 << 20), UINT64_MAX);
}

TEST(PathRateTest, SaturatedPeriodMeasuresTheRateOverBusyTimeOnly) {
  PathRate r;
  EXPECT_FALSE(r.Sample(kT0, true, false).period_over);  // starts the first period
  r.Add(1000000, kT0);
  r.MarkSaturated();
  r.Delivered(1000000);
  r.Remove(1000000, kT0 + milliseconds(50));  // busy for 50 ms, then idle
  auto s = r.Sample(kT0 + milliseconds(100), true, false);
  EXPECT_TRUE(s.period_over);
  EXPECT_TRUE(s.updated);
  EXPECT_NEAR(r.rate(), 1000000 / 0.05, 1);  // 20 MB/s while busy, not 10
  // path_queue 20 ms at 20 MB/s: 400 kB, but never under two chunks.
  EXPECT_EQ(r.Window(Millis(20), 1000), 400000u);
  EXPECT_EQ(r.Window(Millis(20), 1 << 20), 2u << 20);
  EXPECT_EQ(r.Window(Millis(0), 1000), UINT64_MAX);
}

// Current reads the period so far without closing it; CloseEarly then measures it before its
// 100 ms, as saturated (a slowdown seen against a sibling), so a slower reading lowers the rate
// that an unsaturated full period would have left alone.
TEST(PathRateTest, CurrentReadsThePeriodAndCloseEarlyMeasuresIt) {
  PathRate r = Measured(2000000, milliseconds(100));
  ASSERT_NEAR(r.rate(), 20e6, 1);
  // 30 ms busy with one chunk outstanding (no backlog at a chunk of 1000), 60 kB delivered.
  r.Add(1000, kT0 + milliseconds(100));
  r.Delivered(60000);
  const auto cur = r.Current(kT0 + milliseconds(130));
  EXPECT_NEAR(cur.busy_s, 0.03, 1e-9);
  EXPECT_NEAR(cur.rate, 2e6, 1);
  // Reading changes nothing: the period goes on.
  EXPECT_FALSE(r.Sample(kT0 + milliseconds(130), true, false).period_over);
  EXPECT_NEAR(r.Current(kT0 + milliseconds(130)).rate, 2e6, 1);
  const auto s = r.CloseEarly(kT0 + milliseconds(130), 1000);
  EXPECT_TRUE(s.updated);
  EXPECT_NEAR(r.rate(), 0.5 * 20e6 + 0.5 * 2e6, 1);  // a sharp change: half way
  // A new period from there.
  EXPECT_DOUBLE_EQ(r.Current(kT0 + milliseconds(130)).busy_s, 0);
}

// RestartPeriod drops what the period had gathered (a probe is measured on its own), and
// CloseEarly measures as little as kProbeBusy of busy time, which a full period would carry
// over to the next.
TEST(PathRateTest, RestartPeriodDropsThePeriodAndCloseEarlyMeasuresAShortOne) {
  PathRate r = Measured(2000000, milliseconds(1000));
  ASSERT_NEAR(r.rate(), 2e6, 1);
  // A busy stretch that ended (its time already counted into the period), then another.
  r.Add(500, kT0 + milliseconds(1000));
  r.Remove(500, kT0 + milliseconds(1008));
  r.Add(5000, kT0 + milliseconds(1010));
  r.Delivered(1000);
  r.RestartPeriod(kT0 + milliseconds(1020));
  auto cur = r.Current(kT0 + milliseconds(1020));
  EXPECT_DOUBLE_EQ(cur.busy_s, 0);
  EXPECT_DOUBLE_EQ(cur.rate, 0);
  r.Delivered(120000);
  cur = r.Current(kT0 + milliseconds(1032));
  EXPECT_NEAR(cur.busy_s, 0.012, 1e-9);  // still busy, counted from the restart
  EXPECT_NEAR(cur.rate, 1e7, 1);
  EXPECT_EQ(r.outstanding(), 5000u);
  EXPECT_TRUE(r.CloseEarly(kT0 + milliseconds(1032)).updated);
  EXPECT_NEAR(r.rate(), 0.5 * 2e6 + 0.5 * 1e7, 1);
}

TEST(PathRateTest, UnsaturatedPeriodOnlyRaisesTheRate) {
  PathRate r = Measured(2000000, milliseconds(100));
  const double rate = r.rate();  // 20 MB/s
  // Not saturated, slower: says only that the path carries at least that much.
  r.Add(100, kT0 + milliseconds(100));
  r.Delivered(100000);
  r.Remove(100, kT0 + milliseconds(200));
  EXPECT_FALSE(r.Sample(kT0 + milliseconds(200), true, false).updated);
  EXPECT_DOUBLE_EQ(r.rate(), rate);
}

// A faster unsaturated period (a token bucket's burst after an idle gap reads above the shaped
// rate) moves the rate up by the running average's weight, not to the burst's speed.
TEST(PathRateTest, UnsaturatedFasterPeriodRaisesTheRateByTheAverage) {
  PathRate r = Measured(2000000, milliseconds(100));
  ASSERT_NEAR(r.rate(), 20e6, 1);
  r.Add(100, kT0 + milliseconds(100));
  r.Delivered(4000000);
  r.Remove(100, kT0 + milliseconds(200));
  EXPECT_TRUE(r.Sample(kT0 + milliseconds(200), true, false).updated);  // 40 MB/s, unsaturated
  EXPECT_NEAR(r.rate(), 0.7 * 20e6 + 0.3 * 40e6, 1);
}

TEST(PathRateTest, SharpSlowdownIsFollowedWithWeightOneHalf) {
  PathRate r;
  r.Sample(kT0, true, false);
  r.Add(1, kT0);
  r.MarkSaturated();
  r.Delivered(10000000);
  r.Sample(kT0 + milliseconds(100), true, false);  // 100 MB/s, still busy
  EXPECT_NEAR(r.rate(), 1e8, 1);
  r.MarkSaturated();
  r.Delivered(1000000);
  r.Sample(kT0 + milliseconds(200), true, false);  // 10 MB/s: a tenfold slowdown
  EXPECT_NEAR(r.rate(), 0.5 * 1e8 + 0.5 * 1e7, 1);
}

// A backlog marks a period saturated without a block: a path whose window and socket buffer
// take a whole message (a fresh connection's rate read from a token bucket's burst, far above
// the shaped rate) never blocks, but with more than a chunk outstanding on average over its
// busy time it was carrying all it could, and its rate comes down to what it delivered. With
// less outstanding (a chunk at a time, the algorithm setting the pace) it does not.
TEST(PathRateTest, BacklogOverTheBusyTimeMeasuresTheRate) {
  constexpr uint64_t kChunk = 256 * 1024;
  auto believed_fast = [] {
    PathRate r;
    r.Sample(kT0, true, false, kChunk);
    r.Add(1, kT0);
    r.MarkSaturated();
    r.Delivered(10000000);
    r.Remove(1, kT0 + milliseconds(100));
    r.Sample(kT0 + milliseconds(100), true, false, kChunk);  // 100 MB/s
    return r;
  };
  PathRate r = believed_fast();
  ASSERT_NEAR(r.rate(), 1e8, 1);
  // Four chunks dealt at once, delivered one by one over 100 ms at 10 MB/s: 2.5 chunks
  // outstanding on average, never blocked.
  const auto t = kT0 + milliseconds(100);
  r.Add(4 * kChunk, t);
  for (int i = 1; i <= 4; ++i) {
    r.Delivered(kChunk);
    r.Remove(kChunk, t + milliseconds(25 * i) - std::chrono::microseconds(1));
  }
  EXPECT_TRUE(r.Sample(kT0 + milliseconds(200), true, false, kChunk).updated);
  const double delivered = 4.0 * kChunk / 0.1;
  EXPECT_NEAR(r.rate(), 0.5 * 1e8 + 0.5 * delivered, 1e3);
  // The same delivery with one chunk at a time outstanding: only "at least this much".
  PathRate q = believed_fast();
  for (int i = 0; i < 4; ++i) {
    q.Add(kChunk, t + milliseconds(25 * i));
    q.Delivered(kChunk);
    q.Remove(kChunk, t + milliseconds(25 * (i + 1)) - std::chrono::microseconds(1));
  }
  EXPECT_FALSE(q.Sample(kT0 + milliseconds(200), true, false, kChunk).updated);
  EXPECT_NEAR(q.rate(), 1e8, 1);
  // Without a backlog bound (the default) the four-chunk period says nothing either.
  PathRate u = believed_fast();
  u.Add(4 * kChunk, t);
  for (int i = 1; i <= 4; ++i) {
    u.Delivered(kChunk);
    u.Remove(kChunk, t + milliseconds(25 * i) - std::chrono::microseconds(1));
  }
  EXPECT_FALSE(u.Sample(kT0 + milliseconds(200), true, false).updated);
}

TEST(PathRateTest, ShortBusyTimeOrSuspectPathMeasuresNothing) {
  PathRate r;
  r.Sample(kT0, true, false);
  r.Add(1, kT0);
  r.MarkSaturated();
  r.Delivered(1000);
  r.Remove(1, kT0 + milliseconds(10));  // busy 10 ms < 20 ms
  EXPECT_FALSE(r.Sample(kT0 + milliseconds(100), true, false).updated);
  EXPECT_DOUBLE_EQ(r.rate(), 0);
  r.Add(1, kT0 + milliseconds(100));
  r.MarkSaturated();
  r.Delivered(1000000);
  // A suspect path's saturated period says nothing of its capacity, but it still showed this
  // much.
  EXPECT_TRUE(r.Sample(kT0 + milliseconds(200), true, true).updated);
  EXPECT_GT(r.rate(), 0);
  r.Restart();
  EXPECT_DOUBLE_EQ(r.rate(), 0);
  EXPECT_EQ(r.outstanding(), 0u);
}

// Bursts under the 20 ms a measurement needs (a fast link between compute phases) add up
// across periods instead of being dropped: three 8 ms bursts of 1 MB measure 125 MB/s.
TEST(PathRateTest, ShortBurstsAddUpToAMeasurement) {
  PathRate r;
  r.Sample(kT0, true, false);
  for (int i = 0; i < 3; ++i) {
    const auto start = kT0 + milliseconds(100 * i);
    r.Add(1000000, start);
    r.MarkSaturated();
    r.Delivered(1000000);
    r.Remove(1000000, start + milliseconds(8));
    const auto s = r.Sample(start + milliseconds(100), true, false);
    EXPECT_TRUE(s.period_over);
    EXPECT_EQ(s.updated, i == 2) << "burst " << i;
  }
  EXPECT_NEAR(r.rate(), 3000000 / 0.024, 1);
  // A path that goes down meanwhile forgets what it carried: nothing adds up across it.
  PathRate d;
  d.Sample(kT0, true, false);
  d.Add(1000000, kT0);
  d.Delivered(1000000);
  d.Remove(1000000, kT0 + milliseconds(15));
  d.Sample(kT0 + milliseconds(100), true, false);
  d.Sample(kT0 + milliseconds(150), false, false);  // down
  d.Sample(kT0 + milliseconds(160), true, false);   // back: a fresh period
  d.Add(1000000, kT0 + milliseconds(160));
  d.Delivered(1000000);
  d.Remove(1000000, kT0 + milliseconds(170));
  EXPECT_FALSE(d.Sample(kT0 + milliseconds(260), true, false).updated);
  EXPECT_DOUBLE_EQ(d.rate(), 0);
}

TEST(StripingTest, SharesFollowTheRatesOfUsablePaths) {
  auto s = Shares({{3, 30.0}, {5, 10.0}, {7, 0.0}});
  ASSERT_EQ(s.size(), 2u);
  EXPECT_DOUBLE_EQ(s[3], 0.75);
  EXPECT_DOUBLE_EQ(s[5], 0.25);
  EXPECT_TRUE(Shares({{1, 0.0}}).empty());
  EXPECT_TRUE(Shares({}).empty());
}

TEST(StripingTest, LargestShiftCountsAVanishedOrNewPathAsShareZero) {
  auto [id, d] = LargestShift({{1, 0.5}, {2, 0.5}}, {{1, 0.55}, {2, 0.45}});
  EXPECT_LT(d, kRebalanceNews);
  std::tie(id, d) = LargestShift({{1, 0.5}, {2, 0.5}}, {{1, 1.0}});
  EXPECT_EQ(id, 1);
  EXPECT_DOUBLE_EQ(d, 0.5);
  std::tie(id, d) = LargestShift({{1, 1.0}}, {{1, 0.6}, {4, 0.4}});
  EXPECT_EQ(id, 1);
  EXPECT_NEAR(d, 0.4, 1e-12);
  std::tie(id, d) = LargestShift({{1, 1.0}}, {});
  EXPECT_EQ(id, -1);
}

TEST(StripingTest, ASlowPathLeavesAChunkThatAFasterPathWouldDeliverSooner) {
  constexpr uint64_t kChunk = 256 * 1024;
  const double fast = 125e6, slow = 12.5e6;  // a rail shaped to a tenth of its neighbour
  // Idle fast path: one chunk there takes 2 ms, on the slow path 21 ms.
  EXPECT_TRUE(LeaveToFaster({slow, 0}, {{fast, 0}}, kChunk));
  // The fast path with 12 chunks queued still delivers a 13th (27 ms) about as soon as the
  // slow one delivers its first (21 ms): within the slack, the slow path takes it.
  EXPECT_FALSE(LeaveToFaster({slow, 0}, {{fast, 12 * kChunk}}, kChunk));
  // The fast path never leaves a chunk to the slow one.
  EXPECT_FALSE(LeaveToFaster({fast, 4 * kChunk}, {{slow, 0}}, kChunk));
  // Equal paths share: an idle one takes a chunk; one two chunks ahead leaves the next to
  // the idle one, within the slack it does not.
  EXPECT_FALSE(LeaveToFaster({fast, 0}, {{fast, 0}}, kChunk));
  EXPECT_TRUE(LeaveToFaster({fast, 2 * kChunk}, {{fast, 0}}, kChunk));
  EXPECT_FALSE(LeaveToFaster({fast, 0}, {{fast * 1.2, 0}}, kChunk));
  // Unmeasured paths are not compared.
  EXPECT_FALSE(LeaveToFaster({0, 0}, {{fast, 0}}, kChunk));
  EXPECT_FALSE(LeaveToFaster({slow, 0}, {{0, 0}}, kChunk));
  EXPECT_FALSE(LeaveToFaster({slow, 0}, {}, kChunk));
}

}  // namespace
}  // namespace ftccl::transport::engine
