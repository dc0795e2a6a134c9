#include "reports/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

#include "reports/metric_table.h"
#include "reports/schema.h"
#include "reports/text.h"
#include "reports/verdict.h"

namespace faultline::reports {
namespace {

using Group = std::map<std::string, std::vector<const nlohmann::json*>>;

Group GroupByKey(const std::vector<nlohmann::json>& reports) {
  Group g;
  for (const auto& r : reports) g[ScenarioKey(r)].push_back(&r);
  return g;
}

std::vector<double> Values(const std::vector<const nlohmann::json*>& runs, const char* metric) {
  std::vector<double> out;
  for (const auto* r : runs) {
    if (auto v = RunValue(*r, metric)) out.push_back(*v);
  }
  return out;
}

bool Measured(const nlohmann::json& obj, const char* key) {
  return obj.is_object() && NumberOf(obj.value(key, nlohmann::json())).has_value();
}

// Whether the applied fault's per_fault entry `pf` says `metric` never happened (compare.h).
bool NeverFor(const nlohmann::json& report, const nlohmann::json& pf, const std::string& metric) {
  auto it = pf.find(metric);
  if (it == pf.end() || !it->is_null()) return false;  // absent (an older schema) or measured
  const MetricRow* row = FindMetric(metric);
  const NullRule rule = row != nullptr ? row->null_rule : NullRule::kNeverIfDetected;
  if (rule == NullRule::kNeverIfBaseline) {
    return Measured(pf, kBaselineBusbwGbps) || Measured(report.at("metrics"), kBaselineBusbwGbps);
  }
  if (rule == NullRule::kNeverIfNotConverged) {
    auto nc = pf.find("never_converged");
    if (nc != pf.end()) return nc->is_boolean() && nc->get<bool>();
  }
  return Measured(pf, kDetectionMs);
}


std::optional<int64_t> MostWrong(const std::vector<const nlohmann::json*>& runs) {
  std::optional<int64_t> out;
  for (const auto* r : runs) {
    if (!r->contains("correctness") || !(*r)["correctness"].is_object()) continue;
    const nlohmann::json w = (*r)["correctness"].value("wrong", nlohmann::json());
    if (w.is_number_integer()) out = std::max(out.value_or(0), w.get<int64_t>());
  }
  return out;
}

std::string Pad(const std::string& s, size_t w) {
  return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' ');
}

std::string Opt(const std::optional<double>& v) {
  if (!v) return "null";
  return std::isinf(*v) && *v > 0 ? "never" : FormatNumber(*v);
}

std::string Change(const std::optional<double>& pct) {
  if (!pct) return "";
  if (std::isinf(*pct)) return *pct > 0 ? "+inf%" : "-inf%";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%+.1f%%", *pct);
  return buf;
}

}  // namespace

const char* ChangeStatusName(ChangeStatus s) {
  switch (s) {
    case ChangeStatus::kOk: return "ok";
    case ChangeStatus::kImproved: return "improved";
    case ChangeStatus::kRegression: return "REGRESSION";
    case ChangeStatus::kBothNull: return "n/a";
    case ChangeStatus::kLost: return "LOST";
    case ChangeStatus::kNew: return "new";
  }
  return "?";
}

int ScenarioChange::Regressions() const {
  if (runs_a > 0 && runs_b == 0) return 1;
  int n = verdict_regressed + wrong_regressed;
  for (const auto& m : metrics) n += m.regression();
  return n;
}

int Comparison::Regressions() const {
  int n = 0;
  for (const auto& s : scenarios) n += s.Regressions();
  return n;
}

std::string ScenarioKey(const nlohmann::json& report) {
  return FormatValue(report.at("scenario").value("name", nlohmann::json("?"))) + " [" +
         FormatValue(report.value("ccl", nlohmann::json("?"))) + "]";
}

double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(values.size()));
  const size_t idx =
      static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(values.size()))) - 1;
  return values[idx];
}

bool IsConvergenceMetric(const std::string& metric) {
  // The metrics whose null can mean "never" (metric_table.h).
  const MetricRow* row = FindMetric(metric);
  return row != nullptr && row->null_rule != NullRule::kNotMeasured;
}

std::optional<double> RunValue(const nlohmann::json& report, const std::string& metric) {
  if (IsConvergenceMetric(metric)) {
    std::set<std::string> applied;
    for (const auto& f : report.at("faults")) {
      if (f.is_object() && f.value("id", nlohmann::json()).is_string() &&
          NumberOf(f.value("applied_s", nlohmann::json()))) {
        applied.insert(f["id"].get<std::string>());
      }
    }
    for (const auto& pf : report.at("per_fault")) {
      if (!pf.is_object() || !pf.value("id", nlohmann::json()).is_string() ||
          !applied.count(pf["id"].get<std::string>())) {
        continue;
      }
      if (NeverFor(report, pf, metric)) return std::numeric_limits<double>::infinity();
    }
  }
  return NumberOf(report.at("metrics").value(metric, nlohmann::json()));
}

