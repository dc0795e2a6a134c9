// trend.html (reports/trend.h): one self-contained page, no script, as report.html.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "reports/text.h"
#include "reports/trend.h"

namespace faultline::reports {
namespace {

constexpr const char* kStyle =
    "body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;padding:1em 2em;max-width:1200px;"
    "color:#1d1d1f}h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em}"
    ".box{overflow-x:auto;max-width:100%}table{border-collapse:collapse;margin:.5em 0}"
    "th,td{border:1px solid #ccd;padding:.25em .6em;text-align:left;white-space:nowrap}"
    "th{background:#f1f3f8}.REGRESSION{color:#b00020;font-weight:600}.improved{color:#16702b}.watch{color:#a05a00}"
    ".FAIL,.HARNESS{background:#fde8e8}.PASS{background:#e8f6ec}"
    ".plots{display:flex;flex-wrap:wrap;gap:.8em}.plot{border:1px solid #e3e5ec;padding:.3em}"
    ".plot h3{font-size:.85em;margin:.1em 0 .2em;font-weight:600}"
    "svg text{font:10px system-ui,sans-serif;fill:#555}.line{fill:none;stroke:#1a4f8b;"
    "stroke-width:1.5}.pt{fill:#1a4f8b}.never{fill:#b00020}.band{fill:#9bb7e0;opacity:.35}"
    ".mid{stroke:#666;stroke-dasharray:3 3}.change{stroke:#b00020;stroke-width:1.5}"
    "footer{margin-top:2em;color:#777;font-size:.85em}";

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

std::string Px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

// One series: a line over the nights (a point per present night, so a single night shows),
// "never" as a red point on the top edge, the band median +- threshold (the baseline's nights
// only when a change was found) and the change's first night as a red line.
std::string SeriesSvg(const MetricTrend& m, size_t nights) {
  const double w = 300, h = 120, l = 44, r = 8, top = 8, bottom = 18;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto& v : m.values) {
    if (v && !std::isinf(*v)) lo = std::min(lo, *v), hi = std::max(hi, *v);
  }
  if (m.baseline_median && m.threshold && !std::isinf(*m.baseline_median)) {
    lo = std::min(lo, *m.baseline_median - *m.threshold);
    hi = std::max(hi, *m.baseline_median + *m.threshold);
  }
  if (!(lo <= hi)) lo = 0, hi = 1;  // every value never
  if (hi - lo < 1e-12) lo -= 0.5 * std::max(1.0, std::fabs(lo)), hi += 0.5 * std::max(1.0, std::fabs(hi));
  const double span = hi - lo;
  lo -= span * 0.08;
  hi += span * 0.08;
  auto x = [&](size_t i) {
    return nights <= 1 ? l + (w - l - r) / 2 : l + (w - l - r) * static_cast<double>(i) /
                                                       static_cast<double>(nights - 1);
  };
  auto y = [&](double v) { return top + (h - top - bottom) * (hi - v) / (hi - lo); };
  std::string s = "<svg class=\"trend-plot\" data-metric=\"" + HtmlEscape(m.metric) +
                  "\" width=\"" + Px(w) + "\" height=\"" + Px(h) + "\" viewBox=\"0 0 " + Px(w) +
                  " " + Px(h) + "\">";
  if (m.baseline_median && m.threshold && !std::isinf(*m.baseline_median)) {
    const size_t end = m.first_night ? *m.first_night : nights;
    const double x0 = x(0) - 4, x1 = end == 0 ? x(0) : (end >= nights ? x(nights - 1) + 4 : (x(end - 1) + x(end)) / 2);
    s += "<rect class=\"band\" x=\"" + Px(x0) + "\" y=\"" + Px(y(*m.baseline_median + *m.threshold)) +
         "\" width=\"" + Px(std::max(1.0, x1 - x0)) + "\" height=\"" +
         Px(std::max(1.0, y(*m.baseline_median - *m.threshold) - y(*m.baseline_median + *m.threshold))) +
         "\"/>";
    s += "<line class=\"mid\" x1=\"" + Px(x0) + "\" x2=\"" + Px(x1) + "\" y1=\"" +
         Px(y(*m.baseline_median)) + "\" y2=\"" + Px(y(*m.baseline_median)) + "\"/>";
  }
  if (m.first_night) {
    const double xc = x(*m.first_night);
    s += "<line class=\"change\" x1=\"" + Px(xc) + "\" x2=\"" + Px(xc) + "\" y1=\"" + Px(top) +
         "\" y2=\"" + Px(h - bottom) + "\"/>";
  }
  std::string pts;
  std::string dots;
  for (size_t i = 0; i < m.values.size(); ++i) {
    const auto& v = m.values[i];
    if (!v) continue;
    if (std::isinf(*v)) {
      dots += "<circle class=\"never\" cx=\"" + Px(x(i)) + "\" cy=\"" + Px(top) + "\" r=\"3\"><title>night " +
              std::to_string(i + 1) + ": never</title></circle>";
      continue;
    }
    pts += Px(x(i)) + "," + Px(y(*v)) + " ";
    dots += "<circle class=\"pt\" cx=\"" + Px(x(i)) + "\" cy=\"" + Px(y(*v)) + "\" r=\"2.5\"><title>night " +
            std::to_string(i + 1) + ": " + Num(*v) + "</title></circle>";
  }
  if (!pts.empty()) s += "<polyline class=\"line\" points=\"" + pts + "\"/>";
  s += dots;
  s += "<text x=\"2\" y=\"" + Px(top + 8) + "\">" + Num(hi) + "</text>";
  s += "<text x=\"2\" y=\"" + Px(h - bottom) + "\">" + Num(lo) + "</text>";
  s += "<text x=\"" + Px(l) + "\" y=\"" + Px(h - 4) + "\">night 1</text>";
  if (nights > 1) {
    s += "<text x=\"" + Px(w - r - 40) + "\" y=\"" + Px(h - 4) + "\">night " +
         std::to_string(nights) + "</text>";
  }
  return s + "</svg>";
}

std::string Cell(const std::optional<double>& v) {
  if (!v) return "-";
  if (std::isinf(*v)) return "never";
  return Num(*v);
}

}  // namespace

