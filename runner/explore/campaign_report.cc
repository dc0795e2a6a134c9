#include "runner/explore/campaign_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "reports/text.h"

namespace faultline::runner::explore {
namespace {

using reports::HtmlEscape;
using reports::XmlEscape;

std::string Num(double v, const char* f = "%.1f") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

nlohmann::json FaultsJson(const std::vector<GenFault>& fs) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& f : fs) a.push_back(Describe(f));
  return a;
}

nlohmann::json TopologyJson(const TopologyShrinkResult& t) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& st : t.steps) steps.push_back(st.ToJson());
  return {{"minimal",
           {{"hosts", t.minimal.hosts},
            {"ranks_per_host", t.minimal.ranks_per_host},
            {"rails", t.minimal.rails},
            {"bytes", t.minimal.bytes}}},
          {"steps", steps},
          {"out_of_budget", t.out_of_budget}};
}

// The campaign's runs over time: one row per run, a bar from its start to its end (green: every
// invariant held, red: one failed, grey: it could not be run or judged), so that the page shows
// when each run happened, how long it took, which ones went at once (--jobs) and where the
// search stopped to confirm and shrink.
std::string RunsTimelineSvg(const CampaignRecord& c) {
  const double w = 900, left = 56, right = 16, top = 12, bottom = 40;
  const double row = c.runs.size() > 120 ? 3 : c.runs.size() > 40 ? 6 : 12;
  const double pw = w - left - right, ph = row * static_cast<double>(c.runs.size());
  const double h = top + ph + bottom;
  double end = c.seconds;
  for (const auto& r : c.runs) end = std::max(end, r.started_s + r.seconds);
  // Ticks at a round step, about six of them.
  double step = 1;
  for (double s : {1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0}) {
    step = s;
    if (end / s <= 6) break;
  }
  const double xmax = std::max(step, std::ceil(end / step) * step);
  auto X = [&](double t) { return left + t / xmax * pw; };
  std::ostringstream o;
  // Inline SVG in HTML needs no namespace attribute (and the page names no URL at all).
  o << "<svg width=\"" << w << "\" height=\"" << h << "\" viewBox=\"0 0 " << w << " " << h
    << "\" role=\"img\" aria-label=\"runs over the campaign's time\">\n";
  o << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"#888\"/>\n";
  for (double t = 0; t <= xmax + 1e-9; t += step) {
    o << "<line x1=\"" << X(t) << "\" x2=\"" << X(t) << "\" y1=\"" << top << "\" y2=\"" << top + ph
      << "\" stroke=\"#eee\"/><text x=\"" << X(t) << "\" y=\"" << top + ph + 14
      << "\" font-size=\"11\" text-anchor=\"middle\">" << Num(t, "%g") << "</text>\n";
  }
  o << "<text x=\"" << left + pw / 2 << "\" y=\"" << h - 6
    << "\" font-size=\"12\" text-anchor=\"middle\">seconds from the campaign's start</text>\n"
    << "<text x=\"14\" y=\"" << top + ph / 2 << "\" font-size=\"12\" text-anchor=\"middle\" "
    << "transform=\"rotate(-90 14 " << top + ph / 2 << ")\">run</text>\n";
  for (size_t i = 0; i < c.runs.size(); ++i) {
    const RunRecord& r = c.runs[i];
    const char* cls = !r.error.empty() ? "error" : r.Violation().empty() ? "held" : "violated";
    const char* fill = !r.error.empty() ? "#999" : r.Violation().empty() ? "#2a2" : "#c00";
    const double y = top + row * static_cast<double>(i);
    o << "<rect class=\"" << cls << "\" x=\"" << X(r.started_s) << "\" y=\"" << y + 1
      << "\" width=\"" << std::max(1.0, X(r.started_s + r.seconds) - X(r.started_s))
      << "\" height=\"" << std::max(1.0, row - 2) << "\" fill=\"" << fill << "\"><title>run "
      << r.index << ": " << Num(r.started_s) << " s to " << Num(r.started_s + r.seconds) << " s, "
      << HtmlEscape(r.outcome.empty() ? std::string("no outcome") : r.outcome)
      << (r.Violation().empty() ? "" : ", " + HtmlEscape(r.Violation()) + " failed")
      << "</title></rect>\n";
    if (row >= 12) {
      o << "<text x=\"" << left - 6 << "\" y=\"" << y + row - 2
        << "\" font-size=\"10\" text-anchor=\"end\">" << r.index << "</text>\n";
    }
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace

std::string RunRecord::Violation() const {
  for (const auto& i : invariants) {
    if (i.verdict == Verdict::kFail) return i.name;
  }
  return "";
}

nlohmann::json CampaignJson(const CampaignRecord& c) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& r : c.runs) {
    nlohmann::json inv = nlohmann::json::array();
    nlohmann::json failures = nlohmann::json::array();
    for (const auto& i : r.invariants) {
      inv.push_back(i.ToJson());
      if (i.verdict == Verdict::kFail) failures.push_back(i.name);
    }
    runs.push_back(
        {{"index", r.index},
         {"seed", c.seed},
         {"file", r.file},
         {"dir", r.dir},
         {"outcome", r.outcome},
         {"exit_code", r.exit_code},
         {"seconds", r.seconds},
         {"started_s", r.started_s},
         {"faults", FaultsJson(r.faults)},
         {"invariants", inv},
         {"invariant_failures", failures},
         {"stall_ms", r.stall_ms ? nlohmann::json(*r.stall_ms) : nlohmann::json()},
         {"sweep_value", r.sweep_value ? nlohmann::json(*r.sweep_value) : nlohmann::json()},
         {"error", r.error.empty() ? nlohmann::json() : nlohmann::json(r.error)}});
  }
  nlohmann::json shrink = nullptr;
  if (c.shrink) {
    const ShrinkRecord& s = *c.shrink;
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& st : s.result.steps) steps.push_back(st.ToJson());
    shrink = {{"from_index", s.from_index},
              {"invariant", s.invariant},
              {"confirmed", s.confirmed},
              {"confirm_runs", s.confirm_runs},
              {"candidates", s.result.asked},
              {"runs", s.runs},
              {"out_of_budget", s.result.out_of_budget},
              {"steps", steps},
              {"minimal", FaultsJson(s.result.minimal)},
              {"topology", s.topology ? TopologyJson(*s.topology) : nlohmann::json()},
              {"minimal_file", s.minimal_file},
              {"minimal_failed", s.minimal_failed},
              {"minimal_runs", s.minimal_runs}};
  }
  nlohmann::json unconfirmed = nlohmann::json::array();
  for (const auto& u : c.unconfirmed) {
    unconfirmed.push_back({{"index", u.from_index},
                           {"invariant", u.invariant},
                           {"failed", u.minimal_failed},
                           {"runs", u.minimal_runs}});
  }
  nlohmann::json sweep = nullptr;
  if (c.sweep) {
    sweep = {{"kind", c.sweep->kind},
             {"param", c.sweep->param},
             {"unit", c.sweep->Unit()},
             {"values", SweepValues(*c.sweep)}};
  }
  return {{"schema", kCampaignSchema},
          {"sweep", sweep},
          {"space", {{"file", c.space_file}, {"sha256", c.space_sha256}, {"name", c.space_name}}},
          {"ccl", c.ccl},
          {"version", c.version},
          {"worker", c.worker_sha256.empty() ? nlohmann::json()
                                             : nlohmann::json{{"source", c.worker_source},
                                                              {"sha256", c.worker_sha256}}},
          {"seed", c.seed},
          {"confirm", {{"k", c.confirm_k}, {"n", c.confirm_n}}},
          {"jobs", c.jobs},
          {"invariants", c.invariants_on},
          {"runs", runs},
          {"shrink", shrink},
          {"unconfirmed", unconfirmed},
          {"stop_reason", c.stop_reason},
          {"exit_code", c.exit_code},
          {"seconds", c.seconds}};
}

