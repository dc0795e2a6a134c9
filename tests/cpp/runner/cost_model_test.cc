// The recovery-policy cost model (runner/policy/cost_model.h) against hand-computed numbers:
// each policy winning where it should, the choice's tie order, outages that outlast their
// estimate, bad inputs, capped costs, and the decision line's schema and its validator.
#include "runner/policy/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <ostream>

namespace faultline::policy {

// Failure messages name the policy rather than its bytes.
void PrintTo(RecoveryPolicy p, std::ostream* os) { *os << RecoveryPolicyName(p); }

namespace {

using nlohmann::json;

const PolicyEstimate& Of(const PolicyDecision& d, RecoveryPolicy p) {
  for (const PolicyEstimate& e : d.options) {
    if (e.policy == p) return e;
  }
  ADD_FAILURE() << "no option " << RecoveryPolicyName(p);
  static const PolicyEstimate kNone;
  return kNone;
}

// Every option's breakdown adds up to its cost, and nothing is NaN or infinite.
void ExpectConsistent(const PolicyState& s, const PolicyDecision& d) {
  ASSERT_EQ(d.options.size(), 4u);
  for (const PolicyEstimate& e : d.options) {
    SCOPED_TRACE(RecoveryPolicyName(e.policy));
    EXPECT_TRUE(std::isfinite(e.lost_gpu_seconds));
    EXPECT_GE(e.lost_gpu_seconds, 0);
    EXPECT_EQ(e.applicable, e.why_not.empty());
    if (!e.applicable) {
      EXPECT_EQ(e.lost_gpu_seconds, 0);
      continue;
    }
    EXPECT_NEAR(e.lost_gpu_seconds,
                s.world_size * (e.stall_s + e.lost_work_s + e.degraded_s) + e.capacity_loss_gpu_s,
                1e-9 * std::max(1.0, e.lost_gpu_seconds));
  }
  EXPECT_TRUE(Of(d, d.chosen).applicable);
  EXPECT_TRUE(ValidateDecisionJson(DecisionToJson(s, d)).ok())
      << ValidateDecisionJson(DecisionToJson(s, d)).ToString();
}

// A link fault on an 8-rank job; each test changes what it is about.
PolicyState LinkState() {
  PolicyState s;
  s.fault_class = FaultClassKind::kLink;
  s.world_size = 8;
  s.steps_remaining = 10000;
  s.step_time_s = 0.2;
  s.comm_fraction = 0.5;
  s.surviving_bandwidth_fraction = 0.5;
  s.outage_so_far_s = 0;
  s.expected_outage_s = 60;
  s.checkpoint_age_s = 100;
  s.restart_cost_s = 120;
  s.shrink_cost_s = 10;
  s.failover_switch_cost_s = 0.05;
  s.wait_bound_s = 2;
  return s;
}

TEST(RecoveryPolicyNames, RoundTrip) {
  for (RecoveryPolicy p :
       {RecoveryPolicy::kFailStop, RecoveryPolicy::kFailover, RecoveryPolicy::kWait,
        RecoveryPolicy::kShrink, RecoveryPolicy::kAdaptive}) {
    EXPECT_EQ(ParseRecoveryPolicy(RecoveryPolicyName(p)), p);
  }
  EXPECT_STREQ(RecoveryPolicyName(RecoveryPolicy::kFailStop), "fail_stop");
  EXPECT_STREQ(RecoveryPolicyName(RecoveryPolicy::kAdaptive), "adaptive");
  EXPECT_FALSE(ParseRecoveryPolicy("failstop").has_value());
  EXPECT_FALSE(ParseRecoveryPolicy("").has_value());
  for (FaultClassKind k : {FaultClassKind::kLink, FaultClassKind::kNic, FaultClassKind::kRank}) {
    EXPECT_EQ(ParseFaultClassKind(FaultClassKindName(k)), k);
  }
  EXPECT_STREQ(FaultClassKindName(FaultClassKind::kNic), "nic");
  EXPECT_FALSE(ParseFaultClassKind("gpu").has_value());
}

TEST(CostModel, ShortTransientLinkOutageWaitWins) {
  PolicyState s = LinkState();
  s.step_time_s = 0.3;
  s.comm_fraction = 0.3;
  s.surviving_bandwidth_fraction = 0;  // no path to that peer for now
  s.outage_so_far_s = 0.05;
  s.expected_outage_s = 0.2;
  s.checkpoint_age_s = 600;
  const PolicyDecision d = Decide(s);
  ExpectConsistent(s, d);
  EXPECT_EQ(d.chosen, RecoveryPolicy::kWait);
  EXPECT_FALSE(d.outage_outlasted_estimate);
  const PolicyEstimate& wait = Of(d, RecoveryPolicy::kWait);
  EXPECT_NEAR(wait.lost_gpu_seconds, 8 * (0.2 - 0.05), 1e-9);
  EXPECT_FALSE(wait.fallback.has_value());
  EXPECT_FALSE(Of(d, RecoveryPolicy::kFailover).applicable);
  EXPECT_NE(Of(d, RecoveryPolicy::kFailover).why_not.find("bandwidth 0"), std::string::npos);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kShrink).lost_gpu_seconds, 8 * 10 + 10000 * 0.3, 1e-9);
  // The path is back before the restart ends: only the restart and the lost work.
  EXPECT_NEAR(Of(d, RecoveryPolicy::kFailStop).lost_gpu_seconds, 8 * (120 + 600), 1e-9);
}

