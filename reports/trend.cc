#include "reports/trend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <regex>

#include "reports/compare.h"
#include "reports/metric_table.h"
#include "reports/verdict.h"

namespace faultline::reports {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// A normal distribution's sigma is 1.4826 times its median absolute deviation.
constexpr double kMadToSigma = 1.4826;

// The metrics a trend follows: the report's metric keys, and a training run's goodput ratio
// (higher is better).
struct TrendMetric {
  std::string name;
  std::string unit;
  bool higher_is_worse;
};

std::vector<TrendMetric> TrendMetrics() {
  std::vector<TrendMetric> out;
  for (const MetricRow& m : kMetricTable) out.push_back({m.name, m.unit, m.higher_is_worse});
  const MetricRow& goodput = *FindMetric(kGoodputRatio);
  out.push_back({goodput.name, goodput.unit, goodput.higher_is_worse});
  return out;
}

nlohmann::json Number(const std::optional<double>& v) {
  if (!v) return nullptr;
  if (std::isinf(*v)) return "never";
  return *v;
}

std::string Fmt(const std::optional<double>& v) {
  if (!v) return "-";
  if (std::isinf(*v)) return "never";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4g", *v);
  return buf;
}

}  // namespace

const char* TrendStatusName(TrendStatus s) {
  switch (s) {
    case TrendStatus::kNotJudged:
      return "not judged";
    case TrendStatus::kSteady:
      return "steady";
    case TrendStatus::kRegression:
      return "REGRESSION";
    case TrendStatus::kImproved:
      return "improved";
    case TrendStatus::kWatch:
      return "watch";
  }
  return "?";
}

int ScenarioTrend::Regressions() const {
  int n = 0;
  for (const MetricTrend& m : metrics) n += m.status == TrendStatus::kRegression;
  return n;
}

int Trend::Regressions() const {
  int n = 0;
  for (const ScenarioTrend& s : scenarios) n += s.Regressions();
  return n;
}

std::string TrendKey(const nlohmann::json& report) {
  std::string key = ScenarioKey(report);
  static const std::regex kSeed(R"((,seed=\d+)|(seed=\d+,?))");
  key = std::regex_replace(key, kSeed, "");
  const size_t empty = key.find("[] ");
  if (empty != std::string::npos) key.erase(empty, 2);
  return key;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  if (n % 2 == 1) return values[n / 2];
  const double a = values[n / 2 - 1], b = values[n / 2];
  if (std::isinf(a) || std::isinf(b)) return b;  // never + x: never
  return (a + b) / 2;
}

namespace {

// |a - b|, with never (+infinity) at distance 0 from never and infinitely far from a number.
double Distance(double a, double b) {
  if (std::isinf(a) || std::isinf(b)) return std::isinf(a) && std::isinf(b) ? 0 : kInf;
  return std::fabs(a - b);
}

// The rule at night t (trend.h), when it finds a change there.
struct Change {
  bool worse = false;
  double m = 0, noise = 0, threshold = 0, after = 0;
};

std::optional<Change> ChangeAt(const std::vector<double>& values, size_t t, bool higher_is_worse,
                               const TrendOptions& o) {
  // Worse is positive: d > 0 means the value moved in the worse direction.
  auto worse_by = [&](double x, double m) {
    if (std::isinf(x) && std::isinf(m)) return 0.0;
    return higher_is_worse ? x - m : m - x;
  };
  const std::vector<double> before(values.begin(), values.begin() + static_cast<long>(t));
  const double m = Median(before);
  if (std::isinf(m)) return std::nullopt;  // a never baseline is not judged
  std::vector<double> dev;
  for (double x : before) dev.push_back(std::isinf(x) ? kInf : std::fabs(x - m));
  const double noise = kMadToSigma * Median(dev);
  const double base = std::max(o.k * noise, o.min_rel * std::fabs(m));
  // A change must also leave what the baseline itself showed on that side.
  double worse_span = 0, better_span = 0;
  for (double x : before) {
    const double d = worse_by(x, m);
    worse_span = std::max(worse_span, d);
    better_span = std::max(better_span, -d);
  }
  const double after =
      Median(std::vector<double>(values.begin() + static_cast<long>(t), values.end()));
  const double first = worse_by(values[t], m);
  const double rest = worse_by(after, m);
  const double worse_threshold = std::max(base, worse_span);
  const double better_threshold = std::max(base, better_span);
  const bool worse = first > worse_threshold && rest > worse_threshold;
  const bool better = first < -better_threshold && rest < -better_threshold;
  if (!worse && !better) return std::nullopt;
  return Change{worse, m, noise, worse ? worse_threshold : better_threshold, after};
}

}  // namespace

