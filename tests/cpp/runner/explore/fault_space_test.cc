// The fault space parser: the shipped spaces parse; every error names file:line:column.
#include "runner/explore/fault_space.h"

#include <gtest/gtest.h>

#include <string>

namespace faultline::runner::explore {
namespace {

const std::string kSpace = R"(name: s
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
workload: {op: allreduce, bytes: 1MiB, duration: 5s, warmup: 500ms}
start: {min: 1s, max: 1500ms}
gap: {min: 100ms, max: 800ms}
horizon: 2800ms
kinds:
  - {type: link_down, weight: 3, duration: {min: 100ms, max: 1s}}
)";

std::string Errors(const SpaceOutcome& o) {
  std::string s;
  for (const auto& d : o.diagnostics) s += d.ToString() + "\n";
  return s;
}

TEST(FaultSpace, ShippedSpacesParse) {
  for (const char* f :
       {"links.yaml", "connections.yaml", "small.yaml", "flaps.yaml", "failback.yaml",
        "one_rail.yaml", "both_rails.yaml", "corrupt.yaml", "relay.yaml"}) {
    std::string path = FAULTLINE_SOURCE_DIR;  // appended piece by piece: see generator_test
    path.append("/scenarios/explore/").append(f);
    const SpaceOutcome o = ParseFaultSpaceFile(path);
    ASSERT_TRUE(o.ok()) << f << "\n" << Errors(o);
    EXPECT_FALSE(o.space->kinds.empty());
    EXPECT_EQ(o.space->targets.hosts, (std::vector<int>{0, 1}));
    EXPECT_EQ(o.space->sha256.size(), 64u);
  }
}

TEST(FaultSpace, DefaultsAndTypedValues) {
  const SpaceOutcome o = ParseFaultSpace(kSpace, "s.yaml");
  ASSERT_TRUE(o.ok()) << Errors(o);
  const FaultSpace& s = *o.space;
  EXPECT_EQ(s.base.topology.hosts, 2);
  EXPECT_EQ(s.horizon_ns, 2'800'000'000);
  EXPECT_EQ(s.start_ns.lo, 1'000'000'000);
  EXPECT_EQ(s.kinds[0].duration_ns.hi, 1'000'000'000);
  EXPECT_EQ(s.targets.rails, (std::vector<int>{0, 1}));  // every rail by default
  EXPECT_TRUE(s.invariants.liveness_after_heal);
}

struct BadCase {
  const char* replace;  // a line of kSpace ...
  const char* with;     // ... replaced by this
  const char* expect;   // "line:col: text" that must be among the errors
};

class FaultSpaceErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(FaultSpaceErrors, NamesLineAndColumn) {
  std::string text = kSpace;
  const BadCase& c = GetParam();
  const size_t at = text.find(c.replace);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, std::string(c.replace).size(), c.with);
  const SpaceOutcome o = ParseFaultSpace(text, "s.yaml");
  ASSERT_FALSE(o.ok());
  EXPECT_NE(Errors(o).find(std::string("s.yaml:") + c.expect), std::string::npos) << Errors(o);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FaultSpaceErrors,
    ::testing::Values(
        // The scenario part is checked by the scenario parser, at its own position.
        BadCase{"hosts: 2,", "hosts: 0,", "2:19: "},
        BadCase{"horizon: 2800ms", "horizont: 2800ms", "6:1: unknown key 'horizont'"},
        BadCase{"horizon: 2800ms", "horizon: 9s", "6:10: the horizon 9000ms is past the workload's end"},
        BadCase{"horizon: 2800ms", "horizon: 4s", "6:10: the horizon 4000ms plus liveness_after_heal.within"},
        BadCase{"start: {min: 1s,", "start: {min: 100ms,", "4:8: the first fault may start at 100ms, within the warm-up"},
        BadCase{"duration: {min: 100ms, max: 1s}", "duration: {min: 2s, max: 1s}", "8:59: kind link_down.duration.max is below its min"},
        BadCase{", duration: {min: 100ms, max: 1s}", "", "8:5: missing required key 'duration'"},
        BadCase{"type: link_down", "type: link_dwn", "8:12: unknown type 'link_dwn'"},
        BadCase{"weight: 3", "weight: 0", "8:3: every kind has weight 0"},
        BadCase{"max: 1s}}", "max: 1500ms}}", "8:5: kind link_down lasts up to 1500ms: started at start.max 1500ms"},
        BadCase{"kinds:", "targets: {hosts: [0, 2]}\nkinds:", "7:22: "},
        BadCase{"kinds:", "invariants: {liveness_after_heal: {pct: 0}}\nkinds:", "7:41: liveness_after_heal.pct must be above 0"},
        BadCase{"weight: 3, duration: {min: 100ms, max: 1s}", "parts: [payload]", "8:23: unknown key 'parts'"},
        BadCase{"type: link_down, weight: 3, duration: {min: 100ms, max: 1s}", "type: conn_corrupt, parts: [payload, trailer]", "8:43: unknown kind conn_corrupt.parts 'trailer'"},
        BadCase{"type: link_down, weight: 3, duration: {min: 100ms, max: 1s}", "type: conn_corrupt, parts: [header, header]", "8:42: kind conn_corrupt.parts names header twice"},
        BadCase{"type: link_down, weight: 3, duration: {min: 100ms, max: 1s}", "type: conn_corrupt, parts: []", "8:33: kind conn_corrupt.parts must list payload, header or both, got an empty list"}));

TEST(FaultSpace, ConnCorruptNeedsAnotherHost) {
  std::string text = kSpace;
  text.replace(text.find("hosts: 2,"), 9, "hosts: 1,");
  text += "  - {type: conn_corrupt}\n";
  const SpaceOutcome o = ParseFaultSpace(text, "s.yaml");
  ASSERT_FALSE(o.ok());
  EXPECT_NE(Errors(o).find("s.yaml:9:5: kind conn_corrupt corrupts a frame to a rank on another "
                           "host: the topology has 1"),
            std::string::npos)
      << Errors(o);
}

TEST(FaultSpace, ConnCorruptPartsDefaultToThePayload) {
  std::string text = kSpace;
  text +=
      "  - {type: conn_corrupt, weight: 2}\n  - {type: conn_corrupt, parts: [header, payload]}\n";
  // Listed twice: refused; once each in two spaces below.
  EXPECT_FALSE(ParseFaultSpace(text, "s.yaml").ok());
  std::string one = kSpace + "  - {type: conn_corrupt, weight: 2}\n";
  SpaceOutcome o = ParseFaultSpace(one, "s.yaml");
  ASSERT_TRUE(o.ok()) << Errors(o);
  ASSERT_EQ(o.space->kinds.size(), 2u);
  EXPECT_EQ(o.space->kinds[1].parts, (std::vector<std::string>{"payload"}));
  EXPECT_TRUE(o.space->kinds[1].OneShot());
  EXPECT_FALSE(o.space->kinds[1].HasSide());
  one = kSpace + "  - {type: conn_corrupt, parts: [header, payload]}\n";
  o = ParseFaultSpace(one, "s.yaml");
  ASSERT_TRUE(o.ok()) << Errors(o);
  EXPECT_EQ(o.space->kinds[1].parts, (std::vector<std::string>{"header", "payload"}));
}

// One NIC per rank: the ranks whose ports are hit are a target, and nic_down (every port of
// one rank's NIC) is a kind. On shared NICs, where a host's ranks share ports, a rank target
// is refused and nic_down takes the host's NIC.
TEST(FaultSpace, PerRankNicsTakeRankTargetsAndNicDown) {
  std::string text = kSpace;
  text.replace(text.find("ranks_per_host: 1, rails: 2}"), 28,
               "ranks_per_host: 2, rails: 2, nics: per_rank}");
  text.replace(text.find("kinds:"), 6, "targets: {ranks: [1]}\nkinds:");
  text += "  - {type: nic_down, duration: {min: 600ms, max: 1s}}\n";
  SpaceOutcome o = ParseFaultSpace(text, "s.yaml");
  ASSERT_TRUE(o.ok()) << Errors(o);
  EXPECT_EQ(o.space->targets.ranks, (std::vector<int>{1}));
  ASSERT_EQ(o.space->kinds.size(), 2u);
  EXPECT_TRUE(o.space->kinds[1].WholeNic());
  EXPECT_TRUE(o.space->kinds[1].HasSide());
  EXPECT_EQ(o.space->kinds[1].duration_ns.lo, 600'000'000);
  // Without per_rank: a rank target is refused; nic_down is the host's NIC.
  std::string shared = text;
  shared.replace(shared.find(", nics: per_rank"), 16, "");
  o = ParseFaultSpace(shared, "s.yaml");
  ASSERT_FALSE(o.ok());
  EXPECT_NE(Errors(o).find("s.yaml:7:18: targets.ranks needs nics: per_rank"), std::string::npos)
      << Errors(o);
  shared.replace(shared.find("targets: {ranks: [1]}\n"), 22, "");
  o = ParseFaultSpace(shared, "s.yaml");
  ASSERT_TRUE(o.ok()) << Errors(o);
  ASSERT_EQ(o.space->kinds.size(), 2u);
  EXPECT_TRUE(o.space->kinds[1].WholeNic());
  EXPECT_FALSE(o.space->base.topology.per_rank_nics());
  // A rank the topology does not have.
  std::string far = text;
  far.replace(far.find("ranks: [1]"), 10, "ranks: [2]");
  o = ParseFaultSpace(far, "s.yaml");
  ASSERT_FALSE(o.ok());
  EXPECT_NE(Errors(o).find("s.yaml:7:19: "), std::string::npos) << Errors(o);
}

TEST(FaultSpace, UnreadableFile) {
  const SpaceOutcome o = ParseFaultSpaceFile("/nonexistent/space.yaml");
  ASSERT_FALSE(o.ok());
  EXPECT_NE(Errors(o).find("cannot read"), std::string::npos);
}

}  // namespace
}  // namespace faultline::runner::explore
