// Checks (expectations -> pass/fail), the report.json writer, and the exit code `faultline run`
// takes from that report through the one verdict rule (reports/verdict.h), the same one
// junit.xml shows.
#include <gtest/gtest.h>

#include "reports/junit.h"
#include "reports/verdict.h"
#include "runner/core/checks.h"
#include "runner/core/report_json.h"

namespace faultline::runner {
namespace {

constexpr int64_t kMs = 1'000'000;

RunMetrics SomeMetrics() {
  RunMetrics m;
  m.outcome = Outcome::kSurvived;
  m.wrong_results = 0;
  m.overall.baseline_busbw_gbps = 0.8;
  m.overall.stall_ms = 140;
  m.overall.recovery_ms = 150;
  m.overall.goodput_loss_pct = 70;
  FaultMetrics f;
  f.id = "f1";
  f.values = m.overall;
  f.progress_ms = 150;
  f.all_flows_ms = 180;
  f.convergence = "path_events";
  f.flows.push_back({0, 1, 1, 2'010'000'000, 2'040'000'000, true});
  f.flows.push_back({1, 0, 1, 2'020'000'000, std::nullopt, false});
  m.per_fault.push_back(f);
  return m;
}

// The report.json of a run with `history`, `metrics` and `checks`, as run.cc builds it.
nlohmann::json ReportOf(const History& history, const RunMetrics& metrics,
                        const std::vector<CheckResult>& checks) {
  static const Scenario scenario = [] {
    Scenario s;
    s.name = "verdict";
    return s;
  }();
  ReportInputs in;
  in.scenario = &scenario;
  in.scenario_file = "scenarios/verdict.yaml";
  in.history = &history;
  in.metrics = &metrics;
  in.checks = &checks;
  return BuildReportJson(in);
}

// `faultline run`'s exit code for a run that completed: what Run::Finish returns.
int ExitCodeOf(const nlohmann::json& report) {
  return reports::VerdictExitCode(reports::VerdictOf(report));
}
int ExitCodeOf(const std::vector<CheckResult>& checks) {
  return ExitCodeOf(ReportOf(History{}, SomeMetrics(), checks));
}

const CheckResult* Named(const std::vector<CheckResult>& cs, const std::string& name) {
  for (const auto& c : cs) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

TEST(Checks, EachExpectationAgainstItsMetric) {
  Expectations e;
  e.outcome = ExpectedOutcome::kSurvive;
  e.wrong_results = 0;
  e.stall_ms_max = 100;                              // 140: fails
  e.recovery = Expectations::Recovery{90, 200, 50};  // 150: passes
  e.goodput_loss_pct_max = 70;                       // 70: passes (at the limit)
  e.detection_ms_max = 1000;                         // null: fails
  std::vector<CheckResult> cs = CheckExpectations(e, SomeMetrics());
  ASSERT_EQ(cs.size(), 6u);
  EXPECT_EQ(cs[0].name, "outcome");
  EXPECT_TRUE(Named(cs, "outcome")->pass);
  EXPECT_EQ(Named(cs, "outcome")->value, "survived");
  EXPECT_TRUE(Named(cs, "wrong_results")->pass);
  EXPECT_FALSE(Named(cs, "stall_ms")->pass);
  EXPECT_EQ(Named(cs, "stall_ms")->limit, (nlohmann::json{{"max", 100.0}}));
  EXPECT_EQ(Named(cs, "stall_ms")->value, 140.0);
  EXPECT_TRUE(Named(cs, "recovery_ms")->pass);
  EXPECT_EQ(Named(cs, "recovery_ms")->limit["within_ms"], 200.0);
  EXPECT_TRUE(Named(cs, "goodput_loss_pct")->pass);
  EXPECT_FALSE(Named(cs, "detection_ms")->pass);
  EXPECT_TRUE(Named(cs, "detection_ms")->value.is_null());
  EXPECT_EQ(ExitCodeOf(cs), 1);
  e.stall_ms_max = 140;
  e.detection_ms_max.reset();
  EXPECT_EQ(ExitCodeOf(CheckExpectations(e, SomeMetrics())), 0);
}

TEST(Checks, OutcomeAndWrongResultsAndDegradedRatio) {
  RunMetrics m = SomeMetrics();
  m.outcome = Outcome::kHung;
  m.wrong_results = 2;
  m.overall.degraded_ratio = 0.45;
  Expectations e;
  e.outcome = ExpectedOutcome::kAbortClean;
  e.wrong_results = 1;
  e.degraded_ratio_min = 0.4;
  auto cs = CheckExpectations(e, m);
  EXPECT_FALSE(Named(cs, "outcome")->pass);
  EXPECT_EQ(Named(cs, "outcome")->limit, "aborted_clean");
  EXPECT_EQ(Named(cs, "outcome")->value, "hung");
  EXPECT_FALSE(Named(cs, "wrong_results")->pass);
  EXPECT_TRUE(Named(cs, "degraded_ratio")->pass);
  m.overall.degraded_ratio.reset();
  EXPECT_FALSE(Named(CheckExpectations(e, m), "degraded_ratio")->pass);
  EXPECT_TRUE(CheckExpectations(Expectations{}, m).empty());
  EXPECT_EQ(ExitCodeOf(std::vector<CheckResult>{}), 0);
  // Without expectations a hung run is still no PASS: `faultline run` exits 1.
  const std::vector<CheckResult> none;
  EXPECT_EQ(ExitCodeOf(ReportOf(History{}, m, none)), 1);
  m.outcome = Outcome::kAbortedClean;
  EXPECT_EQ(ExitCodeOf(ReportOf(History{}, m, none)), 0);
}

// expect.param_sha256: twin holds only when both hashes are known and equal.
TEST(Checks, ParamHashAgainstTheTwin) {
  const std::string a(64, 'a'), b(64, 'b');
  CheckResult c = CheckParamHashAgainstTwin(a, a);
  EXPECT_TRUE(c.pass);
  EXPECT_EQ(c.name, "param_sha256");
  EXPECT_EQ(c.limit, a);
  EXPECT_EQ(c.value, a);
  EXPECT_FALSE(CheckParamHashAgainstTwin(a, b).pass);
  c = CheckParamHashAgainstTwin(std::nullopt, a);  // the ranks disagreed, or none finished
  EXPECT_FALSE(c.pass);
  EXPECT_TRUE(c.value.is_null());
  EXPECT_FALSE(CheckParamHashAgainstTwin(a, std::nullopt).pass);  // no twin to compare with
  EXPECT_FALSE(CheckParamHashAgainstTwin(std::nullopt, std::nullopt).pass);
}

TEST(Report, KeysAndValuesOfV2) {
  Scenario s;
  s.name = "demo";
  s.ccl = CclName::kFtccl;
  s.workload.check = true;
  History h;
  h.run_start_ns = 1000 * kMs;
  FaultRecord f;
  f.id = "f1";
  f.kind = "link_down";
  f.target.host = 0;
  f.target.rail = 1;
  f.target.side = LinkSide::kSwitch;
  f.scheduled_ns = 3000 * kMs;
  f.applied_ns = 3001 * kMs;
  f.observed_ns = 3002 * kMs;
  f.observed = {{"in_effect", true}};
  h.faults.push_back(f);
  RunMetrics m = SomeMetrics();
  Expectations e;
  e.stall_ms_max = 100;
  std::vector<CheckResult> cs = CheckExpectations(e, m);
  ReportInputs in;
  in.scenario = &s;
  in.scenario_file = "scenarios/demo.yaml";
  in.scenario_sha256 = Sha256Hex("x");
  in.seed = 42;
  in.environment = {{"kernel", "6.1"}};
  in.history = &h;
  in.metrics = &m;
  in.checks = &cs;
  in.files.junit = "junit.xml";
  nlohmann::json r = BuildReportJson(in);
  for (const char* key : {"schema", "scenario", "environment", "ccl", "outcome", "correctness",
                          "faults", "metrics", "per_fault", "expectations", "files"}) {
    EXPECT_TRUE(r.contains(key)) << key;
  }
  EXPECT_EQ(r["schema"], "faultline.report/v2");
  EXPECT_EQ(r["scenario"]["name"], "demo");
  EXPECT_EQ(r["scenario"]["seed"], 42);
  EXPECT_EQ(r["scenario"]["sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(r["ccl"], "ftccl");
  EXPECT_EQ(r["outcome"], "survived");
  EXPECT_EQ(r["correctness"], (nlohmann::json{{"checked", true}, {"wrong", 0}}));
  const nlohmann::json& fj = r["faults"][0];
  EXPECT_EQ(fj["id"], "f1");
  EXPECT_EQ(fj["type"], "link_down");
  EXPECT_EQ(fj["target"], (nlohmann::json{{"host", 0}, {"rail", 1}, {"side", "switch"}}));
  EXPECT_DOUBLE_EQ(fj["scheduled_s"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(fj["applied_s"].get<double>(), 2.001);
  EXPECT_TRUE(fj["reverted_s"].is_null());
  EXPECT_EQ(fj["observed"]["in_effect"], true);
  const nlohmann::json& mj = r["metrics"];
  for (const char* key : {"baseline_busbw_gbps", "stall_ms", "detection_ms", "failover_latency_ms",
                          "recovery_ms", "degraded_ratio", "goodput_loss_pct"}) {
    EXPECT_TRUE(mj.contains(key)) << key;
  }
  EXPECT_TRUE(mj["detection_ms"].is_null());
  EXPECT_EQ(mj["stall_ms"], 140.0);
  EXPECT_EQ(r["per_fault"][0]["id"], "f1");
  EXPECT_EQ(r["per_fault"][0]["recovery_ms"], 150.0);
  EXPECT_EQ(r["per_fault"][0]["progress_ms"], 150.0);
  EXPECT_EQ(r["per_fault"][0]["all_flows_ms"], 180.0);
  EXPECT_EQ(r["per_fault"][0]["convergence"], "path_events");
  EXPECT_EQ(r["per_fault"][0]["never_converged"], false);
  ASSERT_EQ(r["per_fault"][0]["flows"].size(), 2u);
  const nlohmann::json& flow = r["per_fault"][0]["flows"][0];
  EXPECT_EQ(flow["rank"], 0);
  EXPECT_EQ(flow["peer"], 1);
  EXPECT_EQ(flow["path"], 1);
  EXPECT_EQ(flow["counted"], true);
  EXPECT_NEAR(flow["resumed_s"].get<double>() - flow["down_s"].get<double>(), 0.030, 1e-9);
  EXPECT_TRUE(r["per_fault"][0]["flows"][1]["resumed_s"].is_null());
  EXPECT_TRUE(r["metrics"].contains("failover_first_ms"));
  EXPECT_TRUE(r["window"]["stop_agreements"].is_null());  // this history has none
  EXPECT_EQ(
      r["expectations"][0],
      (nlohmann::json{
          {"name", "stall_ms"}, {"limit", {{"max", 100.0}}}, {"value", 140.0}, {"pass", false}}));
  EXPECT_EQ(r["files"]["junit"], "junit.xml");
  EXPECT_TRUE(r["files"]["html"].is_null());
  // Unchecked results report no count rather than zero.
  s.workload.check = false;
  EXPECT_TRUE(BuildReportJson(in)["correctness"]["wrong"].is_null());
  // The timed stop agreements: how many, median, longest, failed.
  h.syncs = {{0, 5, 0, 2 * kMs, true}, {1, 5, 0, 6 * kMs, true}, {0, 6, 0, 3 * kMs, false}};
  const nlohmann::json sa = BuildReportJson(in)["window"]["stop_agreements"];
  EXPECT_EQ(sa, (nlohmann::json{{"count", 3}, {"median_ms", 3.0}, {"max_ms", 6.0}, {"failed", 1}}));
}

// A fault whose time never came because every rank had ended: no harness failure when the ranks
// had aborted (cleanly, as expected) on an earlier fault, a harness failure when they had
// simply finished first. The exit code and junit.xml say the same in both cases.
// A rejoin: one entry per grow; the members' stall from the first member's start, the
// repair's cost from the joiner's repair, both to the last rank in the grown group.
TEST(Report, GrowEntryTimesTheStallAndTheRepairToFullSize) {
  History h;
  h.run_start_ns = 1'000'000'000;
  auto grow = [](int rank, int64_t start, int64_t end, bool joiner) {
    GrowRecord g;
    g.rank = rank;
    g.start_ns = start;
    g.end_ns = end;
    g.joined = {1};
    g.group = 2;
    g.joiner = joiner;
    return g;
  };
  h.grows = {grow(0, 4'000'000'000, 4'030'000'000, false),
             grow(1, 3'500'000'000, 4'050'000'000, true)};
  const nlohmann::json r = ReportOf(h, SomeMetrics(), {});
  ASSERT_EQ(r["grows"].size(), 1u) << r["grows"].dump();
  const nlohmann::json& g = r["grows"][0];
  EXPECT_EQ(g["joined"], nlohmann::json({1}));
  EXPECT_EQ(g["group"], 2);
  EXPECT_EQ(g["ranks"], nlohmann::json({0, 1}));
  EXPECT_DOUBLE_EQ(g["repaired_s"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(g["start_s"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(g["stall_ms"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(g["repair_to_full_ms"].get<double>(), 550.0);
  EXPECT_TRUE(g["ok"].get<bool>());
  // Without the joiner's record the repair's cost is not known: null, not a made-up value.
  h.grows.pop_back();
  const nlohmann::json m = ReportOf(h, SomeMetrics(), {})["grows"][0];
  EXPECT_TRUE(m["repair_to_full_ms"].is_null());
  EXPECT_DOUBLE_EQ(m["stall_ms"].get<double>(), 30.0);
  EXPECT_TRUE(ReportOf(History{}, SomeMetrics(), {})["grows"].empty());
}

TEST(Verdict, FaultNotReachedAfterACleanAbortExitsZeroAndJUnitAgrees) {
  History h;
  FaultRecord down;
  down.id = "down";
  down.kind = "link_down";
  down.applied_ns = 2000 * kMs;
  FaultRecord late;
  late.id = "late";
  late.kind = "link_down";
  late.scheduled_ns = 20000 * kMs;
  late.error = reports::kRanksEndedFirstError;
  h.faults = {down, late};
  RunMetrics m = SomeMetrics();
  m.outcome = Outcome::kAbortedClean;
  Expectations e;
  e.outcome = ExpectedOutcome::kAbortClean;
  const nlohmann::json aborted = ReportOf(h, m, CheckExpectations(e, m));
  EXPECT_EQ(aborted["faults"][1]["error"], reports::kRanksEndedFirstError);
  EXPECT_EQ(ExitCodeOf(aborted), 0);
  const std::string junit = reports::JUnitXml({aborted});
  EXPECT_EQ(junit.find("<error "), std::string::npos) << junit;
  EXPECT_NE(junit.find("<property name=\"verdict\" value=\"PASS\"/>"), std::string::npos) << junit;

  m.outcome = Outcome::kSurvived;
  e.outcome = ExpectedOutcome::kSurvive;
  const nlohmann::json finished = ReportOf(h, m, CheckExpectations(e, m));
  EXPECT_EQ(ExitCodeOf(finished), 3);
  const std::string junit_finished = reports::JUnitXml({finished});
  EXPECT_NE(junit_finished.find("<property name=\"verdict\" value=\"HARNESS ERROR\"/>"),
            std::string::npos)
      << junit_finished;
  EXPECT_NE(junit_finished.find("<error "), std::string::npos) << junit_finished;
}

TEST(Report, Sha256KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

}  // namespace
}  // namespace faultline::runner
