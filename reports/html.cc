#include "reports/html.h"

#include "reports/metric_table.h"
#include "reports/svg_plot.h"
#include "reports/text.h"
#include "reports/verdict.h"

namespace faultline::reports {
namespace {

constexpr char kStyle[] = R"css(
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:0 auto;max-width:1000px;padding:16px;color:#222}
h1{margin:0;font-size:28px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.verdict{padding:14px 18px;border-radius:6px;color:#fff}
.verdict-pass{background:#1b7f3b}.verdict-fail{background:#b3261e}.verdict-harness{background:#8a5a00}
.verdict p{margin:6px 0 0}.verdict ul{margin:6px 0 0;padding-left:20px}
table{border-collapse:collapse;font-size:13px;margin:4px 0}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.null{color:#888;text-align:center}
td.observed{font-family:monospace;font-size:11px;max-width:420px;word-break:break-all}
td.pass{color:#1b7f3b;font-weight:bold}td.fail{color:#b3261e;font-weight:bold}
pre{background:#f7f7f7;border:1px solid #ddd;padding:8px;overflow:auto;font-size:12px}
.note{background:#fff8e1;border-left:4px solid #f0b400;padding:6px 10px;font-size:13px}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.swatch{display:inline-block;width:14px;height:10px;margin-right:4px;vertical-align:middle}
svg{max-width:100%;height:auto;border:1px solid #ddd}
footer{margin-top:30px;font-size:11px;color:#777}
)css";

std::string Str(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key)) return "";
  return FormatValue(obj[key]);
}

std::string Cell(const nlohmann::json& v) {
  if (v.is_null()) return "<td class=\"null\" title=\"null: does not apply or was not measured\">&#8212;</td>";
  if (v.is_number()) return "<td class=\"num\">" + HtmlText(FormatValue(v)) + "</td>";
  return "<td>" + HtmlText(FormatValue(v)) + "</td>";
}

std::string Row(const std::string& key, const std::string& value) {
  return "<tr><th>" + HtmlText(key) + "</th><td>" + HtmlText(value) + "</td></tr>";
}

std::string VerdictHeader(const nlohmann::json& r) {
  const Verdict v = VerdictOf(r);
  const char* cls = v == Verdict::kPass ? "verdict-pass" : v == Verdict::kFail ? "verdict-fail" : "verdict-harness";
  std::string out = "<header id=\"verdict\" class=\"verdict " + std::string(cls) + "\"><h1>" +
                    VerdictName(v) + "</h1><p>" + HtmlText(VerdictLine(r)) + "</p>";
  std::vector<std::string> why = HarnessErrors(r);
  for (const auto& f : FailedExpectations(r)) why.push_back(f);
  if (auto u = UnexpectedOutcome(r)) why.push_back(*u);
  if (!why.empty()) {
    out += "<ul>";
    for (const auto& w : why) out += "<li>" + HtmlText(w) + "</li>";
    out += "</ul>";
  }
  return out + "</header>";
}

std::string Facts(const RunData& run) {
  const nlohmann::json& r = run.report;
  const nlohmann::json& sc = r.at("scenario");
  std::string out = "<section id=\"run\"><h2>Run</h2><table>";
  out += Row("scenario", Str(sc, "name"));
  out += Row("file", Str(sc, "file"));
  out += Row("sha256", Str(sc, "sha256"));
  out += Row("seed", Str(sc, "seed"));
  out += Row("ccl", Str(r, "ccl"));
  if (r.contains("policy")) out += Row("policy", Str(r, "policy"));
  out += Row("outcome", Str(r, "outcome"));
  if (r.contains("correctness") && r["correctness"].is_object()) {
    const auto& c = r["correctness"];
    out += Row("results checked", Str(c, "checked"));
    out += Row("wrong results", c.value("wrong", nlohmann::json()).is_null()
                                    ? std::string("not checked")
                                    : Str(c, "wrong"));
  }
  out += Row("completed collectives", std::to_string(run.series.size()));
  for (const auto& [label, text] : TrainingFacts(r)) out += Row(label, text);
  if (!run.series.empty()) {
    out += Row("collective size", std::to_string(run.series.front().bytes) + " bytes");
  }
  return out + "</table></section>";
}

std::string Throughput(const RunData& run) {
  std::string out = "<section id=\"throughput\"><h2>Bus bandwidth over time</h2>";
  out += BusbwPlotSvg(run);
  out +=
      "<div class=\"legend\">"
      "<span><i class=\"swatch\" style=\"background:#1a4f8b\"></i>busbw per collective</span>"
      "<span><i class=\"swatch\" style=\"background:#666\"></i>baseline (dashed)</span>"
      "<span><i class=\"swatch\" style=\"background:#f29d38;opacity:.5\"></i>fault applied &#8594; "
      "reverted</span>";
  bool cycles = false;
  for (const auto& f : run.report.at("faults")) cycles |= !FormatCycles(f).empty();
  if (cycles) {
    out +=
        "<span><i class=\"swatch\" style=\"background:#e07b00;opacity:.6\"></i>a flap's "
        "downs, as played</span>";
  }
  out +=
      "<span><i class=\"swatch\" style=\"background:#1f6fd1\"></i>D detection</span>"
      "<span><i class=\"swatch\" style=\"background:#d17a00\"></i>P first path</span>"
      "<span><i class=\"swatch\" style=\"background:#8e3fc0\"></i>F failover (full "
      "convergence)</span>"
      "<span><i class=\"swatch\" style=\"background:#1b8a3a\"></i>R recovery</span></div>";
  size_t not_applied = 0;
  for (const auto& f : run.report.at("faults")) {
    if (f.is_object() && !f.value("applied_s", nlohmann::json()).is_number()) ++not_applied;
  }
  if (not_applied > 0) {
    out += "<p class=\"note\">" + std::to_string(not_applied) +
           " fault(s) were never applied and have no band; see the fault table.</p>";
  }
  return out + "</section>";
}

// per_fault[].rails as one table: the port's throughput (max of tx and rx) before, during
// and after each fault.
std::string RailWindowTable(const nlohmann::json& r) {
  std::string rows;
  for (const auto& pf : r.at("per_fault")) {
    if (!pf.is_object() || !pf.contains("rails") || !pf["rails"].is_array()) continue;
    for (const auto& w : pf["rails"]) {
      std::string port = "h";  // appended (GCC 12 warns falsely on "h" + string at -O3)
      port.append(Str(w, "host"));
      if (w.contains("rank")) port.append(" n").append(Str(w, "rank"));
      port.append(" r").append(Str(w, "rail"));
      rows += "<tr><td>" + HtmlText(Str(pf, "id")) + "</td><td>" + HtmlText(port) + "</td>" +
              Cell(w.value("before_gbps", nlohmann::json())) +
              Cell(w.value("during_gbps", nlohmann::json())) +
              Cell(w.value("after_gbps", nlohmann::json())) + "</tr>";
    }
  }
  if (rows.empty()) return "";
  return "<table id=\"rail-window-table\"><tr><th>fault</th><th>port</th><th>before Gbit/s</th>"
         "<th>during Gbit/s</th><th>after Gbit/s</th></tr>" + rows +
         "</table><p>Per port, the busier direction's average (max of tx and rx): before = the "
         "baseline window after warm-up, during = applied &#8594; reverted, after = reverted + "
         "1 s &#8594; the next fault or the end.</p>";
}

std::string Rails(const RunData& run) {
  std::string out = "<section id=\"rails\"><h2>Rails</h2>";
  if (run.rails && !run.rails->columns.empty()) {
    out += "<p>Throughput of every rail port from the kernel's interface counters, sampled by "
           "the runner for any CCL (rails.csv; tx = sent by the host's port, solid; rx = "
           "received, dashed), with the faults shaded (darker: the fault targets this host).</p>";
    for (int h : RailHosts(run)) out += RailThroughputSvg(run, h);
    out += RailWindowTable(run.report);
  } else {
    const nlohmann::json note = run.report.value("rails", nlohmann::json());
    std::string why = "rails.csv is not in the run directory";
    if (note.is_object() && note.contains("errors")) why += " (sampling failed: " + FormatValue(note["errors"]) + ")";
    out += "<p class=\"note\" id=\"per-rail-note\">Per-rail throughput is not recorded for "
           "this run: " + HtmlText(why) + ".</p>";
  }
  out += "<h3>Path state reported by the CCL</h3>";
  if (run.events.empty()) {
    out += "<p class=\"note\">No CCL path events were recorded in this run (the CCL emits "
           "none, or no path changed state).</p>";
  }
  if (RailCount(run) > 0) {
    out += RailPlotSvg(run);
  } else {
    out += "<p class=\"note\">The number of rails is not recorded in this report.</p>";
  }
  return out + "</section>";
}

// Policy shrink: each shrink of the group, with who was left out and how long it took.
std::string ShrinkTable(const nlohmann::json& r) {
  const nlohmann::json shrinks = r.value("shrinks", nlohmann::json::array());
  if (!shrinks.is_array() || shrinks.empty()) return "";
  std::string out = "<section id=\"shrinks\"><h2>Shrinks (policy shrink)</h2>"
                    "<table id=\"shrink-table\"><tr><th>left out</th><th>group</th>"
                    "<th>ranks</th><th>start s</th><th>duration ms</th><th>slowest rank ms</th>"
                    "<th>ok</th></tr>";
  for (const auto& s : shrinks) {
    out += "<tr><td>" + HtmlText(FormatValue(s.value("excluded", nlohmann::json()))) + "</td><td>" +
           HtmlText(FormatValue(s.value("group", nlohmann::json()))) + "</td><td>" +
           HtmlText(FormatValue(s.value("ranks", nlohmann::json()))) + "</td><td>" +
           HtmlText(FormatValue(s.value("start_s", nlohmann::json()))) + "</td><td>" +
           HtmlText(FormatValue(s.value("duration_ms", nlohmann::json()))) + "</td><td>" +
           HtmlText(FormatValue(s.value("slowest_rank_ms", nlohmann::json()))) + "</td><td>" +
           HtmlText(FormatValue(s.value("ok", nlohmann::json()))) + "</td></tr>";
  }
  return out + "</table><p class=\"note\">From the first surviving rank starting the shrink to "
               "the last one done (events.jsonl has each rank's).</p></section>";
}

// A report.json key as a table heading that may wrap after each '_' (a 12-column table of
// snake_case keys is otherwise wider than the page).
std::string Heading(std::string_view key) {
  std::string out;
  size_t from = 0;
  for (size_t i = 0; i < key.size(); ++i) {
    if (key[i] == '_') {
      out += HtmlText(key.substr(from, i + 1 - from)) + "<wbr>";
      from = i + 1;
    }
  }
  return out + HtmlText(key.substr(from));
}

std::string FaultTable(const nlohmann::json& r) {
  std::string out = "<section id=\"faults\"><h2>Faults and per-fault metrics</h2>";
  if (r.at("faults").empty()) return out + "<p>No fault was scheduled (a fault-free run).</p></section>";
  out += "<table id=\"fault-table\"><tr><th>id</th><th>type</th><th>target</th><th>scheduled s</th>"
         "<th>applied s</th><th>reverted s</th><th>observed (read back from the kernel)</th></tr>";
  for (const auto& f : r.at("faults")) {
    const std::string id = Str(f, "id");
    out += "<tr data-fault=\"" + HtmlEscape(id) + "\"><td>" + HtmlText(id) + "</td><td>" +
           HtmlText(Str(f, "type")) + "</td><td>" +
           HtmlText(FormatTarget(f.value("target", nlohmann::json()))) + "</td>";
    out += Cell(f.value("scheduled_s", nlohmann::json()));
    out += Cell(f.value("applied_s", nlohmann::json()));
    out += Cell(f.value("reverted_s", nlohmann::json()));
    const nlohmann::json observed = f.value("observed", nlohmann::json());
    out += observed.is_structured() ? "<td class=\"observed\">" + HtmlText(observed.dump()) + "</td>"
                                    : Cell(observed);
    out += "</tr>";
    if (const std::string played = FormatCycles(f); !played.empty()) {
      out += "<tr class=\"cycles\"><td></td><td colspan=\"6\">" + HtmlText(played) + "</td></tr>";
    }
    if (f.contains("error") && !f["error"].is_null()) {
      out += "<tr><td></td><td colspan=\"6\" class=\"fail\">error: " + HtmlText(Str(f, "error")) +
             "</td></tr>";
    }
  }
  out += "</table><table id=\"per-fault-table\"><tr><th>fault</th>";
  for (const auto& k : kMetricTable) out += "<th>" + Heading(k.name) + "</th>";
  out += "<th>" + Heading("progress_ms") + "</th><th>convergence from</th><th>affected flows</th></tr>";
  for (const auto& f : r.at("faults")) {
    const std::string id = Str(f, "id");
    nlohmann::json pf = nlohmann::json::object();
    for (const auto& p : r.at("per_fault")) {
      if (p.is_object() && Str(p, "id") == id) pf = p;
    }
    out += "<tr data-fault=\"" + HtmlEscape(id) + "\"><td>" + HtmlText(id) + "</td>";
    const bool never = pf.value("never_converged", false) == true;
    for (const auto& k : kMetricTable) {
      out += never && std::string(k.name) == kFailoverLatencyMs
                 ? "<td class=\"fail never\">never</td>"
                 : Cell(pf.value(k.name, nlohmann::json()));
    }
    out += Cell(pf.value("progress_ms", nlohmann::json()));
    const nlohmann::json from = pf.value("convergence", nlohmann::json());
    out += from.is_string() ? "<td>" + Heading(from.get<std::string>()) + "</td>" : Cell(from);
    int counted = 0, total = 0;
    if (pf.contains("flows") && pf["flows"].is_array()) {
      for (const auto& fl : pf["flows"]) {
        ++total;
        if (fl.is_object() && fl.value("counted", false) == true) ++counted;
      }
    }
    out += pf.contains("flows") ? "<td>" + std::to_string(counted) + " of " +
                                      std::to_string(total) + " reported down</td>"
                                : Cell(nlohmann::json());
    out += "</tr>";
  }
  return out + "</table><p>Null (&#8212;): the metric does not apply to the fault or could not "
               "be measured; no value is made up. failover_first_ms: the first affected flow "
               "carries data again; failover_latency_ms: full convergence (RFC 6412), the last "
               "one does; progress_ms: every rank behind the target completed a collective it "
               "started after the fault (the same rule for every library). A flow reported down "
               "that a collective did without while the fault held is idle and not counted."
               "</p></section>";
}

std::string MetricsTable(const nlohmann::json& r) {
  std::string out = "<section id=\"metrics\"><h2>Overall metrics</h2><table><tr><th>metric</th><th>value</th><th>unit</th></tr>";
  for (const auto& k : kMetricTable) {
    out += "<tr><th>" + std::string(k.name) + "</th>" +
           Cell(r.at("metrics").value(k.name, nlohmann::json())) + "<td>" + k.unit + "</td></tr>";
  }
  return out + "</table></section>";
}

std::string Expectations(const nlohmann::json& r) {
  std::string out = "<section id=\"expectations\"><h2>Expectations</h2>";
  if (r.at("expectations").empty()) return out + "<p>The scenario sets no expectation.</p></section>";
  out += "<table id=\"expectation-table\"><tr><th>expectation</th><th>limit</th><th>measured</th><th>result</th></tr>";
  for (const auto& e : r.at("expectations")) {
    const bool pass = e.value("pass", false);
    out += "<tr><td>" + HtmlText(Str(e, "name")) + "</td><td>" +
           HtmlText(FormatLimit(e.value("limit", nlohmann::json()))) + "</td>" +
           Cell(e.value("value", nlohmann::json())) + "<td class=\"" + (pass ? "pass" : "fail") +
           "\">" + (pass ? "PASS" : "FAIL") + "</td></tr>";
  }
  return out + "</table></section>";
}

std::string Scenario(const RunData& run) {
  std::string out = "<section id=\"scenario\"><h2>Scenario file</h2>";
  if (!run.scenario_text) return out + "<p class=\"note\">scenario.yaml is not in the run directory.</p></section>";
  return out + "<pre>" + HtmlText(*run.scenario_text) + "</pre></section>";
}

std::string Environment(const nlohmann::json& r) {
  std::string out = "<section id=\"environment\"><h2>Environment</h2>";
  const nlohmann::json env = r.value("environment", nlohmann::json::object());
  if (!env.is_object() || env.empty()) return out + "<p>Not recorded.</p></section>";
  out += "<table>";
  for (const auto& [k, v] : env.items()) {
    if (k == "topology") continue;
    if (v.is_object()) {
      for (const auto& [k2, v2] : v.items()) out += Row(k + "." + k2, FormatValue(v2));
    } else {
      out += Row(k, FormatValue(v));
    }
  }
  out += "</table>";
  if (env.contains("topology") && !env["topology"].is_null()) {
    out += "<details><summary>topology</summary><pre>" + HtmlText(env["topology"].dump(2)) +
           "</pre></details>";
  }
  return out + "</section>";
}

}  // namespace

std::string HtmlReport(const RunData& run) {
  const nlohmann::json& r = run.report;
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" +
      HtmlText(std::string(VerdictName(VerdictOf(r))) + " - " + Str(r.at("scenario"), "name") +
               " - faultline") +
      "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  out += VerdictHeader(r) + "\n";
  out += Facts(run) + "\n";
  out += Throughput(run) + "\n";
  out += Rails(run) + "\n";
  out += FaultTable(r) + "\n";
  out += ShrinkTable(r) + "\n";
  out += MetricsTable(r) + "\n";
  out += Expectations(r) + "\n";
  out += Scenario(run) + "\n";
  out += Environment(r) + "\n";
  if (!run.notes.empty()) {
    out += "<section id=\"notes\"><h2>Missing inputs</h2><ul>";
    for (const auto& n : run.notes) out += "<li>" + HtmlText(n) + "</li>";
    out += "</ul></section>\n";
  }
  out += "<footer>faultline report, schema " + HtmlText(Str(r, "schema")) + "</footer>\n</body>\n</html>\n";
  return out;
}

}  // namespace faultline::reports
