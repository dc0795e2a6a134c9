#include "reports/run_data.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "reports/html.h"
#include "reports/write_reports.h"
#include "synthetic.h"

namespace faultline::reports {
namespace {

namespace fs = std::filesystem;

TEST(ParseTimeseriesCsv, RowsAndErrors) {
  auto ok = ParseTimeseriesCsv(
      "index,start_s,end_s,duration_ms,bytes,busbw_gbps\n3,0.5,0.52,20.000,1048576,0.8389\n");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].index, 3);
  EXPECT_DOUBLE_EQ((*ok)[0].end_s, 0.52);
  EXPECT_EQ((*ok)[0].bytes, 1048576u);
  EXPECT_DOUBLE_EQ((*ok)[0].busbw_gbps, 0.8389);
  auto empty = ParseTimeseriesCsv("index,start_s,end_s,duration_ms,bytes,busbw_gbps\n");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  EXPECT_FALSE(ParseTimeseriesCsv("").ok());
  auto bad = ParseTimeseriesCsv("index,start_s,end_s,duration_ms,bytes,busbw_gbps\n1,2,x,4,5,6\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos);
}

TEST(ParseEventsJsonl, KeepsCclEventsToleratesACutOffLastLine) {
  const std::string text =
      R"({"type":"fault","id":"f1","kind":"link_down"})" "\n"
      R"({"type":"ccl_event","t_s":2.5,"rank":1,"kind":"path_down","path":0,"reason":"timeout"})" "\n"
      R"({"type":"ccl_event","t_s":2.6,"rank":1,"kind":"rebal)";
  auto ev = ParseEventsJsonl(text);
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  ASSERT_EQ(ev->size(), 1u);
  EXPECT_EQ((*ev)[0].kind, "path_down");
  EXPECT_EQ((*ev)[0].rank, 1);
  EXPECT_EQ((*ev)[0].path, 0);
  EXPECT_EQ((*ev)[0].reason, "timeout");
  // The same broken line in the middle is an error.
  EXPECT_FALSE(ParseEventsJsonl("{\"type\":\n{\"type\":\"fault\"}\n").ok());
}

TEST(CheckReport, RequiresTheSchemaAndKeys) {
  EXPECT_TRUE(CheckReport(testing::Report()).ok());
  auto r = testing::Report();
  r["schema"] = "faultline.report/v0";
  EXPECT_NE(CheckReport(r).message().find(
                "schema \"faultline.report/v0\", expected one of \"faultline.report/v1\", "
                "\"faultline.report/v2\""),
            std::string::npos)
      << CheckReport(r).message();
  r.erase("schema");
  EXPECT_NE(CheckReport(r).message().find("schema missing"), std::string::npos);
  // A v1 report has v2's layout keys: it is read (and rendered); compare refuses to mix them.
  r["schema"] = "faultline.report/v1";
  EXPECT_TRUE(CheckReport(r).ok());
  r["schema"] = kReportSchema;
  EXPECT_TRUE(CheckReport(r).ok());
  r = testing::Report();
  r.erase("expectations");
  EXPECT_NE(CheckReport(r).message().find("expectations"), std::string::npos);
  EXPECT_FALSE(CheckReport(nlohmann::json::array()).ok());
  // Every reader takes an expectation's "pass" as a bool; anything else is a bad report, not
  // an exception in `faultline compare` or `report`.
  for (const nlohmann::json& pass : {nlohmann::json("yes"), nlohmann::json(1), nlohmann::json()}) {
    nlohmann::json bad = testing::Report();
    bad["expectations"][0]["pass"] = pass;
    EXPECT_FALSE(ParseReport(bad.dump(), "run").ok()) << pass;
  }
  nlohmann::json no_pass = testing::Report();
  no_pass["expectations"][1].erase("pass");
  EXPECT_FALSE(CheckReport(no_pass).ok());
  EXPECT_FALSE(ParseReport("{", "run").ok());
  EXPECT_TRUE(ParseReport(testing::Report().dump(), "run").ok());
}

