// RunReport (reports/run_report.h): FromJson then ToJson gives back the same report.json, on
// hand-made reports, the fuzz corpus and a report.json written by `faultline run`; the typed
// fields hold what the readers take from it.
#include "reports/run_report.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "reports/verdict.h"
#include "reports/write_reports.h"
#include "synthetic.h"

namespace faultline::reports {
namespace {

nlohmann::json ReadJson(const std::string& rel) {
  std::ifstream in(std::string(FAULTLINE_SOURCE_DIR) + "/" + rel);
  EXPECT_TRUE(in) << rel;
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

void ExpectRoundTrip(const nlohmann::json& j, const std::string& what) {
  Result<RunReport> r = RunReport::FromJson(j);
  ASSERT_TRUE(r.ok()) << what << ": " << r.status().ToString();
  EXPECT_EQ(r->ToJson(), j) << what;
  EXPECT_EQ(r->ToJson().dump(2), j.dump(2)) << what;
}

TEST(RunReport, RoundTripsHandMadeReports) {
  ExpectRoundTrip(testing::Report(), "Report()");
  ExpectRoundTrip(testing::PassingReport(), "PassingReport()");
}

TEST(RunReport, RoundTripsTheFuzzCorpusAndARealRun) {
  for (const char* f :
       {"tests/fuzz/corpus/report/report.json", "tests/fuzz/corpus/report/aborted.json",
        "tests/fuzz/corpus/report/skipped.json", "tests/cpp/reports/testdata/demo_report.json"}) {
    ExpectRoundTrip(ReadJson(f), f);
  }
}

TEST(RunReport, TypedFieldsHoldTheReport) {
  const nlohmann::json j = testing::Report("rail-flap");
  Result<RunReport> r = RunReport::FromJson(j);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->scenario.has_value());
  EXPECT_EQ(r->scenario->name, "rail-flap");
  EXPECT_EQ(r->ccl, "ftccl");
  EXPECT_EQ(r->outcome, j.at("outcome").get<std::string>());
  ASSERT_TRUE(r->faults.has_value());
  ASSERT_EQ(r->faults->size(), 3u);
  EXPECT_EQ((*r->faults)[0].id, "f1");
  ASSERT_TRUE(r->expectations.has_value());
  ASSERT_EQ(r->expectations->size(), 3u);
  EXPECT_EQ((*r->expectations)[2].name, "stall_ms");
  EXPECT_EQ((*r->expectations)[2].pass, false);
  ASSERT_TRUE((*r->expectations)[2].value.has_value());
  EXPECT_DOUBLE_EQ((*r->expectations)[2].value->get<double>(), 812.25);
  // None of the typed keys is left in rest.
  for (const char* k :
       {"schema", "scenario", "ccl", "outcome", "faults", "metrics", "per_fault", "expectations"}) {
    EXPECT_FALSE(r->rest.contains(k)) << k;
  }
}

TEST(RunReport, EditsThroughTheModelReachTheJson) {
  Result<RunReport> r = RunReport::FromJson(testing::PassingReport());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(VerdictOf(r->ToJson()), Verdict::kPass);
  r->harness_errors = std::vector<std::string>{"writing the reports: disk full"};
  r->files.emplace().junit = "junit.xml";
  const nlohmann::json j = r->ToJson();
  EXPECT_EQ(VerdictOf(j), Verdict::kHarnessError);
  EXPECT_EQ(j.at("files").at("junit"), "junit.xml");
}

TEST(RunReport, KeepsKeysOfUnexpectedTypesAsTheyAre) {
  nlohmann::json j = testing::PassingReport();
  j["ccl"] = 7;                             // not a string: stays in rest
  j["harness_errors"] = {"a", 1};           // not all strings
  j["faults"][0]["error"] = nullptr;        // a null error
  j["scenario"]["seed"] = -1;               // a negative seed
  j["expectations"][0]["value"] = nullptr;  // not measured
  j["future_key"] = {{"x", 1}};
  Result<RunReport> r = RunReport::FromJson(j);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ccl.has_value());
  EXPECT_FALSE(r->harness_errors.has_value());
  EXPECT_FALSE((*r->faults)[0].error.has_value());
  EXPECT_TRUE((*r->expectations)[0].value.has_value());
  EXPECT_EQ(r->ToJson(), j);
}

TEST(RunReport, RefusesWhatIsNotAReport) {
  EXPECT_FALSE(RunReport::FromJson(nlohmann::json::object()).ok());
  EXPECT_FALSE(RunReport::FromJson(nlohmann::json::array()).ok());
  nlohmann::json j = testing::PassingReport();
  j["schema"] = "faultline.report/v99";
  EXPECT_EQ(RunReport::FromJson(j).status().code(), Code::kInvalidArgument);
}

// WriteReports names junit.xml and report.html through the model: every other key of
// report.json, null or of an unexpected type, is written back as it was.
TEST(RunReport, WriteReportsKeepsEveryOtherKey) {
  char tmpl[] = "/tmp/faultline-runreport-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::filesystem::path dir(tmpl);
  nlohmann::json report = testing::PassingReport();
  report["files"] = {{"timeseries", nullptr}, {"rails", "rails.csv"}, {"junit", 3}};
  report["future_key"] = {1, "two"};
  std::ofstream(dir / "report.json") << report.dump(2) << "\n";
  ASSERT_TRUE(WriteReports(dir.string()).ok());
  std::ifstream in(dir / "report.json");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json expected = report;
  expected["files"]["junit"] = "junit.xml";
  expected["files"]["html"] = "report.html";
  EXPECT_EQ(nlohmann::json::parse(ss.str()), expected);
  EXPECT_EQ(ss.str(), expected.dump(2) + "\n");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace faultline::reports
