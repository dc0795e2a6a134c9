#include "reports/html.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "reports/svg_plot.h"
#include "synthetic.h"

namespace faultline::reports {
namespace {

using testing::CountByClass;
using testing::ParseXml;
using testing::SvgById;

int CountOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(HtmlReport, VerdictFirstThenSectionsInOrder) {
  const std::string html = HtmlReport(testing::Run(testing::Report()));
  const size_t verdict = html.find("<header id=\"verdict\" class=\"verdict verdict-fail\"><h1>FAIL</h1>");
  ASSERT_NE(verdict, std::string::npos);
  size_t last = verdict;
  for (const char* id : {"run", "throughput", "rails", "faults", "metrics", "expectations",
                         "scenario", "environment"}) {
    const size_t at = html.find("<section id=\"" + std::string(id) + "\">");
    ASSERT_NE(at, std::string::npos) << id;
    EXPECT_GT(at, last) << id;
    last = at;
  }
  // The failed expectation is named in the verdict with its value and limit.
  EXPECT_NE(html.find("stall_ms: measured 812.25, limit max 500"), std::string::npos);
  EXPECT_EQ(html.find("<section id=\"notes\">"), std::string::npos);
  EXPECT_EQ(html.find("a flap's downs"), std::string::npos);  // no flap in this run
}

TEST(HtmlReport, PassingRunSaysPass) {
  const std::string html = HtmlReport(testing::Run(testing::PassingReport()));
  EXPECT_NE(html.find("<h1>PASS</h1>"), std::string::npos);
  EXPECT_NE(html.find("verdict-pass"), std::string::npos);
}

TEST(HtmlReport, SelfContained) {
  const std::string html = HtmlReport(testing::Run(testing::Report()));
  EXPECT_NE(html.find("Content-Security-Policy\" content=\"default-src 'none'"), std::string::npos);
  // No script, no link, no image, no src/href attribute, no url(): nothing to fetch.
  for (const char* bad : {"<script", "<link", "<img", "<iframe", " src=", " href=", "url(", "@import"}) {
    EXPECT_EQ(html.find(bad), std::string::npos) << bad;
  }
  // The only URL is the SVG namespace name, which is never fetched.
  std::regex url("https?://[^\"]*");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), url); it != std::sregex_iterator(); ++it) {
    EXPECT_EQ(it->str(), "http://www.w3.org/2000/svg");
  }
}

TEST(BusbwPlot, OneBandPerAppliedFaultAndMarkersForMeasuredInstants) {
  const std::string html = HtmlReport(testing::Run(testing::Report()));
  const std::string svg = SvgById(html, "busbw-plot");
  ASSERT_FALSE(svg.empty());
  auto root = ParseXml(svg);
  ASSERT_TRUE(root) << "the inline SVG is not well-formed XML";
  // f1 and f2 were applied, f3 never was.
  EXPECT_EQ(CountByClass(svg, "rect", "fault-band"), 2);
  std::vector<std::string> banded;
  for (const auto* r : root->All("rect")) {
    if (r->Attr("class") == "fault-band") banded.push_back(r->Attr("data-fault"));
  }
  EXPECT_EQ(banded, (std::vector<std::string>{"f1", "f2"}));
  // f1 has detection, failover and recovery; f2 has none (recovery null).
  EXPECT_EQ(CountByClass(svg, "line", "marker marker-detection"), 1);
  EXPECT_EQ(CountByClass(svg, "line", "marker marker-failover"), 1);
  EXPECT_EQ(CountByClass(svg, "line", "marker marker-recovery"), 1);
  EXPECT_EQ(CountByClass(svg, "line", "baseline"), 1);
  EXPECT_EQ(CountByClass(svg, "polyline", "busbw"), 1);
  EXPECT_NE(svg.find("f2 (not reverted)"), std::string::npos);
  EXPECT_NE(html.find("1 fault(s) were never applied"), std::string::npos);
}

