// The trend across nights (reports/trend.h): the rule on synthetic series (a step, a spike, a
// drift within the noise, both directions), and on nights of report.json objects with one
// planted regression: exactly that scenario and metric from that night on, nothing without it.
#include "reports/trend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "synthetic.h"

namespace faultline::reports {
namespace {

// Run-to-run noise of about +-3 % around 100, the same every time.
constexpr double kJitter[] = {1.5, -2.0, 0.5, 3.0, -1.0, -2.5, 2.0, 0.0, -3.0, 1.0, 2.5, -0.5};

std::vector<double> Noisy(size_t n, double level, size_t step_at = SIZE_MAX, double step = 0) {
  std::vector<double> v;
  for (size_t i = 0; i < n; ++i) v.push_back(level + kJitter[i % 12] + (i >= step_at ? step : 0));
  return v;
}

// Elements of class `cls` over every plot of a trend page (each plot parsed on its own).
int CountInPlots(const std::string& html, const std::string& element, const std::string& cls) {
  int total = 0;
  for (size_t at = html.find("<svg class=\"trend-plot\""); at != std::string::npos;
       at = html.find("<svg class=\"trend-plot\"", at + 1)) {
    const size_t end = html.find("</svg>", at);
    const int n = testing::CountByClass(html.substr(at, end + 6 - at), element, cls);
    if (n < 0) return -1;
    total += n;
  }
  return total;
}

TEST(TrendRule, NoiseAloneIsSteady) {
  const MetricTrend m = JudgeSeries(Noisy(12, 100), true, TrendOptions{});
  EXPECT_EQ(m.status, TrendStatus::kSteady);
  EXPECT_FALSE(m.first_night.has_value());
  ASSERT_TRUE(m.baseline_median.has_value());
  EXPECT_NEAR(*m.baseline_median, 100.25, 1e-9);  // (100 + 100.5) / 2
}

TEST(TrendRule, AStepInTheWorseDirectionIsARegressionFromItsFirstNight) {
  const MetricTrend m = JudgeSeries(Noisy(10, 100, 6, 60), true, TrendOptions{});
  EXPECT_EQ(m.status, TrendStatus::kRegression);
  ASSERT_TRUE(m.first_night.has_value());
  EXPECT_EQ(*m.first_night, 6u);
  EXPECT_GT(*m.after_median, *m.baseline_median + *m.threshold);
}

TEST(TrendRule, AnOutlierJustBeforeAStepIsItsForerunnerNotItsFirstNight) {
  // Night 5 leaves the baseline (100 -> 145) but stays nearer it than the step to ~200 that
  // follows from night 6: the step is dated night 6, where a nightly user would bisect.
  std::vector<double> v = Noisy(10, 100, 6, 100);
  v[5] = 145;
  MetricTrend m = JudgeSeries(v, true, TrendOptions{});
  EXPECT_EQ(m.status, TrendStatus::kRegression);
  ASSERT_TRUE(m.first_night.has_value());
  EXPECT_EQ(*m.first_night, 6u);
  // The outlier is then part of the baseline: its deviation raises the threshold.
  EXPECT_GE(*m.threshold, 145 - *m.baseline_median);
  // A night already at the new level is the step's first night (nearer the after level).
  v[5] = 170;
  m = JudgeSeries(v, true, TrendOptions{});
  ASSERT_TRUE(m.first_night.has_value());
  EXPECT_EQ(*m.first_night, 5u);
  // An improvement likewise: a dip before a drop is its forerunner.
  std::vector<double> drop = Noisy(10, 100, 6, -80);
  drop[5] = 70;
  m = JudgeSeries(drop, true, TrendOptions{});
  EXPECT_EQ(m.status, TrendStatus::kImproved);
  ASSERT_TRUE(m.first_night.has_value());
  EXPECT_EQ(*m.first_night, 6u);
}

TEST(TrendRule, DirectionFollowsTheMetric) {
  // A drop: a regression of a lower-is-worse metric (busbw), an improvement of a stall.
  const std::vector<double> drop = Noisy(10, 100, 5, -50);
  EXPECT_EQ(JudgeSeries(drop, false, TrendOptions{}).status, TrendStatus::kRegression);
  const MetricTrend better = JudgeSeries(drop, true, TrendOptions{});
  EXPECT_EQ(better.status, TrendStatus::kImproved);
  EXPECT_EQ(*better.first_night, 5u);
}

TEST(TrendRule, AOneNightSpikeIsNotAChangeAndOnTheLastNightOnlyWatch) {
  std::vector<double> v = Noisy(10, 100);
  v[6] = 300;
  EXPECT_EQ(JudgeSeries(v, true, TrendOptions{}).status, TrendStatus::kSteady);
  v = Noisy(10, 100);
  v[9] = 300;
  const MetricTrend last = JudgeSeries(v, true, TrendOptions{});
  EXPECT_EQ(last.status, TrendStatus::kWatch);
  EXPECT_EQ(*last.first_night, 9u);
  // The next night confirms it.
  v.push_back(290);
  const MetricTrend confirmed = JudgeSeries(v, true, TrendOptions{});
  EXPECT_EQ(confirmed.status, TrendStatus::kRegression);
  EXPECT_EQ(*confirmed.first_night, 9u);
}

TEST(TrendRule, AShiftWithinTheNoiseOrTheFloorIsNotFlagged) {
  // +8 on a series whose nights spread +-3: beyond 4 noise sigmas but within 25 % of the
  // baseline; flagged only with a lower floor.
  const std::vector<double> v = Noisy(12, 100, 6, 16);
  EXPECT_EQ(JudgeSeries(v, true, TrendOptions{}).status, TrendStatus::kSteady);
  TrendOptions tight;
  tight.min_rel = 0.05;
  EXPECT_EQ(JudgeSeries(v, true, tight).status, TrendStatus::kRegression);
  // +4: within 4 noise sigmas, whatever the floor.
  EXPECT_EQ(JudgeSeries(Noisy(12, 100, 6, 4), true, tight).status, TrendStatus::kSteady);
}

TEST(TrendRule, AValueTheBaselineAlreadyShowedIsNotAChange) {
  // A heavy-tailed metric: one baseline night as high as the later ones.
  std::vector<double> v = Noisy(10, 100, 6, 80);
  v[2] = 185;
  EXPECT_EQ(JudgeSeries(v, true, TrendOptions{}).status, TrendStatus::kSteady);
  v[2] = 150;
  EXPECT_EQ(JudgeSeries(v, true, TrendOptions{}).status, TrendStatus::kRegression);
}

TEST(TrendRule, NeverAfterAMeasuredBaselineIsARegression) {
  std::vector<double> v = Noisy(8, 100);
  v[6] = v[7] = std::numeric_limits<double>::infinity();
  const MetricTrend m = JudgeSeries(v, true, TrendOptions{});
  EXPECT_EQ(m.status, TrendStatus::kRegression);
  EXPECT_EQ(*m.first_night, 6u);
}

TEST(TrendRule, TooFewNightsAreNotJudged) {
  EXPECT_EQ(JudgeSeries({100, 101, 99, 100, 102}, true, TrendOptions{}).status,
            TrendStatus::kNotJudged);
}

TEST(TrendKey, SeedsOfACombinationAreOneKey) {
  nlohmann::json r = testing::PassingReport("accept-loss[hosts=2,op=allreduce,seed=3]");
  EXPECT_EQ(TrendKey(r), "accept-loss[hosts=2,op=allreduce] [ftccl]");
  r = testing::PassingReport("x[seed=12]");
  EXPECT_EQ(TrendKey(r), "x [ftccl]");
  r = testing::PassingReport("plain");
  EXPECT_EQ(TrendKey(r), "plain [ftccl]");
}

// Ten nights of two scenarios, each run with two seeds, stall_ms around 100 ms and busbw
// around 10 Gbit/s with noise; with `plant`, scenario b's stall is 60 % higher from night 6.
std::vector<TrendNight> Nights(bool plant) {
  std::vector<TrendNight> nights;
  for (size_t n = 0; n < 10; ++n) {
    TrendNight night;
    night.label = "night-" + std::to_string(n + 1);
    for (const char* scenario : {"a", "b"}) {
      for (int seed = 1; seed <= 2; ++seed) {
        nlohmann::json r = testing::PassingReport(std::string(scenario) + "[op=allreduce,seed=" +
                                                  std::to_string(seed) + "]");
        const double jitter = kJitter[(n * 2 + static_cast<size_t>(seed)) % 12];
        double stall = 100 + jitter;
        if (plant && std::string(scenario) == "b" && n >= 6) stall *= 1.6;
        r["metrics"]["stall_ms"] = stall;
        r["metrics"]["baseline_busbw_gbps"] = 10 + jitter / 10;
        night.reports.push_back(r);
      }
    }
    nights.push_back(night);
  }
  return nights;
}

TEST(Trend, FlagsExactlyThePlantedRegressionFromItsNight) {
  auto t = ComputeTrend(Nights(true), TrendOptions{});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->Regressions(), 1);
  int flagged = 0;
  for (const ScenarioTrend& s : t->scenarios) {
    for (const MetricTrend& m : s.metrics) {
      if (m.status != TrendStatus::kRegression) continue;
      ++flagged;
      EXPECT_EQ(s.key, "b[op=allreduce] [ftccl]");
      EXPECT_EQ(m.metric, "stall_ms");
      ASSERT_TRUE(m.first_night.has_value());
      EXPECT_EQ(t->nights[*m.first_night], "night-7");
    }
  }
  EXPECT_EQ(flagged, 1);
  const nlohmann::json j = TrendToJson(*t);
  EXPECT_EQ(j["regressions"], 1);
  EXPECT_EQ(j["nights"].size(), 10u);
  EXPECT_NE(TrendMarkdown(*t).find("| b[op=allreduce] [ftccl] | stall_ms | REGRESSION | night-7 |"),
            std::string::npos)
      << TrendMarkdown(*t);
  const std::string html = TrendHtml(*t);
  EXPECT_EQ(CountInPlots(html, "line", "change"), 1);
}

TEST(Trend, TheSameNightsWithoutThePlantFlagNothing) {
  auto t = ComputeTrend(Nights(false), TrendOptions{});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->Regressions(), 0);
  for (const ScenarioTrend& s : t->scenarios) {
    for (const MetricTrend& m : s.metrics) {
      EXPECT_NE(m.status, TrendStatus::kRegression) << s.key << " " << m.metric;
    }
  }
}

