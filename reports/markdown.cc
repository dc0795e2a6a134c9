#include "reports/markdown.h"

#include "reports/metric_table.h"
#include "reports/text.h"
#include "reports/verdict.h"

namespace faultline::reports {
namespace {

std::string Str(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key)) return "";
  return FormatValue(obj[key]);
}

std::string Cell(const nlohmann::json& v) {
  return v.is_null() ? std::string("—") : MarkdownCell(FormatValue(v));
}

}  // namespace

std::string MarkdownSummary(const RunData& run) {
  const nlohmann::json& r = run.report;
  const nlohmann::json& sc = r.at("scenario");
  std::string out = "## faultline: " + MarkdownCell(Str(sc, "name")) + " — **" +
                    VerdictName(VerdictOf(r)) + "**\n\n";
  out += MarkdownCell(VerdictLine(r)) + "\n\n";
  std::vector<std::string> why = HarnessErrors(r);
  for (const auto& f : FailedExpectations(r)) why.push_back(f);
  if (auto u = UnexpectedOutcome(r)) why.push_back(*u);
  for (const auto& w : why) out += "- " + MarkdownCell(w) + "\n";
  if (!why.empty()) out += "\n";

  out += "| run | |\n|---|---|\n";
  out += "| scenario | " + MarkdownCell(Str(sc, "name")) + " |\n";
  out += "| file | `" + MarkdownCell(Str(sc, "file")) + "` |\n";
  out += "| sha256 | `" + MarkdownCell(Str(sc, "sha256")) + "` |\n";
  out += "| seed | " + MarkdownCell(Str(sc, "seed")) + " |\n";
  out += "| ccl | " + MarkdownCell(Str(r, "ccl")) + " |\n";
  if (r.contains("policy")) out += "| policy | " + MarkdownCell(Str(r, "policy")) + " |\n";
  out += "| outcome | " + MarkdownCell(Str(r, "outcome")) + " |\n";
  for (const auto& s : r.value("shrinks", nlohmann::json::array())) {
    out += "| shrink | left out " + MarkdownCell(FormatValue(s.value("excluded", nlohmann::json()))) +
           ", group of " + MarkdownCell(FormatValue(s.value("group", nlohmann::json()))) + " in " +
           MarkdownCell(FormatValue(s.value("duration_ms", nlohmann::json()))) + " ms" +
           (s.value("ok", false) ? "" : " (failed)") + " |\n";
  }
  for (const auto& g : r.value("grows", nlohmann::json::array())) {
    out += "| grow | rejoined " + MarkdownCell(FormatValue(g.value("joined", nlohmann::json()))) +
           ", group of " + MarkdownCell(FormatValue(g.value("group", nlohmann::json()))) +
           "; stall " + MarkdownCell(FormatValue(g.value("stall_ms", nlohmann::json()))) +
           " ms, repair to full size " +
           MarkdownCell(FormatValue(g.value("repair_to_full_ms", nlohmann::json()))) + " ms" +
           (g.value("ok", false) ? "" : " (failed)") + " |\n";
  }
  if (r.contains("correctness") && r["correctness"].is_object()) {
    const auto& c = r["correctness"];
    out += "| wrong results | " +
           (c.value("wrong", nlohmann::json()).is_null() ? std::string("not checked")
                                                         : MarkdownCell(Str(c, "wrong"))) +
           " |\n";
  }
  out += "| completed collectives | " + std::to_string(run.series.size()) + " |\n";
  for (const auto& [label, text] : TrainingFacts(r)) {
    out += "| " + MarkdownCell(label) + " | " + MarkdownCell(text) + " |\n";
  }
  if (r.contains("environment") && r["environment"].is_object()) {
    const auto& env = r["environment"];
    if (env.contains("kernel")) out += "| kernel | " + MarkdownCell(Str(env, "kernel")) + " |\n";
    if (env.contains("versions") && env["versions"].is_object()) {
      for (const auto& [k, v] : env["versions"].items()) {
        out += "| " + MarkdownCell(k) + " version | " + Cell(v) + " |\n";
      }
    }
    if (env.contains("knobs") && env["knobs"].is_object()) {
      for (const auto& [k, v] : env["knobs"].items()) {
        out += "| " + MarkdownCell(k) + " | " + Cell(v) + " |\n";
      }
    }
  }

  out += "\n### Expectations\n\n";
  if (r.at("expectations").empty()) {
    out += "The scenario sets no expectation.\n";
  } else {
    out += "| expectation | limit | measured | result |\n|---|---|---:|---|\n";
    for (const auto& e : r.at("expectations")) {
      out += "| " + MarkdownCell(Str(e, "name")) + " | " +
             MarkdownCell(FormatLimit(e.value("limit", nlohmann::json()))) + " | " +
             Cell(e.value("value", nlohmann::json())) + " | " +
             (e.value("pass", false) ? "PASS" : "**FAIL**") + " |\n";
    }
  }

  out += "\n### Faults and per-fault metrics\n\n";
  if (r.at("faults").empty()) {
    out += "No fault was scheduled (a fault-free run).\n";
  } else {
    out += "| fault | type | target | applied s | reverted s |";
    std::string sep = "|---|---|---|---:|---:|";
    for (const auto& k : kMetricTable) {
      out.append(" ").append(k.name).append(" |");
      sep += "---:|";
    }
    out += "\n" + sep + "\n";
    for (const auto& f : r.at("faults")) {
      const std::string id = Str(f, "id");
      nlohmann::json pf = nlohmann::json::object();
      for (const auto& p : r.at("per_fault")) {
        if (p.is_object() && Str(p, "id") == id) pf = p;
      }
      out += "| " + MarkdownCell(id) + " | " + MarkdownCell(Str(f, "type")) + " | " +
             MarkdownCell(FormatTarget(f.value("target", nlohmann::json()))) + " | " +
             Cell(f.value("applied_s", nlohmann::json())) + " | " +
             Cell(f.value("reverted_s", nlohmann::json())) + " |";
      const bool never = pf.value("never_converged", false) == true;
      for (const auto& k : kMetricTable) {
        out.append(" ")
            .append(never && std::string(k.name) == kFailoverLatencyMs
                        ? std::string("**never**")
                        : Cell(pf.value(k.name, nlohmann::json())))
            .append(" |");
      }
      out += "\n";
    }
    for (const auto& f : r.at("faults")) {
      if (const std::string played = FormatCycles(f); !played.empty()) {
        out += "\n" + MarkdownCell(Str(f, "id")) + ": " + MarkdownCell(played) + "\n";
      }
    }
  }

  out += "\n### Overall metrics\n\n| metric | value |\n|---|---:|\n";
  for (const auto& k : kMetricTable) {
    const nlohmann::json v = r.at("metrics").value(k.name, nlohmann::json());
    out += "| " + std::string(k.name) + " | " + Cell(v) +
           (v.is_null() || *k.unit == '\0' ? "" : std::string(" ") + k.unit) + " |\n";
  }
  out += "\n— means null: the metric does not apply or could not be measured; **never**: the "
         "fault's affected traffic never fully converged within the run. failover_first_ms is "
         "first-path convergence, failover_latency_ms full convergence (RFC 6412).\n";
  return out;
}

}  // namespace faultline::reports
