// What a rank knows of its paths (runner/worker/path_tracker.h) and the fault-state matrix the
// ranks gather at a step boundary (runner/worker/fault_matrix.h), on synthetic events and
// vectors: outages and their history, news and its hand-over, left-out ranks, a rank's slots,
// the affected cover and the survivors' step time.
#include <gtest/gtest.h>

#include <vector>

#include "runner/policy/cost_model.h"
#include "runner/worker/fault_matrix.h"
#include "runner/worker/path_tracker.h"

namespace faultline::runner {
namespace {

CclEvent Event(EventKind kind, int64_t t_ns, int peer, int path) {
  CclEvent e;
  e.kind = kind;
  e.time_ns = t_ns;
  e.peer = peer;
  e.path = path;
  return e;
}

TEST(WorkerPathTracker, FollowsOutagesAndTheirHistory) {
  PathTracker t;
  EXPECT_FALSE(t.AnyPathDown());
  t.Note(Event(EventKind::kPathDown, 100, 1, 0), {});
  t.Note(Event(EventKind::kPathDown, 150, 1, 0), {});  // still the same outage
  EXPECT_TRUE(t.AnyPathDown());
  EXPECT_TRUE(t.AnyPathToWaitFor());
  EXPECT_TRUE(t.news());
  EXPECT_EQ(t.faults_seen(), 2);
  EXPECT_EQ(t.first_fault_ns(), 100);
  EXPECT_EQ(t.news_since_ns(), 100);
  t.Note(Event(EventKind::kPathUp, 400, 1, 0), {});
  EXPECT_FALSE(t.AnyPathDown());
  const PathTracker::Path& p = t.paths().at({1, 0});
  EXPECT_EQ(p.outages, 1);
  EXPECT_EQ(p.outage_ns, 300);
  EXPECT_FALSE(p.down_since.has_value());
  // Not a fault: path_up and the other kinds leave the counters alone.
  t.Note(Event(EventKind::kMigrated, 500, 1, 1), {});
  EXPECT_EQ(t.faults_seen(), 2);
}

TEST(WorkerPathTracker, NewsIsHandedOverAndWaitedOutPathsAreNotWaitedForAgain) {
  PathTracker t;
  t.Note(Event(EventKind::kPathDown, 100, 1, 0), {});
  t.ClearNews();
  EXPECT_FALSE(t.news());
  EXPECT_EQ(t.first_fault_ns(), 100);
  // The next event without news forgets the old news time.
  t.Note(Event(EventKind::kRelayOff, 200, -1, -1), {});
  EXPECT_FALSE(t.news_since_ns().has_value());
  t.MarkWaitedOut();
  EXPECT_TRUE(t.AnyPathDown());
  EXPECT_FALSE(t.AnyPathToWaitFor());
  // Back and down again: a new outage, waited for again.
  t.Note(Event(EventKind::kPathUp, 300, 1, 0), {});
  t.Note(Event(EventKind::kPathDown, 400, 1, 0), {});
  EXPECT_TRUE(t.AnyPathToWaitFor());
  t.ClearNews(/*all=*/true);
  EXPECT_FALSE(t.first_fault_ns().has_value());
  t.NoteFirstFault(900);
  t.NoteFirstFault(950);
  EXPECT_EQ(t.first_fault_ns(), 900);
}

TEST(WorkerPathTracker, RelayAbortAndLeftOutRanks) {
  PathTracker t;
  t.Note(Event(EventKind::kRelayOn, 100, 2, -1), {});
  EXPECT_TRUE(t.relay_on());
  EXPECT_TRUE(t.news());
  t.Note(Event(EventKind::kRelayOff, 110, 2, -1), {});
  EXPECT_FALSE(t.relay_on());
  PathTracker u;
  u.Note(Event(EventKind::kPathDown, 100, 3, 0), {3});  // a left-out rank's last words
  EXPECT_FALSE(u.AnyPathDown());
  EXPECT_FALSE(u.news());
  u.Note(Event(EventKind::kAbort, 120, -1, -1), {3});
  EXPECT_TRUE(u.news());
  u.Note(Event(EventKind::kPathDown, 130, 1, 0), {});
  u.Note(Event(EventKind::kPathDown, 130, 2, 1), {});
  u.ForgetRanks({1});
  EXPECT_EQ(u.paths().count({1, 0}), 0u);
  EXPECT_EQ(u.paths().count({2, 1}), 1u);
  EXPECT_FALSE(u.news());
}

TEST(WorkerFaultMatrix, LayoutWithAndWithoutThePerPairBlocks) {
  FaultMatrix small(3);
  EXPECT_TRUE(small.HasMatrix());
  EXPECT_EQ(small.Size(), FaultMatrix::kSlots + 3 + 2 * 9);
  EXPECT_EQ(small.MatrixSlot(0, 0), FaultMatrix::kSlots + 3);
  EXPECT_EQ(small.MatrixSlot(2, 1, FaultMatrix::kRefRateBlock), FaultMatrix::kSlots + 3 + 9 + 7);
  FaultMatrix large(FaultMatrix::kMaxMatrixRanks + 1);
  EXPECT_FALSE(large.HasMatrix());
  EXPECT_EQ(large.Size(), FaultMatrix::kSlots + FaultMatrix::kMaxMatrixRanks + 1);
}

FaultMatrix::Local LocalOf(const PathTracker& t, int rank, std::vector<int> members, int rails) {
  FaultMatrix::Local l;
  l.rank = rank;
  l.members = std::move(members);
  l.rails = rails;
  l.paths = &t;
  l.now_ns = 1'000'000'000;
  return l;
}

TEST(WorkerFaultMatrix, ARanksSlotsFromItsPaths) {
  PathTracker t;
  t.Note(Event(EventKind::kPathDown, 100, 1, 0), {});
  t.Note(Event(EventKind::kPathUp, 300, 1, 0), {});  // history: one outage of 200 ns
  t.Note(Event(EventKind::kPathDown, 500, 1, 0), {});
  FaultMatrix m(3);
  std::vector<int64_t> v(m.Size(), 0);
  FaultMatrix::Local l = LocalOf(t, 0, {0, 1, 2}, 2);
  l.ref_rates = {0, 2e6, 3e6};
  l.clean_steps = 4;
  l.clean_ar_ns = 400;
  l.last_ar_ns = 200;  // twice as slow as the clean mean: half the bandwidth
  m.FillLocal(l, &v);
  EXPECT_EQ(v[FaultMatrix::kNews], 1);
  EXPECT_EQ(v[FaultMatrix::kDown], 1);
  EXPECT_EQ(v[FaultMatrix::kClass], 1);
  EXPECT_EQ(v[FaultMatrix::kNegStart], -500);
  EXPECT_EQ(v[FaultMatrix::kExpected], 200);
  EXPECT_EQ(v[FaultMatrix::kNegBandwidth], -1000000 / 2);
  EXPECT_EQ(v[m.ScoreSlot(0)], 1);
  EXPECT_EQ(v[m.ScoreSlot(1)], 1);
  EXPECT_EQ(v[m.MatrixSlot(0, 1)], 1);
  EXPECT_EQ(v[m.MatrixSlot(0, 2)], 0);
  EXPECT_EQ(v[m.MatrixSlot(0, 2, FaultMatrix::kRefRateBlock)], 3000);
  // Own port down and cut off from the only other member: class nic, score 2 + 4.
  PathTracker u;
  u.Note(Event(EventKind::kPathDown, 100, 1, 0), {});
  std::vector<int64_t> w(m.Size(), 0);
  FaultMatrix::Local k = LocalOf(u, 0, {0, 1}, 1);
  k.own_port_down = true;
  m.FillLocal(k, &w);
  EXPECT_EQ(w[FaultMatrix::kClass], 2);
  EXPECT_EQ(w[m.ScoreSlot(0)], 2 + FaultMatrix::kOwnPortDown);
  EXPECT_EQ(w[FaultMatrix::kExpected], FaultMatrix::kPermanent);  // no history
}

TEST(WorkerFaultMatrix, TheLibrarysDampingSaysWhenAFlappingPathReturns) {
  PathTracker t;
  t.Note(Event(EventKind::kPathDown, 900'000'000, 1, 0), {});
  FaultMatrix m(2);
  std::vector<int64_t> v(m.Size(), 0);
  FaultMatrix::Local l = LocalOf(t, 0, {0, 1}, 2);
  workload::adapters::FlapDamping d;
  d.holddown = std::chrono::milliseconds(100);
  d.holddown_max = std::chrono::milliseconds(1000);
  d.window = std::chrono::milliseconds(5000);
  workload::adapters::FlapDamping::Path p;
  p.peer = 1;
  p.path = 0;
  p.downs_in_window = 3;
  p.first_down_ns = 500'000'000;
  p.hold_until_ns = 1'200'000'000;
  d.paths.push_back(p);
  l.damping = d;
  m.FillLocal(l, &v);
  const double remaining = policy::FlappingOutageRemaining(3, 0.5, 0.2, 0.1, 1.0);
  EXPECT_EQ(v[FaultMatrix::kExpected], 100'000'000 + static_cast<int64_t>(remaining * 1e9));
}

TEST(WorkerFaultMatrix, TheCoverDropsTheRankWithTheMostDownPaths) {
  FaultMatrix m(4);
  std::vector<int64_t> v(m.Size(), 0);
  // Rank 2 sees 0 and 3 down; rank 1 sees 2 down: rank 2 covers every down pair.
  v[m.MatrixSlot(2, 0)] = 1;
  v[m.MatrixSlot(2, 3)] = 1;
  v[m.MatrixSlot(1, 2)] = 1;
  EXPECT_EQ(m.AffectedCover(v, {0, 1, 2, 3}), std::vector<int>({2}));
  // A single pair: the end whose own port went down, else the lower rank.
  std::vector<int64_t> w(m.Size(), 0);
  w[m.MatrixSlot(1, 3)] = 1;
  EXPECT_EQ(m.AffectedCover(w, {0, 1, 2, 3}), std::vector<int>({1}));
  w[m.ScoreSlot(3)] = 1 + FaultMatrix::kOwnPortDown;
  EXPECT_EQ(m.AffectedCover(w, {0, 1, 2, 3}), std::vector<int>({3}));
  // Left-out ranks' pairs are not edges; at most group - 1 ranks.
  EXPECT_TRUE(m.AffectedCover(w, {0, 1, 2}).empty());
  std::vector<int64_t> all(m.Size(), 0);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b)
      if (a != b) all[m.MatrixSlot(a, b)] = 1;
  EXPECT_EQ(m.AffectedCover(all, {0, 1, 2, 3}).size(), 3u);
}

TEST(WorkerFaultMatrix, WithoutTheMatrixTheHighestScoreOtherThanTheCoordinator) {
  FaultMatrix m(FaultMatrix::kMaxMatrixRanks + 2);
  std::vector<int64_t> v(m.Size(), 0);
  std::vector<int> members;
  for (int r = 0; r < m.world(); ++r) members.push_back(r);
  EXPECT_TRUE(m.AffectedCover(v, members).empty());
  v[m.ScoreSlot(0)] = 6;  // the coordinator is never picked
  v[m.ScoreSlot(5)] = 1;
  v[m.ScoreSlot(9)] = 2;
  v[m.ScoreSlot(11)] = 2;
  EXPECT_EQ(m.AffectedCover(v, members), std::vector<int>({9}));
  EXPECT_FALSE(m.ShrunkStepTime(v, members, {9}, 0.1, 0.5).has_value());
}

TEST(WorkerFaultMatrix, TheSurvivorsStepTimeFromTheirRingsSlowestLink) {
  FaultMatrix m(3);
  std::vector<int64_t> v(m.Size(), 0);
  const int rate = FaultMatrix::kRefRateBlock;
  v[m.MatrixSlot(0, 1, rate)] = 1000;
  v[m.MatrixSlot(1, 2, rate)] = 4000;
  v[m.MatrixSlot(0, 2, rate)] = 2000;
  v[m.MatrixSlot(2, 0, rate)] = 500;  // the better direction counts
  // Ring 0-1-2-0: slowest 1000. Without rank 1: ring 0-2, 2000 -> twice as fast.
  auto t = m.ShrunkStepTime(v, {0, 1, 2}, {1}, 0.1, 0.5);
  ASSERT_TRUE(t.has_value());
  EXPECT_DOUBLE_EQ(*t, policy::RingStepTimeEstimate(0.1, 0.5, 3, 2, 2.0));
  EXPECT_FALSE(m.ShrunkStepTime(v, {0, 1, 2}, {}, 0.1, 0.5).has_value());
  std::vector<int64_t> none(m.Size(), 0);
  EXPECT_FALSE(m.ShrunkStepTime(none, {0, 1, 2}, {1}, 0.1, 0.5).has_value());
}

}  // namespace
}  // namespace faultline::runner
