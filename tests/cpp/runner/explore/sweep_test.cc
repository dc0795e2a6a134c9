// Sweeps: the --sweep argument against a space, the values, the space at one value (only the
// swept kind, its parameter fixed, the timeline shared by every value) and the plot.
#include "runner/explore/sweep.h"

#include <gtest/gtest.h>

#include <string>

#include "runner/explore/generator.h"

namespace faultline::runner::explore {
namespace {

const std::string kSpace = R"(name: s
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
workload: {op: allreduce, bytes: 1MiB, duration: 5s, warmup: 500ms}
faults_per_run: {min: 1, max: 2}
start: {min: 1s, max: 1500ms}
gap: {min: 100ms, max: 800ms}
horizon: 2800ms
kinds:
  - {type: link_down, weight: 3, duration: {min: 100ms, max: 1s}}
  - {type: link_flap, down: {min: 50ms, max: 200ms}, up: {min: 50ms, max: 300ms}, count: {min: 1, max: 3}}
  - {type: loss, percent: {min: 1, max: 20}, duration: {min: 200ms, max: 1s}}
  - {type: port_drop}
)";

FaultSpace Space() {
  SpaceOutcome o = ParseFaultSpace(kSpace, "s.yaml");
  EXPECT_TRUE(o.ok());
  return *o.space;
}

TEST(Sweep, ParsesKindParameterRangeAndPoints) {
  SweepSpec s;
  ASSERT_EQ(ParseSweep("link_flap.down=50..200:4", Space(), &s), std::nullopt);
  EXPECT_EQ(s.kind, "link_flap");
  EXPECT_EQ(s.param, "down");
  EXPECT_EQ(s.Label(), "link_flap.down (ms)");
  EXPECT_EQ(SweepValues(s), (std::vector<double>{50, 100, 150, 200}));
  ASSERT_EQ(ParseSweep("loss.percent=1..2:3", Space(), &s), std::nullopt);
  EXPECT_EQ(SweepValues(s), (std::vector<double>{1, 1.5, 2}));
  ASSERT_EQ(ParseSweep("link_down.duration=300..300:1", Space(), &s), std::nullopt);
  EXPECT_EQ(SweepValues(s), (std::vector<double>{300}));
}

TEST(Sweep, RefusesWhatTheSpaceCannotSweep) {
  SweepSpec s;
  const FaultSpace sp = Space();
  auto err = [&](const std::string& t) { return ParseSweep(t, sp, &s).value_or(""); };
  EXPECT_NE(err("bandwidth.rate=1..2:2").find("no kind bandwidth (it has link_down, link_flap, "
                                             "loss, port_drop)"),
            std::string::npos);
  EXPECT_NE(err("link_down.percent=1..2:2").find("it takes duration"), std::string::npos);
  EXPECT_NE(err("port_drop.duration=1..2:2").find("it takes none"), std::string::npos);
  EXPECT_NE(err("link_flap.down=50-200:4").find("not of the form"), std::string::npos);
  EXPECT_NE(err("link_flap.down=50ms..200ms:4").find("plain numbers (in ms)"), std::string::npos);
  EXPECT_NE(err("link_flap.down=200..50:4").find("below A"), std::string::npos);
  EXPECT_NE(err("link_flap.down=50..200:0").find("whole number from 1 to 100"), std::string::npos);
  EXPECT_NE(err("loss.percent=10..200:3").find("at most 100"), std::string::npos);
}

TEST(Sweep, EveryValueSharesItsTimelineAndOnlyTheParameterMoves) {
  SweepSpec s;
  ASSERT_EQ(ParseSweep("link_flap.down=50..200:4", Space(), &s), std::nullopt);
  std::vector<RunFaults> runs;
  for (double v : SweepValues(s)) {
    const FaultSpace at = SpaceAt(Space(), s, v);
    ASSERT_EQ(at.kinds.size(), 1u);
    EXPECT_EQ(at.kinds[0].type, "link_flap");
    runs.push_back(Generate(at, 7, 0));
    ASSERT_FALSE(runs.back().faults.empty());
    for (const auto& f : runs.back().faults) {
      EXPECT_EQ(f.type, "link_flap");
      EXPECT_EQ(f.down_ns, static_cast<int64_t>(v) * 1'000'000);
    }
  }
  // The first fault starts at the same time on the same target for every value.
  for (const auto& r : runs) {
    EXPECT_EQ(r.scenario_seed, runs[0].scenario_seed);
    EXPECT_EQ(r.faults[0].at_ns, runs[0].faults[0].at_ns);
    EXPECT_EQ(r.faults[0].host, runs[0].faults[0].host);
    EXPECT_EQ(r.faults[0].up_ns, runs[0].faults[0].up_ns);
  }
  // Each generated file keeps the space's rules.
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_TRUE(FitsSpace(SpaceAt(Space(), s, SweepValues(s)[i]), runs[i].faults));
  }
}

TEST(Sweep, PlotMarksEachRunByOutcome) {
  SweepSpec s;
  ASSERT_EQ(ParseSweep("link_flap.down=50..200:4", Space(), &s), std::nullopt);
  const std::string svg = SweepSvg(s, {{50, "survived", 20.0, false},
                                       {100, "survived", 450.0, true},
                                       {150, "aborted_clean", 900.0, false},
                                       {200, "hung", std::nullopt, true}});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t p = svg.find(what); p != std::string::npos; p = svg.find(what, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("class=\"survived\""), 2u);
  EXPECT_EQ(count("class=\"aborted_clean\""), 1u);
  EXPECT_EQ(count("class=\"hung\""), 1u);
  EXPECT_EQ(count("class=\"violation\""), 2u);
  // The y axis reaches the largest stall, rounded up (900 ms -> 900), and names both axes.
  EXPECT_NE(svg.find(">900</text>"), std::string::npos);
  EXPECT_NE(svg.find("link_flap.down (ms)"), std::string::npos);
  EXPECT_NE(svg.find("stall (ms)"), std::string::npos);
}

}  // namespace
}  // namespace faultline::runner::explore
