// Timeline: a pure function of scenario and seed; link_flap expansion with seeded jitter.
#include "runner/core/timeline.h"

#include <gtest/gtest.h>

#include "base/units.h"

namespace faultline::runner {
namespace {

constexpr int64_t kMs = 1'000'000;

Scenario Parse(const std::string& faults) {
  const std::string yaml =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 2, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 20s}\n"
      "faults:\n" +
      faults;
  ParseOutcome r = ParseScenario(yaml, "t.yaml");
  EXPECT_TRUE(r.ok());
  for (const auto& d : r.diagnostics) ADD_FAILURE() << d.ToString();
  return r.scenario.value_or(Scenario{});
}

TEST(Timeline, FlapWithoutJitterExpandsIntoExactDownUpPairs) {
  Scenario s = Parse(
      "  - {id: f1, at: 2s, type: link_flap, target: {host: 1, rail: 0, side: switch}, "
      "down: 200ms, up: 300ms, count: 3}\n");
  Timeline tl = BuildTimeline(s, 1);
  ASSERT_EQ(tl.actions.size(), 6u);
  const int64_t want[] = {2000, 2200, 2500, 2700, 3000, 3200};
  for (size_t i = 0; i < 6; ++i) {
    const TimelineAction& a = tl.actions[i];
    EXPECT_EQ(a.at_ns, want[i] * kMs) << i;
    EXPECT_EQ(a.nominal_ns, want[i] * kMs) << i;
    EXPECT_EQ(a.type, i % 2 == 0 ? ActionType::kApply : ActionType::kRevert) << i;
    EXPECT_EQ(a.cycle, static_cast<int>(i / 2));
    EXPECT_EQ(a.fault_id, "f1");
    EXPECT_EQ(a.kind, "link_flap");
    EXPECT_EQ(a.injector_kind, "link_down");
    EXPECT_EQ(a.target.host, 1);
    EXPECT_EQ(a.target.rail, 0);
  }
  EXPECT_EQ(tl.actions[0].params, (nlohmann::json{{"side", "switch"}}));
}

TEST(Timeline, FlapJitterIsSeededBoundedAndReproducible) {
  Scenario s = Parse(
      "  - {id: f1, at: 1s, type: link_flap, target: {host: 0, rail: 1}, down: 200ms, "
      "up: 300ms, count: 20, jitter: 50ms}\n");
  Timeline a = BuildTimeline(s, 42);
  Timeline b = BuildTimeline(s, 42);
  Timeline c = BuildTimeline(s, 43);
  ASSERT_EQ(a.actions.size(), 40u);
  bool differs = false, jittered = false;
  for (size_t i = 0; i < a.actions.size(); ++i) {
    EXPECT_EQ(a.actions[i].at_ns, b.actions[i].at_ns);
    differs = differs || a.actions[i].at_ns != c.actions[i].at_ns;
    jittered = jittered || a.actions[i].at_ns != a.actions[i].nominal_ns;
    if (i > 0) {
      // Each period stays within [base - jitter, base + jitter].
      const int64_t period = a.actions[i].at_ns - a.actions[i - 1].at_ns;
      const int64_t base = (i % 2 == 1) ? 200 * kMs : 300 * kMs;
      EXPECT_GE(period, base - 50 * kMs) << i;
      EXPECT_LE(period, base + 50 * kMs) << i;
      EXPECT_EQ(a.actions[i].nominal_ns - a.actions[i - 1].nominal_ns, base);
    }
    // Never later than the validator's worst-case end.
    EXPECT_LE(a.actions[i].at_ns, *s.faults[0].LatestEndNs());
  }
  EXPECT_EQ(a.actions[0].at_ns, 1000 * kMs);  // the first transition is not jittered
  EXPECT_TRUE(jittered);
  EXPECT_TRUE(differs);
}

TEST(Timeline, JitterOfOneFaultDoesNotDependOnOtherFaults) {
  const std::string flap =
      "  - {id: fl, at: 1s, type: link_flap, target: {host: 0, rail: 1}, down: 200ms, "
      "up: 300ms, count: 4, jitter: 50ms}\n";
  Scenario alone = Parse(flap);
  Scenario with = Parse(
      "  - {id: other, at: 1s, type: link_flap, target: {host: 1, rail: 1}, down: 200ms, "
      "up: 300ms, count: 4, jitter: 50ms}\n" +
      flap);
  std::vector<int64_t> t1, t2;
  for (const auto& a : BuildTimeline(alone, 9).actions) t1.push_back(a.at_ns);
  for (const auto& a : BuildTimeline(with, 9).actions) {
    if (a.fault_id == "fl") t2.push_back(a.at_ns);
  }
  EXPECT_EQ(t1, t2);
  EXPECT_NE(FaultSeed(9, "fl"), FaultSeed(9, "other"));
  EXPECT_EQ(FaultSeed(9, "fl"), FaultSeed(9, "fl"));
}

TEST(Timeline, SteadyOneShotAndPermanentFaults) {
  Scenario s = Parse(
      "  - {id: bw, at: 5s, type: bandwidth, target: {host: 0, rail: 0}, rate: 250Mbps, for: 2s}\n"
      "  - {id: ld, at: 1s, type: link_down, target: {host: 1, rail: 1}, for: 4s}\n"
      "  - {id: pd, at: 6s, type: port_drop, target: {host: 1, rail: 0}}\n"
      "  - {id: lo, at: 8s, type: loss, target: {host: 0, rail: 1}, percent: 2.5%}\n"
      "  - {id: qp, at: 5s, type: qp_error, target: {host: 0, rank: 1, rail: 1}, peer: 2}\n"
      "  - {id: rk, at: 9s, type: rank_kill, target: {host: 1, rank: 1}}\n");
  Timeline tl = BuildTimeline(s, 3);
  std::vector<std::string> order;
  for (const auto& a : tl.actions) {
    order.push_back(a.fault_id + ":" + ActionTypeName(a.type) + "@" + FormatDuration(a.at_ns));
  }
  // At 5s the revert of ld comes before the applies, which keep file order.
  const std::vector<std::string> want = {"ld:apply@1s", "ld:revert@5s", "bw:apply@5s",
                                         "qp:apply@5s", "pd:apply@6s",  "bw:revert@7s",
                                         "lo:apply@8s", "rk:apply@9s"};
  EXPECT_EQ(order, want);
  const TimelineAction& bw = tl.actions[2];
  auto rate = ParseRate(bw.params["rate"].get<std::string>());
  ASSERT_TRUE(rate.ok());
  EXPECT_EQ(*rate, 250'000'000u);
  const TimelineAction& qp = tl.actions[3];
  EXPECT_EQ(qp.params, (nlohmann::json{{"peer", 2}, {"path", 1}}));
  const TimelineAction& pd = tl.actions[4];
  EXPECT_EQ(pd.params, (nlohmann::json{{"side", "host"}, {"remove", false}}));
  const TimelineAction& lo = tl.actions[6];
  EXPECT_DOUBLE_EQ(lo.params["percent"].get<double>(), 2.5);
  // The loss pattern's seed follows the run seed.
  EXPECT_EQ(lo.params["seed"], BuildTimeline(s, 3).actions[6].params["seed"]);
  EXPECT_NE(lo.params["seed"], BuildTimeline(s, 4).actions[6].params["seed"]);
}

}  // namespace
}  // namespace faultline::runner