std::string CampaignHtml(const CampaignRecord& c) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    << "<title>faultline explore: " << HtmlEscape(c.space_name) << "</title>\n<style>"
    << "body{font-family:sans-serif;margin:1.5em;max-width:1400px}"
    << "table{border-collapse:collapse;margin:1em 0}"
    << "td,th{border:1px solid #bbb;padding:3px 8px;text-align:left;vertical-align:top}"
    << ".fail{background:#fdd}.pass{background:#dfd}.na{color:#777}"
    << "code,pre{font-size:90%}code{word-break:break-all}.scroll{overflow-x:auto}"
    << "</style></head><body>\n";
  o << "<h1>Campaign " << HtmlEscape(c.space_name) << "</h1>\n<p>space <code>"
    << HtmlEscape(c.space_file) << "</code> (sha256 <code>" << HtmlEscape(c.space_sha256)
    << "</code>), ccl " << HtmlEscape(c.ccl) << ", seed " << c.seed << ", " << c.runs.size()
    << " run(s) in " << Num(c.seconds) << " s"
    << (c.jobs > 1 ? ", up to " + std::to_string(c.jobs) + " at once" : std::string())
    << ", stopped: " << HtmlEscape(c.stop_reason) << ", exit code " << c.exit_code << ".</p>\n";
  if (!c.worker_sha256.empty()) {
    o << "<p>Every run's ranks ran <code>" << HtmlEscape(c.worker_source)
      << "</code> as copied at the start (sha256 <code>" << HtmlEscape(c.worker_sha256)
      << "</code>).</p>\n";
  }
  if (c.sweep) {
    std::vector<SweepPoint> pts;
    for (const auto& r : c.runs) {
      if (r.sweep_value)
        pts.push_back({*r.sweep_value, r.outcome, r.stall_ms, !r.Violation().empty()});
    }
    o << "<h2>Sweep of " << HtmlEscape(c.sweep->Label()) << "</h2>\n<p>Stall (report.json "
      << "stall_ms) of each run against the value: a dot survived, a square aborted cleanly, a "
      << "cross on the top edge hung or crashed (or has no stall), a ring violated an "
      << "invariant.</p>\n<div class=\"scroll\">" << SweepSvg(*c.sweep, pts) << "</div>\n";
  }
  if (!c.runs.empty()) {
    o << "<h2>Runs over time</h2>\n<p>Each run from its start to its end: green, every "
      << "invariant held; red, one failed; grey, it could not be run or judged. A gap after a red "
      << "run is the time spent confirming and shrinking it (below).</p>\n<div "
      << "class=\"scroll\">" << RunsTimelineSvg(c) << "</div>\n";
  }
  o << "<h2>Runs</h2>\n<div class=\"scroll\"><table><tr><th>index</th><th>file</th>"
    << (c.sweep ? "<th>" + HtmlEscape(c.sweep->Label()) + "</th><th>stall ms</th>" : "")
    << "<th>started s</th><th>seconds</th><th>outcome</th><th>faults</th>";
  for (const auto& n : c.invariants_on) o << "<th>" << HtmlEscape(n) << "</th>";
  o << "</tr>\n";
  for (const auto& r : c.runs) {
    o << "<tr" << (r.Violation().empty() && r.error.empty() ? "" : " class=\"fail\"") << "><td>"
      << r.index << "</td><td><code>" << HtmlEscape(r.file) << "</code></td><td>";
    if (c.sweep) {
      o << (r.sweep_value ? Num(*r.sweep_value, "%g") : "") << "</td><td>"
        << (r.stall_ms ? Num(*r.stall_ms) : "-") << "</td><td>";
    }
    o << Num(r.started_s) << "</td><td>" << Num(r.seconds) << "</td><td>" << HtmlEscape(r.outcome)
      << (r.error.empty() ? "" : "<br>" + HtmlEscape(r.error)) << "</td><td>";
    for (const auto& f : r.faults) o << HtmlEscape(Describe(f)) << "<br>";
    o << "</td>";
    for (const auto& n : c.invariants_on) {
      const InvariantResult* found = nullptr;
      for (const auto& i : r.invariants) {
        if (i.name == n) found = &i;
      }
      if (!found) {
        o << "<td class=\"na\">-</td>";
        continue;
      }
      const char* cls = found->verdict == Verdict::kFail   ? "fail"
                        : found->verdict == Verdict::kPass ? "pass"
                                                           : "na";
      o << "<td class=\"" << cls << "\">" << VerdictString(found->verdict);
      if (!found->detail.empty()) o << "<br><small>" << HtmlEscape(found->detail) << "</small>";
      o << "</td>";
    }
    o << "</tr>\n";
  }
  o << "</table></div>\n";
  for (const auto& u : c.unconfirmed) {
    o << "<p>Run " << u.from_index << ": " << HtmlEscape(u.invariant) << " failed " << u.minimal_failed
      << " of " << u.minimal_runs << " run(s), fewer than " << c.confirm_k
      << ": unconfirmed, not a violation.</p>\n";
  }
  if (c.shrink) {
    const ShrinkRecord& s = *c.shrink;
    o << "<h2>Shrinking run " << s.from_index << " (" << HtmlEscape(s.invariant) << ")</h2>\n"
      << "<p>original confirmed: " << (s.confirmed ? "yes" : "no") << "; " << s.result.asked
      << " candidate(s), " << s.runs << " run(s)"
      << (s.result.out_of_budget ? ", stopped by its budget" : "") << ". Minimal file <code>"
      << HtmlEscape(s.minimal_file) << "</code>, failed " << s.minimal_failed << " of "
      << s.minimal_runs
      << " run(s).</p>\n<div "
         "class=\"scroll\"><table><tr><th>#</th><th>candidate</th><th>faults</th>"
      << "<th>fails</th><th>kept</th></tr>\n";
    int n = 0;
    for (const auto& st : s.result.steps) {
      o << "<tr" << (st.accepted ? " class=\"pass\"" : "") << "><td>" << ++n << "</td><td>"
        << HtmlEscape(st.action) << "</td><td>";
      for (const auto& f : st.faults) o << HtmlEscape(Describe(f)) << "<br>";
      o << "</td><td>" << (st.failed ? "yes" : "no") << "</td><td>" << (st.accepted ? "yes" : "")
        << "</td></tr>\n";
    }
    o << "</table></div>\n";
    if (s.topology) {
      o << "<h3>Topology</h3>\n<ul>";
      for (const auto& st : s.topology->steps) {
        o << "<li>" << HtmlEscape(st.action) << " (" << HtmlEscape(st.shape.Describe())
          << "): " << (st.failed ? "still fails, kept" : "passes") << "</li>";
      }
      o << "</ul>\n<p>Minimal topology: " << HtmlEscape(s.topology->minimal.Describe())
        << (s.topology->out_of_budget ? " (stopped by its budget)" : "") << ".</p>\n";
    }
    o << "<h3>Minimal faults</h3>\n<pre>";
    for (const auto& f : s.result.minimal) o << HtmlEscape(Describe(f)) << "\n";
    o << "</pre>\n";
  }
  o << "</body></html>\n";
  return o.str();
}