MetricTrend JudgeSeries(const std::vector<double>& values, bool higher_is_worse,
                        const TrendOptions& o) {
  MetricTrend out;
  out.higher_is_worse = higher_is_worse;
  if (values.size() < o.min_before + 1) return out;
  for (size_t t = o.min_before; t < values.size(); ++t) {
    std::optional<Change> c = ChangeAt(values, t, higher_is_worse, o);
    if (!c) continue;
    // A night that leaves the baseline but stays nearer it than the level after it is the
    // change's forerunner (an outlier just before a step), not its first night, while the next
    // night finds the same change.
    while (t + 1 < values.size() && Distance(values[t], c->after) > Distance(values[t], c->m)) {
      std::optional<Change> next = ChangeAt(values, t + 1, higher_is_worse, o);
      if (!next || next->worse != c->worse) break;
      ++t;
      c = next;
    }
    if (values.size() - t < o.min_after) {
      out.status = TrendStatus::kWatch;
    } else {
      out.status = c->worse ? TrendStatus::kRegression : TrendStatus::kImproved;
    }
    out.first_night = t;
    out.baseline_median = c->m;
    out.noise = c->noise;
    out.threshold = c->threshold;
    out.after_median = c->after;
    return out;
  }
  out.status = TrendStatus::kSteady;
  const double m = Median(values);
  if (!std::isinf(m)) {
    std::vector<double> dev;
    for (double x : values) dev.push_back(std::isinf(x) ? kInf : std::fabs(x - m));
    out.baseline_median = m;
    out.noise = kMadToSigma * Median(dev);
    out.threshold = std::max(o.k * *out.noise, o.min_rel * std::fabs(m));
  }
  return out;
}

Result<Trend> ComputeTrend(const std::vector<TrendNight>& nights, const TrendOptions& o) {
  if (nights.size() < 2) {
    return Status(Code::kInvalidArgument,
                  "a trend needs at least two nights, got " + std::to_string(nights.size()));
  }
  if (!(o.k > 0) || !(o.min_rel >= 0) || o.min_before < 1 || o.min_after < 1) {
    return Status(Code::kInvalidArgument,
                  "the rule needs k > 0, min_rel >= 0, min_before >= 1 and min_after >= 1");
  }
  std::vector<nlohmann::json> all;
  for (const TrendNight& n : nights) all.insert(all.end(), n.reports.begin(), n.reports.end());
  FL_RETURN_IF_ERROR(CheckSameSchema(all, {}));

  Trend t;
  t.options = o;
  // key -> per night, its reports.
  std::map<std::string, std::vector<std::vector<const nlohmann::json*>>> by_key;
  for (size_t i = 0; i < nights.size(); ++i) {
    t.nights.push_back(nights[i].label);
    for (const nlohmann::json& r : nights[i].reports) {
      auto& per_night = by_key[TrendKey(r)];
      per_night.resize(nights.size());
      per_night[i].push_back(&r);
    }
  }
  for (auto& [key, per_night] : by_key) {
    ScenarioTrend s;
    s.key = key;
    for (const auto& runs : per_night) {
      s.verdicts.push_back(runs.empty() ? "" : VerdictName(WorstVerdict(runs)));
    }
    for (const TrendMetric& metric : TrendMetrics()) {
      std::vector<std::optional<double>> values;
      std::vector<double> present;
      std::vector<size_t> night_of;
      for (size_t i = 0; i < per_night.size(); ++i) {
        std::vector<double> xs;
        for (const nlohmann::json* r : per_night[i]) {
          if (auto v = RunValue(*r, metric.name)) xs.push_back(*v);
        }
        if (xs.empty()) {
          values.push_back(std::nullopt);
        } else {
          values.push_back(Median(xs));
          present.push_back(*values.back());
          night_of.push_back(i);
        }
      }
      if (present.empty()) continue;  // a metric this scenario never has
      MetricTrend m = JudgeSeries(present, metric.higher_is_worse, o);
      m.metric = metric.name;
      m.unit = metric.unit;
      m.values = values;
      if (m.first_night) m.first_night = night_of[*m.first_night];
      s.metrics.push_back(std::move(m));
    }
    t.scenarios.push_back(std::move(s));
  }
  return t;
}

