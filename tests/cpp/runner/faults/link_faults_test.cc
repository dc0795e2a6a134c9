// The link fault kinds' runner side (runner/faults/{link_down,link_flap,port_drop}): their
// YAML keys and validation, their injector parameters and how long they hold.
#include <gtest/gtest.h>

#include "runner/faults/registry.h"
#include "tests/cpp/runner/faults/fault_test_util.h"

namespace faultline::runner::testing {
namespace {

TEST(LinkFaults, ParseValidEntries) {
  const std::vector<std::string> e = {
      "{id: d, at: 1s, type: link_down, target: {host: 1, rail: 0, side: switch}, for: 2s}",
      "{id: f, at: 4s, type: link_flap, target: {host: 0, rail: 1}, down: 200ms, up: 300ms, "
      "count: 2, jitter: 10ms}",
      "{id: p, at: 6s, type: port_drop, target: {host: 0, rail: 0}, remove: true}",
  };
  Scenario s = MustParse(e);
  ASSERT_EQ(s.faults.size(), 3u);
  EXPECT_EQ(s.faults[0].kind, "link_down");
  EXPECT_EQ(s.faults[0].target.side, LinkSide::kSwitch);
  EXPECT_EQ(s.faults[0].LatestEndNs(), 3'000'000'000);
  EXPECT_EQ(s.faults[1].params.count, 2);
  // 2 x 200ms + 1 x 300ms, every one of the 3 periods stretched by at most 10ms.
  EXPECT_EQ(s.faults[1].LatestEndNs(), 4'000'000'000 + 700'000'000 + 30'000'000);
  EXPECT_FALSE(s.faults[1].Permanent());
  EXPECT_TRUE(s.faults[2].Permanent());
  EXPECT_TRUE(s.faults[2].params.remove);

  auto down = ActionsOf(s, "d");
  ASSERT_EQ(down.size(), 2u);
  EXPECT_EQ(down[0].injector_kind, "link_down");
  EXPECT_EQ(down[0].params, (nlohmann::json{{"side", "switch"}}));
  EXPECT_EQ(down[1].type, ActionType::kRevert);
  // The flap becomes link_down cycles: apply/revert per count.
  auto flap = ActionsOf(s, "f");
  ASSERT_EQ(flap.size(), 4u);
  for (const auto& a : flap) EXPECT_EQ(a.injector_kind, "link_down");
  EXPECT_EQ(flap[3].cycle, 1);
  auto drop = ActionsOf(s, "p");
  ASSERT_EQ(drop.size(), 1u);  // held to the end of the run: no revert
  EXPECT_EQ(drop[0].params, (nlohmann::json{{"side", "host"}, {"remove", true}}));
}

TEST(LinkFaults, RejectKeysOfOtherKindsWithLineAndColumn) {
  const std::vector<std::string> e = {
      "{id: d, at: 1s, type: link_down, target: {host: 0, rail: 0}, percent: 5}",
      "{id: f, at: 4s, type: link_flap, target: {host: 1, rail: 1}, down: 1s, up: 1s, rate: 1}",
      "{id: p, at: 8s, type: port_drop, target: {host: 1, rail: 0, rank: 0}}",
  };
  EXPECT_EQ(Errors(ScenarioWith(e)),
            (std::vector<std::string>{
                Where(e, 0, "percent") +
                    ": unknown key 'percent' in fault 'd' (expected one of: id, type, at, "
                    "target, for, for)",
                Where(e, 1, "rate") +
                    ": unknown key 'rate' in fault 'f' (expected one of: id, type, at, target, "
                    "down, up, count, jitter, for)",
                Where(e, 2, "rank") +
                    ": unknown key 'rank' in target of fault 'p' (expected one of: host, rail, "
                    "side)",
            }));
}

TEST(LinkFaults, RefuseForWhereTheKindSetsItsOwnLength) {
  const std::vector<std::string> e = {
      "{id: f, at: 1s, type: link_flap, target: {host: 0, rail: 0}, down: 1s, up: 1s, for: 1s}",
      "{id: p, at: 4s, type: port_drop, target: {host: 1, rail: 1}, for: 1s}",
  };
  EXPECT_EQ(Errors(ScenarioWith(e)),
            (std::vector<std::string>{
                Where(e, 0, "for") +
                    ": 'for' does not apply to link_flap (a flap lasts count x (down + up))",
                Where(e, 1, "for") +
                    ": 'for' does not apply to port_drop (a dropped port stays down for the "
                    "rest of the run)",
            }));
}

TEST(LinkFaults, FlapPeriodsAndJitterAreChecked) {
  const std::vector<std::string> e = {
      "{id: a, at: 1s, type: link_flap, target: {host: 0, rail: 0}, down: 0s, up: 1s}",
      "{id: b, at: 4s, type: link_flap, target: {host: 1, rail: 1}, down: 1s, up: 1s, "
      "jitter: 1s}",
      "{id: c, at: 9s, type: link_flap, target: {host: 0, rail: 1}, up: 1s}",
  };
  EXPECT_EQ(Errors(ScenarioWith(e)),
            (std::vector<std::string>{
                Where(e, 0, "0s") + ": fault 'a': down and up must be > 0",
                Where(e, 1, "1s}") +
                    ": fault 'b': jitter 1s is not below down/up (1s/1s) (jitter must be "
                    "smaller than both periods so transitions keep their order)",
                "t.yaml:8:5: missing required key 'down' in fault 'c' (add 'down: 200ms')",
            }));
}

TEST(LinkFaults, PerRankNicsNameThePortsRank) {
  const std::vector<std::string> e = {
      "{id: d, at: 1s, type: link_down, target: {host: 1, rank: 1, rail: 0}, for: 1s}",
      "{id: x, at: 4s, type: port_drop, target: {host: 0, rail: 0}}",
  };
  EXPECT_EQ(Errors(ScenarioWith(e, "per_rank")),
            (std::vector<std::string>{
                Where(e, 1, "{host") +
                ": missing required key 'rank' in target of fault 'x' (with 'nics: per_rank' "
                "every rank has its own NIC: add 'rank: 0' to name whose port on the rail is "
                "hit)"}));
  Scenario s = MustParse({e[0]}, "per_rank");
  ASSERT_EQ(s.faults.size(), 1u);
  EXPECT_TRUE(s.faults[0].target.port);
  EXPECT_EQ(s.faults[0].target.GlobalRank(s.topology), 3);
}

}  // namespace
}  // namespace faultline::runner::testing
