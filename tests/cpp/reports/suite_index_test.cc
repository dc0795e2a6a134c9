// reports/suite_index.h: the key metrics read from a report, the pivot of a matrix by its
// axes (median and spread over seeds, the best cell of each row by the metric's direction),
// and the index pages that show them.
#include "reports/suite_index.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace faultline::reports {
namespace {

using Axes = std::vector<std::pair<std::string, std::string>>;

nlohmann::json Collective(std::optional<double> stall, std::optional<double> degraded,
                          std::vector<std::optional<double>> progress) {
  auto num = [](std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  nlohmann::json r = {{"outcome", "survived"},
                      {"metrics",
                       {{"stall_ms", num(stall)},
                        {"failover_latency_ms", 7.5},
                        {"degraded_ratio", num(degraded)},
                        {"recovery_ms", nullptr}}},
                      {"per_fault", nlohmann::json::array()}};
  for (auto p : progress) r["per_fault"].push_back({{"progress_ms", num(p)}});
  return r;
}

SuiteRun MakeRun(const std::string& group, Axes axes, nlohmann::json report) {
  SuiteRun r;
  r.group = group;
  r.name = group;
  for (const auto& [k, v] : axes) r.name += " " + k + "=" + v;
  r.axes = std::move(axes);
  r.verdict = "PASS";
  r.report = std::move(report);
  return r;
}

std::optional<double> Key(const nlohmann::json& report, const std::string& key) {
  for (const auto& [k, v] : KeyMetrics(report)) {
    if (k == key) return v;
  }
  ADD_FAILURE() << key << " is not a key metric";
  return std::nullopt;
}

TEST(SuiteIndex, KeyMetricsOfACollectiveRun) {
  const nlohmann::json r = Collective(12.0, 0.5, {30.0, 45.0});
  EXPECT_EQ(Key(r, "stall_ms"), 12.0);
  EXPECT_EQ(Key(r, "failover_latency_ms"), 7.5);
  EXPECT_EQ(Key(r, "progress_ms"), 45.0) << "the worst fault's";
  EXPECT_EQ(Key(r, "degraded_ratio"), 0.5);
  EXPECT_EQ(Key(r, "recovery_ms"), std::nullopt);
  EXPECT_EQ(Key(Collective(1.0, 0.5, {30.0, std::nullopt}), "progress_ms"), std::nullopt)
      << "a fault without progress_ms makes the overall figure null";
  EXPECT_EQ(Key(Collective(1.0, 0.5, {}), "progress_ms"), std::nullopt);
}

TEST(SuiteIndex, KeyMetricsOfATrainingRun) {
  nlohmann::json r = {{"train", nlohmann::json::object()},
                      {"metrics", {{"goodput_ratio", 0.875}, {"steps_per_s", 20.0}}}};
  ASSERT_EQ(KeyMetrics(r).size(), 2u);
  EXPECT_EQ(Key(r, "goodput_ratio"), 0.875);
  EXPECT_EQ(Key(r, "steps_per_s"), 20.0);
}

// hosts x op x seed: stall by (hosts, op) with three seeds, one seed unmeasured.
std::vector<SuiteRun> Matrix() {
  std::vector<SuiteRun> runs;
  const double stall[2][2][3] = {{{10, 30, 20}, {50, 40, 60}}, {{5, 9, 7}, {3, 100, 4}}};
  const char* hosts[] = {"2", "4"};
  const char* ops[] = {"allreduce", "allgather"};
  for (int h = 0; h < 2; ++h) {
    for (int o = 0; o < 2; ++o) {
      for (int s = 0; s < 3; ++s) {
        std::optional<double> v = stall[h][o][s];
        if (h == 1 && o == 0 && s == 2) v.reset();
        runs.push_back(MakeRun("link_down",
                           {{"hosts", hosts[h]}, {"op", ops[o]}, {"seed", std::to_string(s + 1)}},
                           Collective(v, 0.1 * (h + 1) + 0.3 * o, {v})));
      }
    }
  }
  return runs;
}

const Pivot* Find(const std::vector<Pivot>& ps, const std::string& metric) {
  for (const Pivot& p : ps) {
    if (p.metric == metric) return &p;
  }
  return nullptr;
}

TEST(SuiteIndex, PivotFoldsSeedsIntoMedianAndSpread) {
  const std::vector<SuiteRun> runs = Matrix();
  const std::vector<Pivot> ps = MatrixPivots(runs);
  const Pivot* p = Find(ps, "stall_ms");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->group, "link_down");
  EXPECT_EQ(p->row_axes, "hosts");
  EXPECT_EQ(p->col_axis, "op");
  EXPECT_EQ(p->rows, (std::vector<std::string>{"2", "4"}));
  EXPECT_EQ(p->cols, (std::vector<std::string>{"allreduce", "allgather"}));
  const PivotCell& c00 = p->cells[0][0];
  EXPECT_EQ(c00.median, 20.0);
  EXPECT_EQ(c00.spread, 20.0);
  EXPECT_EQ(c00.measured, 3);
  EXPECT_EQ(c00.runs, 3);
  const PivotCell& c10 = p->cells[1][0];
  EXPECT_EQ(c10.median, 7.0) << "the median of the two measured seeds, 5 and 9";
  EXPECT_EQ(c10.measured, 2);
  EXPECT_EQ(c10.runs, 3);
  EXPECT_EQ(p->cells[1][1].median, 4.0) << "the median, not the mean, of 3, 100, 4";
  // Lower stall is better: allreduce on 2 hosts (20 < 50), allgather on 4 (4 < 7).
  EXPECT_TRUE(p->cells[0][0].best);
  EXPECT_FALSE(p->cells[0][1].best);
  EXPECT_FALSE(p->cells[1][0].best);
  EXPECT_TRUE(p->cells[1][1].best);
  // Higher degraded_ratio is better: allgather in both rows.
  const Pivot* d = Find(ps, "degraded_ratio");
  ASSERT_NE(d, nullptr);
  EXPECT_FALSE(d->higher_is_worse);
  EXPECT_TRUE(d->cells[0][1].best && d->cells[1][1].best);
  EXPECT_FALSE(d->cells[0][0].best || d->cells[1][0].best);
  EXPECT_EQ(Find(ps, "recovery_ms"), nullptr) << "no run measured it: no pivot";
}

TEST(SuiteIndex, OneAxisGivesOneRowAndGroupsStayApart) {
  std::vector<SuiteRun> runs = {MakeRun("a", {{"op", "allreduce"}}, Collective(1.0, 0.5, {1.0})),
                                MakeRun("a", {{"op", "allgather"}}, Collective(2.0, 0.5, {2.0})),
                                MakeRun("b", {{"seed", "1"}}, Collective(9.0, 0.5, {9.0})),
                                MakeRun("", {}, Collective(5.0, 0.5, {5.0}))};
  const std::vector<Pivot> ps = MatrixPivots(runs);
  for (const Pivot& p : ps) EXPECT_EQ(p.group, "a") << "only seeds, or no matrix: no pivot";
  const Pivot* p = Find(ps, "stall_ms");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->row_axes, "");
  ASSERT_EQ(p->rows.size(), 1u);
  EXPECT_EQ(p->cells[0][0].median, 1.0);
  EXPECT_TRUE(p->cells[0][0].best);
}

