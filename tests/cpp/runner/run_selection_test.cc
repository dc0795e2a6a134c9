// `faultline run --only KEY=VALUE --seeds N`: which runs a file stands for after the
// selection (runner/core/run_selection.h), on matrices expanded by the real parser.
#include "runner/core/run_selection.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runner/core/scenario.h"

namespace faultline::runner {
namespace {

const char* kMatrix = R"(name: accept
seed: 7
topology: {ranks_per_host: 2, rails: 2}
matrix: {hosts: [2, 4], op: [allreduce, allgather]}
workload: {bytes: 1MiB, duration: 4s, warmup: 500ms}
faults:
  - {id: d, at: 1s, type: link_down, target: {host: 1, rail: 0}, for: 1s}
expect: {outcome: survive, wrong_results: 0}
)";

std::vector<Scenario> Expand(const char* yaml) {
  ExpandOutcome e = ExpandScenario(yaml, "t.yaml");
  EXPECT_TRUE(e.ok());
  return e.runs;
}

std::vector<std::string> Names(const std::vector<Scenario>& runs) {
  std::vector<std::string> out;
  for (const auto& r : runs) out.push_back(r.name);
  return out;
}

TEST(RunSelection, DefaultKeepsEveryRunAsItIs) {
  std::vector<Scenario> runs = Expand(kMatrix);
  ASSERT_FALSE(SelectRuns(RunSelection{}, &runs).has_value());
  EXPECT_EQ(Names(runs), (std::vector<std::string>{
                             "accept[hosts=2,op=allreduce]", "accept[hosts=2,op=allgather]",
                             "accept[hosts=4,op=allreduce]", "accept[hosts=4,op=allgather]"}));
  for (const auto& r : runs) EXPECT_EQ(r.seed, 7u);
}

TEST(RunSelection, SeedsRepeatEveryRunFromTheScenarioSeed) {
  std::vector<Scenario> runs = Expand(kMatrix);
  RunSelection sel;
  sel.seeds = 3;
  ASSERT_FALSE(SelectRuns(sel, &runs).has_value());
  ASSERT_EQ(runs.size(), 12u);
  EXPECT_EQ(runs[0].name, "accept[hosts=2,op=allreduce,seed=7]");
  EXPECT_EQ(runs[1].name, "accept[hosts=2,op=allreduce,seed=8]");
  EXPECT_EQ(runs[2].name, "accept[hosts=2,op=allreduce,seed=9]");
  EXPECT_EQ(runs[3].name, "accept[hosts=2,op=allgather,seed=7]");
  EXPECT_EQ(runs[2].seed, 9u);
  EXPECT_EQ(runs[2].MatrixLabel(), "hosts=2,op=allreduce,seed=9");
  EXPECT_EQ(runs[2].base_name, "accept");
  EXPECT_EQ(runs[11].topology.hosts, 4);
  EXPECT_EQ(runs[11].workload.op, runs[3].workload.op);
}

TEST(RunSelection, SeedsStartAtTheOverrideAndNameAFileWithoutMatrix) {
  std::vector<Scenario> runs = Expand(R"(name: single
seed: 3
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
workload: {op: allreduce, bytes: 1MiB, duration: 2s}
)");
  RunSelection sel;
  sel.seeds = 2;
  sel.base_seed = 100;
  ASSERT_FALSE(SelectRuns(sel, &runs).has_value());
  EXPECT_EQ(Names(runs), (std::vector<std::string>{"single[seed=100]", "single[seed=101]"}));
  EXPECT_EQ(runs[1].seed, 101u);
}

TEST(RunSelection, OnlyKeepsMatchingCombinationsAfterSeeds) {
  std::vector<Scenario> runs = Expand(kMatrix);
  RunSelection sel;
  sel.seeds = 2;
  sel.only = {{"hosts", "2"}, {"seed", "8"}};
  ASSERT_FALSE(SelectRuns(sel, &runs).has_value());
  EXPECT_EQ(Names(runs), (std::vector<std::string>{"accept[hosts=2,op=allreduce,seed=8]",
                                                   "accept[hosts=2,op=allgather,seed=8]"}));
  // A value nobody has leaves nothing; a key the matrix does not vary filters nothing.
  std::vector<Scenario> none = Expand(kMatrix);
  ASSERT_FALSE(SelectRuns(RunSelection{{{"hosts", "3"}}, 1, {}}, &none).has_value());
  EXPECT_TRUE(none.empty());
  std::vector<Scenario> all = Expand(kMatrix);
  ASSERT_FALSE(SelectRuns(RunSelection{{{"bytes", "1MiB"}}, 1, {}}, &all).has_value());
  EXPECT_EQ(all.size(), 4u);
}

TEST(RunSelection, SeedsAgainstAMatrixSeedIsAnError) {
  std::vector<Scenario> runs = Expand(R"(name: seeded
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
matrix: {seed: [1, 2]}
workload: {op: allreduce, bytes: 1MiB, duration: 2s}
)");
  RunSelection sel;
  sel.seeds = 2;
  auto err = SelectRuns(sel, &runs);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find("seeded varies seed in its matrix"), std::string::npos) << *err;
  EXPECT_EQ(runs.size(), 2u);  // unchanged
  sel.seeds = 0;
  EXPECT_TRUE(SelectRuns(sel, &runs).has_value());
}

TEST(RunSelection, ParseOnly) {
  std::pair<std::string, std::string> kv;
  EXPECT_FALSE(ParseOnly("hosts=2", &kv).has_value());
  EXPECT_EQ(kv, (std::pair<std::string, std::string>{"hosts", "2"}));
  EXPECT_FALSE(ParseOnly("bytes=a=b", &kv).has_value());
  EXPECT_EQ(kv.second, "a=b");
  for (const char* bad : {"hosts", "=2", "hosts=", ""}) {
    auto err = ParseOnly(bad, &kv);
    ASSERT_TRUE(err.has_value()) << bad;
    EXPECT_NE(err->find("KEY=VALUE"), std::string::npos) << *err;
  }
  auto err = ParseOnly("host=2", &kv);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find("'host' is not a matrix key"), std::string::npos) << *err;
}

}  // namespace
}  // namespace faultline::runner
