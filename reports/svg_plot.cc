#include "reports/svg_plot.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <vector>

#include "reports/metric_table.h"
#include "reports/text.h"

namespace faultline::reports {
namespace {

constexpr double kWidth = 960;
constexpr double kLeft = 64, kRight = 24;

struct Band {
  std::string id;
  std::string type;
  std::string target;
  std::optional<int> rail;
  double from = 0;
  std::optional<double> to;  // absent: not reverted
  // A fault played in cycles (link_flap): each down as applied, to its up (absent: the heal's).
  std::vector<std::pair<double, std::optional<double>>> downs;
};

struct Marker {
  std::string fault;
  std::string kind;  // detection, failover, recovery
  double t = 0;
  double ms = 0;
};

std::vector<Band> Bands(const nlohmann::json& report) {
  std::vector<Band> out;
  for (const auto& f : report.at("faults")) {
    if (!f.is_object()) continue;
    auto applied = NumberOf(f.value("applied_s", nlohmann::json()));
    if (!applied) continue;
    Band b;
    b.id = FormatValue(f.value("id", nlohmann::json("?")));
    b.type = FormatValue(f.value("type", nlohmann::json("?")));
    b.target = FormatTarget(f.value("target", nlohmann::json()));
    if (f.contains("target") && f["target"].is_object() && f["target"].contains("rail") &&
        f["target"]["rail"].is_number_integer()) {
      b.rail = f["target"]["rail"].get<int>();
    }
    b.from = *applied;
    b.to = NumberOf(f.value("reverted_s", nlohmann::json()));
    if (f.contains("cycles") && f["cycles"].is_array()) {
      for (const auto& c : f["cycles"]) {
        if (!c.is_object()) continue;
        if (auto down = NumberOf(c.value("down_s", nlohmann::json()))) {
          b.downs.emplace_back(*down, NumberOf(c.value("up_s", nlohmann::json())));
        }
      }
    }
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<Marker> Markers(const nlohmann::json& report, const std::vector<Band>& bands) {
  static constexpr std::pair<const char*, const char*> kKinds[] = {
      {kDetectionMs, "detection"},
      {kFailoverFirstMs, "first-path"},
      {kFailoverLatencyMs, "failover"},  // full convergence
      {kRecoveryMs, "recovery"}};
  std::vector<Marker> out;
  for (const auto& pf : report.at("per_fault")) {
    if (!pf.is_object()) continue;
    const std::string id = FormatValue(pf.value("id", nlohmann::json()));
    auto band = std::find_if(bands.begin(), bands.end(), [&](const Band& b) { return b.id == id; });
    if (band == bands.end()) continue;
    for (const auto& [key, kind] : kKinds) {
      if (auto ms = NumberOf(pf.value(key, nlohmann::json()))) {
        out.push_back({id, kind, band->from + *ms / 1000.0, *ms});
      }
    }
  }
  return out;
}

// Round tick step for a range split in about `n` parts.
double TickStep(double range, int n) {
  if (range <= 0) return 1;
  const double raw = range / n;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * mag) return m * mag;
  }
  return 10 * mag;
}

struct Scale {
  double x0 = 0, x1 = 1, px0 = kLeft, px1 = kWidth - kRight;
  double X(double t) const { return px0 + (t - x0) / (x1 - x0) * (px1 - px0); }
};

double TimeEnd(const RunData& run, const std::vector<Band>& bands,
               const std::vector<Marker>& markers) {
  double end = 0;
  for (const auto& p : run.series) end = std::max(end, p.end_s);
  for (const auto& b : bands) end = std::max(end, b.to.value_or(b.from));
  for (const auto& m : markers) end = std::max(end, m.t);
  for (const auto& e : run.events) end = std::max(end, e.t_s);
  return end <= 0 ? 1 : end * 1.02;
}

std::string N(double v) { return FormatNumber(v, 2); }

std::string TimeAxis(const Scale& s, double y_top, double y_bottom) {
  std::string out = "<g class=\"x-axis\">";
  out += "<line x1=\"" + N(s.px0) + "\" y1=\"" + N(y_bottom) + "\" x2=\"" + N(s.px1) + "\" y2=\"" +
         N(y_bottom) + "\" stroke=\"#444\"/>";
  const double step = TickStep(s.x1 - s.x0, 10);
  for (double t = std::ceil(s.x0 / step) * step; t <= s.x1 + 1e-9; t += step) {
    const double x = s.X(t);
    out += "<line x1=\"" + N(x) + "\" y1=\"" + N(y_top) + "\" x2=\"" + N(x) + "\" y2=\"" +
           N(y_bottom) + "\" stroke=\"#eee\"/>";
    out += "<text x=\"" + N(x) + "\" y=\"" + N(y_bottom + 16) + "\" text-anchor=\"middle\">" +
           FormatNumber(t, 2) + "</text>";
  }
  out += "<text x=\"" + N((s.px0 + s.px1) / 2) + "\" y=\"" + N(y_bottom + 32) +
         "\" text-anchor=\"middle\">time since run start (s)</text></g>";
  return out;
}

const char* MarkerColor(const std::string& kind) {
  if (kind == "detection") return "#1f6fd1";
  if (kind == "first-path") return "#d17a00";
  if (kind == "failover") return "#8e3fc0";
  return "#1b8a3a";
}

// The marker's letter and its row above the axis: D detection, P first path, F failover
// (full convergence), R recovery.
char MarkerLetter(const std::string& kind) {
  return kind == "first-path" ? 'P' : static_cast<char>(std::toupper(kind[0]));
}
int MarkerRow(const std::string& kind) {
  if (kind == "first-path") return 1;
  if (kind == "failover") return 2;
  if (kind == "recovery") return 3;
  return 0;
}

// A fault played in cycles: one strip per down (class fault-down) inside its band, from the
// down to its up (to the band's end where the heal brought it up).
std::string DownStrips(const Band& b, const Scale& s, double y, double height,
                       const char* opacity) {
  std::string out;
  const double end = b.to.value_or(s.x1);
  for (const auto& [down, up] : b.downs) {
    const double x0 = s.X(down), x1 = s.X(up.value_or(end));
    out += "<rect class=\"fault-down\" data-fault=\"" + XmlEscape(b.id) + "\" x=\"" + N(x0) +
           "\" y=\"" + N(y) + "\" width=\"" + N(std::max(x1 - x0, 1.0)) + "\" height=\"" +
           N(height) + "\" fill=\"#e07b00\" fill-opacity=\"" + opacity + "\"><title>" +
           XmlText(b.id + " down " + FormatNumber(down) + " s, " +
                   (up ? "up " + FormatNumber(*up) + " s" : "up at the heal")) +
           "</title></rect>";
  }
  return out;
}

}  // namespace

std::string BusbwPlotSvg(const RunData& run) {
  const std::vector<Band> bands = Bands(run.report);
  const std::vector<Marker> markers = Markers(run.report, bands);
  constexpr double kHeight = 360, kTop = 28, kBottom = 44;
  Scale s;
  s.x1 = TimeEnd(run, bands, markers);
  const auto baseline =
      NumberOf(run.report.at("metrics").value(kBaselineBusbwGbps, nlohmann::json()));
  double ymax = baseline.value_or(0);
  for (const auto& p : run.series) ymax = std::max(ymax, p.busbw_gbps);
  ymax = ymax <= 0 ? 1 : ymax * 1.12;
  const double py0 = kHeight - kBottom, py1 = kTop;
  auto Y = [&](double v) { return py0 - v / ymax * (py0 - py1); };

  std::string out = "<svg id=\"busbw-plot\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " +
                    N(kWidth) + " " + N(kHeight) + "\" width=\"" + N(kWidth) + "\" height=\"" +
                    N(kHeight) +
                    "\" role=\"img\" aria-label=\"bus bandwidth over time\" "
                    "font-family=\"sans-serif\" font-size=\"11\">";
  out += "<rect x=\"0\" y=\"0\" width=\"" + N(kWidth) + "\" height=\"" + N(kHeight) +
         "\" fill=\"#fff\"/>";
  // y axis and grid
  out += "<g class=\"y-axis\">";
  const double ystep = TickStep(ymax, 6);
  for (double v = 0; v <= ymax + 1e-12; v += ystep) {
    out += "<line x1=\"" + N(s.px0) + "\" y1=\"" + N(Y(v)) + "\" x2=\"" + N(s.px1) + "\" y2=\"" +
           N(Y(v)) + "\" stroke=\"#eee\"/>";
    out += "<text x=\"" + N(s.px0 - 6) + "\" y=\"" + N(Y(v) + 4) + "\" text-anchor=\"end\">" +
           FormatNumber(v, 3) + "</text>";
  }
  out += "<line x1=\"" + N(s.px0) + "\" y1=\"" + N(py1) + "\" x2=\"" + N(s.px0) + "\" y2=\"" +
         N(py0) + "\" stroke=\"#444\"/>";
  out += "<text transform=\"translate(16," + N((py0 + py1) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">busbw (Gbit/s)</text></g>";
  out += TimeAxis(s, py1, py0);
  // fault bands
  for (const auto& b : bands) {
    const double x0 = s.X(b.from);
    const double x1 = s.X(b.to.value_or(s.x1));
    out += "<rect class=\"fault-band\" data-fault=\"" + XmlEscape(b.id) + "\" x=\"" + N(x0) +
           "\" y=\"" + N(py1) + "\" width=\"" + N(std::max(x1 - x0, 1.5)) + "\" height=\"" +
           N(py0 - py1) +
           "\" fill=\"#f29d38\" fill-opacity=\"0.28\" stroke=\"#e07b00\" "
           "stroke-opacity=\"0.6\"><title>" +
           XmlText(b.id + ": " + b.type + " " + b.target + ", applied " + FormatNumber(b.from) +
                   " s, " + (b.to ? "reverted " + FormatNumber(*b.to) + " s" : "not reverted")) +
           "</title></rect>";
    out += DownStrips(b, s, py1, py0 - py1, "0.35");
    out += "<text class=\"fault-label\" x=\"" + N(x0 + 3) + "\" y=\"" + N(py1 - 6) + "\">" +
           XmlText(b.id + (b.to ? "" : " (not reverted)")) + "</text>";
  }
  // baseline
  if (baseline) {
    out += "<line class=\"baseline\" x1=\"" + N(s.px0) + "\" y1=\"" + N(Y(*baseline)) + "\" x2=\"" +
           N(s.px1) + "\" y2=\"" + N(Y(*baseline)) +
           "\" stroke=\"#666\" stroke-dasharray=\"6 4\"><title>baseline " +
           FormatNumber(*baseline) + " Gbit/s</title></line>";
  }
  // busbw step line
  if (run.series.empty()) {
    out +=
        "<text class=\"no-data\" x=\"" + N((s.px0 + s.px1) / 2) + "\" y=\"" + N((py0 + py1) / 2) +
        "\" text-anchor=\"middle\" font-size=\"14\" fill=\"#a00\">no completed collective</text>";
  } else {
    std::string pts;
    for (const auto& p : run.series) {
      pts += N(s.X(p.start_s)) + "," + N(Y(p.busbw_gbps)) + " " + N(s.X(p.end_s)) + "," +
             N(Y(p.busbw_gbps)) + " ";
    }
    pts.pop_back();
    out +=
        "<polyline class=\"busbw\" fill=\"none\" stroke=\"#1a4f8b\" stroke-width=\"1.5\" "
        "points=\"" +
        pts + "\"/>";
  }
  // measured instants
  for (const auto& m : markers) {
    const double x = s.X(m.t);
    out += "<line class=\"marker marker-" + m.kind + "\" data-fault=\"" + XmlEscape(m.fault) +
           "\" x1=\"" + N(x) + "\" y1=\"" + N(py1) + "\" x2=\"" + N(x) + "\" y2=\"" + N(py0) +
           "\" stroke=\"" + MarkerColor(m.kind) + "\" stroke-width=\"1.5\" stroke-dasharray=\"" +
           (m.kind == "detection"  ? "2 2"
            : m.kind == "failover" ? "5 2"
                                   : "8 3") +
           "\"><title>" + XmlText(m.fault + " " + m.kind + " after " + FormatNumber(m.ms) + " ms") +
           "</title></line>";
    out += "<text x=\"" + N(x + 2) + "\" y=\"" + N(py0 - 4 - 12 * MarkerRow(m.kind)) +
           "\" fill=\"" + MarkerColor(m.kind) + "\">" + std::string(1, MarkerLetter(m.kind)) +
           "</text>";
  }
  // The training workload: the selector's decisions and the runner's restarts, each a
  // vertical line at its time labelled with the policy chosen (or "restart").
  const nlohmann::json train = run.report.value("train", nlohmann::json::object());
  auto mark = [&](const std::string& cls, double t, const std::string& label,
                  const std::string& title) {
    if (t < s.x0 || t > s.x1) return;
    const double x = s.X(t);
    out += "<line class=\"marker " + cls + "\" x1=\"" + N(x) + "\" y1=\"" + N(py1) + "\" x2=\"" +
           N(x) + "\" y2=\"" + N(py0) + "\" stroke=\"#b03030\" stroke-width=\"1.5\"><title>" +
           XmlText(title) + "</title></line>";
    out += "<text x=\"" + N(x + 2) + "\" y=\"" + N(py1 + 12) + "\" fill=\"#b03030\">" +
           XmlText(label) + "</text>";
  };
  if (train.is_object()) {
    for (const auto& d : train.value("decisions", nlohmann::json::array())) {
      if (!d.is_object() || !d.value("t_s", nlohmann::json()).is_number()) continue;
      const std::string chosen = d.value("chosen", std::string("?"));
      mark("marker-decision", d["t_s"].get<double>(), chosen,
           "policy decision: " + chosen + " (fault class " + d.value("fault_class", std::string("?")) +
               ", decided in " + FormatValue(d.value("latency_ms", nlohmann::json())) + " ms)");
    }
    for (const auto& r : train.value("restarts", nlohmann::json::array())) {
      if (!r.is_object() || !r.value("t_s", nlohmann::json()).is_number()) continue;
      mark("marker-restart", r["t_s"].get<double>(), "restart",
           "restart " + FormatValue(r.value("incarnation", nlohmann::json())) + ": " +
               r.value("why", std::string()));
    }
  }
  out += "</svg>";
  return out;
}

int RailCount(const RunData& run) {
  const nlohmann::json& env = run.report.value("environment", nlohmann::json::object());
  if (env.is_object() && env.contains("topology") && env["topology"].is_object()) {
    const auto& hosts = env["topology"].value("hosts", nlohmann::json());
    if (hosts.is_array() && !hosts.empty() && hosts[0].is_object() && hosts[0].contains("rails") &&
        hosts[0]["rails"].is_array()) {
      return static_cast<int>(hosts[0]["rails"].size());
    }
  }
  int rails = 0;
  for (const auto& b : Bands(run.report)) {
    if (b.rail) rails = std::max(rails, *b.rail + 1);
  }
  for (const auto& e : run.events) rails = std::max(rails, e.path + 1);
  return rails;
}

std::string RailPlotSvg(const RunData& run) {
  const int rails = RailCount(run);
  const std::vector<Band> bands = Bands(run.report);
  const std::vector<Marker> markers = Markers(run.report, bands);
  constexpr double kTop = 12, kLane = 34, kBottom = 44;
  const double height = kTop + kLane * rails + kBottom;
  Scale s;
  s.x1 = TimeEnd(run, bands, markers);
  std::string out = "<svg id=\"rail-plot\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " +
                    N(kWidth) + " " + N(height) + "\" width=\"" + N(kWidth) + "\" height=\"" +
                    N(height) +
                    "\" role=\"img\" aria-label=\"rail path state over time\" "
                    "font-family=\"sans-serif\" font-size=\"11\">";
  out += "<rect x=\"0\" y=\"0\" width=\"" + N(kWidth) + "\" height=\"" + N(height) +
         "\" fill=\"#fff\"/>";
  out += TimeAxis(s, kTop, kTop + kLane * rails);
  for (int r = 0; r < rails; ++r) {
    const double y = kTop + kLane * r;
    out += "<g class=\"rail-lane\" data-rail=\"" + std::to_string(r) + "\">";
    out += "<rect x=\"" + N(s.px0) + "\" y=\"" + N(y + 4) + "\" width=\"" + N(s.px1 - s.px0) +
           "\" height=\"" + N(kLane - 8) + "\" fill=\"#e8f3e8\"/>";
    out += "<text x=\"" + N(s.px0 - 6) + "\" y=\"" + N(y + kLane / 2 + 4) +
           "\" text-anchor=\"end\">rail " + std::to_string(r) + "</text>";
    for (const auto& b : bands) {
      if (b.rail != r) continue;
      const double x0 = s.X(b.from), x1 = s.X(b.to.value_or(s.x1));
      out += "<rect class=\"rail-fault\" x=\"" + N(x0) + "\" y=\"" + N(y + 2) + "\" width=\"" +
             N(std::max(x1 - x0, 1.5)) + "\" height=\"" + N(kLane - 4) +
             "\" fill=\"#f29d38\" fill-opacity=\"0.28\"><title>" + XmlText(b.id + ": " + b.type) +
             "</title></rect>";
    }
    // Down intervals per rank, merged by drawing each (overlaps simply overlap).
    std::map<int, double> down_since;  // rank -> t
    auto down_rect = [&](double from, double to, int rank) {
      const double x0 = s.X(from), x1 = s.X(to);
      out += "<rect class=\"path-down\" x=\"" + N(x0) + "\" y=\"" + N(y + 8) + "\" width=\"" +
             N(std::max(x1 - x0, 1.0)) + "\" height=\"" + N(kLane - 16) +
             "\" fill=\"#c62828\" fill-opacity=\"0.55\"><title>rail " + std::to_string(r) +
             " down for rank " + std::to_string(rank) + " from " + FormatNumber(from) + " s to " +
             FormatNumber(to) + " s</title></rect>";
    };
    std::vector<EventRow> events;
    for (const auto& e : run.events) {
      if (e.path == r) events.push_back(e);
    }
    std::stable_sort(events.begin(), events.end(),
                     [](const EventRow& a, const EventRow& b) { return a.t_s < b.t_s; });
    for (const auto& e : events) {
      if (e.kind == "path_down") {
        down_since.emplace(e.rank, e.t_s);
      } else if (e.kind == "path_up" || e.kind == "failback") {
        auto it = down_since.find(e.rank);
        if (it != down_since.end()) {
          down_rect(it->second, e.t_s, e.rank);
          down_since.erase(it);
        }
      }
      const double x = s.X(e.t_s);
      out += "<line class=\"rail-event\" x1=\"" + N(x) + "\" y1=\"" + N(y + 4) + "\" x2=\"" + N(x) +
             "\" y2=\"" + N(y + kLane - 4) + "\" stroke=\"#333\" stroke-opacity=\"0.6\"><title>" +
             XmlText(e.kind + " rank " + std::to_string(e.rank) + " at " + FormatNumber(e.t_s) +
                     " s" + (e.reason.empty() ? "" : ": " + e.reason)) +
             "</title></line>";
    }
    for (const auto& [rank, since] : down_since) down_rect(since, s.x1, rank);
    out += "</g>";
  }
  out += "</svg>";
  return out;
}

}  // namespace faultline::reports

namespace faultline::reports {

std::vector<int> RailHosts(const RunData& run) {
  std::vector<int> out;
  if (!run.rails) return out;
  for (const auto& c : run.rails->columns) {
    if (std::find(out.begin(), out.end(), c.host) == out.end()) out.push_back(c.host);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string RailThroughputSvg(const RunData& run, int host) {
  static constexpr const char* kPalette[] = {"#1a4f8b", "#c0392b", "#1b8a3a", "#8e3fc0",
                                             "#d17a00", "#00838f", "#6d4c41", "#ad1457"};
  const RailsTable& rails = *run.rails;
  const std::vector<Band> bands = Bands(run.report);
  std::vector<int> fault_hosts(bands.size(), -1);
  {
    size_t i = 0;
    for (const auto& f : run.report.at("faults")) {
      if (!f.is_object() || !NumberOf(f.value("applied_s", nlohmann::json()))) continue;
      const nlohmann::json t = f.value("target", nlohmann::json());
      if (t.is_object() && t.contains("host") && t["host"].is_number_integer()) {
        fault_hosts[i] = t["host"].get<int>();
      }
      ++i;
    }
  }
  constexpr double kHeight = 240, kTop = 24, kBottom = 44;
  Scale s;
  s.x0 = std::min(0.0, rails.t_s.empty() ? 0.0 : rails.t_s.front());
  s.x1 = TimeEnd(run, bands, Markers(run.report, bands));
  if (!rails.t_s.empty()) s.x1 = std::max(s.x1, rails.t_s.back());
  if (s.x1 <= s.x0) s.x1 = s.x0 + 1;
  // Port keys in column order: one colour each.
  std::vector<std::string> ports;
  double ymax = 0;
  for (const auto& c : rails.columns) {
    if (c.host != host) continue;
    const std::string key = (c.rank ? "n" + std::to_string(*c.rank) + " " : "") + "rail " +
                            std::to_string(c.rail) + (c.rdma ? " rdma" : "");
    if (std::find(ports.begin(), ports.end(), key) == ports.end()) ports.push_back(key);
    for (const auto& v : c.values) {
      if (v) ymax = std::max(ymax, *v);
    }
  }
  ymax = ymax <= 0 ? 1 : ymax * 1.12;
  const double py0 = kHeight - kBottom, py1 = kTop;
  auto Y = [&](double v) { return py0 - v / ymax * (py0 - py1); };
  const std::string hs = std::to_string(host);
  std::string out = "<svg id=\"rail-throughput-h" + hs +
                    "\" class=\"rail-throughput\" data-host=\"" + hs +
                    "\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + N(kWidth) + " " +
                    N(kHeight) + "\" width=\"" + N(kWidth) + "\" height=\"" + N(kHeight) +
                    "\" role=\"img\" aria-label=\"host " + hs +
                    " rail throughput over time\" font-family=\"sans-serif\" font-size=\"11\">";
  out += "<rect x=\"0\" y=\"0\" width=\"" + N(kWidth) + "\" height=\"" + N(kHeight) +
         "\" fill=\"#fff\"/>";
  out += "<text x=\"" + N(s.px0) + "\" y=\"14\" font-weight=\"bold\">host " + hs + "</text>";
  out += "<g class=\"y-axis\">";
  const double ystep = TickStep(ymax, 4);
  for (double v = 0; v <= ymax + 1e-12; v += ystep) {
    out += "<line x1=\"" + N(s.px0) + "\" y1=\"" + N(Y(v)) + "\" x2=\"" + N(s.px1) + "\" y2=\"" +
           N(Y(v)) + "\" stroke=\"#eee\"/><text x=\"" + N(s.px0 - 6) + "\" y=\"" + N(Y(v) + 4) +
           "\" text-anchor=\"end\">" + FormatNumber(v, 3) + "</text>";
  }
  out += "<text transform=\"translate(16," + N((py0 + py1) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">Gbit/s</text></g>";
  out += TimeAxis(s, py1, py0);
  for (size_t i = 0; i < bands.size(); ++i) {
    const Band& b = bands[i];
    const double x0 = s.X(b.from), x1 = s.X(b.to.value_or(s.x1));
    const bool here = fault_hosts[i] == host;
    out += "<rect class=\"fault-band\" data-fault=\"" + XmlEscape(b.id) + "\" x=\"" + N(x0) +
           "\" y=\"" + N(py1) + "\" width=\"" + N(std::max(x1 - x0, 1.5)) + "\" height=\"" +
           N(py0 - py1) + "\" fill=\"#f29d38\" fill-opacity=\"" + (here ? "0.30" : "0.12") +
           "\"><title>" +
           XmlText(b.id + ": " + b.type + " " + b.target + (here ? "" : " (another host)")) +
           "</title></rect>";
    out += DownStrips(b, s, py1, py0 - py1, here ? "0.35" : "0.14");
  }
  for (const auto& c : rails.columns) {
    if (c.host != host) continue;
    const std::string key = (c.rank ? "n" + std::to_string(*c.rank) + " " : "") + "rail " +
                            std::to_string(c.rail) + (c.rdma ? " rdma" : "");
    const size_t colour =
        static_cast<size_t>(std::find(ports.begin(), ports.end(), key) - ports.begin());
    std::string pts;
    auto flush = [&] {
      if (pts.empty()) return;
      pts.pop_back();
      out += "<polyline class=\"rail-rate\" data-column=\"" + XmlEscape(c.name) +
             "\" fill=\"none\" stroke=\"" + kPalette[colour % 8] + "\" stroke-width=\"1.3\"" +
             (c.tx ? "" : " stroke-dasharray=\"4 2\"") + " points=\"" + pts + "\"><title>" +
             XmlText(key + (c.tx ? " tx" : " rx")) + "</title></polyline>";
      pts.clear();
    };
    // Drawn as 100 ms averages: the 20 ms samples of a striping library alternate between
    // rails burst by burst, which hides one rail under the other; rails.csv keeps them all.
    // A bin without a valid sample breaks the line.
    constexpr double kBinS = 0.1;
    int64_t bin = INT64_MIN;
    double sum = 0;
    int n = 0;
    bool gap = false;
    auto emit = [&] {
      if (bin == INT64_MIN) return;
      if (n == 0 || gap) flush();
      if (n > 0) {
        pts += N(s.X((static_cast<double>(bin) + 0.5) * kBinS)) + "," + N(Y(sum / n)) + " ";
      }
    };
    for (size_t i = 0; i < c.values.size() && i < rails.t_s.size(); ++i) {
      const int64_t b = static_cast<int64_t>(std::floor(rails.t_s[i] / kBinS));
      if (b != bin) {
        emit();
        gap = bin != INT64_MIN && b != bin + 1;
        bin = b;
        sum = 0;
        n = 0;
      }
      if (c.values[i]) {
        sum += *c.values[i];
        ++n;
      }
    }
    emit();
    flush();
  }
  // Legend: one entry per port.
  double lx = s.px0 + 60;
  for (size_t i = 0; i < ports.size(); ++i) {
    out += "<text class=\"rail-legend\" x=\"" + N(lx) + "\" y=\"14\" fill=\"" + kPalette[i % 8] +
           "\">" + XmlText(ports[i]) + "</text>";
    lx += 12 + 7 * static_cast<double>(ports[i].size());
  }
  return out + "</svg>";
}

}  // namespace faultline::reports
