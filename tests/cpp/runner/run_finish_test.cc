// The end of a run (runner/exec/run_finish.h) from a hand-made history, through a fake Site:
// the files it writes, and an exit code that is the verdict of report.json as it is on disk
// (a report writer that fails turns the run into a harness error in the file and the code).
#include "runner/exec/run_finish.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "exec_test_util.h"
#include "reports/exit_code.h"

namespace faultline::runner {
namespace {

namespace fs = std::filesystem;
using testing::Calls;
using testing::FakeSite;
using testing::ScenarioFrom;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kT0 = 1000 * kMs;

const char* kYaml =
    "name: finish\n"
    "topology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
    "workload: {op: allreduce, bytes: 1MiB, duration: 2s, warmup: 0ms}\n"
    "expect: {outcome: survive, wrong_results: 0}\n";

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class RunFinishTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("fl-finish-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "scenario.yaml") << kYaml;
    options_.scenario_path = (dir_ / "scenario.yaml").string();
    options_.out_dir = dir_.string();
    scenario_ = ScenarioFrom(kYaml);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Two ranks, `n` allreduces 10 ms apart on both, `wrong` of them wrong on rank 1.
  History TwoRanks(int n, int wrong) {
    History h;
    h.world_size = 2;
    h.op = CollOp::kAllReduce;
    h.run_start_ns = kT0;
    for (int i = 0; i < n; ++i) {
      for (int r = 0; r < 2; ++r) {
        OpRecord op;
        op.rank = r;
        op.index = i;
        op.start_ns = kT0 + i * 10 * kMs;
        op.end_ns = op.start_ns + 5 * kMs;
        op.bytes = 1 << 20;
        op.wrong = r == 1 && i < wrong;
        h.ops.push_back(op);
      }
    }
    for (int r = 0; r < 2; ++r) {
      RankEnd e;
      e.rank = r;
      e.exit = RankExit::kCompleted;
      h.ranks.push_back(e);
    }
    return h;
  }

  int Finish(History h) {
    FinishInputs in;
    in.scenario = &scenario_;
    in.options = &options_;
    in.out_dir = dir_.string();
    in.run_id = "t1";
    in.t0_ns = kT0;
    in.execute_start_ns = kT0;
    in.built.history = std::move(h);
    in.site = &site_;
    in.harness_errors = &harness_errors_;
    return FinishRun(in);
  }

  nlohmann::json Report() { return nlohmann::json::parse(Slurp(dir_ / "report.json")); }

  fs::path dir_;
  RunOptions options_;
  Scenario scenario_;
  Calls calls_;
  FakeSite site_{&calls_};
  std::vector<std::string> harness_errors_;
};

TEST_F(RunFinishTest, ACleanRunPassesAndWritesEveryFile) {
  EXPECT_EQ(Finish(TwoRanks(50, 0)), reports::ToInt(reports::ExitCode::kOk));
  const nlohmann::json r = Report();
  EXPECT_EQ(r["outcome"], "survived");
  EXPECT_EQ(r["correctness"]["wrong"], 0);
  for (const auto& e : r["expectations"]) EXPECT_TRUE(e["pass"].get<bool>()) << e.dump();
  EXPECT_FALSE(r.contains("harness_errors"));
  // One timeseries row per collective (both ranks' records make one), and the reports.
  const std::string ts = Slurp(dir_ / "timeseries.csv");
  EXPECT_EQ(std::count(ts.begin(), ts.end(), '\n'), 51);
  for (const char* f : {"events.jsonl", "junit.xml", "report.html", "summary.md"}) {
    EXPECT_TRUE(fs::exists(dir_ / f)) << f;
  }
  EXPECT_FALSE(fs::exists(dir_ / "rails.csv")) << "no rail was sampled";
}

TEST_F(RunFinishTest, WrongResultsFailTheExpectation) {
  EXPECT_EQ(Finish(TwoRanks(50, 3)), reports::ToInt(reports::ExitCode::kExpectationFailed));
  const nlohmann::json r = Report();
  EXPECT_EQ(r["correctness"]["wrong"], 3);
  bool failed = false;
  for (const auto& e : r["expectations"]) failed |= !e["pass"].get<bool>();
  EXPECT_TRUE(failed) << r["expectations"].dump();
}

TEST_F(RunFinishTest, AHarnessErrorIsInTheFileAndTheCode) {
  harness_errors_.push_back("rank 1's log could not be read");
  EXPECT_EQ(Finish(TwoRanks(50, 0)), reports::ToInt(reports::ExitCode::kHarnessError));
  const nlohmann::json r = Report();
  ASSERT_TRUE(r.contains("harness_errors"));
  EXPECT_EQ(r["harness_errors"][0], "rank 1's log could not be read");
}

TEST_F(RunFinishTest, AReportThatCannotBeWrittenIsAHarnessErrorOnDiskToo) {
  // report.html's place is taken by a directory: its writer fails after report.json exists.
  fs::create_directories(dir_ / "report.html");
  EXPECT_EQ(Finish(TwoRanks(50, 0)), reports::ToInt(reports::ExitCode::kHarnessError));
  const nlohmann::json r = Report();
  ASSERT_TRUE(r.contains("harness_errors")) << "the exit code says harness error, the file not";
  EXPECT_NE(r["harness_errors"].dump().find("report.html"), std::string::npos)
      << r["harness_errors"].dump();
  EXPECT_EQ(harness_errors_.size(), r["harness_errors"].size());
}

}  // namespace
}  // namespace faultline::runner