TEST(CostModel, PermanentPortDropFailoverWinsOnASmallWorld) {
  PolicyState s = LinkState();
  s.fault_class = FaultClassKind::kNic;
  s.world_size = 2;
  s.steps_remaining = 100000;
  s.comm_fraction = 0.3;
  s.surviving_bandwidth_fraction = 0.5;
  s.expected_outage_s = std::nullopt;  // permanent
  s.checkpoint_age_s = 300;
  const PolicyDecision d = Decide(s);
  ExpectConsistent(s, d);
  EXPECT_EQ(d.chosen, RecoveryPolicy::kFailover);
  const double t_d = 0.2 * ((1 - 0.3) + 0.3 / 0.5);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kFailover).lost_gpu_seconds, 2 * (0.05 + 100000 * (t_d - 0.2)),
              1e-6);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kShrink).lost_gpu_seconds, 2 * 10 + 100000 * 0.2, 1e-6);
  // The restart does not bring the port back: the replay and the rest run degraded too.
  EXPECT_NEAR(Of(d, RecoveryPolicy::kFailStop).lost_gpu_seconds,
              2 * (120 + 300) + 2 * (100000 + 300 / 0.2) * (t_d - 0.2), 1e-6);
  EXPECT_FALSE(Of(d, RecoveryPolicy::kWait).applicable);
  EXPECT_EQ(Of(d, RecoveryPolicy::kWait).why_not, "the outage is permanent");
}

TEST(CostModel, PermanentPortDropShrinkWinsOnALargeWorld) {
  // The same 30 % slowdown on 8 ranks costs 2.4 GPUs' worth of time; shrink loses one GPU.
  PolicyState s = LinkState();
  s.fault_class = FaultClassKind::kNic;
  s.steps_remaining = 100000;
  s.comm_fraction = 0.3;
  s.expected_outage_s = std::nullopt;
  const PolicyDecision d = Decide(s);
  ExpectConsistent(s, d);
  EXPECT_EQ(d.chosen, RecoveryPolicy::kShrink);
  const double t_d = 0.2 * ((1 - 0.3) + 0.3 / 0.5);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kFailover).lost_gpu_seconds, 8 * (0.05 + 100000 * (t_d - 0.2)),
              1e-6);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kShrink).lost_gpu_seconds, 8 * 10 + 100000 * 0.2, 1e-6);
}

PolicyState KilledRank(int64_t steps_remaining) {
  PolicyState s;
  s.fault_class = FaultClassKind::kRank;
  s.world_size = 8;
  s.steps_remaining = steps_remaining;
  s.step_time_s = 1;
  s.comm_fraction = 0.3;
  s.surviving_bandwidth_fraction = 0;
  s.expected_outage_s = std::nullopt;
  s.checkpoint_age_s = 1800;  // an old checkpoint
  s.restart_cost_s = 300;
  s.shrink_cost_s = 30;
  s.failover_switch_cost_s = 0.05;
  s.wait_bound_s = 2;
  return s;
}

TEST(CostModel, KilledRankShrinkWinsWhenFewStepsRemain) {
  const PolicyState s = KilledRank(1000);
  const PolicyDecision d = Decide(s);
  ExpectConsistent(s, d);
  EXPECT_EQ(d.chosen, RecoveryPolicy::kShrink);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kShrink).lost_gpu_seconds, 8 * 30 + 1000 * 1.0, 1e-9);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kShrink).capacity_loss_gpu_s, 1000 * 1.0, 1e-9);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kFailStop).lost_gpu_seconds, 8 * (300 + 1800), 1e-9);
  for (RecoveryPolicy p : {RecoveryPolicy::kFailover, RecoveryPolicy::kWait}) {
    EXPECT_FALSE(Of(d, p).applicable) << RecoveryPolicyName(p);
    EXPECT_EQ(Of(d, p).why_not, "no path to a dead rank");
  }
}

TEST(CostModel, KilledRankFailStopWinsOnALongHorizon) {
  const PolicyState s = KilledRank(100000);
  const PolicyDecision d = Decide(s);
  ExpectConsistent(s, d);
  EXPECT_EQ(d.chosen, RecoveryPolicy::kFailStop);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kFailStop).lost_gpu_seconds, 8 * (300 + 1800), 1e-9);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kShrink).lost_gpu_seconds, 8 * 30 + 100000 * 1.0, 1e-9);
}

TEST(CostModel, KilledRankOfASingleRankJobOnlyRestarts) {
  PolicyState s = KilledRank(1000);
  s.world_size = 1;
  const PolicyDecision d = Decide(s);
  ExpectConsistent(s, d);
  EXPECT_EQ(d.chosen, RecoveryPolicy::kFailStop);
  EXPECT_FALSE(Of(d, RecoveryPolicy::kShrink).applicable);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kFailStop).lost_gpu_seconds, 1 * (300 + 1800), 1e-9);
}

