#include "runner/sim/sim_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "reports/markdown_html.h"
#include "reports/text.h"

namespace faultline::sim {
namespace {

std::string Num(double v, const char* fmt = "%.4g") {
  if (!std::isfinite(v)) return v > 0 ? "inf" : "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

double Get(const nlohmann::json& j, const char* a, const char* b = nullptr) {
  const nlohmann::json* p = &j;
  if (!p->contains(a)) return std::nan("");
  p = &(*p)[a];
  if (b != nullptr) {
    if (!p->contains(b)) return std::nan("");
    p = &(*p)[b];
  }
  return p->is_number() ? p->get<double>() : std::nan("");
}

std::string CiText(const nlohmann::json& v) {
  if (!v.is_object() || !v.contains("ci95")) return "unpriced";
  return Num(v["mean"].get<double>()) + " [" + Num(v["ci95"][0].get<double>()) + ", " +
         Num(v["ci95"][1].get<double>()) + "]";
}

// The policies of a scale in their order (fail_stop, failover, adaptive), not the JSON's.
std::vector<std::pair<std::string, const nlohmann::json*>> Ordered(const nlohmann::json& pol) {
  std::vector<std::pair<std::string, const nlohmann::json*>> out;
  for (int i = 0; i < kNumPolicies; ++i) {
    const char* name = PolicyName(static_cast<Policy>(i));
    if (pol.contains(name)) out.emplace_back(name, &pol[name]);
  }
  return out;
}

const char* kColors[] = {"#b03a2e", "#1a4f8b", "#2e8b57", "#8e44ad", "#d68910", "#555"};

// Lost GPU-hours vs GPUs, one line per policy, log-log.
std::string ScalePlot(const nlohmann::json& sim) {
  const auto& scales = sim["scales"];
  const double w = 640, h = 310, l = 70, r = 140, t = 30, b = 40;
  double xmin = 1e300, xmax = 0, ymin = 1e300, ymax = 0;
  for (const auto& s : scales) {
    xmin = std::min(xmin, s["gpus"].get<double>());
    xmax = std::max(xmax, s["gpus"].get<double>());
    for (const auto& [name, p] : s["policies"].items()) {
      const double y = Get(p, "gpu_hours_lost", "mean");
      if (y > 0) {
        ymin = std::min(ymin, y);
        ymax = std::max(ymax, y);
      }
    }
  }
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Num(w, "%.0f") +
                    "\" height=\"" + Num(h, "%.0f") + "\" role=\"img\" aria-label=\"lost GPU-hours vs scale\">";
  if (ymax <= 0 || xmax <= 0) return svg + "<text x=\"10\" y=\"20\">no loss to plot</text></svg>";
  // One scale simulated: its points sit in the middle of a decade (a marker each, no curve).
  const bool one_scale = xmax == xmin;
  if (one_scale) {
    xmin /= std::sqrt(10.0);
    xmax *= std::sqrt(10.0);
  }
  if (ymax == ymin) ymax = ymin * 10;
  const double lx0 = std::log10(xmin), lx1 = std::log10(xmax);
  const double ly0 = std::floor(std::log10(ymin)), ly1 = std::ceil(std::log10(ymax));
  auto X = [&](double x) { return l + (std::log10(x) - lx0) / (lx1 - lx0) * (w - l - r); };
  auto Y = [&](double y) { return h - b - (std::log10(y) - ly0) / (ly1 - ly0) * (h - t - b); };
  svg += "<line x1=\"" + Num(l) + "\" y1=\"" + Num(h - b) + "\" x2=\"" + Num(w - r) + "\" y2=\"" +
         Num(h - b) + "\" stroke=\"#333\"/>";
  svg += "<line x1=\"" + Num(l) + "\" y1=\"" + Num(t) + "\" x2=\"" + Num(l) + "\" y2=\"" +
         Num(h - b) + "\" stroke=\"#333\"/>";
  for (double e = ly0; e <= ly1; e += 1) {
    svg += "<text x=\"" + Num(l - 5) + "\" y=\"" + Num(Y(std::pow(10, e)) + 4) +
           "\" text-anchor=\"end\" font-size=\"11\">1e" + Num(e, "%.0f") + "</text>";
  }
  for (const auto& s : scales) {
    const double g = s["gpus"].get<double>();
    svg += "<text x=\"" + Num(X(g)) + "\" y=\"" + Num(h - b + 16) +
           "\" text-anchor=\"middle\" font-size=\"11\">" + Num(g, "%.0f") + "</text>";
  }
  svg += "<text x=\"" + Num((l + w - r) / 2) + "\" y=\"" + Num(h - 6) +
         "\" text-anchor=\"middle\" font-size=\"12\">GPUs</text>";
  svg += "<text x=\"" + Num(l + 6) + "\" y=\"" + Num(t - 6) + "\" font-size=\"12\">GPU-h lost</text>";
  int i = 0;
  for (const auto& [name, unused] : Ordered(scales[0]["policies"])) {
    std::string pts;
    for (const auto& s : scales) {
      const double y = Get(s["policies"][name], "gpu_hours_lost", "mean");
      if (y > 0) pts += Num(X(s["gpus"].get<double>())) + "," + Num(Y(y)) + " ";
    }
    const char* color = kColors[i % 6];
    for (const auto& s : scales) {
      const double y = Get(s["policies"][name], "gpu_hours_lost", "mean");
      if (y > 0) {
        svg += "<circle class=\"point\" cx=\"" + Num(X(s["gpus"].get<double>())) + "\" cy=\"" +
               Num(Y(y)) + "\" r=\"3.5\" fill=\"" + color + "\"/>";
      }
    }
    svg += "<polyline fill=\"none\" stroke=\"" + std::string(color) +
           "\" stroke-width=\"2\" points=\"" + pts + "\"/>";
    svg += "<text x=\"" + Num(w - r + 8) + "\" y=\"" + Num(t + 14 + 16 * i) + "\" fill=\"" +
           color + "\" font-size=\"12\">" + reports::HtmlText(name) + "</text>";
    ++i;
  }
  if (one_scale) {
    svg += "<text x=\"" + Num(l + 6) + "\" y=\"" + Num(h - b - 8) +
           "\" font-size=\"11\" fill=\"#555\">one scale simulated: a point per policy</text>";
  }
  return svg + "</svg>";
}

// Lost GPU-hours by cause at the first scale, one stacked bar per policy.
std::string BreakdownPlot(const nlohmann::json& sim) {
  const auto& pol = sim["scales"][0]["policies"];
  const double w = 640, h = 60 + 40.0 * static_cast<double>(pol.size()), l = 90, r = 20;
  double max = 0;
  for (const auto& [name, pp] : Ordered(pol)) {
    const nlohmann::json& p = *pp;
    double sum = 0;
    for (const auto& [k, v] : p["breakdown_gpu_hours"].items()) sum += v.get<double>();
    max = std::max(max, sum);
  }
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Num(w, "%.0f") +
                    "\" height=\"" + Num(h, "%.0f") + "\" role=\"img\" aria-label=\"cost breakdown\">";
  if (max <= 0) return svg + "<text x=\"10\" y=\"20\">no loss</text></svg>";
  int row = 0;
  std::vector<std::string> causes;
  for (const auto& [name, pp] : Ordered(pol)) {
    const nlohmann::json& p = *pp;
    double x = l;
    int ci = 0;
    for (const auto& [k, v] : p["breakdown_gpu_hours"].items()) {
      if (row == 0) causes.push_back(k);
      const double bw = v.get<double>() / max * (w - l - r);
      svg += "<rect x=\"" + Num(x) + "\" y=\"" + Num(10 + 40.0 * row) + "\" width=\"" +
             Num(std::max(0.0, bw)) + "\" height=\"24\" fill=\"" + kColors[ci % 6] +
             "\"><title>" + reports::HtmlText(k) + ": " + Num(v.get<double>()) +
             " GPU-h</title></rect>";
      x += bw;
      ++ci;
    }
    svg += "<text x=\"" + Num(l - 6) + "\" y=\"" + Num(27 + 40.0 * row) +
           "\" text-anchor=\"end\" font-size=\"12\">" + reports::HtmlText(name) + "</text>";
    ++row;
  }
  double x = l;
  for (size_t i = 0; i < causes.size(); ++i) {
    svg += "<rect x=\"" + Num(x) + "\" y=\"" + Num(h - 22) + "\" width=\"10\" height=\"10\" fill=\"" +
           kColors[i % 6] + "\"/><text x=\"" + Num(x + 14) + "\" y=\"" + Num(h - 13) +
           "\" font-size=\"11\">" + reports::HtmlText(causes[i]) + "</text>";
    x += 90;
  }
  return svg + "</svg>";
}

}  // namespace

nlohmann::json SimulationJson(const SimConfig& c, const std::vector<ScaleResult>& scales,
                              int seeds, const Calibration* cal, const std::string& cal_file,
                              const std::string& command) {
  nlohmann::json out;
  out["schema"] = kSimulationSchema;
  out["command"] = command;
  out["seeds"] = seeds;
  out["inputs"] = c.ToJson();
  if (cal != nullptr) {
    nlohmann::json es = nlohmann::json::array();
    for (const auto& e : cal->entries) {
      if (e.ccl != c.ccl) continue;
      es.push_back({{"kind", e.kind},
                    {"policy", e.policy},
                    {"faults", e.samples.size()},
                    {"survived", e.Survived()}});
    }
    out["calibration"] = {{"file", cal_file},
                          {"ccl", c.ccl},
                          {"reports", cal->sources.size()},
                          {"entries", std::move(es)}};
  } else {
    out["calibration"] = nullptr;
  }
  nlohmann::json js = nlohmann::json::array();
  for (const auto& s : scales) {
    nlohmann::json pol = nlohmann::json::object();
    for (const auto& p : s.policies) {
      nlohmann::json b = nlohmann::json::object();
      for (const auto& [k, v] : p.breakdown) b[k] = v;
      const bool priced = p.unpriced.empty();
      nlohmann::json actions = nlohmann::json::object();
      for (const auto& [k, v] : p.actions) actions[k] = v;
      pol[PolicyName(p.policy)] = {
          {"gpu_hours_lost", priced ? p.gpu_hours_lost.ToJson() : nlohmann::json(nullptr)},
          {"effective_training_time_ratio",
           priced ? p.effective_ratio.ToJson() : nlohmann::json(nullptr)},
          {"unpriced", priced ? nlohmann::json(nullptr) : nlohmann::json(p.unpriced)},
          {"actions_mean", p.actions.empty() ? nlohmann::json(nullptr) : actions},
          {"checkpoint_interval_s", std::isfinite(p.checkpoint_interval_s)
                                        ? nlohmann::json(p.checkpoint_interval_s)
                                        : nlohmann::json(nullptr)},
          {"daly_interval_s",
           p.daly_interval_s ? nlohmann::json(*p.daly_interval_s) : nlohmann::json(nullptr)},
          {"restarts_mean", p.restarts_mean},
          {"failures_mean", p.failures_mean},
          {"breakdown_gpu_hours", std::move(b)},
          {"notes", p.notes}};
    }
    nlohmann::json diffs = nlohmann::json::object();
    for (const auto& d : s.differences) {
      diffs[std::string(PolicyName(d.a)) + " - " + PolicyName(d.b)] =
          d.unpriced.empty() ? d.gpu_hours_lost.ToJson()
                             : nlohmann::json({{"unpriced", d.unpriced}});
    }
    js.push_back({{"gpus", s.gpus},
                  {"bootstrap", s.bootstrap},
                  {"differences_gpu_hours_lost", std::move(diffs)},
                  {"hosts", s.hosts},
                  {"failures_per_day", s.failures_per_day},
                  {"mtbf_h", std::isfinite(s.mtbf_h) ? nlohmann::json(s.mtbf_h) : nlohmann::json(nullptr)},
                  {"policies", std::move(pol)}});
  }
  out["policies"] = js.empty() ? nlohmann::json::object() : js[0]["policies"];
  out["scales"] = std::move(js);
  return out;
}

std::string SimulationMarkdown(const nlohmann::json& sim) {
  const auto& in = sim["inputs"];
  std::string md = "## faultline simulate: GPU-hours lost to failures\n\n";
  md += "`" + reports::MarkdownCell(sim["command"].get<std::string>()) + "`\n\n";
  const int boots = sim["scales"].empty() ? 0 : sim["scales"][0].value("bootstrap", 0);
  md += Num(in["days"].get<double>()) + " days, " + std::to_string(sim["seeds"].get<int>()) +
        " seeds, 95 % intervals of the mean in brackets: " +
        (boots > 0 ? "seed noise and the calibration's own sampling (" + std::to_string(boots) +
                         " bootstrap resamples of its samples, each over the same seeds)"
                   : std::string("seed noise only (no calibration to resample)")) +
        ".\n\n";
  md += "| GPUs | failures/day | MTBF h | policy | GPU-h lost | effective training time | "
        "restarts | checkpoint every s |\n|---:|---:|---:|---|---:|---:|---:|---:|\n";
  for (const auto& s : sim["scales"]) {
    for (const auto& [name, pp] : Ordered(s["policies"])) {
      const nlohmann::json& p = *pp;
      md += "| " + Num(s["gpus"].get<double>(), "%.0f") + " | " +
            Num(s["failures_per_day"].get<double>()) + " | " +
            (s["mtbf_h"].is_null() ? "-" : Num(s["mtbf_h"].get<double>())) + " | " + name +
            " | " + CiText(p["gpu_hours_lost"]) + " | " +
            CiText(p["effective_training_time_ratio"]) + " | " +
            Num(p["restarts_mean"].get<double>()) + " | " +
            (p["checkpoint_interval_s"].is_null() ? "never"
                                                  : Num(p["checkpoint_interval_s"].get<double>())) +
            " |\n";
    }
  }
  md += "\n### Differences between policies (paired: same failures, same resample)\n\n"
        "| GPUs | difference | GPU-h lost |\n|---:|---|---:|\n";
  for (const auto& s : sim["scales"]) {
    if (!s.contains("differences_gpu_hours_lost")) continue;
    for (const auto& [k, v] : s["differences_gpu_hours_lost"].items()) {
      md += "| " + Num(s["gpus"].get<double>(), "%.0f") + " | " + reports::MarkdownCell(k) +
            " | " + (v.contains("unpriced") ? "unpriced: " + reports::MarkdownCell(v["unpriced"].get<std::string>())
                                            : CiText(v)) +
            " |\n";
    }
  }
  bool any_actions = false;
  for (const auto& s : sim["scales"]) {
    for (const auto& [name, pp] : Ordered(s["policies"])) {
      if ((*pp).contains("actions_mean") && (*pp)["actions_mean"].is_object()) {
        if (!any_actions) {
          md += "\n### What the cost model chose (mean per run)\n\n| GPUs | policy | actions |\n"
                "|---:|---|---|\n";
          any_actions = true;
        }
        std::string acts;
        for (const auto& [k, v] : (*pp)["actions_mean"].items()) {
          acts += (acts.empty() ? "" : ", ") + k + " " + Num(v.get<double>());
        }
        md += "| " + Num(s["gpus"].get<double>(), "%.0f") + " | " + name + " | " + acts + " |\n";
      }
    }
  }
  for (const auto& s : sim["scales"]) {
    for (const auto& [name, pp] : Ordered(s["policies"])) {
      if ((*pp).contains("unpriced") && (*pp)["unpriced"].is_string()) {
        md += "\n**Unpriced** (" + Num(s["gpus"].get<double>(), "%.0f") + " GPUs, " + name +
              "): " + reports::MarkdownCell((*pp)["unpriced"].get<std::string>()) + "\n";
      }
    }
  }
  md += "\n### Lost GPU-hours by cause (" +
        Num(sim["scales"][0]["gpus"].get<double>(), "%.0f") + " GPUs)\n\n| policy |";
  std::string sep = "|---|";
  const auto& pol0 = sim["scales"][0]["policies"];
  for (const auto& [k, v] : pol0.begin().value()["breakdown_gpu_hours"].items()) {
    md += " " + k + " |";
    sep += "---:|";
  }
  md += "\n" + sep + "\n";
  for (const auto& [name, pp] : Ordered(pol0)) {
    const nlohmann::json& p = *pp;
    md += "| " + name + " |";
    for (const auto& [k, v] : p["breakdown_gpu_hours"].items()) {
      md += ' ';
      md += Num(v.get<double>());
      md += " |";
    }
    md += "\n";
  }
  md += "\n### Inputs and their sources\n\n| input | value | source |\n|---|---|---|\n";
  for (const auto& [k, v] : in["classes"].items()) {
    md += "| " + k + " rate | " + Num(v["rate_per_unit_hour"].get<double>()) + " per " +
          v["unit"].get<std::string>() + "-hour (" + Num(v["units"].get<double>(), "%.0f") +
          " units) | " + reports::MarkdownCell(v["source"].get<std::string>()) + " |\n";
    if (v.contains("transient_fraction")) {
      md += "| " + k + " transient share | " + Num(v["transient_fraction"].get<double>()) + " | " +
            reports::MarkdownCell(v["transient_source"].get<std::string>()) + " |\n";
    }
  }
  for (const auto& s : in["sources"]) md += "| | | " + reports::MarkdownCell(s.get<std::string>()) + " |\n";
  if (sim["calibration"].is_null()) {
    md += "\nNo calibration: failover's costs are the config's model.\n";
  } else {
    md += "\nCalibration `" + reports::MarkdownCell(sim["calibration"]["file"].get<std::string>()) +
          "` (" + reports::MarkdownCell(sim["calibration"]["ccl"].get<std::string>()) + "): ";
    for (const auto& e : sim["calibration"]["entries"]) {
      md += reports::MarkdownCell(e["kind"].get<std::string>()) + " under " +
            reports::MarkdownCell(e.value("policy", "failover")) + " " +
            std::to_string(e["survived"].get<int>()) + "/" + std::to_string(e["faults"].get<int>()) +
            " survived; ";
    }
    md += "\n";
  }
  std::vector<std::string> notes;
  for (const auto& s : sim["scales"]) {
    for (const auto& [name, pp] : Ordered(s["policies"])) {
      for (const auto& n : (*pp)["notes"]) {
        // A note that holds at every scale once; one that depends on the scale, with it.
        const std::string text = n.get<std::string>();
        const bool per_scale = text.find("Young/Daly") != std::string::npos;
        const std::string line =
            (per_scale ? Num(s["gpus"].get<double>(), "%.0f") + " GPUs, " : std::string()) +
            name + ": " + text;
        if (std::find(notes.begin(), notes.end(), line) == notes.end()) notes.push_back(line);
      }
    }
  }
  if (!notes.empty()) {
    md += "\n### Modelled, not measured\n\n";
    for (const auto& n : notes) md += "- " + reports::MarkdownCell(n) + "\n";
  }
  return md;
}

std::string SimulationHtml(const nlohmann::json& sim) {
  std::string h =
      "<!doctype html><html><head><meta charset=\"utf-8\"><title>faultline simulate</title>"
      "<style>body{font:14px sans-serif;margin:2em;max-width:1100px}table{border-collapse:"
      "collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
      "td.n{text-align:right}h3{font-size:15px;margin:18px 0 6px}table{margin:4px 0 10px}"
      "</style></head><body>";
  h += "<h1>GPU-hours lost to failures</h1><p><code>" +
       reports::HtmlText(sim["command"].get<std::string>()) + "</code></p>";
  h += "<h2>Lost GPU-hours vs scale</h2>" + ScalePlot(sim);
  h += "<h2>Cost breakdown by cause (" +
       Num(sim["scales"][0]["gpus"].get<double>(), "%.0f") + " GPUs)</h2>" + BreakdownPlot(sim);
  h += "<h2>Results</h2><table><tr><th>GPUs</th><th>failures/day</th><th>policy</th>"
       "<th>GPU-h lost (95 % CI)</th><th>effective training time</th><th>restarts</th>"
       "<th>checkpoint every s</th></tr>";
  for (const auto& s : sim["scales"]) {
    for (const auto& [name, pp] : Ordered(s["policies"])) {
      const nlohmann::json& p = *pp;
      h += "<tr><td class=\"n\">" + Num(s["gpus"].get<double>(), "%.0f") + "</td><td class=\"n\">" +
           Num(s["failures_per_day"].get<double>()) + "</td><td>" + reports::HtmlText(name) +
           "</td><td class=\"n\">" + CiText(p["gpu_hours_lost"]) + "</td><td class=\"n\">" +
           CiText(p["effective_training_time_ratio"]) + "</td><td class=\"n\">" +
           Num(p["restarts_mean"].get<double>()) + "</td><td class=\"n\">" +
           (p["checkpoint_interval_s"].is_null() ? "never"
                                                 : Num(p["checkpoint_interval_s"].get<double>())) +
           "</td></tr>";
    }
  }
  h += "</table>";
  // The differences, choices, inputs (every one with its source) and notes: the Markdown's
  // sections, rendered as HTML (tables as tables).
  const std::string md = SimulationMarkdown(sim);
  const size_t at = md.find("### Differences between policies");
  h += "<h2>Paired differences, choices, inputs, sources and what was modelled</h2>" +
       reports::MarkdownToHtml(at == std::string::npos ? md : md.substr(at));
  return h + "</body></html>\n";
}

}  // namespace faultline::sim
