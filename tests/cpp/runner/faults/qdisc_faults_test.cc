// The qdisc fault kinds' runner side (runner/faults/{bandwidth,delay,jitter,corrupt,reorder}):
// their YAML keys and validation, their defaults and their injector parameters.
#include <gtest/gtest.h>

#include "tests/cpp/runner/faults/fault_test_util.h"

namespace faultline::runner::testing {
namespace {

TEST(QdiscFaults, ParseValidEntries) {
  const std::vector<std::string> e = {
      "{id: b, at: 1s, type: bandwidth, target: {host: 0, rail: 0}, rate: 250Mbps, burst: 64KiB, "
      "for: 1s}",
      "{id: d, at: 1s, type: delay, target: {host: 0, rail: 1}, delay: 5ms, jitter: 1ms, for: 1s}",
      "{id: j, at: 1s, type: jitter, target: {host: 1, rail: 0}, jitter: 2ms}",
      "{id: c, at: 3s, type: corrupt, target: {host: 0, rail: 0}, percent: 1, for: 1s}",
      "{id: r, at: 1s, type: reorder, target: {host: 1, rail: 1}, percent: 10%, for: 1s}",
  };
  Scenario s = MustParse(e);
  ASSERT_EQ(s.faults.size(), 5u);
  EXPECT_EQ(s.faults[0].params.rate_bps, 250'000'000u);
  EXPECT_EQ(s.faults[2].params.delay_ns, 2'000'000);   // base delay defaults to the jitter
  EXPECT_EQ(s.faults[4].params.delay_ns, 10'000'000);  // the injector's default
  EXPECT_TRUE(s.faults[2].Permanent());                // held without `for`
  EXPECT_FALSE(s.faults[3].Permanent());

  EXPECT_EQ(ActionsOf(s, "b")[0].params, (nlohmann::json{{"rate", "250Mbit"}, {"burst", 65536}}));
  EXPECT_EQ(ActionsOf(s, "d")[0].params, (nlohmann::json{{"delay", "5ms"}, {"jitter", "1ms"}}));
  EXPECT_EQ(ActionsOf(s, "j").size(), 1u);  // no revert: held to the end
  EXPECT_EQ(ActionsOf(s, "j")[0].params, (nlohmann::json{{"delay", "2ms"}, {"jitter", "2ms"}}));
  EXPECT_EQ(ActionsOf(s, "c")[0].params, (nlohmann::json{{"percent", 1.0}}));
  EXPECT_EQ(ActionsOf(s, "c")[1].type, ActionType::kRevert);
  EXPECT_EQ(ActionsOf(s, "r")[0].params, (nlohmann::json{{"percent", 10.0}, {"delay", "10ms"}}));
}

TEST(QdiscFaults, RejectBadKeysWithLineAndColumn) {
  const std::vector<std::string> e = {
      "{id: b, at: 1s, type: bandwidth, target: {host: 0, rail: 0}, rat: 1Gbps}",
      "{id: d, at: 1s, type: delay, target: {host: 0, rail: 1}, delay: 5ms, percent: 3}",
  };
  EXPECT_EQ(
      Errors(ScenarioWith(e)),
      (std::vector<std::string>{
          Where(e, 0, "{id") + ": missing required key 'rate' in fault 'b' (add 'rate: 100Mbps')",
          Where(e, 0, "rat:") + ": unknown key 'rat' in fault 'b' (did you mean 'at'?)",
          Where(e, 1, "percent") +
              ": unknown key 'percent' in fault 'd' (expected one of: id, type, at, "
              "target, for, delay, jitter, for)",
      }));
}

TEST(QdiscFaults, ValuesNeedTheirUnits) {
  const std::vector<std::string> e = {
      "{id: b, at: 1s, type: bandwidth, target: {host: 0, rail: 0}, rate: 100}",
      "{id: j, at: 1s, type: jitter, target: {host: 0, rail: 1}, jitter: 2}",
      "{id: c, at: 1s, type: corrupt, target: {host: 1, rail: 0}, percent: 150}",
  };
  auto errors = Errors(ScenarioWith(e));
  ASSERT_EQ(errors.size(), 3u) << Dump(errors);
  EXPECT_EQ(errors[0].rfind(Where(e, 0, "100") + ": fault 'b'.rate: malformed rate '100'", 0), 0u);
  EXPECT_EQ(errors[1].rfind(Where(e, 1, "2}") + ": fault 'j'.jitter: malformed duration '2'", 0),
            0u);
  EXPECT_EQ(errors[2], Where(e, 2, "150") +
                           ": fault 'c'.percent must be a percentage in [0, 100], got '150' "
                           "(write e.g. 5% or 5)");
}

}  // namespace
}  // namespace faultline::runner::testing
