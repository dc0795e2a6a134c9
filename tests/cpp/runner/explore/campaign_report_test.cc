// The campaign's files: campaign.json names every run and the shrink path; campaign.html is
// self-contained and escapes what it shows; junit.xml has one testcase per run and invariant.
#include "runner/explore/campaign_report.h"

#include <gtest/gtest.h>

namespace faultline::runner::explore {
namespace {

CampaignRecord Sample() {
  CampaignRecord c;
  c.space_file = "spaces/<evil>&.yaml";
  c.space_name = "s<script>alert(1)</script>";
  c.ccl = "ftccl";
  c.seed = 3;
  c.invariants_on = {"exact_results", "liveness_after_heal"};
  GenFault f;
  f.id = "f0";
  f.type = "link_down";
  f.at_ns = 1'000'000'000;
  f.for_ns = 200'000'000;
  RunRecord ok;
  ok.index = 0;
  ok.file = "runs/run-0.yaml";
  ok.outcome = "survived";
  ok.faults = {f};
  ok.invariants = {{"exact_results", Verdict::kPass, ""},
                   {"liveness_after_heal", Verdict::kNotApplicable, "no heal"}};
  RunRecord bad = ok;
  bad.index = 1;
  bad.file = "runs/run-1.yaml";
  bad.invariants = {{"exact_results", Verdict::kFail, "3 wrong <b>"},
                    {"liveness_after_heal", Verdict::kPass, ""}};
  RunRecord broken = ok;
  broken.index = 2;
  broken.error = "exit code 3 \"quoted\"";
  broken.invariants.clear();
  c.runs = {ok, bad, broken};
  c.shrink.emplace();
  c.shrink->from_index = 1;
  c.shrink->invariant = "exact_results";
  c.shrink->result.minimal = {f};
  c.shrink->result.steps = {{"ddmin: keep f0", {f}, true, true}};
  c.shrink->result.asked = 1;
  c.exit_code = 1;
  return c;
}

TEST(CampaignReport, JsonListsRunsAndShrinkPath) {
  const nlohmann::json j = CampaignJson(Sample());
  EXPECT_EQ(j["schema"], kCampaignSchema);
  ASSERT_EQ(j["runs"].size(), 3u);
  EXPECT_EQ(j["runs"][1]["invariant_failures"], nlohmann::json::array({"exact_results"}));
  EXPECT_EQ(j["runs"][1]["seed"], 3);
  EXPECT_EQ(j["runs"][0]["faults"][0], "f0 link_down h0 r0 host at 1000ms for 200ms");
  EXPECT_EQ(j["shrink"]["steps"][0]["action"], "ddmin: keep f0");
  EXPECT_EQ(j["exit_code"], 1);
}

TEST(CampaignReport, HtmlIsSelfContainedAndEscaped) {
  const std::string h = CampaignHtml(Sample());
  EXPECT_EQ(h.find("<script"), std::string::npos);
  EXPECT_NE(h.find("&lt;script&gt;"), std::string::npos);
  EXPECT_NE(h.find("3 wrong &lt;b&gt;"), std::string::npos);
  EXPECT_NE(h.find("spaces/&lt;evil&gt;&amp;.yaml"), std::string::npos);
  for (const char* external : {"http://", "https://", "src=", "<link", "@import"}) {
    EXPECT_EQ(h.find(external), std::string::npos) << external;
  }
  EXPECT_NE(h.find("Shrinking run 1"), std::string::npos);
}

// The timeline draws each run where it happened: with two runs at once (--jobs 2) their bars
// overlap in time, one after another they do not; each bar's class is its verdict.
TEST(CampaignReport, RunsOverTimeDrawEachRunFromItsStartForItsLength) {
  CampaignRecord c = Sample();
  c.jobs = 2;
  c.runs[0].started_s = 0;
  c.runs[0].seconds = 10;
  c.runs[1].started_s = 0.5;
  c.runs[1].seconds = 10;
  c.runs[2].started_s = 20;
  c.runs[2].seconds = 10;
  c.seconds = 30;
  const std::string h = CampaignHtml(c);
  EXPECT_NE(h.find("Runs over time"), std::string::npos);
  EXPECT_NE(h.find("up to 2 at once"), std::string::npos);
  // Rows 12 px from y 12; x = 56 + t / 30 * 828 (the plot is 828 px wide from x 56, and 30 s
  // at a 5 s step): each bar is 10 s, 276 px wide.
  auto bar = [](const char* cls, const char* x, const char* y) {
    return "<rect class=\"" + std::string(cls) + "\" x=\"" + x + "\" y=\"" + y +
           "\" width=\"276\" height=\"10\"";
  };
  EXPECT_NE(h.find(bar("held", "56", "13")), std::string::npos) << h;
  EXPECT_NE(h.find(bar("violated", "69.8", "25")), std::string::npos) << h;
  EXPECT_NE(h.find(bar("error", "608", "37")), std::string::npos) << h;
  EXPECT_NE(h.find("<title>run 1: 0.5 s to 10.5 s, survived, exact_results failed</title>"),
            std::string::npos);
  // The table has when each run started and how long it took.
  EXPECT_NE(h.find("<td>20.0</td><td>10.0</td>"), std::string::npos);
  EXPECT_EQ(CampaignJson(c)["runs"][1]["started_s"], 0.5);
  EXPECT_EQ(CampaignJson(c)["jobs"], 2);
}

// The rank program the runs used (the campaign's copy): its source and sha256 in the JSON
// and on the page; null where none was pinned.
TEST(CampaignReport, RecordsTheWorkerEveryRunUsed) {
  CampaignRecord c = Sample();
  EXPECT_TRUE(CampaignJson(c)["worker"].is_null());
  c.worker_source = "/b/bin/faultline-worker";
  c.worker_sha256 = std::string(64, 'a');
  const nlohmann::json w = CampaignJson(c)["worker"];
  EXPECT_EQ(w["source"], "/b/bin/faultline-worker");
  EXPECT_EQ(w["sha256"], std::string(64, 'a'));
  const std::string h = CampaignHtml(c);
  EXPECT_NE(h.find("<code>/b/bin/faultline-worker</code> as copied at the start (sha256 <code>" +
                   std::string(64, 'a') + "</code>)"),
            std::string::npos)
      << h;
}

TEST(CampaignReport, AnUnconfirmedFailureIsSkippedNotFailed) {
  CampaignRecord c = Sample();
  c.shrink.reset();
  ShrinkRecord u;
  u.from_index = 1;
  u.invariant = "exact_results";
  u.minimal_failed = 1;
  u.minimal_runs = 3;
  c.unconfirmed = {u};
  c.exit_code = 0;
  const std::string x = CampaignJunit(c);
  EXPECT_NE(x.find("tests=\"5\" failures=\"0\" errors=\"1\" skipped=\"2\""), std::string::npos) << x;
  EXPECT_NE(x.find("unconfirmed: failed 1 of 3 run(s)"), std::string::npos);
  const nlohmann::json j = CampaignJson(c);
  EXPECT_EQ(j["unconfirmed"][0]["failed"], 1);
  EXPECT_NE(CampaignHtml(c).find("unconfirmed, not a violation"), std::string::npos);
}

TEST(CampaignReport, JunitHasATestcasePerRunAndInvariant) {
  const std::string x = CampaignJunit(Sample());
  EXPECT_NE(x.find("tests=\"5\" failures=\"1\" errors=\"1\" skipped=\"1\""), std::string::npos) << x;
  EXPECT_NE(x.find("name=\"run-1.exact_results\""), std::string::npos);
  EXPECT_NE(x.find("<failure message=\"3 wrong &lt;b&gt;\">"), std::string::npos);
  EXPECT_NE(x.find("exit code 3 &quot;quoted&quot;"), std::string::npos);
  EXPECT_EQ(x.find("<script"), std::string::npos);
}

}  // namespace
}  // namespace faultline::runner::explore
