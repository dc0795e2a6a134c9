// The rank fault kinds' runner side (runner/faults/{rank_pause,rank_kill}): a rank target
// {host, rank}, a pause held for `for`, a kill that acts once and lasts.
#include <gtest/gtest.h>

#include "runner/faults/registry.h"
#include "tests/cpp/runner/faults/fault_test_util.h"

namespace faultline::runner::testing {
namespace {

TEST(RankFaults, ParseValidEntries) {
  const std::vector<std::string> e = {
      "{id: p, at: 1s, type: rank_pause, target: {host: 1, rank: 1}, for: 500ms}",
      "{id: k, at: 6s, type: rank_kill, target: {host: 0, rank: 1}}",
  };
  Scenario s = MustParse(e);
  ASSERT_EQ(s.faults.size(), 2u);
  EXPECT_EQ(s.faults[0].target.GlobalRank(s.topology), 3);
  EXPECT_FALSE(s.faults[0].target.rail.has_value());
  EXPECT_EQ(s.faults[0].LatestEndNs(), 1'500'000'000);
  EXPECT_TRUE(s.faults[1].Permanent());
  EXPECT_EQ(ActionsOf(s, "p").size(), 2u);
  EXPECT_EQ(ActionsOf(s, "k").size(), 1u);
  EXPECT_TRUE(s.faults[1].descriptor().kills_rank);
  EXPECT_FALSE(s.faults[0].descriptor().kills_rank);
}

TEST(RankFaults, RejectBadKeysWithLineAndColumn) {
  const std::vector<std::string> e = {
      "{id: p, at: 1s, type: rank_pause, target: {host: 1, rank: 1, rail: 0}, for: 1s}",
      "{id: k, at: 6s, type: rank_kill, target: {host: 0, rank: 5}, for: 1s}",
      "{id: q, at: 8s, type: rank_pause, target: {host: 1, rank: 0}, fro: 1s}",
  };
  EXPECT_EQ(
      Errors(ScenarioWith(e)),
      (std::vector<std::string>{
          Where(e, 0, "rail") +
              ": unknown key 'rail' in target of fault 'p' (expected one of: host, rank)",
          Where(e, 1, "5}") +
              ": rank 5 does not exist: the topology has 2 ranks per host (rank must be "
              "in 0..1)",
          Where(e, 1, "for") +
              ": 'for' does not apply to rank_kill (this fault acts once, at 'at')",
          Where(e, 2, "fro") + ": unknown key 'fro' in fault 'q' (expected one of: id, type, at, "
                               "target, for, for)",
      }));
}

TEST(RankFaults, MissingTargetHintNamesARank) {
  const std::vector<std::string> e = {"{id: p, at: 1s, type: rank_pause, for: 1s}"};
  EXPECT_EQ(
      Errors(ScenarioWith(e)),
      (std::vector<std::string>{
          Where(e, 0, "{id") +
          ": missing required key 'target' in fault 'p' (add 'target: {host: 0, rank: 0}')"}));
}

}  // namespace
}  // namespace faultline::runner::testing
