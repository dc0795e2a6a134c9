// The one verdict rule (reports/verdict.h) and the writers that show it: `faultline run`'s exit
// code is VerdictExitCode(VerdictOf(report)), so junit.xml, report.html and summary.md must say
// the same verdict for the same report.
#include "reports/verdict.h"

#include <gtest/gtest.h>

#include <string>

#include "reports/html.h"
#include "reports/junit.h"
#include "reports/markdown.h"
#include "synthetic.h"

namespace faultline::reports {
namespace {

using testing::ParseXml;

// The passing report whose ranks aborted cleanly on f2 (as the scenario expected), so that f3's
// time never came: the runner records kRanksEndedFirstError for it.
nlohmann::json AbortedBeforeF3() {
  nlohmann::json r = testing::PassingReport();
  r["outcome"] = "aborted_clean";
  r["expectations"][0] = {
      {"name", "outcome"}, {"limit", "aborted_clean"}, {"value", "aborted_clean"}, {"pass", true}};
  r["faults"][2]["error"] = kRanksEndedFirstError;
  return r;
}

// What each writer says about `report`: the verdict name in the HTML header, the Markdown title
// and the JUnit suite (its "verdict" property and whether it counts an error).
struct Shown {
  std::string html;
  std::string markdown;
  std::string junit_verdict;
  std::string junit_errors;
};

Shown WritersOn(const nlohmann::json& report) {
  Shown s;
  const RunData run = testing::Run(report);
  const std::string html = HtmlReport(run);
  for (const char* name : {"PASS", "FAIL", "HARNESS ERROR"}) {
    if (html.find("<h1>" + std::string(name) + "</h1>") != std::string::npos) s.html = name;
  }
  const std::string md = MarkdownSummary(run);
  for (const char* name : {"PASS", "FAIL", "HARNESS ERROR"}) {
    if (md.find("— **" + std::string(name) + "**\n") != std::string::npos) s.markdown = name;
  }
  auto root = ParseXml(JUnitXml({report}));
  if (root && !root->children.empty()) {
    const auto& suite = root->children[0];
    s.junit_errors = suite.Attr("errors");
    for (const auto* p : suite.All("property")) {
      if (p->Attr("name") == "verdict") s.junit_verdict = p->Attr("value");
    }
  }
  return s;
}

TEST(Verdict, FaultNotReachedAfterACleanAbortIsNoHarnessError) {
  const nlohmann::json r = AbortedBeforeF3();
  EXPECT_TRUE(FaultErrors(r).empty());
  EXPECT_TRUE(HarnessErrors(r).empty());
  EXPECT_EQ(VerdictOf(r), Verdict::kPass);
  EXPECT_EQ(VerdictExitCode(VerdictOf(r)), 0);
  const Shown s = WritersOn(r);
  EXPECT_EQ(s.html, "PASS");
  EXPECT_EQ(s.markdown, "PASS");
  EXPECT_EQ(s.junit_verdict, "PASS");
  EXPECT_EQ(s.junit_errors, "0");
}

TEST(Verdict, FaultNotReachedAfterAHangOrCrashIsNoHarnessErrorEither) {
  for (const char* outcome : {"hung", "crashed"}) {
    nlohmann::json r = AbortedBeforeF3();
    r["outcome"] = outcome;
    r["expectations"][0]["value"] = outcome;
    r["expectations"][0]["pass"] = false;
    EXPECT_TRUE(FaultErrors(r).empty()) << outcome;
    EXPECT_EQ(VerdictOf(r), Verdict::kFail) << outcome;
    EXPECT_EQ(VerdictExitCode(VerdictOf(r)), 1) << outcome;
    const Shown s = WritersOn(r);
    EXPECT_EQ(s.html, "FAIL") << outcome;
    EXPECT_EQ(s.markdown, "FAIL") << outcome;
    EXPECT_EQ(s.junit_verdict, "FAIL") << outcome;
    EXPECT_EQ(s.junit_errors, "0") << outcome;
  }
}

TEST(Verdict, FaultNotReachedInARunThatSurvivedIsAHarnessError) {
  // The ranks finished their work before f3's time: the run did not test what the scenario says.
  nlohmann::json r = testing::PassingReport();
  r["faults"][2]["error"] = kRanksEndedFirstError;
  ASSERT_EQ(FaultErrors(r).size(), 1u);
  std::string want = "fault f3: ";
  want += kRanksEndedFirstError;
  EXPECT_EQ(FaultErrors(r)[0], want);
  EXPECT_EQ(VerdictOf(r), Verdict::kHarnessError);
  EXPECT_EQ(VerdictExitCode(VerdictOf(r)), 3);
  const Shown s = WritersOn(r);
  EXPECT_EQ(s.html, "HARNESS ERROR");
  EXPECT_EQ(s.markdown, "HARNESS ERROR");
  EXPECT_EQ(s.junit_verdict, "HARNESS ERROR");
  EXPECT_EQ(s.junit_errors, "1");
}

TEST(Verdict, AnyOtherFaultErrorAfterAnAbortIsAHarnessError) {
  nlohmann::json r = AbortedBeforeF3();
  r["faults"][2]["error"] = "netns gone";
  EXPECT_EQ(FaultErrors(r), std::vector<std::string>{"fault f3: netns gone"});
  EXPECT_EQ(VerdictOf(r), Verdict::kHarnessError);
  EXPECT_EQ(WritersOn(r).junit_errors, "1");
}

// A scenario without expectations is not a PASS whatever happened: a run that hung or crashed
// fails unless an expectation names that outcome.
TEST(Verdict, HangOrCrashWithoutExpectationsFails) {
  for (const char* outcome : {"hung", "crashed"}) {
    nlohmann::json r = testing::PassingReport();
    r["outcome"] = outcome;
    r["expectations"] = nlohmann::json::array();
    ASSERT_TRUE(UnexpectedOutcome(r).has_value()) << outcome;
    EXPECT_NE(UnexpectedOutcome(r)->find(outcome), std::string::npos) << *UnexpectedOutcome(r);
    EXPECT_EQ(VerdictOf(r), Verdict::kFail) << outcome;
    EXPECT_EQ(VerdictExitCode(VerdictOf(r)), 1) << outcome;
    const Shown s = WritersOn(r);
    EXPECT_EQ(s.html, "FAIL") << outcome;
    EXPECT_EQ(s.markdown, "FAIL") << outcome;
    EXPECT_EQ(s.junit_verdict, "FAIL") << outcome;
    // The writers say why.
    const RunData run = testing::Run(r);
    EXPECT_NE(HtmlReport(run).find("the scenario does not expect it"), std::string::npos);
    EXPECT_NE(MarkdownSummary(run).find("the scenario does not expect it"), std::string::npos);
  }
  // Expectations that say nothing of the outcome do not excuse it either.
  nlohmann::json r = testing::PassingReport();
  r["outcome"] = "hung";
  r["expectations"].erase(0);  // the outcome expectation
  EXPECT_EQ(VerdictOf(r), Verdict::kFail);
}

TEST(Verdict, SurvivedOrAbortedCleanWithoutExpectationsPasses) {
  for (const char* outcome : {"survived", "aborted_clean"}) {
    nlohmann::json r = testing::PassingReport();
    r["outcome"] = outcome;
    r["expectations"] = nlohmann::json::array();
    EXPECT_FALSE(UnexpectedOutcome(r).has_value()) << outcome;
    EXPECT_EQ(VerdictOf(r), Verdict::kPass) << outcome;
    EXPECT_EQ(WritersOn(r).junit_verdict, "PASS") << outcome;
  }
}

TEST(Verdict, AnExpectedHangPasses) {
  // An incident replay whose reproduce: says the fail-stop library hangs, and it did.
  nlohmann::json r = testing::PassingReport();
  r["outcome"] = "hung";
  r["expectations"] = {{{"name", "reproduce.outcome"}, {"limit", "hung"}, {"value", "hung"}, {"pass", true}}};
  EXPECT_FALSE(UnexpectedOutcome(r).has_value());
  EXPECT_EQ(VerdictOf(r), Verdict::kPass);
  auto root = ParseXml(JUnitXml({r}));
  ASSERT_TRUE(root);
  EXPECT_EQ(root->children[0].Attr("failures"), "0");
  // The same expectation on another outcome does not excuse a crash.
  r["outcome"] = "crashed";
  r["expectations"][0]["value"] = "crashed";
  r["expectations"][0]["pass"] = false;
  EXPECT_TRUE(UnexpectedOutcome(r).has_value());
  EXPECT_EQ(VerdictOf(r), Verdict::kFail);
}

TEST(Verdict, ANullValueFailsWithItsReason) {
  nlohmann::json r = testing::PassingReport();
  r["expectations"][2] = {{"name", "detection_ms"},
                          {"limit", {{"max", 50.0}}},
                          {"value", nullptr},
                          {"pass", false},
                          {"reason", "null: fault f2 has none"}};
  EXPECT_EQ(VerdictOf(r), Verdict::kFail);
  ASSERT_EQ(FailedExpectations(r).size(), 1u);
  EXPECT_EQ(FailedExpectations(r)[0],
            "detection_ms: measured nothing (null: fault f2 has none), limit max 50");
}

TEST(Verdict, HarnessErrorOverFailedExpectationOverPass) {
  nlohmann::json r = testing::Report();  // stall_ms fails
  EXPECT_EQ(VerdictOf(r), Verdict::kFail);
  EXPECT_EQ(VerdictExitCode(VerdictOf(r)), 1);
  EXPECT_EQ(WritersOn(r).html, "FAIL");
  r["harness_errors"] = {"writing the reports: disk full"};
  EXPECT_EQ(VerdictOf(r), Verdict::kHarnessError);
  EXPECT_EQ(VerdictExitCode(VerdictOf(r)), 3);
  EXPECT_EQ(HarnessErrors(r), std::vector<std::string>{"writing the reports: disk full"});
  EXPECT_EQ(VerdictOf(testing::PassingReport()), Verdict::kPass);
  EXPECT_EQ(VerdictExitCode(Verdict::kPass), 0);
}

}  // namespace
}  // namespace faultline::reports