TEST(SuiteIndex, PagesShowMetricsAndMarkTheBestCell) {
  const std::vector<SuiteRun> runs = Matrix();
  const SuiteSummary s{"scenarios/x.yaml", 1, 42};
  const std::string html = SuiteIndexHtml(s, runs);
  // Long names and keys may wrap (<wbr>) so the run table fits the page.
  EXPECT_NE(html.find("<th>stall_<wbr>ms (ms)</th>"), std::string::npos);
  EXPECT_NE(html.find("<th>progress_<wbr>ms (ms)</th>"), std::string::npos);
  EXPECT_NE(html.find("link_down: stall_ms (ms) by op (lower is better)"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num best\">20 (spread 20, 3/3)</td>"), std::string::npos)
      << html;
  EXPECT_NE(html.find("<td class=\"num\">7 (spread 4, 2/3)</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("12 runs: 12 passed, 0 failed"), std::string::npos);
  const std::string md = SuiteIndexMarkdown(s, runs);
  EXPECT_NE(md.find("| **20 (spread 20, 3/3)** |"), std::string::npos) << md;
  EXPECT_NE(md.find("## link_down: degraded_ratio by op (higher is better)"), std::string::npos)
      << md;
}

// A suite's output read back from disk: the combination from the directory name, the group
// from the directories above it, verdicts from the reports, the worst exit code.
TEST(SuiteIndex, ReadSuiteFromItsDirectories) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("fl-suite-" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto put = [&](const std::string& rel, nlohmann::json report) {
    fs::create_directories(root / rel);
    std::ofstream(root / rel / "report.json") << report.dump();
    return (root / rel).string();
  };
  nlohmann::json pass = Collective(3.0, 0.5, {4.0});
  pass["scenario"] = {{"name", "ld[hosts=2,op=allreduce]"}};
  pass["expectations"] = {{{"name", "outcome"}, {"pass", true}}};
  nlohmann::json fail = pass;
  fail["scenario"]["name"] = "ld[hosts=4,op=allreduce]";
  fail["expectations"][0]["pass"] = false;
  nlohmann::json skipped = {{"scenario", {{"name", "netem"}}}, {"skipped", "kernel lacks netem"},
                            {"outcome", "skipped"}};
  nlohmann::json bad = {{"scenario", {{"name", "broken"}}}, {"outcome", "not_run"},
                        {"harness_errors", {"bad input: broken.yaml:3:1: unknown key"}}};
  std::vector<std::string> dirs = {put("ld/hosts=2,op=allreduce", pass),
                                   put("ld/hosts=4,op=allreduce", fail), put("netem", skipped),
                                   put("broken", bad)};
  const SuiteOnDisk s = ReadSuite(root.string(), dirs);
  fs::remove_all(root);
  ASSERT_EQ(s.runs.size(), 4u);
  EXPECT_EQ(s.runs[0].group, "ld");
  EXPECT_EQ(s.runs[0].axes, (Axes{{"hosts", "2"}, {"op", "allreduce"}}));
  EXPECT_EQ(s.runs[0].name, "ld[hosts=2,op=allreduce]");
  EXPECT_EQ(s.runs[0].verdict, "PASS");
  EXPECT_EQ(s.runs[1].verdict, "FAIL");
  EXPECT_EQ(s.runs[2].verdict, "SKIPPED");
  EXPECT_EQ(s.runs[2].note, "skipped: kernel lacks netem");
  EXPECT_TRUE(s.runs[2].axes.empty());
  EXPECT_EQ(s.runs[3].verdict, "BAD INPUT");
  EXPECT_EQ(s.exit_code, 2) << "bad input is worse than a failed expectation";
  EXPECT_FALSE(s.runs[0].seconds.has_value());
  const std::vector<Pivot> ps = MatrixPivots(s.runs);
  const Pivot* p = Find(ps, "stall_ms");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->rows, (std::vector<std::string>{"2", "4"}));
}

}  // namespace
}  // namespace faultline::reports
