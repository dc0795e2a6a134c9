// The train workload's recovery policies (runner/worker/policies/policy.h) on synthetic
// observations, no process: what each policy asks of the loop before and after a step, at a
// step boundary, after a failed call and after a rank loss, and adaptive's decision requests
// (deferral of path news, nic at once, outages over or outlasted, the rank-loss question).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "runner/worker/policies/policy.h"

namespace faultline::runner::policies {
namespace {

using policy::RecoveryPolicy;

std::unique_ptr<Policy> Make(const char* name) {
  std::unique_ptr<Policy> p = MakePolicy(name);
  EXPECT_NE(p, nullptr) << name;
  return p;
}

LocalView News() {
  LocalView l;
  l.news = true;
  return l;
}

TEST(PolicyFactory, NamesEveryPolicyAndRefusesOthers) {
  for (const char* name : {"failover", "fail_stop", "wait", "shrink", "adaptive"}) {
    auto p = MakePolicy(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_STREQ(p->Name(), name);
  }
  EXPECT_EQ(MakePolicy("restart"), nullptr);
  EXPECT_EQ(MakePolicy(""), nullptr);
}

TEST(PolicyFailover, LeavesRecoveryToTheLibraryAndEndsOnAFailedCall) {
  auto p = Make("failover");
  EXPECT_FALSE(p->Flagged());
  EXPECT_FALSE(p->WaitsForLostPeers());
  EXPECT_EQ(p->BoundaryGather(), Gather::kNone);
  EXPECT_EQ(p->AtStepEdge(News()).kind, Action::kContinue);
  EXPECT_EQ(p->OnFailedCall(/*can_shrink=*/true).kind, Action::kFail);
  EXPECT_EQ(p->OnFailedCall(false).kind, Action::kFail);
}

TEST(PolicyFailStop, StopsAtTheFirstFaultSeen) {
  auto p = Make("fail_stop");
  EXPECT_TRUE(p->ForgetsStartupFaults());
  EXPECT_EQ(p->BoundaryGather(), Gather::kNone);
  EXPECT_EQ(p->AtStepEdge(LocalView{}).kind, Action::kContinue);
  LocalView down;
  down.any_path_down = true;  // a path down without news: already handed over, not new
  EXPECT_EQ(p->AtStepEdge(down).kind, Action::kContinue);
  const Action a = p->AtStepEdge(News());
  EXPECT_EQ(a.kind, Action::kFailStop);
  EXPECT_EQ(a.why, "the library reported a fault");
  EXPECT_EQ(p->OnFailedCall(true).kind, Action::kFailStop);
}

TEST(PolicyWait, FlagsPathsToWaitForAndHoldsWhileAnyRankWaits) {
  auto p = Make("wait");
  EXPECT_TRUE(p->Flagged());
  EXPECT_TRUE(p->WaitsForLostPeers());
  EXPECT_EQ(p->BoundaryGather(), Gather::kWaitFlags);
  LocalView l;
  l.news = true;
  l.any_path_down = true;  // down, but already waited out
  EXPECT_FALSE(p->Flag(l));
  l.path_to_wait_for = true;
  EXPECT_TRUE(p->Flag(l));
  GroupView g;
  EXPECT_EQ(p->AtBoundary(g).kind, Action::kContinue);
  g.any_waiting = true;
  EXPECT_EQ(p->AtBoundary(g).kind, Action::kHold);
  EXPECT_EQ(p->OnFailedCall(true).kind, Action::kFail);
}

TEST(PolicyWait, HoldRoundsEndWhenThePathsReturnOrTheBoundPassed) {
  EXPECT_EQ(NextHoldStep(true, false), HoldStep::kHold);
  EXPECT_EQ(NextHoldStep(false, false), HoldStep::kReturned);
  EXPECT_EQ(NextHoldStep(false, true), HoldStep::kReturned);  // back in time: returned wins
  EXPECT_EQ(NextHoldStep(true, true), HoldStep::kWaitedOut);
}

// A gathered vector for `world` ranks with the summary slots set.
struct Gathered {
  explicit Gathered(int world) : matrix(world), v(matrix.Size(), 0) {
    v[FaultMatrix::kNegStart] = -FaultMatrix::kPermanent;
    v[FaultMatrix::kNegBandwidth] = -1000000;
  }
  GroupView View(bool coordinator, int64_t now_ns = 10'000'000'000) {
    GroupView g;
    g.state = &v;
    g.matrix = &matrix;
    for (int r = 0; r < matrix.world(); ++r) g.members.push_back(r);
    g.coordinator = coordinator;
    g.now_ns = now_ns;
    g.base.world_size = matrix.world();
    g.base.steps_remaining = 100;
    g.base.step_time_s = 0.1;
    g.base.comm_fraction = 0.5;
    g.base.restart_cost_s = 2;
    g.base.shrink_cost_s = 0.05;
    g.base.wait_bound_s = 5;
    return g;
  }
  FaultMatrix matrix;
  std::vector<int64_t> v;
};

TEST(PolicyShrink, DropsTheAffectedRanksOnlyWhileAPathIsDown) {
  auto p = Make("shrink");
  EXPECT_TRUE(p->Flagged());
  EXPECT_FALSE(p->WaitsForLostPeers());
  EXPECT_EQ(p->BoundaryGather(), Gather::kFaultState);
  EXPECT_TRUE(p->Flag(News()));
  Gathered g(3);
  g.v[FaultMatrix::kNews] = 1;  // a fault already over: nobody to drop
  EXPECT_EQ(p->AtBoundary(g.View(true)).kind, Action::kContinue);
  g.v[FaultMatrix::kDown] = 1;
  const Action a = p->AtBoundary(g.View(false));
  EXPECT_EQ(a.kind, Action::kShrinkAffected);
  EXPECT_EQ(a.why, "the shrink policy");
  Gathered alone(1);
  alone.v[FaultMatrix::kDown] = 1;  // a group of one has nobody to drop
  EXPECT_EQ(p->AtBoundary(alone.View(true)).kind, Action::kContinue);
  EXPECT_EQ(p->OnFailedCall(true).kind, Action::kShrinkLostRank);
  EXPECT_EQ(p->OnFailedCall(false).kind, Action::kFail);
  RankLossView loss;
  EXPECT_EQ(p->AfterRankLoss(loss).kind, Action::kContinue);
}

TEST(PolicyAdaptive, PathNewsIsDecidedOneStepLaterOnTheCoordinatorOnly) {
  auto p = Make("adaptive");
  EXPECT_TRUE(p->WaitsForLostPeers());
  EXPECT_TRUE(p->MeasuresPeerRates());
  Gathered g(2);
  g.v[FaultMatrix::kNews] = 1;
  g.v[FaultMatrix::kClass] = 1;
  g.v[FaultMatrix::kDown] = 1;
  g.v[FaultMatrix::kNegStart] = -9'500'000'000;  // down since 0.5 s before now
  g.v[FaultMatrix::kExpected] = FaultMatrix::kPermanent;
  g.v[FaultMatrix::kNegBandwidth] = -500000;
  g.v[g.matrix.MatrixSlot(1, 0)] = 1;
  // The boundary of the detection: deferred, nothing shared.
  EXPECT_EQ(p->AtBoundary(g.View(true)).kind, Action::kContinue);
  EXPECT_TRUE(p->Pending());
  // The next boundary: the coordinator asks, with what it measured.
  g.v[FaultMatrix::kNews] = 0;
  const Action a = p->AtBoundary(g.View(true));
  EXPECT_FALSE(p->Pending());
  ASSERT_EQ(a.kind, Action::kShare);
  ASSERT_TRUE(a.request.has_value());
  const DecisionRequest& r = *a.request;
  EXPECT_EQ(r.trigger, "path_down");
  EXPECT_EQ(r.state.fault_class, policy::FaultClassKind::kLink);
  EXPECT_DOUBLE_EQ(r.state.surviving_bandwidth_fraction, 0.5);
  EXPECT_DOUBLE_EQ(r.state.outage_so_far_s, 0.5);
  // No history: as long again as so far (at least a step).
  ASSERT_TRUE(r.state.expected_outage_s.has_value());
  EXPECT_DOUBLE_EQ(*r.state.expected_outage_s, 1.0);
  EXPECT_EQ(r.shrink_set, std::vector<int>({0}));  // the pair's lower rank on a tie
  EXPECT_EQ(r.state.shrink_ranks, 1);
  EXPECT_FALSE(r.fault_over);

  // Another rank of the group shares without a request.
  auto q = Make("adaptive");
  g.v[FaultMatrix::kNews] = 1;
  EXPECT_EQ(q->AtBoundary(g.View(false)).kind, Action::kContinue);
  g.v[FaultMatrix::kNews] = 0;
  const Action b = q->AtBoundary(g.View(false));
  EXPECT_EQ(b.kind, Action::kShare);
  EXPECT_FALSE(b.request.has_value());
}

TEST(PolicyAdaptive, ACutOffRankIsDecidedAtOnceAndAFaultOverIsAnEndedOutage) {
  auto p = Make("adaptive");
  Gathered nic(2);
  nic.v[FaultMatrix::kNews] = 1;
  nic.v[FaultMatrix::kClass] = 2;
  nic.v[FaultMatrix::kDown] = 1;
  nic.v[FaultMatrix::kExpected] = FaultMatrix::kPermanent;
  const Action a = p->AtBoundary(nic.View(true));
  ASSERT_TRUE(a.request.has_value());
  EXPECT_EQ(a.request->state.fault_class, policy::FaultClassKind::kNic);

  auto q = Make("adaptive");
  Gathered over(2);
  over.v[FaultMatrix::kNews] = 1;
  over.v[FaultMatrix::kClass] = 1;  // news, but nothing down by the boundary
  const Action b = q->AtBoundary(over.View(true));
  ASSERT_TRUE(b.request.has_value());
  EXPECT_EQ(b.request->trigger, "path_fault_over");
  EXPECT_TRUE(b.request->fault_over);
  EXPECT_DOUBLE_EQ(b.request->state.outage_so_far_s, 0);
  EXPECT_EQ(b.request->state.expected_outage_s, 0.0);

  // Nothing new and nothing down: no boundary work at all.
  Gathered quiet(2);
  EXPECT_EQ(q->AtBoundary(quiet.View(true)).kind, Action::kContinue);
}

TEST(PolicyAdaptive, ReDecidesOnlyWhenTheOutageOutlastsTheLastDecision) {
  auto p = Make("adaptive");
  Gathered g(2);
  g.v[FaultMatrix::kNews] = 1;
  g.v[FaultMatrix::kClass] = 2;
  g.v[FaultMatrix::kDown] = 1;
  g.v[FaultMatrix::kNegStart] = -9'000'000'000;  // down for 1 s at now = 10 s
  g.v[FaultMatrix::kExpected] = FaultMatrix::kPermanent;
  const Action first = p->AtBoundary(g.View(true, 10'000'000'000));
  ASSERT_TRUE(first.request.has_value());
  EXPECT_DOUBLE_EQ(*first.request->state.expected_outage_s, 2.0);  // 2 x so far
  p->Decided(*first.request, /*chosen=*/true);                     // expected to end 1 s from now
  g.v[FaultMatrix::kNews] = 0;
  const Action within = p->AtBoundary(g.View(true, 10'500'000'000));
  EXPECT_EQ(within.kind, Action::kShare);
  EXPECT_FALSE(within.request.has_value());
  const Action outlasted = p->AtBoundary(g.View(true, 11'000'000'001));
  ASSERT_TRUE(outlasted.request.has_value());
  EXPECT_EQ(outlasted.request->trigger, "path_down");
}

TEST(PolicyAdaptive, AppliesTheSharedDecision) {
  auto p = Make("adaptive");
  EXPECT_EQ(p->ApplyAtBoundary(std::nullopt).kind, Action::kContinue);
  EXPECT_EQ(p->ApplyAtBoundary(RecoveryPolicy::kWait).kind, Action::kHold);
  EXPECT_EQ(p->ApplyAtBoundary(RecoveryPolicy::kFailover).kind, Action::kContinue);
  const Action shrink = p->ApplyAtBoundary(RecoveryPolicy::kShrink);
  EXPECT_EQ(shrink.kind, Action::kShrinkAffected);
  EXPECT_EQ(shrink.why, "the adaptive policy");
  const Action stop = p->ApplyAtBoundary(RecoveryPolicy::kFailStop);
  EXPECT_EQ(stop.kind, Action::kFailStop);
  EXPECT_EQ(stop.why, "the adaptive policy chose fail_stop");
}

TEST(PolicyAdaptive, AfterALostRankTheSurvivorsDecideWhetherToRestart) {
  auto p = Make("adaptive");
  EXPECT_EQ(p->OnFailedCall(true).kind, Action::kShrinkLostRank);
  EXPECT_EQ(p->OnFailedCall(false).kind, Action::kFail);
  RankLossView loss;
  loss.lost = 2;
  loss.group_before = 3;
  loss.group_after = 2;
  loss.outage_so_far_s = 0.25;
  loss.before.world_size = 3;
  loss.before.step_time_s = 0.1;
  loss.before.comm_fraction = 0.5;
  loss.before.expected_outage_s = 7;
  EXPECT_FALSE(p->AfterRankLoss(loss).request.has_value());  // not the coordinator
  EXPECT_EQ(p->AfterRankLoss(loss).kind, Action::kShare);
  loss.coordinator = true;
  const Action a = p->AfterRankLoss(loss);
  ASSERT_TRUE(a.request.has_value());
  EXPECT_EQ(a.request->trigger, "rank_lost");
  EXPECT_EQ(a.request->shrink_set, std::vector<int>({2}));
  EXPECT_EQ(a.request->state.fault_class, policy::FaultClassKind::kRank);
  EXPECT_EQ(a.request->state.surviving_bandwidth_fraction, 0);
  EXPECT_FALSE(a.request->state.expected_outage_s.has_value());
  EXPECT_DOUBLE_EQ(a.request->state.outage_so_far_s, 0.25);
  ASSERT_TRUE(a.request->state.shrunk_step_time_s.has_value());
  EXPECT_DOUBLE_EQ(*a.request->state.shrunk_step_time_s,
                   policy::RingStepTimeEstimate(0.1, 0.5, 3, 2, 1.0));
  EXPECT_EQ(p->ApplyAfterRankLoss(RecoveryPolicy::kShrink, 2).kind, Action::kContinue);
  const Action stop = p->ApplyAfterRankLoss(RecoveryPolicy::kFailStop, 2);
  EXPECT_EQ(stop.kind, Action::kFailStop);
  EXPECT_EQ(stop.why, "the adaptive policy chose fail_stop after losing rank 2");
}

}  // namespace
}  // namespace faultline::runner::policies