std::string CampaignJunit(const CampaignRecord& c) {
  int tests = 0, failures = 0, errors = 0, skipped = 0;
  std::ostringstream cases;
  const std::string suite = "explore." + c.space_name;
  for (const auto& r : c.runs) {
    const std::string run = "run-" + std::to_string(r.index);
    if (!r.error.empty()) {
      ++tests;
      ++errors;
      cases << "  <testcase classname=\"" << XmlEscape(suite) << "\" name=\"" << XmlEscape(run)
            << "\" time=\"" << Num(r.seconds, "%.3f") << "\"><error message=\""
            << XmlEscape(r.error) << "\"/></testcase>\n";
      continue;
    }
    const ShrinkRecord* flaky = nullptr;
    for (const auto& u : c.unconfirmed) {
      if (u.from_index == r.index) flaky = &u;
    }
    for (const auto& i : r.invariants) {
      ++tests;
      cases << "  <testcase classname=\"" << XmlEscape(suite) << "\" name=\""
            << XmlEscape(run + "." + i.name) << "\" time=\"0\">";
      if (i.verdict == Verdict::kFail && flaky && flaky->invariant == i.name) {
        ++skipped;
        cases << "<skipped message=\""
              << XmlEscape("unconfirmed: failed " + std::to_string(flaky->minimal_failed) +
                           " of " + std::to_string(flaky->minimal_runs) + " run(s): " + i.detail)
              << "\"/>";
      } else if (i.verdict == Verdict::kFail) {
        ++failures;
        cases << "<failure message=\"" << XmlEscape(i.detail) << "\">"
              << reports::XmlText(r.file) << "</failure>";
      } else if (i.verdict == Verdict::kNotApplicable) {
        ++skipped;
        cases << "<skipped message=\"" << XmlEscape(i.detail) << "\"/>";
      }
      cases << "</testcase>\n";
    }
  }
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n <testsuite name=\""
    << XmlEscape(suite) << "\" tests=\"" << tests << "\" failures=\"" << failures
    << "\" errors=\"" << errors << "\" skipped=\"" << skipped << "\" time=\""
    << Num(c.seconds, "%.3f") << "\">\n"
    << cases.str() << " </testsuite>\n</testsuites>\n";
  return o.str();
}

}  // namespace faultline::runner::explore
