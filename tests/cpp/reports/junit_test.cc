#include "reports/junit.h"

#include <gtest/gtest.h>

#include "synthetic.h"

namespace faultline::reports {
namespace {

using testing::ParseXml;
using testing::Report;
using testing::XmlNode;

const XmlNode* Case(const XmlNode& suite, const std::string& name) {
  for (const XmlNode* c : suite.All("testcase")) {
    if (c->Attr("name") == name) return c;
  }
  return nullptr;
}

TEST(JUnitXml, OneSuiteWithOutcomeAndEveryExpectation) {
  const std::string xml = JUnitXml({Report()});
  auto root = ParseXml(xml);
  ASSERT_TRUE(root) << xml;
  EXPECT_EQ(root->name, "testsuites");
  ASSERT_EQ(root->children.size(), 1u);
  const XmlNode& suite = root->children[0];
  EXPECT_EQ(suite.name, "testsuite");
  EXPECT_EQ(suite.Attr("name"), "rail-flap");
  EXPECT_EQ(suite.Attr("tests"), "4");
  EXPECT_EQ(suite.Attr("failures"), "1");
  EXPECT_EQ(suite.Attr("errors"), "0");
  EXPECT_EQ(suite.Attr("skipped"), "0");
  EXPECT_EQ(root->Attr("tests"), "4");
  EXPECT_EQ(root->Attr("failures"), "1");
  // properties come first, then the testcases, then system-out (schema order).
  EXPECT_EQ(suite.children.front().name, "properties");
  EXPECT_EQ(suite.children.back().name, "system-out");

  const XmlNode* outcome = Case(suite, "outcome");
  ASSERT_NE(outcome, nullptr);
  EXPECT_TRUE(outcome->children.empty());
  EXPECT_EQ(outcome->Attr("classname"), "faultline.rail-flap");
  ASSERT_NE(Case(suite, "expect.outcome"), nullptr);
  EXPECT_TRUE(Case(suite, "expect.wrong_results")->children.empty());
  const XmlNode* stall = Case(suite, "expect.stall_ms");
  ASSERT_NE(stall, nullptr);
  ASSERT_EQ(stall->children.size(), 1u);
  EXPECT_EQ(stall->children[0].name, "failure");
  const std::string msg = stall->children[0].Attr("message");
  EXPECT_NE(msg.find("812.25"), std::string::npos) << msg;
  EXPECT_NE(msg.find("max 500"), std::string::npos) << msg;
  EXPECT_EQ(stall->children[0].Attr("type"), "expectation");

  std::map<std::string, std::string> props;
  for (const XmlNode* p : suite.All("property")) props[p->Attr("name")] = p->Attr("value");
  EXPECT_EQ(props["ccl"], "ftccl");
  EXPECT_EQ(props["seed"], "42");
  EXPECT_EQ(props["outcome"], "survived");
  EXPECT_EQ(props["verdict"], "FAIL");
}

TEST(JUnitXml, NullValueSaysNotMeasured) {
  nlohmann::json r = Report();
  r["expectations"] = {{{"name", "recovery_ms"},
                        {"limit", {{"pct", 90}, {"within_ms", 1000}}},
                        {"value", nullptr},
                        {"pass", false}}};
  auto root = ParseXml(JUnitXml({r}));
  ASSERT_TRUE(root);
  const std::string msg = root->All("failure").at(0)->Attr("message");
  EXPECT_NE(msg.find("null (not measured)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pct 90, within_ms 1000"), std::string::npos) << msg;
}

TEST(JUnitXml, CrashedRunFailsTheOutcomeCase) {
  nlohmann::json r = testing::PassingReport();
  r["outcome"] = "crashed";
  auto root = ParseXml(JUnitXml({r}));
  ASSERT_TRUE(root);
  const XmlNode* outcome = Case(root->children[0], "outcome");
  ASSERT_EQ(outcome->children.size(), 1u);
  EXPECT_EQ(outcome->children[0].name, "failure");
  EXPECT_NE(outcome->children[0].Attr("message").find("crashed"), std::string::npos);
  EXPECT_EQ(root->children[0].Attr("failures"), "1");
}

TEST(JUnitXml, HarnessFailureIsAnError) {
  nlohmann::json r = testing::PassingReport();
  r["harness_errors"] = {"interrupted by a signal: the ranks were stopped early"};
  r["faults"][2]["error"] = "netns gone";
  auto root = ParseXml(JUnitXml({r}));
  ASSERT_TRUE(root);
  const XmlNode& suite = root->children[0];
  EXPECT_EQ(suite.Attr("errors"), "1");
  EXPECT_EQ(suite.Attr("failures"), "0");
  const XmlNode* outcome = Case(suite, "outcome");
  ASSERT_EQ(outcome->children.size(), 1u);
  EXPECT_EQ(outcome->children[0].name, "error");
  EXPECT_NE(outcome->children[0].text.find("fault f3: netns gone"), std::string::npos);
  EXPECT_EQ(root->Attr("errors"), "1");
}

TEST(JUnitXml, SkippedRunIsASkippedCaseNotAPass) {
  nlohmann::json r = testing::PassingReport("netem");
  r["outcome"] = "skipped";
  r["skipped"] = "kernel lacks sch_netem";
  r["expectations"] = nlohmann::json::array();
  auto root = ParseXml(JUnitXml({r}));
  ASSERT_TRUE(root);
  const XmlNode& suite = root->children[0];
  EXPECT_EQ(suite.Attr("skipped"), "1");
  EXPECT_EQ(suite.Attr("tests"), "1");
  EXPECT_EQ(suite.Attr("failures"), "0");
  EXPECT_EQ(suite.Attr("errors"), "0");
  const XmlNode* outcome = Case(suite, "outcome");
  ASSERT_NE(outcome, nullptr);
  ASSERT_EQ(outcome->children.size(), 1u);
  EXPECT_EQ(outcome->children[0].name, "skipped");
  EXPECT_EQ(outcome->children[0].Attr("message"), "kernel lacks sch_netem");
}

TEST(JUnitXml, SeveralReportsOneSuiteEachWithDistinctNames) {
  nlohmann::json a = Report("same");
  nlohmann::json b = testing::PassingReport("same");
  b["ccl"] = "gloo";
  nlohmann::json c = testing::PassingReport("other");
  auto root = ParseXml(JUnitXml({a, b, c}));
  ASSERT_TRUE(root);
  ASSERT_EQ(root->children.size(), 3u);
  EXPECT_EQ(root->children[0].Attr("name"), "same [ftccl, seed 42]");
  EXPECT_EQ(root->children[1].Attr("name"), "same [gloo, seed 42]");
  EXPECT_EQ(root->children[2].Attr("name"), "other");
  EXPECT_EQ(root->Attr("tests"), "12");
  EXPECT_EQ(root->Attr("failures"), "1");
  // Identical name, ccl and seed: numbered.
  auto twice = ParseXml(JUnitXml({a, a}));
  ASSERT_TRUE(twice);
  EXPECT_NE(twice->children[0].Attr("name"), twice->children[1].Attr("name"));
}

TEST(JUnitXml, EmptyListIsAnEmptyValidDocument) {
  auto root = ParseXml(JUnitXml({}));
  ASSERT_TRUE(root);
  EXPECT_EQ(root->Attr("tests"), "0");
  EXPECT_TRUE(root->children.empty());
}

TEST(JUnitXml, HostileNamesAreEscaped) {
  const std::string name = "a<b>&\"c' ]]> \x01\n";
  nlohmann::json r = Report(name);
  r["expectations"][2]["name"] = "x</failure><y>";
  r["scenario"]["file"] = "dir/&amp;.yaml";
  const std::string xml = JUnitXml({r});
  auto root = ParseXml(xml);
  ASSERT_TRUE(root) << xml;
  EXPECT_EQ(root->children[0].Attr("name"), "a<b>&\"c' ]]> \xEF\xBF\xBD\n");
  ASSERT_NE(Case(root->children[0], "expect.x</failure><y>"), nullptr);
  std::map<std::string, std::string> props;
  for (const XmlNode* p : root->All("property")) props[p->Attr("name")] = p->Attr("value");
  EXPECT_EQ(props["scenario.file"], "dir/&amp;.yaml");
}

}  // namespace
}  // namespace faultline::reports