TEST(CostModel, RailAtTenPercentForGoodShrinkWinsAndARestartDoesNotHelp) {
  PolicyState s = LinkState();
  s.steps_remaining = 200000;
  s.step_time_s = 0.5;
  s.comm_fraction = 0.5;
  s.surviving_bandwidth_fraction = 0.1;
  s.expected_outage_s = std::nullopt;
  s.restart_cost_s = 60;  // cheap restart, fresh checkpoint
  s.checkpoint_age_s = 10;
  s.shrink_cost_s = 20;
  const PolicyDecision d = Decide(s);
  ExpectConsistent(s, d);
  const double t_d = 0.5 * ((1 - 0.5) + 0.5 / 0.1);  // 2.75 s: 5.5 x slower
  EXPECT_NEAR(Of(d, RecoveryPolicy::kFailover).lost_gpu_seconds, 8 * (0.05 + 200000 * (t_d - 0.5)),
              1e-6);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kFailStop).lost_gpu_seconds,
              8 * (60 + 10) + 8 * (200000 + 10 / 0.5) * (t_d - 0.5), 1e-6);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kShrink).lost_gpu_seconds, 8 * 20 + 200000 * 0.5, 1e-6);
  EXPECT_EQ(d.chosen, RecoveryPolicy::kShrink);
  EXPECT_GT(Of(d, RecoveryPolicy::kFailStop).lost_gpu_seconds,
            Of(d, RecoveryPolicy::kFailover).lost_gpu_seconds);
}

TEST(FlappingOutage, AsLongAgainThenTheHoldDownTheDownsEarn) {
  // Damping of 100 ms x 2^(n-1), at most 5 s. Two downs in 0.4 s: as long again, by when 4
  // downs earn 800 ms.
  EXPECT_NEAR(FlappingOutageRemaining(2, 0.4, 0.1, 0.1, 5), 0.4 + 0.8, 1e-12);
  // Three downs in 0.8 s: 0.8 s more, then 6 downs' 3.2 s.
  EXPECT_NEAR(FlappingOutageRemaining(3, 0.8, 0.2, 0.1, 5), 0.8 + 3.2, 1e-12);
  // Eight downs: the hold-down is at its cap.
  EXPECT_NEAR(FlappingOutageRemaining(8, 3, 5, 0.1, 5), 3 + 5, 1e-12);
  // A hold-down already earned that ends later than the estimate bounds it from below.
  EXPECT_NEAR(FlappingOutageRemaining(2, 0, 2.5, 0.1, 5), 2.5, 1e-12);
  // No damping: the flapping alone.
  EXPECT_NEAR(FlappingOutageRemaining(4, 1.5, 0, 0, 0), 1.5, 1e-12);
}

// A flapping rail: its expected outage grows with the downs its damping has counted. The
// answer follows from the model's formulas on a made-up state (not one measured on the
// benchmark mix, which is judged with these decisions): failover loses n k (t_d - t) with
// k = D / t_d steps, shrink n S + N (n t_s - m t); the choice flips where those cross.
TEST(CostModel, FlappingRailFailoverWhileTheOutageIsShortShrinkOnceItIsLong) {
  PolicyState s;
  s.fault_class = FaultClassKind::kLink;
  s.world_size = 4;
  s.step_time_s = 0.1;
  s.comm_fraction = 0.5;
  s.surviving_bandwidth_fraction = 0.5;  // t_d = 0.1 (0.5 + 1) = 0.15
  s.checkpoint_age_s = 1;
  s.restart_cost_s = 1;
  s.shrink_cost_s = 0.1;
  s.shrink_ranks = 1;
  s.shrunk_step_time_s = 0.1;  // shrink: 4 x 0.1 + 100 (0.4 - 0.3) = 10.4
  s.wait_bound_s = 0.01;       // waiting is priced by its fallback: out of the way
  s.steps_remaining = 100;
  s.outage_so_far_s = 0.1;
  const double t_d = 0.15;
  auto failover = [&](double d) { return 4 * (d / t_d) * (t_d - 0.1); };
  // Two downs in 0.4 s, 0.1 s held: 0.4 s more, then the 0.8 s four downs earn (D = 1.2 s).
  s.expected_outage_s = 0.1 + FlappingOutageRemaining(2, 0.4, 0.1, 0.1, 5);
  PolicyDecision d = Decide(s);
  ExpectConsistent(s, d);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kFailover).lost_gpu_seconds, failover(1.2), 1e-9);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kShrink).lost_gpu_seconds, 10.4, 1e-9);
  EXPECT_EQ(d.chosen, RecoveryPolicy::kFailover);  // 1.6 < 10.4
  // Ten downs in 5 s: 5 s more, then twenty downs' hold-down at its 5 s cap (D = 10 s).
  s.expected_outage_s = 0.1 + FlappingOutageRemaining(10, 5, 0.5, 0.1, 5);
  d = Decide(s);
  ExpectConsistent(s, d);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kFailover).lost_gpu_seconds, failover(10), 1e-9);
  EXPECT_EQ(d.chosen, RecoveryPolicy::kShrink);  // 13.3 > 10.4 (fail_stop: 20)
}