std::string TrendHtml(const Trend& t) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>faultline trend: " +
      std::to_string(t.Regressions()) + " regression(s) over " + std::to_string(t.nights.size()) +
      " nights</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  out += "<h1>Trend over " + std::to_string(t.nights.size()) + " nights: " +
         std::to_string(t.Regressions()) + " regression(s)</h1>\n";
  out +=
      "<p id=\"rule\">A change is flagged from the first night whose value, and the median "
      "of the nights from it on, differ from the median of the nights before it (at least " +
      std::to_string(t.options.min_before) + ") by more than max(" + Num(t.options.k) +
      " &#215; noise, " + Num(t.options.min_rel * 100) +
      "% of that median, the largest deviation those nights showed on that side), noise = "
      "1.4826 &#215; MAD of those nights. A night nearer that median than the nights after "
      "it, just before such a change, is its forerunner, not its first night. It counts "
      "once " +
      std::to_string(t.options.min_after) +
      " nights show it; on fewer it is only <span class=\"watch\">watch</span>. The band "
      "is that median &#177; the threshold.</p>\n";
  out += "<h2>Changes</h2>\n<div class=\"box\"><table id=\"changes\"><tr><th>scenario</th>"
         "<th>metric</th><th>change</th><th>first night</th><th>before (median)</th>"
         "<th>from then on (median)</th><th>threshold</th></tr>";
  bool any = false;
  for (const ScenarioTrend& s : t.scenarios) {
    for (const MetricTrend& m : s.metrics) {
      if (!m.first_night) continue;
      any = true;
      const std::string st = TrendStatusName(m.status);
      out += "<tr><td>" + HtmlText(s.key) + "</td><td>" + HtmlText(m.metric) +
             "</td><td class=\"" + st + "\">" + st + "</td><td>" +
             HtmlText(std::to_string(*m.first_night + 1) + " (" + t.nights[*m.first_night] + ")") +
             "</td><td>" + Cell(m.baseline_median) + "</td><td>" + Cell(m.after_median) +
             "</td><td>" + Cell(m.threshold) + "</td></tr>";
    }
  }
  if (!any) out += "<tr><td colspan=\"7\">none beyond the noise</td></tr>";
  out += "</table></div>\n";
  out += "<h2>Nights</h2>\n<div class=\"box\"><table id=\"nights\"><tr><th>#</th><th>run</th></tr>";
  for (size_t i = 0; i < t.nights.size(); ++i) {
    out += "<tr><td>" + std::to_string(i + 1) + "</td><td>" + HtmlText(t.nights[i]) + "</td></tr>";
  }
  out += "</table></div>\n";
  for (const ScenarioTrend& s : t.scenarios) {
    out += "<section class=\"scenario\"><h2>" + HtmlText(s.key) + "</h2>\n";
    out += "<div class=\"box\"><table class=\"verdicts\"><tr><th>night</th>";
    for (size_t i = 0; i < s.verdicts.size(); ++i) out += "<th>" + std::to_string(i + 1) + "</th>";
    out += "</tr><tr><th>verdict</th>";
    for (const std::string& v : s.verdicts) {
      const std::string cls = v.empty() ? "" : v.substr(0, v.find(' '));
      out += "<td class=\"" + cls + "\">" + (v.empty() ? "-" : HtmlText(v)) + "</td>";
    }
    out += "</tr></table></div>\n<div class=\"plots\">";
    for (const MetricTrend& m : s.metrics) {
      const std::string st = TrendStatusName(m.status);
      out += "<div class=\"plot\"><h3>" + HtmlText(m.metric) +
             (m.unit.empty() ? "" : " (" + HtmlText(m.unit) + ")") + ": <span class=\"" + st +
             "\">" + st + "</span></h3>" + SeriesSvg(m, t.nights.size()) + "</div>";
    }
    out += "</div></section>\n";
  }
  out += "<footer>faultline trend, schema faultline.trend/v1</footer>\n</body>\n</html>\n";
  return out;
}

}  // namespace faultline::reports