TEST(RunData, ParsesRailsCsv) {
  auto t = ParseRailsCsv(
      "t_s,h0_r0_tx_gbps,h0_r0_rx_gbps,h1_n2_r1_rdma_rx_gbps\n0.02,1.5,,0.25\n0.04,2,3,\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->t_s, (std::vector<double>{0.02, 0.04}));
  ASSERT_EQ(t->columns.size(), 3u);
  EXPECT_EQ(t->columns[0].name, "h0_r0_tx_gbps");
  EXPECT_TRUE(t->columns[0].tx);
  EXPECT_FALSE(t->columns[1].tx);
  EXPECT_EQ(t->columns[1].values[0], std::nullopt);
  EXPECT_EQ(t->columns[1].values[1], 3.0);
  const RailColumn& c = t->columns[2];
  EXPECT_EQ(c.host, 1);
  EXPECT_EQ(c.rank, 2);
  EXPECT_EQ(c.rail, 1);
  EXPECT_TRUE(c.rdma);
  EXPECT_FALSE(c.tx);
  // Bad input names the line.
  EXPECT_NE(ParseRailsCsv("time,h0_r0_tx_gbps\n").status().message().find("line 1"),
            std::string::npos);
  EXPECT_NE(ParseRailsCsv("t_s,h0_rx_tx_gbps\n").status().message().find("h0_rx_tx_gbps"),
            std::string::npos);
  EXPECT_NE(ParseRailsCsv("t_s,h0_r0_up_gbps\n").status().message().find("line 1"),
            std::string::npos);
  EXPECT_NE(ParseRailsCsv("t_s,h0_r0_tx_gbps\n0.1,1,2\n").status().message().find("line 2"),
            std::string::npos);
  EXPECT_NE(ParseRailsCsv("t_s,h0_r0_tx_gbps\n0.1,x\n").status().message().find("line 2"),
            std::string::npos);
}

class RunDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/faultline-reports-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& content) {
    fs::create_directories((fs::path(dir_) / rel).parent_path());
    std::ofstream(fs::path(dir_) / rel) << content;
  }
  std::string Read(const std::string& rel) {
    std::ifstream in(fs::path(dir_) / rel);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string dir_;
};

TEST_F(RunDirTest, LoadsRailsCsvAndRendersItsPlots) {
  nlohmann::json report = testing::Report();
  report["files"]["rails"] = "rails.csv";
  Write("run/report.json", report.dump(2));
  auto missing = LoadRunDir(dir_ + "/run");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->rails);
  EXPECT_NE(std::find(missing->notes.begin(), missing->notes.end(), "rails.csv is missing"),
            missing->notes.end());
  Write("run/rails.csv", testing::RailsCsv());
  auto run = LoadRunDir(dir_ + "/run");
  ASSERT_TRUE(run.ok());
  ASSERT_TRUE(run->rails);
  EXPECT_EQ(run->rails->columns.size(), 8u);
  EXPECT_EQ(run->rails->t_s.size(), 405u);
  const std::string html = HtmlReport(*run);
  EXPECT_FALSE(testing::SvgById(html, "rail-throughput-h0").empty());
  EXPECT_FALSE(testing::SvgById(html, "rail-throughput-h1").empty());
  EXPECT_EQ(testing::XmlError(testing::SvgById(html, "rail-throughput-h1")), "");
  // A malformed file is a note, not a failure to load the run.
  Write("run/rails.csv", "t_s,bad\n");
  auto bad = LoadRunDir(dir_ + "/run");
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(bad->rails);
  EXPECT_FALSE(bad->notes.empty());
}