TEST(CostModel, TransientOutageLongerThanTheWaitBoundFailoverWins) {
  const PolicyState s = LinkState();  // D = 60 s, wait bound 2 s, restart 120 s
  const PolicyDecision d = Decide(s);
  ExpectConsistent(s, d);
  EXPECT_EQ(d.chosen, RecoveryPolicy::kFailover);
  const double t_d = 0.2 * ((1 - 0.5) + 0.5 / 0.5);  // 0.3 s
  EXPECT_NEAR(Of(d, RecoveryPolicy::kFailover).lost_gpu_seconds,
              8 * (0.05 + (60 / t_d) * (t_d - 0.2)), 1e-9);
  // The wait holds 2 s, then fails over for the remaining 58 s.
  const PolicyEstimate& wait = Of(d, RecoveryPolicy::kWait);
  ASSERT_TRUE(wait.fallback.has_value());
  EXPECT_EQ(*wait.fallback, RecoveryPolicy::kFailover);
  EXPECT_NEAR(wait.lost_gpu_seconds, 8 * 2 + 8 * (0.05 + (58 / t_d) * (t_d - 0.2)), 1e-9);
  // The path is back before the restart ends.
  EXPECT_NEAR(Of(d, RecoveryPolicy::kFailStop).lost_gpu_seconds, 8 * (120 + 100), 1e-9);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kShrink).lost_gpu_seconds, 8 * 10 + 10000 * 0.2, 1e-9);
}

TEST(CostModel, FailoverDegradesAtMostTheRemainingSteps) {
  PolicyState s = LinkState();
  s.steps_remaining = 100;  // 60 s / 0.3 s = 200 steps of outage > 100 left
  const PolicyDecision d = Decide(s);
  ExpectConsistent(s, d);
  const double t_d = 0.3;
  EXPECT_NEAR(Of(d, RecoveryPolicy::kFailover).lost_gpu_seconds, 8 * (0.05 + 100 * (t_d - 0.2)),
              1e-9);
}

TEST(CostModel, FailStopRunsDegradedForTheRestOfALongerOutage) {
  PolicyState s = LinkState();
  s.expected_outage_s = 600;
  s.checkpoint_age_s = 30;
  const PolicyDecision d = Decide(s);
  ExpectConsistent(s, d);
  const double t_d = 0.3;
  // 480 s of outage after the restart: min(480 / t_d, 10000 + 30 / 0.2) steps degraded.
  EXPECT_NEAR(Of(d, RecoveryPolicy::kFailStop).lost_gpu_seconds,
              8 * (120 + 30) + 8 * (480 / t_d) * (t_d - 0.2), 1e-9);
}

TEST(CostModel, NoPathAndATransientOutageTieWaitBeforeFailStop) {
  PolicyState s = LinkState();
  s.world_size = 4;
  s.steps_remaining = 100000;
  s.step_time_s = 0.1;
  s.surviving_bandwidth_fraction = 0;
  s.expected_outage_s = 600;
  s.restart_cost_s = 120;
  s.checkpoint_age_s = 50;
  s.wait_bound_s = 30;
  const PolicyDecision d = Decide(s);
  ExpectConsistent(s, d);
  // fail_stop: the restart, the lost work, then no progress for the 480 s left of the outage.
  EXPECT_EQ(Of(d, RecoveryPolicy::kFailStop).lost_gpu_seconds, 4 * (120 + 50 + (600 - 120)));
  // wait: 30 s, then the restart (from 570 s left): the same cost; the tie goes to wait.
  const PolicyEstimate& wait = Of(d, RecoveryPolicy::kWait);
  EXPECT_EQ(wait.lost_gpu_seconds, 4 * 30 + 4 * (120 + 50 + (570 - 120)));
  EXPECT_EQ(wait.fallback, RecoveryPolicy::kFailStop);
  EXPECT_EQ(d.chosen, RecoveryPolicy::kWait);
}

TEST(CostModel, TiesGoToFailoverThenShrinkThenFailStop) {
  // failover = 2 (0.5 + 1000 x 0.125) = 251 = shrink = 2 x 0.5 + 1000 x 0.25 (exact in binary).
  PolicyState s = LinkState();
  s.world_size = 2;
  s.steps_remaining = 1000;
  s.step_time_s = 0.25;
  s.comm_fraction = 0.5;
  s.surviving_bandwidth_fraction = 0.5;
  s.expected_outage_s = std::nullopt;
  s.failover_switch_cost_s = 0.5;
  s.shrink_cost_s = 0.5;
  PolicyDecision d = Decide(s);
  EXPECT_EQ(Of(d, RecoveryPolicy::kFailover).lost_gpu_seconds, 251);
  EXPECT_EQ(Of(d, RecoveryPolicy::kShrink).lost_gpu_seconds, 251);
  EXPECT_EQ(d.chosen, RecoveryPolicy::kFailover);

  // shrink = 0 + 1000 x 1 = 1000 = fail_stop = 2 x 500.
  PolicyState r = KilledRank(1000);
  r.world_size = 2;
  r.shrink_cost_s = 0;
  r.restart_cost_s = 500;
  r.checkpoint_age_s = 0;
  d = Decide(r);
  EXPECT_EQ(Of(d, RecoveryPolicy::kShrink).lost_gpu_seconds, 1000);
  EXPECT_EQ(Of(d, RecoveryPolicy::kFailStop).lost_gpu_seconds, 1000);
  EXPECT_EQ(d.chosen, RecoveryPolicy::kShrink);
}