TEST(Trend, VerdictHistoryIsTheWorstRunOfEachNight) {
  std::vector<TrendNight> nights = Nights(false);
  nights[3].reports[1] = testing::Report("a[op=allreduce,seed=2]");  // stall_ms fails its limit
  nights[3].reports[1]["metrics"]["stall_ms"] = 101.0;
  auto t = ComputeTrend(nights, TrendOptions{});
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->scenarios.size(), 2u);
  const ScenarioTrend& a = t->scenarios[0];
  ASSERT_EQ(a.verdicts.size(), 10u);
  EXPECT_EQ(a.verdicts[3], "FAIL");
  EXPECT_EQ(a.verdicts[2], "PASS");
  EXPECT_EQ(t->scenarios[1].verdicts[3], "PASS");
}

TEST(Trend, OnePresentNightStillDrawsAPoint) {
  std::vector<TrendNight> nights(2);
  nights[0].label = "n1";
  nights[1].label = "n2";
  nights[1].reports.push_back(testing::PassingReport("only-once"));
  auto t = ComputeTrend(nights, TrendOptions{});
  ASSERT_TRUE(t.ok());
  const std::string html = TrendHtml(*t);
  EXPECT_GE(CountInPlots(html, "circle", "pt"), 1);
  EXPECT_EQ(t->scenarios[0].verdicts[0], "");
}

TEST(Trend, RefusesFewerThanTwoNightsAndABadRule) {
  EXPECT_FALSE(ComputeTrend({TrendNight{"one", {}}}, TrendOptions{}).ok());
  TrendOptions bad;
  bad.k = 0;
  EXPECT_FALSE(ComputeTrend(Nights(false), bad).ok());
  TrendOptions no_after;
  no_after.min_after = 0;
  EXPECT_FALSE(ComputeTrend(Nights(false), no_after).ok());
}

}  // namespace
}  // namespace faultline::reports
