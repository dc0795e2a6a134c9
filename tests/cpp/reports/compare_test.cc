#include "reports/compare.h"

#include <gtest/gtest.h>

#include <cmath>

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

TEST(CompareRuns, IdenticalRunsHaveNoRegression) {
  const auto r = testing::Report();
  const Comparison c = CompareRuns({r}, {r}, 10);
  ASSERT_EQ(c.scenarios.size(), 1u);
  EXPECT_EQ(c.scenarios[0].key, "rail-flap [ftccl]");
  EXPECT_EQ(c.Regressions(), 0);
  EXPECT_EQ(Metric(c, "stall_ms").status, ChangeStatus::kOk);
  EXPECT_EQ(Metric(c, "stall_ms").change_pct, 0.0);
  EXPECT_EQ(Metric(c, "recovery_ms").status, ChangeStatus::kBothNull);
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
  const auto a = testing::Report();
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
  const MetricStats& stall = stats[0].metrics[1];
  ASSERT_EQ(stall.metric, "stall_ms");
  EXPECT_EQ(stall.measured, 4u);
  EXPECT_EQ(stall.nulls, 1u);
  EXPECT_EQ(*stall.p50, 20.0);
  EXPECT_EQ(*stall.p95, 40.0);
  EXPECT_EQ(*stall.min, 10.0);
  const MetricStats& recovery = stats[0].metrics[4];
  EXPECT_EQ(recovery.measured, 0u);
  EXPECT_FALSE(recovery.p50.has_value());
  const std::string text = FormatStats(stats);
  EXPECT_NE(text.find("stall_ms              4/5       20          40"), std::string::npos) << text;
}

}  // namespace
}  // namespace faultline::reports