TEST(CostModel, OutageThatOutlastedItsEstimateIsPermanent) {
  PolicyState s = LinkState();
  s.outage_so_far_s = 5;
  s.expected_outage_s = 2;
  const PolicyDecision d = Decide(s);
  ExpectConsistent(s, d);
  EXPECT_TRUE(d.outage_outlasted_estimate);
  EXPECT_FALSE(Of(d, RecoveryPolicy::kWait).applicable);
  EXPECT_NE(Of(d, RecoveryPolicy::kWait).why_not.find("outlasted"), std::string::npos);
  // Failover now runs every remaining step degraded.
  const double t_d = 0.3;
  EXPECT_NEAR(Of(d, RecoveryPolicy::kFailover).lost_gpu_seconds, 8 * (0.05 + 10000 * (t_d - 0.2)),
              1e-9);
  // Exactly at the estimate it has not outlasted it: nothing is left to wait for.
  s.outage_so_far_s = 2;
  const PolicyDecision at = Decide(s);
  EXPECT_FALSE(at.outage_outlasted_estimate);
  EXPECT_EQ(Of(at, RecoveryPolicy::kWait).lost_gpu_seconds, 0);
  EXPECT_EQ(at.chosen, RecoveryPolicy::kWait);
}

TEST(CostModel, PermanentOutageWithNoPathRestartIsNotAnOption) {
  PolicyState s = LinkState();
  s.surviving_bandwidth_fraction = 0;
  s.expected_outage_s = std::nullopt;
  const PolicyDecision d = Decide(s);
  ExpectConsistent(s, d);
  EXPECT_FALSE(Of(d, RecoveryPolicy::kFailStop).applicable);
  EXPECT_FALSE(Of(d, RecoveryPolicy::kFailover).applicable);
  EXPECT_FALSE(Of(d, RecoveryPolicy::kWait).applicable);
  EXPECT_EQ(d.chosen, RecoveryPolicy::kShrink);
}

TEST(CostModel, ExtremeInputsGiveFiniteCappedCosts) {
  PolicyState s = LinkState();
  s.surviving_bandwidth_fraction = std::numeric_limits<double>::denorm_min();
  s.comm_fraction = 1;
  s.steps_remaining = std::numeric_limits<int64_t>::max();
  s.expected_outage_s = std::nullopt;
  s.restart_cost_s = 1e300;
  s.step_time_s = 1e300;
  const PolicyDecision d = Decide(s);
  for (const PolicyEstimate& e : d.options) {
    EXPECT_TRUE(std::isfinite(e.lost_gpu_seconds)) << RecoveryPolicyName(e.policy);
    EXPECT_LE(e.lost_gpu_seconds, kMaxLostGpuSeconds);
    EXPECT_TRUE(std::isfinite(e.degraded_s));
  }
  EXPECT_EQ(Of(d, RecoveryPolicy::kFailover).lost_gpu_seconds, kMaxLostGpuSeconds);
  EXPECT_TRUE(ValidateDecisionJson(DecisionToJson(s, d)).ok());
}

TEST(CostModel, NoStepsLeftCostsOnlyTheStalls) {
  PolicyState s = LinkState();
  s.steps_remaining = 0;
  s.expected_outage_s = std::nullopt;
  const PolicyDecision d = Decide(s);
  ExpectConsistent(s, d);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kFailover).lost_gpu_seconds, 8 * 0.05, 1e-12);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kShrink).lost_gpu_seconds, 8 * 10, 1e-12);
  EXPECT_EQ(d.chosen, RecoveryPolicy::kFailover);
}

