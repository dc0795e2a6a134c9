// The nftables fault kinds' runner side (runner/faults/{loss,blackhole}): their YAML keys and
// validation and their injector parameters (loss draws its seed from the fault's stream).
#include <gtest/gtest.h>

#include "tests/cpp/runner/faults/fault_test_util.h"

namespace faultline::runner::testing {
namespace {

TEST(NftFaults, ParseValidEntries) {
  const std::vector<std::string> e = {
      "{id: l, at: 1s, type: loss, target: {host: 0, rail: 0}, percent: 5%, for: 1s}",
      "{id: h, at: 1s, type: blackhole, target: {host: 1, rail: 1}}",
  };
  Scenario s = MustParse(e);
  ASSERT_EQ(s.faults.size(), 2u);
  EXPECT_DOUBLE_EQ(s.faults[0].params.percent, 5);
  EXPECT_TRUE(s.faults[1].Permanent());
  auto loss = ActionsOf(s, "l");
  ASSERT_EQ(loss.size(), 2u);
  EXPECT_EQ(loss[0].params,
            (nlohmann::json{{"percent", 5.0},
                            {"seed", static_cast<int64_t>(FaultSeed(kSeed, "l") >> 1)}}));
  EXPECT_EQ(loss[1].at_ns, 2'000'000'000);
  EXPECT_EQ(ActionsOf(s, "h")[0].params, nlohmann::json::object());
}

TEST(NftFaults, RejectBadKeysWithLineAndColumn) {
  const std::vector<std::string> e = {
      "{id: l, at: 1s, type: loss, target: {host: 0, rail: 0}, percnt: 5}",
      "{id: h, at: 1s, type: blackhole, target: {host: 1, rail: 1, side: switch}, percent: 1}",
  };
  EXPECT_EQ(
      Errors(ScenarioWith(e)),
      (std::vector<std::string>{
          Where(e, 0, "{id") + ": missing required key 'percent' in fault 'l' (add 'percent: 5%')",
          Where(e, 0, "percnt") + ": unknown key 'percnt' in fault 'l' (did you mean 'percent'?)",
          Where(e, 1, "percent") +
              ": unknown key 'percent' in fault 'h' (expected one of: id, type, at, "
              "target, for, for)",
      }));
}

}  // namespace
}  // namespace faultline::runner::testing
