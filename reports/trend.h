// A trend across nights: the same suite run again and again (a nightly CI, a qualification
// lab's repeated matrix), read as one series per scenario and metric, with a regression
// flagged only where a change exceeds the run-to-run noise measured in the series itself.
// Pure functions of report.json objects; thread-safe.
//
// Input: nights in order (oldest first), each the reports of one run of the suite (a run
// directory or a folder of them, as `faultline compare` reads them). Reports are grouped by
// TrendKey: ScenarioKey (compare.h, "<scenario name> [<ccl>]") with any "seed=N" of a matrix
// combination taken out, so the seeds of one combination in one night are repeated runs of it.
//
// A night's value of a metric for a key: the median over its runs of RunValue (compare.h: a
// number, +infinity for "never", not-applicable runs left out); absent when no run has one.
//
// The rule (TrendOptions): with the present nights' values x_0..x_{n-1} of a series, a change
// at night t (t >= min_before) is found when, with the nights before t as the baseline:
//   m = median(x_0..x_{t-1}), noise = 1.4826 * MAD(x_0..x_{t-1}) (a normal sigma's estimate),
//   threshold = max(k * noise, min_rel * |m|, the baseline's own largest deviation from m on
//   that side),
//   x_t and median(x_t..x_{n-1}) both differ from m by more than the threshold, in the same
//   direction (a change must leave everything the baseline showed).
// The first such t is the change's first night, except that a night nearer m than
// median(x_t..x_{n-1}) is passed over while the next night finds the same change: it is a
// forerunner (an outlier just before a step, or the start of a creep), not the step's first
// night, which is the night a nightly user bisects from. It counts once at least min_after nights
// (t..n-1) show it: a change in the metric's worse direction (metric_table.h) is then a
// regression, in the better direction an improvement. Found on fewer nights (the last one or
// two), it is only "watch": a spike and a step cannot be told apart yet, so it is shown but
// does not fail the trend. A one-night spike earlier on is not a change (the median of the
// nights after it is back within the threshold). "never" after a measured baseline is worse
// for a higher-is-worse metric; a baseline whose median is never is not judged. A series with
// fewer than min_before + 1 present nights is not judged. The floor min_rel and the baseline's
// own range keep a baseline that happened to be tight (the MAD of a few nights can be), or a
// heavy-tailed metric, from flagging what such runs do anyway.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace faultline::reports {

struct TrendNight {
  std::string label;                    // what the user named it (its directory)
  std::vector<nlohmann::json> reports;  // its runs
};

struct TrendOptions {
  double k = 4;           // noise multiples a change must exceed
  double min_rel = 0.25;  // ... and this share of the baseline median
  size_t min_before = 5;  // nights of baseline before a change can be found
  size_t min_after = 2;   // nights that must show a change before it counts
};

enum class TrendStatus { kNotJudged, kSteady, kRegression, kImproved, kWatch };
// "not judged", "steady", "REGRESSION", "improved", "watch"
const char* TrendStatusName(TrendStatus s);

struct MetricTrend {
  std::string metric;
  std::string unit;
  bool higher_is_worse = true;
  // One entry per night (nullopt: no run of that night has a value; +infinity: never).
  std::vector<std::optional<double>> values;
  TrendStatus status = TrendStatus::kNotJudged;
  // Where a change was found (kRegression, kImproved, kWatch): the night it starts, the baseline it
  // was judged against and the median from that night on. For a steady series: median, noise
  // and threshold of the whole series (the band the page draws); no first night.
  std::optional<size_t> first_night;
  std::optional<double> baseline_median;
  std::optional<double> noise;
  std::optional<double> threshold;
  std::optional<double> after_median;
};

struct ScenarioTrend {
  std::string key;
  // Per night: the worst verdict over its runs ("PASS", "FAIL", "HARNESS ERROR"), or "" when
  // the night has no run of this key.
  std::vector<std::string> verdicts;
  std::vector<MetricTrend> metrics;
  int Regressions() const;
};

struct Trend {
  TrendOptions options;
  std::vector<std::string> nights;     // labels, oldest first
  std::vector<ScenarioTrend> scenarios;  // sorted by key
  int Regressions() const;
};

// ScenarioKey without the seed of a matrix combination: "x[hosts=2,seed=3] [ftccl]" ->
// "x[hosts=2] [ftccl]", "x[seed=3] [gloo]" -> "x [gloo]".
std::string TrendKey(const nlohmann::json& report);

// The median of `values` (+infinity allowed); REQUIRES: !values.empty().
double Median(std::vector<double> values);

// Judges one series (the rule above). `values` are the present nights' values; the result's
// first_night indexes `values`.
MetricTrend JudgeSeries(const std::vector<double>& values, bool higher_is_worse,
                        const TrendOptions& options);

// kInvalidArgument when fewer than two nights, options out of range (k <= 0, min_rel < 0,
// min_before < 1, min_after < 1), or the reports mix schemas (CheckSameSchema). REQUIRES: every report passes
// CheckReport.
Result<Trend> ComputeTrend(const std::vector<TrendNight>& nights, const TrendOptions& options);

// trend.json: {schema: "faultline.trend/v1", rule, nights, scenarios: [{key, verdicts,
// metrics: [{metric, unit, higher_is_worse, values, status, first_night, first_night_label,
// baseline_median, noise, threshold, after_median}]}], regressions}. Infinity is "never".
nlohmann::json TrendToJson(const Trend& t);
// A Markdown summary: the rule, the flagged changes (scenario, metric, first night, baseline,
// after, threshold), then the verdict history per scenario.
std::string TrendMarkdown(const Trend& t);
// trend.html: the same, with one plot per judged series (a line over the nights, the
// baseline's band, the first night of a change marked).
std::string TrendHtml(const Trend& t);

}  // namespace faultline::reports