TEST(ValidatePolicyState, RejectsBadInputsNamingTheField) {
  const PolicyState good = LinkState();
  ASSERT_TRUE(ValidatePolicyState(good).ok());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    const char* field;
    void (*mutate)(PolicyState&);
  };
  const Case cases[] = {
      {"world_size", [](PolicyState& s) { s.world_size = 0; }},
      {"world_size >= 2", [](PolicyState& s) { s.world_size = 1; }},  // a link needs two
      {"steps_remaining", [](PolicyState& s) { s.steps_remaining = -1; }},
      {"step_time_s", [](PolicyState& s) { s.step_time_s = 0; }},
      {"step_time_s", [](PolicyState& s) { s.step_time_s = -0.1; }},
      {"comm_fraction", [](PolicyState& s) { s.comm_fraction = 1.5; }},
      {"comm_fraction", [](PolicyState& s) { s.comm_fraction = -0.1; }},
      {"surviving_bandwidth_fraction", [](PolicyState& s) { s.surviving_bandwidth_fraction = 2; }},
      {"surviving_bandwidth_fraction",
       [](PolicyState& s) { s.surviving_bandwidth_fraction = -0.5; }},
      {"outage_so_far_s", [](PolicyState& s) { s.outage_so_far_s = -1; }},
      {"expected_outage_s", [](PolicyState& s) { s.expected_outage_s = -3; }},
      {"checkpoint_age_s", [](PolicyState& s) { s.checkpoint_age_s = -1; }},
      {"restart_cost_s", [](PolicyState& s) { s.restart_cost_s = -1; }},
      {"shrink_cost_s", [](PolicyState& s) { s.shrink_cost_s = -1; }},
      {"shrink_ranks", [](PolicyState& s) { s.shrink_ranks = 0; }},
      {"shrink_ranks", [](PolicyState& s) { s.shrink_ranks = 8; }},  // of 8: none would be left
      {"failover_switch_cost_s", [](PolicyState& s) { s.failover_switch_cost_s = -1; }},
      {"wait_bound_s", [](PolicyState& s) { s.wait_bound_s = -1; }},
      {"fault_class", [](PolicyState& s) { s.fault_class = static_cast<FaultClassKind>(7); }},
  };
  for (const Case& c : cases) {
    PolicyState s = good;
    c.mutate(s);
    const Status st = ValidatePolicyState(s);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << c.field;
    EXPECT_NE(st.message().find(c.field), std::string::npos) << st.ToString();
  }
  PolicyState s = good;
  s.step_time_s = nan;
  EXPECT_EQ(ValidatePolicyState(s).code(), Code::kInvalidArgument);
  s = good;
  s.restart_cost_s = inf;
  EXPECT_EQ(ValidatePolicyState(s).code(), Code::kInvalidArgument);
  s = good;
  s.expected_outage_s = nan;
  EXPECT_EQ(ValidatePolicyState(s).code(), Code::kInvalidArgument);
  s = good;
  s.surviving_bandwidth_fraction = nan;
  EXPECT_EQ(ValidatePolicyState(s).code(), Code::kInvalidArgument);
  // The boundaries are valid.
  s = good;
  s.comm_fraction = 1;
  s.surviving_bandwidth_fraction = 1;
  s.steps_remaining = 0;
  s.expected_outage_s = 0;
  EXPECT_TRUE(ValidatePolicyState(s).ok());
}

TEST(ValidatePolicyStateDeathTest, DecideOnAnInvalidStateAborts) {
  PolicyState s = LinkState();
  s.step_time_s = -1;
  EXPECT_DEATH((void)Decide(s), "ValidatePolicyState");
}

TEST(DecisionJson, RoundTripValidates) {
  PolicyState s = LinkState();
  const PolicyDecision d = Decide(s);
  const json line = json::parse(DecisionToJson(s, d).dump());
  ASSERT_TRUE(ValidateDecisionJson(line).ok()) << ValidateDecisionJson(line).ToString();
  EXPECT_EQ(line["kind"], "policy_decision");
  EXPECT_EQ(line["chosen"], "failover");
  EXPECT_EQ(line["inputs"]["step_time_s"], 0.2);
  EXPECT_EQ(line["inputs"]["fault_class"], "link");
  EXPECT_EQ(line["inputs"]["expected_outage_s"], 60.0);
  ASSERT_EQ(line["options"].size(), 4u);
  EXPECT_EQ(line["options"][0]["policy"], "fail_stop");
  EXPECT_EQ(line["options"][2]["fallback"], "failover");
  EXPECT_EQ(line["options"][1]["lost_gpu_s"], Of(d, RecoveryPolicy::kFailover).lost_gpu_seconds);

  const Result<PolicyState> back = PolicyStateFromJson(line["inputs"]);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->world_size, s.world_size);
  EXPECT_EQ(back->steps_remaining, s.steps_remaining);
  EXPECT_EQ(back->expected_outage_s, s.expected_outage_s);
  EXPECT_EQ(back->failover_switch_cost_s, s.failover_switch_cost_s);
  EXPECT_EQ(Decide(*back).chosen, d.chosen);

  // A permanent outage is null; extra top-level keys (a timestamp) are allowed.
  s.expected_outage_s = std::nullopt;
  json permanent = DecisionToJson(s, Decide(s));
  EXPECT_TRUE(permanent["inputs"]["expected_outage_s"].is_null());
  permanent["t_s"] = 12.5;
  EXPECT_TRUE(ValidateDecisionJson(permanent).ok());
  EXPECT_FALSE(PolicyStateFromJson(permanent["inputs"])->expected_outage_s.has_value());
}

