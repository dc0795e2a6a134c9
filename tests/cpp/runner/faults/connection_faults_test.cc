// The connection fault kinds' runner side (runner/faults/{conn_reset,conn_corrupt,qp_error}):
// one-shot faults on a port's sockets or on one rank's connection through its fault hook.
#include <gtest/gtest.h>

#include "runner/exec/requirements.h"
#include "tests/cpp/runner/faults/fault_test_util.h"

namespace faultline::runner::testing {
namespace {

TEST(ConnectionFaults, ParseValidEntries) {
  const std::vector<std::string> e = {
      "{id: r, at: 1s, type: conn_reset, target: {host: 0, rail: 1}}",
      "{id: c, at: 2s, type: conn_corrupt, target: {host: 1, rank: 1, rail: 0}, peer: 2, "
      "part: header}",
      "{id: q, at: 3s, type: qp_error, target: {host: 1, rank: 0, rail: 1}, peer: 0}",
  };
  Scenario s = MustParse(e);
  ASSERT_EQ(s.faults.size(), 3u);
  for (const auto& f : s.faults) {
    EXPECT_FALSE(f.Permanent()) << f.id;
    EXPECT_EQ(f.LatestEndNs(), f.at_ns) << f.id;  // one-shot: ends where it starts
    EXPECT_EQ(ActionsOf(s, f.id).size(), 1u) << f.id;
  }
  EXPECT_FALSE(s.faults[0].target.rank.has_value());
  EXPECT_EQ(ActionsOf(s, "r")[0].params, nlohmann::json::object());
  EXPECT_EQ(ActionsOf(s, "c")[0].params,
            (nlohmann::json{{"peer", 2}, {"path", 0}, {"part", "header"}}));
  EXPECT_EQ(ActionsOf(s, "q")[0].params, (nlohmann::json{{"peer", 0}, {"path", 1}}));
  // The hook kinds imply their features.
  EXPECT_EQ(RequiredFeatures(s), (std::vector<std::string>{"fault_hook", "verbs"}));
}

TEST(ConnectionFaults, RejectBadKeysWithLineAndColumn) {
  const std::vector<std::string> e = {
      "{id: r, at: 1s, type: conn_reset, target: {host: 0, rail: 1, side: host}}",
      "{id: q, at: 3s, type: qp_error, target: {host: 1, rank: 0, rail: 1}, peer: 0, part: x}",
      "{id: c, at: 5s, type: conn_corrupt, target: {host: 1, rank: 1, rail: 0}, peer: 3, for: 1s}",
  };
  EXPECT_EQ(Errors(ScenarioWith(e)),
            (std::vector<std::string>{
                Where(e, 0, "side") +
                    ": unknown key 'side' in target of fault 'r' (expected one of: host, rail)",
                Where(e, 1, "part") +
                    ": unknown key 'part' in fault 'q' (expected one of: id, type, at, target, "
                    "peer, for)",
                Where(e, 2, "3,") +
                    ": fault 'c': peer is the target rank itself (name the rank on the other "
                    "end of the connection)",
                Where(e, 2, "for") +
                    ": 'for' does not apply to conn_corrupt (this fault acts once, at 'at')",
            }));
}

}  // namespace
}  // namespace faultline::runner::testing