Status CheckSameSchema(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b) {
  std::map<std::string, size_t> sa, sb;
  std::set<std::string> all;
  for (const auto& r : a) ++sa[FormatValue(r.value("schema", nlohmann::json()))];
  for (const auto& r : b) ++sb[FormatValue(r.value("schema", nlohmann::json()))];
  for (const auto& [s, n] : sa) all.insert(s);
  for (const auto& [s, n] : sb) all.insert(s);
  if (all.size() <= 1) return Status::Ok();
  auto side = [](const char* name, const std::map<std::string, size_t>& m) {
    std::string out = name;
    for (const auto& [s, n] : m) out += " " + std::to_string(n) + " x " + s + ",";
    if (!out.empty() && out.back() == ',') out.pop_back();
    return out;
  };
  std::string why;
  for (const auto& s : all) {
    const std::string change = SchemaChangeSince(s);
    if (!change.empty()) why += (why.empty() ? "" : "; ") + change;
  }
  if (why.empty()) why = "their metrics are defined differently";
  std::string sides = side("A:", sa);
  if (!sb.empty()) sides += "; " + side("B:", sb);
  return InvalidArgument("reports of different schemas cannot be compared (" + sides + "): " + why +
                         ". Run both sides with one version of faultline.");
}

Comparison CompareRuns(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b,
                       double tolerance_pct) {
  const Group ga = GroupByKey(a);
  const Group gb = GroupByKey(b);
  std::set<std::string> keys;
  for (const auto& [k, v] : ga) keys.insert(k);
  for (const auto& [k, v] : gb) keys.insert(k);
  Comparison c;
  c.tolerance_pct = tolerance_pct;
  static const std::vector<const nlohmann::json*> kNone;
  for (const auto& key : keys) {
    auto ia = ga.find(key);
    auto ib = gb.find(key);
    const auto& ra = ia == ga.end() ? kNone : ia->second;
    const auto& rb = ib == gb.end() ? kNone : ib->second;
    ScenarioChange s;
    s.key = key;
    s.runs_a = ra.size();
    s.runs_b = rb.size();
    if (!ra.empty()) s.verdict_a = VerdictName(WorstVerdict(ra));
    if (!rb.empty()) s.verdict_b = VerdictName(WorstVerdict(rb));
    if (!ra.empty() && !rb.empty()) {
      s.verdict_regressed = VerdictExitCode(WorstVerdict(rb)) > VerdictExitCode(WorstVerdict(ra));
      s.wrong_a = MostWrong(ra);
      s.wrong_b = MostWrong(rb);
      s.wrong_regressed = s.wrong_b.value_or(0) > s.wrong_a.value_or(0);
      for (const auto& k : kMetricTable) {
        MetricChange m;
        m.metric = k.name;
        m.higher_is_worse = k.higher_is_worse;
        const std::vector<double> va = Values(ra, k.name), vb = Values(rb, k.name);
        if (!va.empty()) m.a = Percentile(va, 50);
        if (!vb.empty()) m.b = Percentile(vb, 50);
        if (!m.a && !m.b) {
          m.status = ChangeStatus::kBothNull;
        } else if (!m.b) {
          m.status = ChangeStatus::kLost;
        } else if (!m.a) {
          m.status = ChangeStatus::kNew;
        } else if (std::isinf(*m.a) || std::isinf(*m.b)) {
          // Never (+infinity) on a side: worse or better by direction, no finite change.
          if (std::isinf(*m.a) && std::isinf(*m.b)) {
            m.status = ChangeStatus::kOk;
          } else {
            const bool b_worse = std::isinf(*m.b) == k.higher_is_worse;
            if (std::isinf(*m.b)) m.change_pct = std::numeric_limits<double>::infinity();
            m.status = b_worse ? ChangeStatus::kRegression : ChangeStatus::kImproved;
          }
        } else {
          const double diff = *m.b - *m.a;
          if (*m.a != 0) {
            m.change_pct = diff / std::fabs(*m.a) * 100.0;
          } else {
            m.change_pct = diff == 0 ? 0.0
                                     : std::copysign(std::numeric_limits<double>::infinity(), diff);
          }
          const bool worse = k.higher_is_worse ? diff > 0 : diff < 0;
          const bool beyond = std::fabs(*m.change_pct) > tolerance_pct;
          m.status = !beyond ? ChangeStatus::kOk
                             : (worse ? ChangeStatus::kRegression : ChangeStatus::kImproved);
        }
        s.metrics.push_back(std::move(m));
      }
    }
    c.scenarios.push_back(std::move(s));
  }
  return c;
}

