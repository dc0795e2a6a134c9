#include "reports/markdown.h"

#include <gtest/gtest.h>

#include "synthetic.h"

namespace faultline::reports {
namespace {

TEST(MarkdownSummary, VerdictAndTables) {
  const std::string md = MarkdownSummary(testing::Run(testing::Report()));
  EXPECT_EQ(md.rfind("## faultline: rail-flap — **FAIL**\n", 0), 0u) << md;
  EXPECT_NE(md.find("- stall_ms: measured 812.25, limit max 500\n"), std::string::npos);
  EXPECT_NE(md.find("| stall_ms | max 500 | 812.25 | **FAIL** |\n"), std::string::npos);
  EXPECT_NE(md.find("| outcome | survived | survived | PASS |\n"), std::string::npos);
  EXPECT_NE(md.find("| f1 | link_down | host 1 rail 0 (host) | 2 | 3 | 10 | 812.25 | 12.5 | — | 40 | 600 | — | 30.5 |\n"),
            std::string::npos) << md;
  EXPECT_NE(md.find("| f3 | rank_pause | host 0 rank 1 | — | — |"), std::string::npos);
  EXPECT_NE(md.find("| recovery_ms | — |\n"), std::string::npos);
  EXPECT_NE(md.find("| baseline_busbw_gbps | 10 Gbit/s |\n"), std::string::npos);
  EXPECT_NE(md.find("| completed collectives | 100 |\n"), std::string::npos);
  EXPECT_NE(md.find("| kernel | Linux 6.1.0 |\n"), std::string::npos);
}

TEST(MarkdownSummary, ANeverConvergedFaultSaysNeverNotNull) {
  nlohmann::json r = testing::Report();
  r["per_fault"][0]["failover_first_ms"] = 4.0;
  r["per_fault"][0]["failover_latency_ms"] = nullptr;
  r["per_fault"][0]["never_converged"] = true;
  const std::string md = MarkdownSummary(testing::Run(r));
  EXPECT_NE(md.find("| 12.5 | 4 | **never** | 600 |"), std::string::npos) << md;
  r["per_fault"][0]["never_converged"] = false;
  EXPECT_NE(MarkdownSummary(testing::Run(r)).find("| 12.5 | 4 | — | 600 |"), std::string::npos);
}

TEST(MarkdownSummary, EveryTableRowHasTheHeaderColumnCount) {
  nlohmann::json r = testing::Report("pipe|name");
  r["faults"][0]["type"] = "link|down";
  const std::string md = MarkdownSummary(testing::Run(r));
  auto cells = [](const std::string& line) {
    int n = 0;
    for (size_t i = 0; i < line.size(); ++i) n += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    return n;
  };
  int header = -1;
  size_t pos = 0;
  while (pos < md.size()) {
    size_t nl = md.find('\n', pos);
    const std::string line = md.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty() || line[0] != '|') {
      header = -1;
      continue;
    }
    if (header < 0) header = cells(line);
    EXPECT_EQ(cells(line), header) << line;
  }
}

TEST(MarkdownSummary, FaultFreeAndNoExpectations) {
  nlohmann::json r = testing::PassingReport();
  r["faults"] = nlohmann::json::array();
  r["per_fault"] = nlohmann::json::array();
  r["expectations"] = nlohmann::json::array();
  const std::string md = MarkdownSummary(testing::Run(r));
  EXPECT_NE(md.find("**PASS**"), std::string::npos);
  EXPECT_NE(md.find("No fault was scheduled"), std::string::npos);
  EXPECT_NE(md.find("The scenario sets no expectation."), std::string::npos);
}

// A training run (torch_ddp) shows its steps, rate, the parameters' hash and final loss; a
// collectives run shows none of it.
TEST(MarkdownSummary, TrainingRunShowsStepsHashAndLoss) {
  nlohmann::json r = testing::Report();
  EXPECT_EQ(MarkdownSummary(testing::Run(r)).find("parameters sha256"), std::string::npos);
  r["workload"] = {{"kind", "torch_ddp"}, {"script", "faultline_torch.ddp_train"},
                   {"steps", 400}, {"warmup", 5}, {"args", nlohmann::json::object()}};
  r["metrics"]["steps_completed"] = 400;
  r["metrics"]["steps_per_s"] = 42.25;
  r["metrics"]["param_sha256"] = std::string(64, 'c');
  r["metrics"]["param_sha256_agree"] = true;
  r["metrics"]["final_loss"] = 2.3015361;
  std::string md = MarkdownSummary(testing::Run(r));
  EXPECT_NE(md.find("| training steps | 400 of 400 completed |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| steps/s | 42.2"), std::string::npos) << md;
  EXPECT_NE(md.find("| parameters sha256 | " + std::string(64, 'c') + " |\n"), std::string::npos);
  EXPECT_NE(md.find("| final loss | 2.301536 |\n"), std::string::npos) << md;
  r["metrics"]["param_sha256"] = nullptr;
  r["metrics"]["param_sha256_agree"] = false;
  md = MarkdownSummary(testing::Run(r));
  EXPECT_NE(md.find("| parameters sha256 | replicas differ |\n"), std::string::npos) << md;
}

}  // namespace
}  // namespace faultline::reports
