#include "reports/suite_index.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cctype>
#include <map>
#include <sstream>

#include "reports/exit_code.h"
#include "reports/metric_table.h"
#include "reports/verdict.h"
#include "reports/text.h"

namespace faultline::reports {
namespace {

constexpr const char* kProgressMs = "progress_ms";

struct MetricInfo {
  std::string unit;
  bool higher_is_worse = true;
};

MetricInfo InfoOf(const std::string& key) {
  for (const MetricRow& r : kMetricTable) {
    if (key == r.name) return {r.unit, r.higher_is_worse};
  }
  for (const MetricRow& r : kTrainingMetricTable) {
    if (key == r.name) return {r.unit, r.higher_is_worse};
  }
  return {"ms", true};  // progress_ms
}

std::optional<double> Metric(const nlohmann::json& report, const char* key) {
  if (!report.is_object() || !report.contains("metrics") || !report["metrics"].is_object()) {
    return std::nullopt;
  }
  return NumberOf(report["metrics"].value(key, nlohmann::json()));
}

// The largest per-fault progress_ms; null when there is no fault or any fault's is null.
std::optional<double> WorstProgress(const nlohmann::json& report) {
  if (!report.is_object() || !report.contains("per_fault") || !report["per_fault"].is_array() ||
      report["per_fault"].empty()) {
    return std::nullopt;
  }
  std::optional<double> worst;
  for (const nlohmann::json& f : report["per_fault"]) {
    std::optional<double> v =
        f.is_object() ? NumberOf(f.value(kProgressMs, nlohmann::json())) : std::nullopt;
    if (!v) return std::nullopt;
    worst = std::max(worst.value_or(*v), *v);
  }
  return worst;
}

bool IsTraining(const nlohmann::json& report) {
  return report.is_object() && report.contains("train");
}

double MedianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

std::string Label(const std::string& key, const std::string& unit) {
  return unit.empty() ? key : key + " (" + unit + ")";
}

std::string CellText(const PivotCell& c) {
  if (!c.median) return c.runs ? "-" : "";
  std::string s = FormatNumber(*c.median, 3);
  if (c.runs > 1 || c.measured != c.runs) {
    s += " (spread " + FormatNumber(c.spread, 3) + ", " + std::to_string(c.measured) + "/" +
         std::to_string(c.runs) + ")";
  }
  return s;
}

struct Counts {
  int pass = 0, fail = 0, skipped = 0, other = 0;
};

Counts CountVerdicts(std::span<const SuiteRun> runs) {
  Counts c;
  for (const SuiteRun& r : runs) {
    if (r.verdict == "SKIPPED") {
      ++c.skipped;
    } else if (r.verdict == "PASS" || r.verdict == "REPRODUCED") {
      ++c.pass;
    } else if (r.verdict == "FAIL" || r.verdict == "NOT REPRODUCED") {
      ++c.fail;
    } else {
      ++c.other;
    }
  }
  return c;
}

// The key metric columns of the run table: every key some run has, in KeyMetrics' order
// (collective figures, then training ones).
std::vector<std::string> MetricColumns(std::span<const SuiteRun> runs) {
  std::vector<std::string> cols;
  for (bool training : {false, true}) {
    for (const SuiteRun& r : runs) {
      if (IsTraining(r.report) != training || !r.report.contains("metrics")) continue;
      for (const auto& [k, v] : KeyMetrics(r.report)) {
        if (std::find(cols.begin(), cols.end(), k) == cols.end()) cols.push_back(k);
      }
    }
  }
  return cols;
}

std::optional<double> ValueOf(const SuiteRun& r, const std::string& key) {
  for (const auto& [k, v] : KeyMetrics(r.report)) {
    if (k == key) return v;
  }
  return std::nullopt;
}

std::string Outcome(const SuiteRun& r) {
  return r.report.is_object() ? r.report.value("outcome", std::string("-")) : "-";
}

std::string HeadLine(const SuiteSummary& s, std::span<const SuiteRun> runs) {
  const Counts c = CountVerdicts(runs);
  return std::to_string(runs.size()) + " runs: " + std::to_string(c.pass) + " passed, " +
         std::to_string(c.fail) + " failed, " + std::to_string(c.skipped) + " skipped, " +
         std::to_string(c.other) + " not judged (bad input or harness error); exit code " +
         std::to_string(s.exit_code) + (s.seconds ? "; " + FormatNumber(*s.seconds, 0) + " s." : ".");
}

std::string CssClass(std::string verdict) {
  std::replace(verdict.begin(), verdict.end(), ' ', '_');
  return verdict;
}

std::string UrlPath(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '/' || c == '.' || c == '_' || c == '-' || c == '=' ||
        c == ',' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// Escaped text that may wrap after '_', ',', '[' and '/' (run names and snake_case keys are
// long words a table cannot otherwise break).
std::string Wrappable(const std::string& s) {
  std::string out;
  for (char c : s) {
    out += HtmlEscape(std::string(1, c));
    if (c == '_' || c == ',' || c == '[' || c == '/') out += "<wbr>";
  }
  return out;
}

std::string PivotTitle(const Pivot& p) {
  std::string t = p.group.empty() ? "" : p.group + ": ";
  t += Label(p.metric, p.unit) + " by " + p.col_axis;
  t += p.higher_is_worse ? " (lower is better)" : " (higher is better)";
  return t;
}

}  // namespace

std::vector<std::pair<std::string, std::optional<double>>> KeyMetrics(
    const nlohmann::json& report) {
  if (IsTraining(report)) {
    return {{kGoodputRatio, Metric(report, kGoodputRatio)},
            {kStepsPerS, Metric(report, kStepsPerS)}};
  }
  return {{kStallMs, Metric(report, kStallMs)},
          {kFailoverLatencyMs, Metric(report, kFailoverLatencyMs)},
          {kProgressMs, WorstProgress(report)},
          {kDegradedRatio, Metric(report, kDegradedRatio)},
          {kRecoveryMs, Metric(report, kRecoveryMs)}};
}

std::vector<Pivot> MatrixPivots(std::span<const SuiteRun> runs) {
  std::vector<std::string> groups;
  for (const SuiteRun& r : runs) {
    if (!r.axes.empty() && std::find(groups.begin(), groups.end(), r.group) == groups.end()) {
      groups.push_back(r.group);
    }
  }
  std::vector<Pivot> out;
  for (const std::string& g : groups) {
    std::vector<const SuiteRun*> members;
    std::vector<std::string> axes;  // every axis but seed, in order of appearance
    for (const SuiteRun& r : runs) {
      if (r.group != g || r.axes.empty()) continue;
      members.push_back(&r);
      for (const auto& [k, v] : r.axes) {
        if (k != "seed" && std::find(axes.begin(), axes.end(), k) == axes.end()) {
          axes.push_back(k);
        }
      }
    }
    if (axes.empty()) continue;  // only seeds: the run table says it all
    const std::string col_axis = axes.back();
    std::vector<std::string> row_axes(axes.begin(), axes.end() - 1);
    auto value_of = [](const SuiteRun& r, const std::string& axis) {
      for (const auto& [k, v] : r.axes) {
        if (k == axis) return v;
      }
      return std::string("-");
    };
    std::vector<std::string> rows, cols;
    std::vector<std::pair<size_t, size_t>> at;  // each member's cell
    for (const SuiteRun* r : members) {
      std::vector<std::string> parts;
      for (const std::string& a : row_axes) parts.push_back(value_of(*r, a));
      const std::string row = Join(parts, ", ");
      const std::string col = value_of(*r, col_axis);
      auto ri = std::find(rows.begin(), rows.end(), row);
      if (ri == rows.end()) ri = rows.insert(rows.end(), row);
      auto ci = std::find(cols.begin(), cols.end(), col);
      if (ci == cols.end()) ci = cols.insert(cols.end(), col);
      at.emplace_back(ri - rows.begin(), ci - cols.begin());
    }
    std::vector<std::string> metrics;
    for (const SuiteRun* r : members) {
      for (const auto& [k, v] : KeyMetrics(r->report)) {
        if (v && std::find(metrics.begin(), metrics.end(), k) == metrics.end()) {
          metrics.push_back(k);
        }
      }
    }
    for (const std::string& m : metrics) {
      Pivot p;
      p.group = g;
      p.metric = m;
      const MetricInfo info = InfoOf(m);
      p.unit = info.unit;
      p.higher_is_worse = info.higher_is_worse;
      p.row_axes = Join(row_axes, ", ");
      p.col_axis = col_axis;
      p.rows = rows;
      p.cols = cols;
      std::vector<std::vector<std::vector<double>>> values(
          rows.size(), std::vector<std::vector<double>>(cols.size()));
      p.cells.assign(rows.size(), std::vector<PivotCell>(cols.size()));
      for (size_t i = 0; i < members.size(); ++i) {
        PivotCell& c = p.cells[at[i].first][at[i].second];
        ++c.runs;
        if (std::optional<double> v = ValueOf(*members[i], m)) {
          values[at[i].first][at[i].second].push_back(*v);
        }
      }
      for (size_t ri = 0; ri < rows.size(); ++ri) {
        std::optional<double> best;
        for (size_t ci = 0; ci < cols.size(); ++ci) {
          PivotCell& c = p.cells[ri][ci];
          const std::vector<double>& v = values[ri][ci];
          c.measured = static_cast<int>(v.size());
          if (v.empty()) continue;
          c.median = MedianOf(v);
          c.spread = *std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end());
          if (!best || (p.higher_is_worse ? *c.median < *best : *c.median > *best)) {
            best = c.median;
          }
        }
        for (PivotCell& c : p.cells[ri]) c.best = best && c.median && *c.median == *best;
      }
      out.push_back(std::move(p));
    }
  }
  return out;
}

std::string SuiteIndexHtml(const SuiteSummary& s, std::span<const SuiteRun> runs) {
  const std::vector<std::string> metric_cols = MetricColumns(runs);
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>faultline: "
    << HtmlEscape(s.title) << "</title>\n<style>\n"
    << "body{font-family:sans-serif;margin:2em;max-width:100%}"
    << "table{border-collapse:collapse;margin-bottom:1.5em}"
    << "td,th{border:1px solid #ccc;padding:4px 10px;text-align:left}"
    << "td.num{text-align:right;font-variant-numeric:tabular-nums}"
    << ".wide{overflow-x:auto}"
    << ".PASS,.REPRODUCED{background:#d7f5d7}.FAIL,.NOT_REPRODUCED{background:#f8d0d0}"
    << ".SKIPPED{background:#eee}.BAD_INPUT,.HARNESS_ERROR{background:#f7e3b0}"
    << "td.best{font-weight:bold;background:#e3effd}\n</style></head><body>\n";
  h << "<h1>faultline: " << HtmlEscape(s.title) << "</h1>\n";
  h << "<p>" << HtmlText(HeadLine(s, runs)) << " <a href=\"junit.xml\">junit.xml</a></p>\n";
  h << "<div class=\"wide\"><table>\n<tr><th>run</th><th>verdict</th><th>outcome</th>";
  for (const std::string& m : metric_cols) {
    h << "<th>" << Wrappable(Label(m, InfoOf(m).unit)) << "</th>";
  }
  h << "<th>time</th><th>reports</th><th>note</th></tr>\n";
  for (const SuiteRun& r : runs) {
    std::string links;
    for (const std::string& f : r.links) {
      links += std::string(links.empty() ? "" : " ") + "<a href=\"" + UrlPath(r.dir + "/" + f) +
               "\">" + HtmlEscape(f) + "</a>";
    }
    h << "<tr class=\"" << CssClass(r.verdict) << "\"><td>" << Wrappable(r.name) << "</td><td>"
      << HtmlEscape(r.verdict) << "</td><td>" << HtmlEscape(Outcome(r)) << "</td>";
    for (const std::string& m : metric_cols) {
      std::optional<double> v = ValueOf(r, m);
      h << "<td class=\"num\">" << (v ? FormatNumber(*v, 3) : "-") << "</td>";
    }
    h << "<td class=\"num\">" << (r.seconds ? FormatNumber(*r.seconds, 1) + " s" : "-")
      << "</td><td>"
      << (links.empty() ? "-" : links) << "</td><td>" << HtmlEscape(r.note) << "</td></tr>\n";
  }
  h << "</table></div>\n";
  const std::vector<Pivot> pivots = MatrixPivots(runs);
  if (!pivots.empty()) {
    h << "<h2>Pivots</h2>\n<p>Each cell: the median over the runs of that combination (with "
         "--seeds, its spread max - min and how many runs measured it); the best cell of each "
         "row is bold.</p>\n";
  }
  for (const Pivot& p : pivots) {
    h << "<h3>" << HtmlEscape(PivotTitle(p)) << "</h3>\n<div class=\"wide\"><table>\n<tr><th>"
      << HtmlEscape(p.row_axes.empty() ? "" : p.row_axes) << "</th>";
    for (const std::string& c : p.cols) h << "<th>" << HtmlEscape(p.col_axis + "=" + c) << "</th>";
    h << "</tr>\n";
    for (size_t ri = 0; ri < p.rows.size(); ++ri) {
      h << "<tr><th>" << HtmlEscape(p.rows[ri]) << "</th>";
      for (const PivotCell& c : p.cells[ri]) {
        h << "<td class=\"num" << (c.best ? " best" : "") << "\">" << HtmlEscape(CellText(c))
          << "</td>";
      }
      h << "</tr>\n";
    }
    h << "</table></div>\n";
  }
  h << "</body></html>\n";
  return h.str();
}

std::string SuiteIndexMarkdown(const SuiteSummary& s, std::span<const SuiteRun> runs) {
  const std::vector<std::string> metric_cols = MetricColumns(runs);
  std::ostringstream m;
  m << "# faultline: " << s.title << "\n\n" << HeadLine(s, runs) << "\n\n";
  m << "| run | verdict | outcome |";
  for (const std::string& k : metric_cols) m << " " << MarkdownCell(Label(k, InfoOf(k).unit)) << " |";
  m << " time | note |\n|---|---|---|";
  for (size_t i = 0; i < metric_cols.size(); ++i) m << "---:|";
  m << "---:|---|\n";
  for (const SuiteRun& r : runs) {
    m << "| " << MarkdownCell(r.name) << " | " << r.verdict << " | " << MarkdownCell(Outcome(r))
      << " |";
    for (const std::string& k : metric_cols) {
      std::optional<double> v = ValueOf(r, k);
      m << " " << (v ? FormatNumber(*v, 3) : "-") << " |";
    }
    m << " " << (r.seconds ? FormatNumber(*r.seconds, 1) + " s" : "-") << " | "
      << MarkdownCell(r.note) << " |\n";
  }
  for (const Pivot& p : MatrixPivots(runs)) {
    m << "\n## " << PivotTitle(p) << "\n\n| " << MarkdownCell(p.row_axes) << " |";
    for (const std::string& c : p.cols) m << " " << MarkdownCell(p.col_axis + "=" + c) << " |";
    m << "\n|---|";
    for (size_t i = 0; i < p.cols.size(); ++i) m << "---:|";
    m << "\n";
    for (size_t ri = 0; ri < p.rows.size(); ++ri) {
      m << "| " << MarkdownCell(p.rows[ri]) << " |";
      for (const PivotCell& c : p.cells[ri]) {
        const std::string t = CellText(c);
        m << " " << (c.best ? "**" + t + "**" : t) << " |";
      }
      m << "\n";
    }
  }
  if (!MatrixPivots(runs).empty()) {
    m << "\nBold: the best cell of its row (the metric's better direction). A cell with more "
         "than one run: median (spread max - min, runs that measured it / runs).\n";
  }
  return m.str();
}

std::string SuiteVerdictText(const nlohmann::json& report) {
  if (!report.is_object()) return "HARNESS ERROR";
  if (report.contains("skipped")) return "SKIPPED";
  const nlohmann::json errors = report.value("harness_errors", nlohmann::json::array());
  if (errors.is_array() && !errors.empty() && errors[0].is_string() &&
      errors[0].get<std::string>().rfind("bad input: ", 0) == 0) {
    return "BAD INPUT";
  }
  const Verdict v = VerdictOf(report);
  if (report.value("judged_by", "") == "reproduce" && v != Verdict::kHarnessError) {
    return v == Verdict::kPass ? "REPRODUCED" : "NOT REPRODUCED";
  }
  return VerdictName(v);
}

std::string SuiteRunNote(const nlohmann::json& report) {
  if (!report.is_object()) return "";
  if (report.contains("skipped")) return "skipped: " + report.value("skipped", std::string());
  const nlohmann::json errors = report.value("harness_errors", nlohmann::json::array());
  if (!errors.is_array() || errors.empty()) return "";
  return errors[0].is_string() ? errors[0].get<std::string>() : errors[0].dump();
}

SuiteOnDisk ReadSuite(const std::string& root, const std::vector<std::string>& run_dirs) {
  namespace fs = std::filesystem;
  SuiteOnDisk out;
  ExitCode worst = ExitCode::kOk;
  for (const std::string& d : run_dirs) {
    SuiteRun r;
    r.dir = fs::path(d).lexically_relative(root).generic_string();
    std::ifstream in(fs::path(d) / "report.json");
    r.report = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (r.report.is_discarded()) r.report = nlohmann::json::object();
    // The report's scenario name carries its matrix label ("accept-loss[hosts=2,...]").
    r.name = r.report.contains("scenario") && r.report["scenario"].is_object()
                 ? r.report["scenario"].value("name", r.dir)
                 : r.dir;
    // ".../<k=v,k=v>": the combination; what is above it, the group.
    const fs::path rel(r.dir);
    const std::string last = rel.filename().string();
    if (last.find('=') != std::string::npos) {
      r.group = rel.parent_path().generic_string();
      size_t from = 0;
      while (from <= last.size()) {
        size_t comma = last.find(',', from);
        if (comma == std::string::npos) comma = last.size();
        const std::string kv = last.substr(from, comma - from);
        const size_t eq = kv.find('=');
        if (eq != std::string::npos) r.axes.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
        from = comma + 1;
      }
    } else {
      r.group = r.dir;
    }
    r.verdict = SuiteVerdictText(r.report);
    for (const char* f : {"report.html", "report.json"}) {
      if (fs::exists(fs::path(d) / f)) r.links.push_back(f);
    }
    r.note = SuiteRunNote(r.report);
    ExitCode code = ExitCode::kOk;
    if (r.verdict == "BAD INPUT") {
      code = ExitCode::kBadInput;
    } else if (r.verdict != "SKIPPED") {
      code = ExitCodeOf(VerdictOf(r.report));
    }
    worst = Worse(worst, code);
    out.runs.push_back(std::move(r));
  }
  out.exit_code = ToInt(worst);
  return out;
}

}  // namespace faultline::reports