std::string FormatComparison(const Comparison& c) {
  std::string out;
  int regressed_scenarios = 0;
  for (const auto& s : c.scenarios) {
    out += s.key + "  (A: " + std::to_string(s.runs_a) + " run(s), B: " + std::to_string(s.runs_b) +
           " run(s))\n";
    if (s.runs_b == 0) {
      out += "  REGRESSION: missing in B\n\n";
      ++regressed_scenarios;
      continue;
    }
    if (s.runs_a == 0) {
      out += "  new: only in B, nothing to compare\n\n";
      continue;
    }
    regressed_scenarios += s.Regressions() > 0;
    out += "  " + Pad("verdict", 22) + Pad(s.verdict_a, 14) + Pad(s.verdict_b, 14) +
           (s.verdict_regressed ? "REGRESSION" : "") + "\n";
    out += "  " + Pad("wrong_results", 22) +
           Pad(s.wrong_a ? std::to_string(*s.wrong_a) : "not checked", 14) +
           Pad(s.wrong_b ? std::to_string(*s.wrong_b) : "not checked", 14) +
           (s.wrong_regressed ? "REGRESSION" : "") + "\n";
    out += "  " + Pad("metric", 22) + Pad("A", 14) + Pad("B", 14) + Pad("change", 11) + "status\n";
    for (const auto& m : s.metrics) {
      std::string status = ChangeStatusName(m.status);
      if (m.status == ChangeStatus::kRegression && m.b && std::isinf(*m.b)) {
        status += " (never happened in B)";
      } else if (m.status == ChangeStatus::kRegression) {
        status += m.higher_is_worse ? " (higher is worse)" : " (lower is worse)";
      } else if (m.status == ChangeStatus::kLost) {
        status += " (REGRESSION: measured in A, null in B)";
      } else if (m.status == ChangeStatus::kNew) {
        status += " (null in A, measured in B)";
      }
      out += "  " + Pad(m.metric, 22) + Pad(Opt(m.a), 14) + Pad(Opt(m.b), 14) +
             Pad(Change(m.change_pct), 11) + status + "\n";
    }
    out += "\n";
  }
  char tol[32];
  std::snprintf(tol, sizeof(tol), "%g%%", c.tolerance_pct);
  out += "compare: " + std::to_string(c.Regressions()) + " regression(s) in " +
         std::to_string(regressed_scenarios) + " of " + std::to_string(c.scenarios.size()) +
         " scenario(s), tolerance " + tol + "\n";
  return out;
}

Result<double> ParseTolerance(const std::string& text) {
  std::string s = text;
  if (!s.empty() && s.back() == '%') s.pop_back();
  if (s.empty()) return InvalidArgument("tolerance \"" + text + "\": expected a percentage like 10%");
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || !std::isfinite(v) || v < 0) {
    return InvalidArgument("tolerance \"" + text + "\": expected a percentage like 10%");
  }
  return v;
}

std::vector<ScenarioStats> RunStats(const std::vector<nlohmann::json>& reports) {
  std::vector<ScenarioStats> out;
  for (const auto& [key, runs] : GroupByKey(reports)) {
    ScenarioStats s;
    s.key = key;
    s.runs = runs.size();
    for (const auto* r : runs) {
      ++s.verdicts[VerdictName(VerdictOf(*r))];
      ++s.outcomes[FormatValue(r->value("outcome", nlohmann::json("?")))];
    }
    for (const auto& k : kMetricTable) {
      MetricStats m;
      m.metric = k.name;
      const std::vector<double> v = Values(runs, k.name);
      m.n = v.size();
      m.n_never = static_cast<size_t>(
          std::count_if(v.begin(), v.end(), [](double x) { return std::isinf(x); }));
      m.n_na = runs.size() - v.size();
      if (!v.empty()) {
        m.p50 = Percentile(v, 50);
        m.p95 = Percentile(v, 95);
        m.min = *std::min_element(v.begin(), v.end());
        m.max = *std::max_element(v.begin(), v.end());
      }
      s.metrics.push_back(std::move(m));
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string FormatStats(const std::vector<ScenarioStats>& stats) {
  std::string out;
  for (const auto& s : stats) {
    out += s.key + "  (" + std::to_string(s.runs) + " run(s))\n  verdicts:";
    for (const auto& [v, n] : s.verdicts) out += " " + v + " " + std::to_string(n);
    out += "; outcomes:";
    for (const auto& [o, n] : s.outcomes) out += " " + o + " " + std::to_string(n);
    out += "\n  " + Pad("metric", 22) + Pad("n", 5) + Pad("never", 7) + Pad("n/a", 5) +
           Pad("p50", 12) + Pad("p95", 12) + Pad("min", 12) + "max\n";
    for (const auto& m : s.metrics) {
      out += "  " + Pad(m.metric, 22) + Pad(std::to_string(m.n), 5) +
             Pad(std::to_string(m.n_never), 7) + Pad(std::to_string(m.n_na), 5) +
             Pad(Opt(m.p50), 12) + Pad(Opt(m.p95), 12) + Pad(Opt(m.min), 12) + Opt(m.max) + "\n";
    }
    out +=
        "  (n: runs measured or never; never: a fault applied and it never happened, counted "
        "as +inf; n/a: does not apply)\n";
    out += "\n";
  }
  return out;
}

}  // namespace faultline::reports