TEST_F(RunDirTest, WriteReportsRendersAllThreeAndNamesThemInReportJson) {
  Write("run/report.json", testing::Report().dump(2));
  Write("run/timeseries.csv",
        "index,start_s,end_s,duration_ms,bytes,busbw_gbps\n0,0.1,0.2,100,1048576,0.16\n"
        "1,0.2,2.5,2300,1048576,0.007\n");
  Write("run/events.jsonl",
        R"({"type":"ccl_event","t_s":2.1,"rank":0,"kind":"path_down","path":0,"reason":""})" "\n");
  Write("run/scenario.yaml", "name: rail-flap\n");
  const std::string run = dir_ + "/run";
  Status st = WriteReports(run);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(testing::XmlError(Read("run/junit.xml")), "");
  const std::string html = Read("run/report.html");
  EXPECT_NE(html.find("<h1>FAIL</h1>"), std::string::npos);
  EXPECT_EQ(testing::CountByClass(testing::SvgById(html, "busbw-plot"), "rect", "fault-band"), 2);
  EXPECT_EQ(testing::CountByClass(testing::SvgById(html, "rail-plot"), "rect", "path-down"), 1);
  EXPECT_NE(html.find("<pre>name: rail-flap\n</pre>"), std::string::npos);
  EXPECT_NE(Read("run/summary.md").find("**FAIL**"), std::string::npos);
  const auto report = nlohmann::json::parse(Read("run/report.json"));
  EXPECT_EQ(report["files"]["junit"], "junit.xml");
  EXPECT_EQ(report["files"]["html"], "report.html");
  EXPECT_EQ(report["files"]["timeseries"], "timeseries.csv");
  EXPECT_EQ(report["metrics"], testing::Report()["metrics"]);
  EXPECT_FALSE(fs::exists(run + "/report.json.tmp"));
  // Rendering again gives the same files.
  const std::string junit = Read("run/junit.xml");
  ASSERT_TRUE(WriteReports(run).ok());
  EXPECT_EQ(Read("run/junit.xml"), junit);
  EXPECT_EQ(Read("run/report.html"), html);
}

TEST_F(RunDirTest, MissingFilesAreNotedNotFatal) {
  Write("run/report.json", testing::PassingReport().dump());
  auto run = LoadRunDir(dir_ + "/run");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->notes.size(), 3u);
  ASSERT_TRUE(WriteReports(dir_ + "/run").ok());
  EXPECT_NE(Read("run/report.html").find("timeseries.csv is missing"), std::string::npos);
}

TEST_F(RunDirTest, BadOrMissingReportIsBadInput) {
  EXPECT_EQ(WriteReports(dir_).code(), Code::kNotFound);
  Write("report.json", "{not json");
  EXPECT_EQ(WriteReports(dir_).code(), Code::kInvalidArgument);
  Write("report.json", R"({"schema":"other"})");
  EXPECT_EQ(WriteReports(dir_).code(), Code::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir_ + "/junit.xml"));
}

TEST_F(RunDirTest, FindRunDirsAndLoadReports) {
  Write("suite/b/report.json", testing::Report("b").dump());
  Write("suite/a/report.json", testing::Report("a").dump());
  Write("suite/a/ranks/rank0.jsonl", "");
  Write("suite/nested/c/report.json", testing::Report("c").dump());
  auto dirs = FindRunDirs(dir_ + "/suite");
  ASSERT_TRUE(dirs.ok());
  EXPECT_EQ(*dirs, (std::vector<std::string>{dir_ + "/suite/a", dir_ + "/suite/b",
                                              dir_ + "/suite/nested/c"}));
  auto one = FindRunDirs(dir_ + "/suite/a");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->size(), 1u);
  auto reports = LoadReports(dir_ + "/suite");
  ASSERT_TRUE(reports.ok());
  EXPECT_EQ((*reports)[2]["scenario"]["name"], "c");
  EXPECT_EQ(FindRunDirs(dir_ + "/nothing").status().code(), Code::kNotFound);
  fs::create_directories(dir_ + "/empty");
  EXPECT_EQ(FindRunDirs(dir_ + "/empty").status().code(), Code::kNotFound);
  Write("bad/x/report.json", "[]");
  EXPECT_EQ(LoadReports(dir_ + "/bad").status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace faultline::reports