TEST(DecisionJson, BrokenLinesFailValidation) {
  PolicyState s = LinkState();
  s.surviving_bandwidth_fraction = 0;  // failover not applicable
  const json good = DecisionToJson(s, Decide(s));
  ASSERT_TRUE(ValidateDecisionJson(good).ok());
  ASSERT_EQ(good["options"][1]["policy"], "failover");
  ASSERT_EQ(good["options"][1]["applicable"], false);

  struct Case {
    const char* expect;  // in the message
    void (*mutate)(json&);
  };
  const Case cases[] = {
      {"not an applicable option", [](json& j) { j["chosen"] = "failover"; }},
      {"not an applicable option", [](json& j) { j["chosen"] = "adaptive"; }},
      {"least-cost", [](json& j) { j["chosen"] = "shrink"; }},
      {"lost_gpu_s must be >= 0", [](json& j) { j["options"][0]["lost_gpu_s"] = -1.0; }},
      {"lost_gpu_s must be a number", [](json& j) { j["options"][0]["lost_gpu_s"] = "1"; }},
      {"missing key \"step_time_s\"", [](json& j) { j["inputs"].erase("step_time_s"); }},
      {"missing key \"options\"", [](json& j) { j.erase("options"); }},
      {"missing key \"degraded_s\"", [](json& j) { j["options"][3].erase("degraded_s"); }},
      {"unknown key \"bandwidth\"", [](json& j) { j["inputs"]["bandwidth"] = 1; }},
      {"world_size must be an integer", [](json& j) { j["inputs"]["world_size"] = 8.5; }},
      {"comm_fraction", [](json& j) { j["inputs"]["comm_fraction"] = 3; }},
      {"fault_class", [](json& j) { j["inputs"]["fault_class"] = "gpu"; }},
      {"kind", [](json& j) { j["kind"] = "fault"; }},
      {"why_not must be empty", [](json& j) { j["options"][1]["why_not"] = ""; }},
      {"twice", [](json& j) { j["options"][1]["policy"] = "fail_stop"; }},
      {"once each", [](json& j) { j["options"].erase(3); }},
      {"disagrees", [](json& j) { j["outage_outlasted_estimate"] = true; }},
      {"fallback", [](json& j) { j["options"][2]["fallback"] = "wait"; }},
      {"options must be an array", [](json& j) { j["options"] = json::object(); }},
  };
  for (const Case& c : cases) {
    json j = good;
    c.mutate(j);
    const Status st = ValidateDecisionJson(j);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << c.expect;
    EXPECT_NE(st.message().find(c.expect), std::string::npos) << st.ToString();
  }
  EXPECT_EQ(ValidateDecisionJson(json::array()).code(), Code::kInvalidArgument);
  EXPECT_EQ(ValidateDecisionJson(json("x")).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace faultline::policy

namespace faultline::policy {
namespace {

// A shrink that must drop every rank of a host (its rail is down for both of its ranks) loses
// two GPUs' work for the horizon, not one: where dropping one rank would beat failing over,
// dropping the two that the fault needs does not. A made-up state (4 ranks on 2 hosts, a
// 0.1 s step that is half allreduce, half the bandwidth left, permanent), its answers from
// the formulas: failover 4 x 100 x (0.15 - 0.1) = 20; shrink 4 x 0.05 + 100 (4 t_s - m 0.1);
// fail_stop 4 (1 + 1) + 4 x 110 x 0.05 = 30.
PolicyState PortDropOfACommBoundJob() {
  PolicyState s;
  s.fault_class = FaultClassKind::kLink;
  s.world_size = 4;
  s.steps_remaining = 100;
  s.step_time_s = 0.1;
  s.comm_fraction = 0.5;
  s.surviving_bandwidth_fraction = 0.5;
  s.expected_outage_s.reset();  // no history: permanent
  s.checkpoint_age_s = 1.0;
  s.restart_cost_s = 1.0;
  s.shrink_cost_s = 0.05;
  s.wait_bound_s = 3;
  s.shrink_ranks = 2;
  return s;
}

TEST(CostModel, ShrinkChargesEveryRankItMustDrop) {
  PolicyState s = PortDropOfACommBoundJob();
  s.shrink_ranks = 1;
  const PolicyDecision one = Decide(s);
  ExpectConsistent(s, one);
  EXPECT_NEAR(Of(one, RecoveryPolicy::kFailover).lost_gpu_seconds, 20, 1e-9);
  EXPECT_NEAR(Of(one, RecoveryPolicy::kFailStop).lost_gpu_seconds, 30, 1e-9);
  EXPECT_NEAR(Of(one, RecoveryPolicy::kShrink).lost_gpu_seconds, 0.2 + 10, 1e-9);
  EXPECT_EQ(one.chosen, RecoveryPolicy::kShrink);
  s.shrink_ranks = 2;
  const PolicyDecision two = Decide(s);
  ExpectConsistent(s, two);
  EXPECT_NEAR(Of(two, RecoveryPolicy::kShrink).lost_gpu_seconds, 0.2 + 20, 1e-9);
  EXPECT_EQ(two.chosen, RecoveryPolicy::kFailover);
  const double horizon = 100 * 0.1;
  EXPECT_NEAR(Of(two, RecoveryPolicy::kShrink).capacity_loss_gpu_s, 2 * horizon, 1e-9);
  EXPECT_NEAR(Of(one, RecoveryPolicy::kShrink).capacity_loss_gpu_s, horizon, 1e-9);
  // The line carries it, and a line without it is not one of this schema.
  nlohmann::json line = DecisionToJson(s, two);
  EXPECT_EQ(line["inputs"]["shrink_ranks"], 2);
  line["inputs"].erase("shrink_ranks");
  EXPECT_FALSE(ValidateDecisionJson(line).ok());
}

TEST(CostModel, ShrinkToSurvivorsThatStepFasterChargesOnlyTheRateItLoses) {
  PolicyState s = PortDropOfACommBoundJob();
  // Survivors as fast as the full group: k GPUs' work for the horizon, 20.2 > failover's 20.
  s.shrunk_step_time_s = s.step_time_s;
  PolicyDecision d = Decide(s);
  ExpectConsistent(s, d);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kShrink).capacity_loss_gpu_s, 2 * 100 * 0.1, 1e-9);
  EXPECT_EQ(d.chosen, RecoveryPolicy::kFailover);
  // Their allreduce inside one host is faster: a 0.06 s step for half the work.
  // N (n t_s - m t) = 100 (4 x 0.06 - 2 x 0.1) = 4 GPU-s, less than failover's 20.
  s.shrunk_step_time_s = 0.06;
  d = Decide(s);
  ExpectConsistent(s, d);
  EXPECT_NEAR(Of(d, RecoveryPolicy::kShrink).capacity_loss_gpu_s, 100 * (4 * 0.06 - 2 * 0.1), 1e-9);
  EXPECT_EQ(d.chosen, RecoveryPolicy::kShrink);
  // Survivors that would outrun the whole group lose nothing (the term is at least 0).
  s.shrunk_step_time_s = 0.04;
  d = Decide(s);
  EXPECT_DOUBLE_EQ(Of(d, RecoveryPolicy::kShrink).capacity_loss_gpu_s, 0);
  // A slower survivors' step costs more than k GPUs' share.
  s.shrunk_step_time_s = 0.12;
  d = Decide(s);
  EXPECT_GT(Of(d, RecoveryPolicy::kShrink).capacity_loss_gpu_s, 2 * 100 * 0.1);
}

TEST(CostModel, ShrunkStepTimeIsValidatedAndCarriedByTheLine) {
  PolicyState s = PortDropOfACommBoundJob();
  for (double bad : {0.0, -1.0, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    s.shrunk_step_time_s = bad;
    const Status st = ValidatePolicyState(s);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.ToString().find("shrunk_step_time_s"), std::string::npos) << st.ToString();
  }
  s.shrunk_step_time_s = 0.06;
  nlohmann::json line = DecisionToJson(s, Decide(s));
  EXPECT_DOUBLE_EQ(line["inputs"]["shrunk_step_time_s"].get<double>(), 0.06);
  EXPECT_TRUE(ValidateDecisionJson(line).ok());
  auto back = PolicyStateFromJson(line["inputs"]);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->shrunk_step_time_s, 0.06);
  s.shrunk_step_time_s.reset();
  line = DecisionToJson(s, Decide(s));
  EXPECT_TRUE(line["inputs"]["shrunk_step_time_s"].is_null());
  EXPECT_TRUE(ValidateDecisionJson(line).ok());
  line["inputs"].erase("shrunk_step_time_s");
  EXPECT_FALSE(ValidateDecisionJson(line).ok());
}

TEST(CostModel, RingStepTimeEstimateScalesOnlyTheAllreduceShare) {
  // 60 ms, half of it allreduce, 4 ranks -> 2 on the same kind of links: the ring moves
  // (1/2) / (3/4) of the data per rank, 30 + 30 x 2/3 = 50 ms.
  EXPECT_NEAR(RingStepTimeEstimate(0.06, 0.5, 4, 2, 1.0), 0.05, 1e-12);
  // Their slowest link 3x faster: 30 + 20 / 3 ms.
  EXPECT_NEAR(RingStepTimeEstimate(0.06, 0.5, 4, 2, 3.0), 0.03 + 0.02 / 3, 1e-12);
  // 4 -> 3 ranks: (2/3) / (3/4) = 8/9 of the allreduce.
  EXPECT_NEAR(RingStepTimeEstimate(0.06, 0.5, 4, 3, 1.0), 0.03 + 0.03 * 8 / 9, 1e-12);
  // No shrink at all, and one rank left (no allreduce).
  EXPECT_NEAR(RingStepTimeEstimate(0.06, 0.5, 4, 4, 1.0), 0.06, 1e-12);
  EXPECT_NEAR(RingStepTimeEstimate(0.06, 0.5, 4, 1, 1.0), 0.03, 1e-12);
  // A job that is all allreduce left alone on one rank still takes a positive time.
  EXPECT_GT(RingStepTimeEstimate(0.06, 1.0, 4, 1, 1.0), 0);
}

}  // namespace
}  // namespace faultline::policy
