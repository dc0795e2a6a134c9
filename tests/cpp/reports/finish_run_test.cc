// FinishRun (reports/finish_run.h): the exit code is the verdict of the report.json on disk,
// also when a writer fails (the failure is recorded there) or when report.json cannot be
// written at all (kHarnessError).
#include "reports/finish_run.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "reports/run_data.h"
#include "synthetic.h"

namespace faultline::reports {
namespace {

namespace fs = std::filesystem;
using testing::PassingReport;
using testing::Report;

class FinishRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/faultline-finish-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  nlohmann::json OnDisk() {
    std::ifstream in(fs::path(dir_) / "report.json");
    std::stringstream ss;
    ss << in.rdbuf();
    return nlohmann::json::parse(ss.str());
  }
  std::string dir_;
};

TEST_F(FinishRunTest, PassingReportIsOkAndStoredWithItsFiles) {
  const nlohmann::json report = PassingReport();
  const FinishedRun done = FinishRun(dir_, report);
  EXPECT_EQ(done.code, ExitCode::kOk);
  EXPECT_EQ(done.verdict, Verdict::kPass);
  EXPECT_TRUE(done.errors.empty());
  EXPECT_TRUE(fs::exists(fs::path(dir_) / "junit.xml"));
  EXPECT_TRUE(fs::exists(fs::path(dir_) / "report.html"));
  EXPECT_TRUE(fs::exists(fs::path(dir_) / "summary.md"));
  // What is on disk is the report plus the names of the files rendered from it.
  nlohmann::json expected = report;
  expected["files"]["junit"] = "junit.xml";
  expected["files"]["html"] = "report.html";
  EXPECT_EQ(OnDisk(), expected);
  EXPECT_EQ(done.report, expected);
}

TEST_F(FinishRunTest, FailedExpectationIsExitOne) {
  const FinishedRun done = FinishRun(dir_, Report());
  EXPECT_EQ(done.code, ExitCode::kExpectationFailed);
  EXPECT_EQ(ToInt(done.code), 1);
  EXPECT_EQ(done.verdict, Verdict::kFail);
  EXPECT_FALSE(OnDisk().contains("harness_errors"));
}

TEST_F(FinishRunTest, WriterFailureIsRecordedOnDiskAndIsAHarnessError) {
  // junit.xml is a non-empty directory: renaming junit.xml.tmp over it fails.
  fs::create_directories(fs::path(dir_) / "junit.xml" / "x");
  const FinishedRun done = FinishRun(dir_, PassingReport());
  EXPECT_EQ(done.code, ExitCode::kHarnessError);
  EXPECT_EQ(done.verdict, Verdict::kHarnessError);
  ASSERT_EQ(done.errors.size(), 1u);
  EXPECT_EQ(done.errors[0].rfind("writing the reports: ", 0), 0u) << done.errors[0];
  // The file on disk says so: a reader of report.json gets the same verdict as the exit code.
  const nlohmann::json disk = OnDisk();
  ASSERT_TRUE(disk.contains("harness_errors"));
  ASSERT_EQ(disk["harness_errors"].size(), 1u);
  EXPECT_EQ(disk["harness_errors"][0], done.errors[0]);
  EXPECT_EQ(VerdictOf(disk), Verdict::kHarnessError);
  EXPECT_EQ(done.report, disk);
}

TEST_F(FinishRunTest, WriterFailureKeepsEarlierHarnessErrors) {
  fs::create_directories(fs::path(dir_) / "report.html" / "x");
  nlohmann::json report = PassingReport();
  report["harness_errors"] = {"interrupted by a signal: the ranks were stopped early"};
  const FinishedRun done = FinishRun(dir_, report);
  EXPECT_EQ(done.code, ExitCode::kHarnessError);
  const nlohmann::json disk = OnDisk();
  ASSERT_EQ(disk["harness_errors"].size(), 2u);
  EXPECT_EQ(disk["harness_errors"][0], "interrupted by a signal: the ranks were stopped early");
}

TEST_F(FinishRunTest, ReportThatCannotBeWrittenIsAHarnessError) {
  // The run directory is a path under a regular file: nothing can be written there.
  std::ofstream(fs::path(dir_) / "file") << "x";
  const std::string under_file = (fs::path(dir_) / "file" / "run").string();
  const FinishedRun done = FinishRun(under_file, PassingReport());
  EXPECT_EQ(done.code, ExitCode::kHarnessError);
  EXPECT_EQ(done.verdict, Verdict::kHarnessError);
  EXPECT_TRUE(done.report.is_null());
  ASSERT_GE(done.errors.size(), 2u);
  EXPECT_EQ(done.errors[0].rfind("writing the report: ", 0), 0u) << done.errors[0];
}

TEST_F(FinishRunTest, StaleReportOnDiskIsNotTakenForTheNewOne) {
  // A passing report.json of an earlier run is replaced, so a failing run cannot exit 0.
  ASSERT_EQ(FinishRun(dir_, PassingReport()).code, ExitCode::kOk);
  EXPECT_EQ(FinishRun(dir_, Report()).code, ExitCode::kExpectationFailed);
}

TEST(ExitCodeTest, ValuesOrderAndVerdicts) {
  EXPECT_EQ(ToInt(ExitCode::kOk), 0);
  EXPECT_EQ(ToInt(ExitCode::kExpectationFailed), 1);
  EXPECT_EQ(ToInt(ExitCode::kBadInput), 2);
  EXPECT_EQ(ToInt(ExitCode::kHarnessError), 3);
  EXPECT_EQ(Worse(ExitCode::kBadInput, ExitCode::kExpectationFailed), ExitCode::kBadInput);
  EXPECT_EQ(Worse(ExitCode::kOk, ExitCode::kHarnessError), ExitCode::kHarnessError);
  EXPECT_EQ(ExitCodeFromInt(2), ExitCode::kBadInput);
  EXPECT_EQ(ExitCodeFromInt(139), ExitCode::kHarnessError);
  EXPECT_EQ(ExitCodeFromInt(-1), ExitCode::kHarnessError);
  EXPECT_EQ(ExitCodeOf(Verdict::kPass), ExitCode::kOk);
  EXPECT_EQ(ExitCodeOf(Verdict::kFail), ExitCode::kExpectationFailed);
  EXPECT_EQ(ExitCodeOf(Verdict::kHarnessError), ExitCode::kHarnessError);
}

}  // namespace
}  // namespace faultline::reports
