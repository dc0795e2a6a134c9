#include "reports/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "synthetic.h"

namespace faultline::reports {
namespace {

nlohmann::json WithMetric(nlohmann::json r, const std::string& key, nlohmann::json v) {
  r["metrics"][key] = std::move(v);
  return r;
}

const MetricChange& Metric(const Comparison& c, const std::string& name) {
  for (const auto& m : c.scenarios.at(0).metrics) {
    if (m.metric == name) return m;
  }
  ADD_FAILURE() << "no metric " << name;
  static MetricChange none;
  return none;
}

const MetricStats& Stat(const ScenarioStats& s, const std::string& name) {
  for (const auto& m : s.metrics) {
    if (m.metric == name) return m;
  }
  ADD_FAILURE() << "no metric " << name;
  static MetricStats none;
  return none;
}

TEST(CompareRuns, IdenticalRunsHaveNoRegression) {
  const auto r = testing::Report();
  const Comparison c = CompareRuns({r}, {r}, 10);
  ASSERT_EQ(c.scenarios.size(), 1u);
  EXPECT_EQ(c.scenarios[0].key, "rail-flap [ftccl]");
  EXPECT_EQ(c.Regressions(), 0);
  EXPECT_EQ(Metric(c, "stall_ms").status, ChangeStatus::kOk);
  EXPECT_EQ(Metric(c, "stall_ms").change_pct, 0.0);
  // f2 was applied and never recovered: never on both sides is no change.
  EXPECT_TRUE(std::isinf(*Metric(c, "recovery_ms").a));
  EXPECT_EQ(Metric(c, "recovery_ms").status, ChangeStatus::kOk);
  // Absent from both (a report without failover_first_ms): n/a.
  EXPECT_EQ(Metric(c, "failover_first_ms").status, ChangeStatus::kBothNull);
}

TEST(CompareRuns, HigherStallIsWorseLowerBusbwIsWorse) {
  const auto a = testing::Report();
  auto b = WithMetric(a, "stall_ms", 1000.0);           // +23.1%
  b = WithMetric(b, "baseline_busbw_gbps", 8.0);        // -20%
  b = WithMetric(b, "detection_ms", 5.0);               // -60%: better
  b = WithMetric(b, "degraded_ratio", 0.75);            // +50%: better
  const Comparison c = CompareRuns({a}, {b}, 10);
  EXPECT_EQ(Metric(c, "stall_ms").status, ChangeStatus::kRegression);
  EXPECT_NEAR(*Metric(c, "stall_ms").change_pct, 23.12, 0.01);
  EXPECT_EQ(Metric(c, "baseline_busbw_gbps").status, ChangeStatus::kRegression);
  EXPECT_NEAR(*Metric(c, "baseline_busbw_gbps").change_pct, -20, 1e-9);
  EXPECT_EQ(Metric(c, "detection_ms").status, ChangeStatus::kImproved);
  EXPECT_EQ(Metric(c, "degraded_ratio").status, ChangeStatus::kImproved);
  EXPECT_EQ(c.Regressions(), 2);
  // The same changes the other way round are improvements and two regressions.
  const Comparison back = CompareRuns({b}, {a}, 10);
  EXPECT_EQ(Metric(back, "stall_ms").status, ChangeStatus::kImproved);
  EXPECT_EQ(Metric(back, "detection_ms").status, ChangeStatus::kRegression);
  EXPECT_EQ(Metric(back, "degraded_ratio").status, ChangeStatus::kRegression);
}

TEST(CompareRuns, ToleranceIsStrict) {
  const auto a = WithMetric(testing::Report(), "stall_ms", 100.0);
  EXPECT_EQ(Metric(CompareRuns({a}, {WithMetric(a, "stall_ms", 110.0)}, 10), "stall_ms").status,
            ChangeStatus::kOk);
  EXPECT_EQ(Metric(CompareRuns({a}, {WithMetric(a, "stall_ms", 110.5)}, 10), "stall_ms").status,
            ChangeStatus::kRegression);
  EXPECT_EQ(Metric(CompareRuns({a}, {WithMetric(a, "stall_ms", 110.5)}, 20), "stall_ms").status,
            ChangeStatus::kOk);
}

TEST(CompareRuns, NullsAreExplicit) {
  auto a = testing::Report();
  a["per_fault"][1]["recovery_ms"] = 900.0;  // every fault recovered: the run's null is n/a
  // recovery_ms: null in A. failover measured in A, null in B: lost, a regression.
  auto b = WithMetric(a, "recovery_ms", 700.0);
  b = WithMetric(b, "failover_latency_ms", nullptr);
  const Comparison c = CompareRuns({a}, {b}, 10);
  EXPECT_EQ(Metric(c, "recovery_ms").status, ChangeStatus::kNew);
  EXPECT_FALSE(Metric(c, "recovery_ms").regression());
  EXPECT_EQ(Metric(c, "failover_latency_ms").status, ChangeStatus::kLost);
  EXPECT_TRUE(Metric(c, "failover_latency_ms").regression());
  EXPECT_FALSE(Metric(c, "failover_latency_ms").change_pct.has_value());
  EXPECT_EQ(c.Regressions(), 1);
  const std::string text = FormatComparison(c);
  EXPECT_NE(text.find("LOST (REGRESSION: measured in A, null in B)"), std::string::npos) << text;
}

TEST(CompareRuns, FromZero) {
  const auto a = WithMetric(testing::Report(), "stall_ms", 0.0);
  const Comparison worse = CompareRuns({a}, {WithMetric(a, "stall_ms", 3.0)}, 10);
  EXPECT_TRUE(std::isinf(*Metric(worse, "stall_ms").change_pct));
  EXPECT_EQ(Metric(worse, "stall_ms").status, ChangeStatus::kRegression);
  const Comparison same = CompareRuns({a}, {a}, 0);
  EXPECT_EQ(Metric(same, "stall_ms").status, ChangeStatus::kOk);
}

TEST(CompareRuns, VerdictWrongResultsAndMissingScenarios) {
  const auto pass = testing::PassingReport();
  auto fail = testing::Report();
  fail["correctness"]["wrong"] = 3;
  const Comparison c = CompareRuns({pass}, {fail}, 1000);
  EXPECT_TRUE(c.scenarios[0].verdict_regressed);
  EXPECT_TRUE(c.scenarios[0].wrong_regressed);
  EXPECT_EQ(c.Regressions(), 2);

  const Comparison missing = CompareRuns({pass, testing::PassingReport("gone")}, {pass}, 10);
  ASSERT_EQ(missing.scenarios.size(), 2u);
  EXPECT_EQ(missing.Regressions(), 1);
  EXPECT_NE(FormatComparison(missing).find("REGRESSION: missing in B"), std::string::npos);
  const Comparison added = CompareRuns({pass}, {pass, testing::PassingReport("new")}, 10);
  EXPECT_EQ(added.Regressions(), 0);
}

TEST(CompareRuns, KeyIncludesTheCcl) {
  auto a = testing::Report();
  auto b = a;
  b["ccl"] = "gloo";
  const Comparison c = CompareRuns({a}, {b}, 10);
  ASSERT_EQ(c.scenarios.size(), 2u);
  EXPECT_EQ(c.Regressions(), 1);  // rail-flap [ftccl] missing in B
}

TEST(CompareRuns, RepeatedRunsCompareTheirMedians) {
  const auto base = testing::Report();
  std::vector<nlohmann::json> a, b;
  for (double v : {100.0, 101.0, 300.0}) a.push_back(WithMetric(base, "stall_ms", v));
  for (double v : {104.0, 105.0, 99.0}) b.push_back(WithMetric(base, "stall_ms", v));
  const Comparison c = CompareRuns(a, b, 10);
  EXPECT_EQ(*Metric(c, "stall_ms").a, 101.0);
  EXPECT_EQ(*Metric(c, "stall_ms").b, 104.0);
  EXPECT_EQ(Metric(c, "stall_ms").status, ChangeStatus::kOk);
  EXPECT_EQ(c.scenarios[0].runs_a, 3u);
}

// The report with f2 (applied, baseline measured) recovered too: recovery_ms is `v` for the run.
nlohmann::json Recovered(double v) {
  auto r = WithMetric(testing::Report(), "recovery_ms", v);
  r["per_fault"][1]["recovery_ms"] = v;
  return r;
}

TEST(RunValue, NeverIsAnAppliedFaultsNullNotApplicableIsAnyOtherNull) {
  const double inf = std::numeric_limits<double>::infinity();
  auto r = testing::Report();
  // recovery_ms: f2 applied, baseline measured, null: never, whatever metrics[] says.
  EXPECT_EQ(RunValue(r, "recovery_ms"), inf);
  EXPECT_EQ(RunValue(WithMetric(r, "recovery_ms", 600.0), "recovery_ms"), inf);
  EXPECT_EQ(RunValue(Recovered(700), "recovery_ms"), 700.0);
  // Not applied (f2 scheduled only): not applicable; the run's null stays null.
  auto not_applied = r;
  not_applied["faults"][1]["applied_s"] = nullptr;
  EXPECT_EQ(RunValue(not_applied, "recovery_ms"), std::nullopt);
  // No baseline anywhere: recovery cannot be measured, not never.
  auto no_baseline = WithMetric(r, "baseline_busbw_gbps", nullptr);
  for (auto& pf : no_baseline["per_fault"]) pf["baseline_busbw_gbps"] = nullptr;
  EXPECT_EQ(RunValue(no_baseline, "recovery_ms"), std::nullopt);

  // failover_latency_ms: f2 has no detection (a fault no path event saw): n/a, the run's 40.
  EXPECT_EQ(RunValue(r, "failover_latency_ms"), 40.0);
  auto detected = r;
  detected["per_fault"][1]["detection_ms"] = 8.0;  // noticed, never resumed (v1 rule)
  EXPECT_EQ(RunValue(detected, "failover_latency_ms"), inf);
  // v2's never_converged decides where present.
  auto v2 = detected;
  v2["per_fault"][1]["never_converged"] = false;
  EXPECT_EQ(RunValue(v2, "failover_latency_ms"), 40.0);
  v2 = r;
  v2["per_fault"][1]["never_converged"] = true;  // e.g. Gloo: no detection, no progress
  EXPECT_EQ(RunValue(v2, "failover_latency_ms"), inf);
  // ...but only for an applied fault.
  v2["faults"][1]["applied_s"] = nullptr;
  EXPECT_EQ(RunValue(v2, "failover_latency_ms"), 40.0);

  // failover_first_ms: absent (v1) is n/a; null after a detection is never; null without one
  // (a CCL without path events) is n/a.
  EXPECT_EQ(RunValue(r, "failover_first_ms"), std::nullopt);
  auto first = WithMetric(r, "failover_first_ms", 3.0);
  for (auto& pf : first["per_fault"]) pf["failover_first_ms"] = nullptr;
  first["per_fault"][0]["failover_first_ms"] = 3.0;
  EXPECT_EQ(RunValue(first, "failover_first_ms"), 3.0);  // f2 null, but no detection
  first["per_fault"][0]["failover_first_ms"] = nullptr;  // f1 detected at 12.5 ms
  EXPECT_EQ(RunValue(first, "failover_first_ms"), inf);

  // Other metrics: null is null, never "never".
  EXPECT_EQ(RunValue(WithMetric(r, "stall_ms", nullptr), "stall_ms"), std::nullopt);
  EXPECT_TRUE(IsConvergenceMetric("failover_first_ms"));
  EXPECT_FALSE(IsConvergenceMetric("stall_ms"));
}

TEST(CompareRuns, NeverIsWorseThanAnyNumber) {
  const auto never = testing::Report();
  const Comparison worse = CompareRuns({Recovered(600)}, {never}, 10);
  EXPECT_EQ(Metric(worse, "recovery_ms").status, ChangeStatus::kRegression);
  EXPECT_TRUE(std::isinf(*Metric(worse, "recovery_ms").change_pct));
  const std::string text = FormatComparison(worse);
  EXPECT_NE(text.find("recovery_ms           600           never         +inf%      REGRESSION "
                      "(never happened in B)"),
            std::string::npos)
      << text;
  const Comparison better = CompareRuns({never}, {Recovered(600)}, 10);
  EXPECT_EQ(Metric(better, "recovery_ms").status, ChangeStatus::kImproved);
  EXPECT_EQ(better.Regressions(), 0);
  // Repeated runs: the median counts never as +inf, it does not drop it.
  const Comparison mostly_never =
      CompareRuns({Recovered(600)}, {Recovered(500), never, never}, 10);
  EXPECT_TRUE(std::isinf(*Metric(mostly_never, "recovery_ms").b));
  EXPECT_EQ(Metric(mostly_never, "recovery_ms").status, ChangeStatus::kRegression);
  const Comparison once_never =
      CompareRuns({Recovered(600)}, {Recovered(500), Recovered(550), never}, 10);
  EXPECT_EQ(*Metric(once_never, "recovery_ms").b, 550.0);
}

TEST(CheckSameSchema, RefusesToMixV1AndV2AndSaysWhy) {
  const auto v2 = testing::Report();
  auto v1 = v2;
  v1["schema"] = "faultline.report/v1";
  EXPECT_TRUE(CheckSameSchema({v2}, {v2, v2}).ok());
  EXPECT_TRUE(CheckSameSchema({v1}, {v1}).ok());
  const Status st = CheckSameSchema({v1}, {v2});
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  for (const char* part : {"A: 1 x faultline.report/v1", "B: 1 x faultline.report/v2",
                           "full convergence", "first-path", "last rank's last collective",
                           "stall_ms is measured in fault-free runs"}) {
    EXPECT_NE(st.message().find(part), std::string::npos) << part << " in " << st.message();
  }
  // Within one side (compare --stats over a folder holding both).
  const Status mixed = CheckSameSchema({v1, v2, v2}, {});
  EXPECT_NE(mixed.message().find("A: 1 x faultline.report/v1, 2 x faultline.report/v2"),
            std::string::npos)
      << mixed.message();
  // Two schemas this build has no description of are still refused.
  auto v9 = v2;
  v9["schema"] = "faultline.report/v9";
  EXPECT_NE(CheckSameSchema({v9}, {v2}).message().find("defined differently"), std::string::npos);
}

TEST(ParseTolerance, Forms) {
  EXPECT_EQ(*ParseTolerance("10%"), 10.0);
  EXPECT_EQ(*ParseTolerance("2.5"), 2.5);
  EXPECT_EQ(*ParseTolerance("0%"), 0.0);
  EXPECT_FALSE(ParseTolerance("-1%").ok());
  EXPECT_FALSE(ParseTolerance("ten").ok());
  EXPECT_FALSE(ParseTolerance("%").ok());
  EXPECT_FALSE(ParseTolerance("10%%").ok());
  EXPECT_FALSE(ParseTolerance("inf").ok());
}

TEST(Percentile, NearestRank) {
  EXPECT_EQ(Percentile({5}, 50), 5);
  EXPECT_EQ(Percentile({3, 1, 2}, 50), 2);
  EXPECT_EQ(Percentile({1, 2, 3, 4}, 50), 2);
  EXPECT_EQ(Percentile({1, 2, 3, 4}, 95), 4);
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_EQ(Percentile(v, 95), 95);
  EXPECT_EQ(Percentile(v, 50), 50);
}

TEST(RunStats, PerMetricOverRepeatedRuns) {
  const auto base = testing::Report();
  std::vector<nlohmann::json> runs;
  for (double v : {10.0, 20.0, 30.0, 40.0}) runs.push_back(WithMetric(base, "stall_ms", v));
  runs.push_back(WithMetric(testing::PassingReport(), "stall_ms", nullptr));
  const auto stats = RunStats(runs);
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].runs, 5u);
  EXPECT_EQ(stats[0].verdicts.at("FAIL"), 4u);
  EXPECT_EQ(stats[0].verdicts.at("PASS"), 1u);
  const MetricStats& stall = Stat(stats[0], "stall_ms");
  EXPECT_EQ(stall.n, 4u);
  EXPECT_EQ(stall.n_never, 0u);
  EXPECT_EQ(stall.n_na, 1u);
  EXPECT_EQ(*stall.p50, 20.0);
  EXPECT_EQ(*stall.p95, 40.0);
  EXPECT_EQ(*stall.min, 10.0);
  // f2 never recovered in any run: n 5, all never, p50 never.
  const MetricStats& recovery = Stat(stats[0], "recovery_ms");
  EXPECT_EQ(recovery.n, 5u);
  EXPECT_EQ(recovery.n_never, 5u);
  EXPECT_TRUE(std::isinf(*recovery.p50));
  const MetricStats& first = Stat(stats[0], "failover_first_ms");
  EXPECT_EQ(first.n, 0u);
  EXPECT_EQ(first.n_na, 5u);
  EXPECT_FALSE(first.p50.has_value());
  const std::string text = FormatStats(stats);
  EXPECT_NE(text.find("stall_ms              4    0      1    20          40"), std::string::npos)
      << text;
  EXPECT_NE(text.find("recovery_ms           5    5      0    never       never"),
            std::string::npos)
      << text;
}

TEST(RunStats, NeverCountsAsInfinityNotAsADroppedNull) {
  const auto never = testing::Report();
  std::vector<nlohmann::json> runs = {Recovered(100), Recovered(200), Recovered(300), never,
                                      never};
  const MetricStats one = Stat(RunStats(runs)[0], "recovery_ms");
  EXPECT_EQ(one.n, 5u);
  EXPECT_EQ(one.n_never, 2u);
  EXPECT_EQ(one.n_na, 0u);
  EXPECT_EQ(*one.p50, 300.0);  // dropping the nulls would give 200
  EXPECT_TRUE(std::isinf(*one.p95));
  EXPECT_EQ(*one.min, 100.0);
  EXPECT_TRUE(std::isinf(*one.max));
  runs.push_back(never);  // 3 of 6 never: the 3rd smallest is still 300
  EXPECT_EQ(*Stat(RunStats(runs)[0], "recovery_ms").p50, 300.0);
  runs.push_back(never);  // 4 of 7: the median is never
  EXPECT_TRUE(std::isinf(*Stat(RunStats(runs)[0], "recovery_ms").p50));
}

}  // namespace
}  // namespace faultline::reports