TEST(BusbwPlot, BandAndMarkersSitAtTheirTimes) {
  const std::string svg = BusbwPlotSvg(testing::Run(testing::Report()));
  auto root = ParseXml(svg);
  ASSERT_TRUE(root);
  double band_x = -1, band_w = -1, detect_x = -1, recover_x = -1;
  for (const auto* r : root->All("rect")) {
    if (r->Attr("data-fault") == "f1") {
      band_x = std::stod(r->Attr("x"));
      band_w = std::stod(r->Attr("width"));
    }
  }
  for (const auto* l : root->All("line")) {
    if (l->Attr("class") == "marker marker-detection") detect_x = std::stod(l->Attr("x1"));
    if (l->Attr("class") == "marker marker-recovery") recover_x = std::stod(l->Attr("x1"));
  }
  ASSERT_GT(band_w, 0);
  // applied 2.0 s, reverted 3.0 s; detection at +12.5 ms, recovery at +600 ms.
  const double px_per_s = band_w / 1.0;
  EXPECT_NEAR(detect_x, band_x + 0.0125 * px_per_s, 0.05);
  EXPECT_NEAR(recover_x, band_x + 0.6 * px_per_s, 0.05);
}

TEST(BusbwPlot, AFlapShowsEachDownAsPlayedInsideItsBand) {
  nlohmann::json report = testing::Report();
  nlohmann::json& f1 = report["faults"][0];  // applied 2.0 s, reverted 3.0 s
  f1["type"] = "link_flap";
  f1["cycles"] = {
      {{"down_scheduled_s", 2.0}, {"down_s", 2.0}, {"up_scheduled_s", 2.2}, {"up_s", 2.2}},
      {{"down_scheduled_s", 2.5}, {"down_s", nullptr}, {"up_scheduled_s", 2.7}, {"up_s", nullptr}},
      {{"down_scheduled_s", 2.8}, {"down_s", 2.85}, {"up_scheduled_s", 3.0}, {"up_s", nullptr}}};
  RunData run = testing::Run(report);
  auto table = ParseRailsCsv(testing::RailsCsv());
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  run.rails = std::move(*table);
  const std::string html = HtmlReport(run);
  for (const char* id : {"busbw-plot", "rail-throughput-h0", "rail-throughput-h1"}) {
    const std::string svg = SvgById(html, id);
    auto root = ParseXml(svg);
    ASSERT_TRUE(root) << id;
    const testing::XmlNode* band = nullptr;
    std::vector<const testing::XmlNode*> downs;
    for (const auto* r : root->All("rect")) {
      if (r->Attr("class") == "fault-band" && r->Attr("data-fault") == "f1") band = r;
      if (r->Attr("class") == "fault-down") downs.push_back(r);
    }
    ASSERT_NE(band, nullptr) << id;
    // The two downs that were applied; the one that was not is not drawn.
    ASSERT_EQ(downs.size(), 2u) << id;
    const double bx = std::stod(band->Attr("x")), px_per_s = std::stod(band->Attr("width"));
    EXPECT_NEAR(std::stod(downs[0]->Attr("x")), bx, 0.05) << id;
    EXPECT_NEAR(std::stod(downs[0]->Attr("width")), 0.2 * px_per_s, 0.05) << id;
    // The last down was brought up by the heal: its strip runs to the band's end (3.0 s).
    EXPECT_NEAR(std::stod(downs[1]->Attr("x")), bx + 0.85 * px_per_s, 0.05) << id;
    EXPECT_NEAR(std::stod(downs[1]->Attr("width")), 0.15 * px_per_s, 0.05) << id;
    EXPECT_NE(svg.find("f1 down 2.85 s, up at the heal"), std::string::npos) << id;
  }
  EXPECT_NE(html.find("a flap's downs, as played"), std::string::npos);  // the legend
  EXPECT_NE(html.find("3 cycles played: down 200 ms (200 to 200)"), std::string::npos);
  EXPECT_NE(html.find("1 down(s) not applied; 1 up(s) left to the final heal"), std::string::npos);
}

TEST(BusbwPlot, NoCollectivesSaysSo) {
  RunData run = testing::Run(testing::Report());
  run.series.clear();
  const std::string svg = BusbwPlotSvg(run);
  EXPECT_NE(svg.find("no completed collective"), std::string::npos);
  EXPECT_EQ(CountByClass(svg, "polyline", "busbw"), 0);
  EXPECT_EQ(CountByClass(svg, "rect", "fault-band"), 2);
}