nlohmann::json TrendToJson(const Trend& t) {
  nlohmann::json j;
  j["schema"] = "faultline.trend/v1";
  j["rule"] = {
      {"k", t.options.k},
      {"min_rel", t.options.min_rel},
      {"min_before", t.options.min_before},
      {"min_after", t.options.min_after},
      {"text",
       "a change at night t: x_t and the median of x_t..x_last both differ from the median m "
       "of the nights before t by more than max(k * 1.4826 * MAD, min_rel * |m|, the largest "
       "deviation of those nights on that side), in the same direction, with at least min_before "
       "nights before t; the first such t, "
       "passed over while x_t is nearer m than that median and the next night finds the same "
       "change (a forerunner of a step, not its first night); it counts "
       "(regression or improvement) when min_after nights show it, else it is watch"},
  };
  j["nights"] = t.nights;
  nlohmann::json scenarios = nlohmann::json::array();
  for (const ScenarioTrend& s : t.scenarios) {
    nlohmann::json js;
    js["key"] = s.key;
    js["verdicts"] = s.verdicts;
    nlohmann::json metrics = nlohmann::json::array();
    for (const MetricTrend& m : s.metrics) {
      nlohmann::json jm;
      jm["metric"] = m.metric;
      jm["unit"] = m.unit;
      jm["higher_is_worse"] = m.higher_is_worse;
      nlohmann::json values = nlohmann::json::array();
      for (const auto& v : m.values) values.push_back(Number(v));
      jm["values"] = values;
      jm["status"] = TrendStatusName(m.status);
      jm["first_night"] = m.first_night ? nlohmann::json(*m.first_night) : nullptr;
      jm["first_night_label"] =
          m.first_night ? nlohmann::json(t.nights[*m.first_night]) : nlohmann::json(nullptr);
      jm["baseline_median"] = Number(m.baseline_median);
      jm["noise"] = Number(m.noise);
      jm["threshold"] = Number(m.threshold);
      jm["after_median"] = Number(m.after_median);
      metrics.push_back(jm);
    }
    js["metrics"] = metrics;
    scenarios.push_back(js);
  }
  j["scenarios"] = scenarios;
  j["regressions"] = t.Regressions();
  return j;
}

std::string TrendMarkdown(const Trend& t) {
  std::string out = "# Trend over " + std::to_string(t.nights.size()) + " nights\n\n";
  const auto g = [](double v) {
    char b[32];
    std::snprintf(b, sizeof(b), "%g", v);
    return std::string(b);
  };
  out +=
      "Rule: a change is flagged from the first night whose value, and the median of the "
      "nights from it on, differ from the median of the nights before it (at least " +
      std::to_string(t.options.min_before) + ") by more than max(" + g(t.options.k) + " x noise, " +
      g(t.options.min_rel * 100) +
      "% of that median, the largest deviation those nights showed on that side); noise = "
      "1.4826 x MAD of those nights. A night nearer that median than the nights after it, "
      "just before such a change, is its forerunner, not its first night. It counts once " +
      std::to_string(t.options.min_after) + " nights show it; on fewer it is only watch.\n\n";
  std::string changes;
  for (const ScenarioTrend& s : t.scenarios) {
    for (const MetricTrend& m : s.metrics) {
      if (!m.first_night) continue;
      changes += "| " + s.key + " | " + m.metric + " | " + TrendStatusName(m.status) + " | " +
                 t.nights[*m.first_night] + " | " + Fmt(m.baseline_median) + " | " +
                 Fmt(m.after_median) + " | " + Fmt(m.threshold) + " |\n";
    }
  }
  out += "## Changes (" + std::to_string(t.Regressions()) + " regression(s))\n\n";
  if (changes.empty()) {
    out += "None beyond the noise.\n\n";
  } else {
    out += "| scenario | metric | change | first night | before (median) | from then on "
           "(median) | threshold |\n|---|---|---|---|---|---|---|\n" +
           changes + "\n";
  }
  out += "## Verdicts per night\n\n| scenario |";
  for (size_t i = 0; i < t.nights.size(); ++i) {
    out += " ";
    out += std::to_string(i + 1);
    out += " |";
  }
  out += "\n|---|";
  for (size_t i = 0; i < t.nights.size(); ++i) out += "---|";
  out += "\n";
  for (const ScenarioTrend& s : t.scenarios) {
    out += "| " + s.key + " |";
    for (const std::string& v : s.verdicts) {
      out += " ";
      out += v.empty() ? std::string("-") : v;
      out += " |";
    }
    out += "\n";
  }
  out += "\nNights: ";
  for (size_t i = 0; i < t.nights.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(i + 1);
    out += " = ";
    out += t.nights[i];
  }
  out += "\n";
  return out;
}

}  // namespace faultline::reports