TEST(RailThroughput, OnePlotPerHostWithEachPortsTxAndRxAndTheFaultBands) {
  RunData run = testing::Run(testing::Report());
  auto table = ParseRailsCsv(testing::RailsCsv());
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  run.rails = std::move(*table);
  run.report["per_fault"][0]["rails"] = testing::F1Rails();
  ASSERT_EQ(RailHosts(run), (std::vector<int>{0, 1}));
  const std::string html = HtmlReport(run);
  EXPECT_EQ(html.find("Per-rail throughput is not recorded"), std::string::npos);
  for (int h : {0, 1}) {
    std::string id = "rail-throughput-h";
    id.append(std::to_string(h));
    const std::string svg = SvgById(html, id);
    ASSERT_FALSE(svg.empty()) << h;
    auto root = ParseXml(svg);
    ASSERT_TRUE(root) << h;
    // f1 and f2 were applied; f3 never was.
    EXPECT_EQ(CountByClass(svg, "rect", "fault-band"), 2) << h;
    std::vector<std::string> columns;
    for (const auto* p : root->All("polyline")) columns.push_back(p->Attr("data-column"));
    // Host 0's rail-0 tx line is broken where a 100 ms bin has no valid cell: two pieces.
    std::string pre = "h";
    pre.append(std::to_string(h));
    std::vector<std::string> want = {pre + "_r0_tx_gbps", pre + "_r0_rx_gbps", pre + "_r1_tx_gbps",
                                     pre + "_r1_rx_gbps"};
    if (h == 0) want.insert(want.begin(), "h0_r0_tx_gbps");
    EXPECT_EQ(columns, want) << h;
  }
  // Host 1's rail 0 is at the bottom of the plot (0 Gbit/s) inside f1's band, at 0.8 outside.
  const std::string svg1 = SvgById(html, "rail-throughput-h1");
  auto root = ParseXml(svg1);
  const testing::XmlNode* band = nullptr;
  for (const auto* r : root->All("rect")) {
    if (r->Attr("data-fault") == "f1") band = r;
  }
  ASSERT_NE(band, nullptr);
  EXPECT_EQ(band->Attr("fill-opacity"), "0.30");  // f1 targets host 1
  const double bx0 = std::stod(band->Attr("x")), bx1 = bx0 + std::stod(band->Attr("width"));
  const double bottom = std::stod(band->Attr("y")) + std::stod(band->Attr("height"));
  int inside = 0, outside = 0;
  for (const auto* p : root->All("polyline")) {
    if (p->Attr("data-column") != "h1_r0_tx_gbps") continue;
    std::istringstream pts(p->Attr("points"));
    std::string xy;
    while (pts >> xy) {
      const double x = std::stod(xy.substr(0, xy.find(','))), y = std::stod(xy.substr(xy.find(',') + 1));
      // Clear of the band's edges by more than one 100 ms bin (about 11 px here).
      if (x > bx0 + 12 && x < bx1 - 12) {
        ++inside;
        EXPECT_NEAR(y, bottom, 0.01);
      } else if (x < bx0 - 12) {
        ++outside;
        EXPECT_LT(y, bottom - 50);
      }
    }
  }
  // Drawn as 100 ms averages: about 8 points well inside the 1 s band, 20 before it.
  EXPECT_GE(inside, 6);
  EXPECT_GE(outside, 18);
  // The per-fault windows: one row per port.
  EXPECT_NE(html.find("<table id=\"rail-window-table\">"), std::string::npos);
  EXPECT_EQ(CountOf(html, "<tr><td>f1</td>"), 4);
  // The CCL's path state is still shown.
  EXPECT_FALSE(SvgById(html, "rail-plot").empty());
}

TEST(RailPlot, PathDownFromEventsAndTheNoPerRailBytesNote) {
  RunData run = testing::Run(testing::Report());
  EXPECT_EQ(RailCount(run), 2);
  const std::string html = HtmlReport(run);
  EXPECT_NE(html.find("Per-rail throughput is not recorded"), std::string::npos);
  const std::string svg = SvgById(html, "rail-plot");
  auto root = ParseXml(svg);
  ASSERT_TRUE(root);
  EXPECT_EQ(CountByClass(svg, "g", "rail-lane"), 2);
  // rank 0: down 2.01 -> up 3.1, rank 1: down 2.02 -> failback 3.2, both on rail 0.
  EXPECT_EQ(CountByClass(svg, "rect", "path-down"), 2);
  EXPECT_EQ(CountByClass(svg, "line", "rail-event"), 5);
  for (const auto* g : root->All("g")) {
    if (g->Attr("class") != "rail-lane") continue;
    int down = 0;
    for (const auto* r : g->All("rect")) down += r->Attr("class") == "path-down";
    EXPECT_EQ(down, g->Attr("data-rail") == "0" ? 2 : 0);
  }
}

TEST(RailPlot, NoEventsSaysSoAndDrawsNoInventedData) {
  RunData run = testing::Run(testing::Report());
  run.events.clear();
  const std::string html = HtmlReport(run);
  EXPECT_NE(html.find("No CCL path events were recorded"), std::string::npos);
  const std::string svg = SvgById(html, "rail-plot");
  EXPECT_EQ(CountByClass(svg, "rect", "path-down"), 0);
  EXPECT_EQ(CountByClass(svg, "g", "rail-lane"), 2);
}

TEST(HtmlReport, TablesCarryValuesAndNulls) {
  const std::string html = HtmlReport(testing::Run(testing::Report()));
  EXPECT_NE(html.find("<tr data-fault=\"f1\"><td>f1</td><td>link_down</td><td>host 1 rail 0 (host)</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<tr data-fault=\"f1\"><td>f1</td><td class=\"num\">10</td>"
                      "<td class=\"num\">812.25</td><td class=\"num\">12.5</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"fail\">FAIL</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"pass\">PASS</td>"), std::string::npos);
  EXPECT_NE(html.find("class=\"null\""), std::string::npos);
  // The scenario text is escaped, not interpreted.
  EXPECT_NE(html.find("faults: [] # &lt;b&gt;&amp;&lt;/b&gt;"), std::string::npos);
  EXPECT_NE(html.find("<th>kernel</th><td>Linux 6.1.0</td>"), std::string::npos);
  EXPECT_NE(html.find("<th>knobs.rail_gbps</th><td>1</td>"), std::string::npos);
}

TEST(HtmlReport, PerFaultShowsFirstAndFullConvergenceAndNever) {
  nlohmann::json r = testing::Report();
  r["per_fault"][0]["failover_first_ms"] = 4.0;
  r["per_fault"][0]["progress_ms"] = 90.0;
  r["per_fault"][0]["convergence"] = "path_events";
  r["per_fault"][0]["flows"] = {{{"rank", 0}, {"peer", 1}, {"path", 0}, {"down_s", 2.0},
                                 {"resumed_s", 2.04}, {"counted", true}},
                                {{"rank", 1}, {"peer", 0}, {"path", 0}, {"down_s", 2.0},
                                 {"resumed_s", nullptr}, {"counted", false}}};
  std::string html = HtmlReport(testing::Run(r));
  // Headings and the convergence source may wrap after each '_' (<wbr>).
  EXPECT_NE(html.find("<th>failover_<wbr>first_<wbr>ms</th><th>failover_<wbr>latency_<wbr>ms</th>"),
            std::string::npos);
  EXPECT_NE(html.find("<td>path_<wbr>events</td><td>1 of 2 reported down</td>"), std::string::npos)
      << html;
  r["per_fault"][0]["failover_latency_ms"] = nullptr;
  r["per_fault"][0]["never_converged"] = true;
  html = HtmlReport(testing::Run(r));
  EXPECT_NE(html.find("<td class=\"fail never\">never</td>"), std::string::npos);
}

TEST(HtmlReport, HostileScenarioNameCannotInjectMarkup) {
  const std::string html = HtmlReport(testing::Run(testing::Report("</title><script>x()</script>")));
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_NE(html.find("&lt;/title&gt;&lt;script&gt;"), std::string::npos);
}

TEST(HtmlReport, MissingInputsAreListed) {
  RunData run = testing::Run(testing::Report());
  run.scenario_text.reset();
  run.notes = {"timeseries.csv is missing"};
  const std::string html = HtmlReport(run);
  EXPECT_NE(html.find("scenario.yaml is not in the run directory"), std::string::npos);
  EXPECT_NE(html.find("<li>timeseries.csv is missing</li>"), std::string::npos);
}

}  // namespace
}  // namespace faultline::reports
