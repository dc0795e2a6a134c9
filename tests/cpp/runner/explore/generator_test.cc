// The generator: a pure function of (space, seed, index); every file it writes validates as a
// scenario, keeps the space's rules and carries its origin.
#include "runner/explore/generator.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>

namespace faultline::runner::explore {
namespace {

FaultSpace Load(const char* name) {
  // Appended piece by piece (GCC 12 warns falsely on a chain of + at -O1 and above).
  std::string path = FAULTLINE_SOURCE_DIR;
  path.append("/scenarios/explore/").append(name);
  const SpaceOutcome o = ParseFaultSpaceFile(path);
  EXPECT_TRUE(o.ok());
  return *o.space;
}

TEST(Generator, SameTripleSameFile) {
  const FaultSpace s = Load("links.yaml");
  for (int64_t i = 0; i < 20; ++i) {
    const RunFaults a = Generate(s, 7, i);
    const RunFaults b = Generate(s, 7, i);
    EXPECT_EQ(a, b);
    EXPECT_EQ(RenderScenario(s, a, {7, i, ""}), RenderScenario(s, b, {7, i, ""}));
  }
}

TEST(Generator, SeedAndIndexChangeTheRun) {
  const FaultSpace s = Load("links.yaml");
  int differ_index = 0, differ_seed = 0;
  for (int64_t i = 0; i < 20; ++i) {
    if (!(Generate(s, 7, i) == Generate(s, 7, i + 1))) ++differ_index;
    if (!(Generate(s, 7, i) == Generate(s, 8, i))) ++differ_seed;
  }
  EXPECT_EQ(differ_index, 20);
  EXPECT_EQ(differ_seed, 20);
}

// A fixed triple gives fixed values: the generator does not depend on the platform's
// standard distributions (a change here changes every campaign's files).
TEST(Generator, PinnedRun) {
  const FaultSpace s = Load("links.yaml");
  const RunFaults r = Generate(s, 1, 0);
  ASSERT_FALSE(r.faults.empty());
  const std::string text = RenderScenario(s, r, {1, 0, ""});
  EXPECT_NE(text.find("# seed 1, index 0"), std::string::npos);
  EXPECT_NE(text.find("name: explore-links-s1-i0"), std::string::npos);
  EXPECT_NE(text.find(s.sha256), std::string::npos);
  std::string got;
  for (const auto& f : r.faults) got += Describe(f) + "\n";
  EXPECT_EQ(got,
            "f0 link_down h1 r1 switch at 1097ms for 296ms\n"
            "f1 blackhole h1 r0 switch at 1289ms for 777ms\n");
  EXPECT_EQ(r.scenario_seed, 332582595u);
}

TEST(Generator, EveryFileValidatesAndKeepsTheRules) {
  for (const char* name : {"links.yaml", "connections.yaml", "corrupt.yaml"}) {
    const FaultSpace s = Load(name);
    std::map<std::string, int> kinds, parts;
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      for (int64_t i = 0; i < 40; ++i) {
        const RunFaults r = Generate(s, seed, i);
        ASSERT_GE(r.faults.size(), 1u) << name << " " << seed << " " << i;
        ASSERT_LE(static_cast<int64_t>(r.faults.size()), s.faults_per_run.hi);
        EXPECT_TRUE(FitsSpace(s, r.faults)) << name << " " << seed << " " << i;
        const std::string text = RenderScenario(s, r, {seed, i, ""});
        const ParseOutcome p = ParseScenario(text, "gen.yaml");
        ASSERT_TRUE(p.ok()) << text << "\n"
                            << (p.diagnostics.empty() ? "" : p.diagnostics[0].ToString());
        ASSERT_EQ(p.scenario->faults.size(), r.faults.size());
        EXPECT_EQ(p.scenario->seed, r.scenario_seed);
        for (size_t k = 0; k < r.faults.size(); ++k) {
          const FaultSpec& f = p.scenario->faults[k];
          EXPECT_EQ(f.id, r.faults[k].id);
          EXPECT_EQ(f.kind, r.faults[k].type);
          EXPECT_EQ(f.at_ns, r.faults[k].at_ns);
          EXPECT_EQ(f.target.host, r.faults[k].host);
          EXPECT_EQ(f.target.rail, r.faults[k].rail);
          if (f.kind == "conn_corrupt") {
            // Rank 0 of the target host corrupts a frame to rank 0 of another host.
            EXPECT_EQ(f.target.rank, 0);
            EXPECT_NE(r.faults[k].peer_host, r.faults[k].host);
            EXPECT_EQ(f.params.peer, r.faults[k].peer_host * s.base.topology.ranks_per_host);
            EXPECT_EQ(f.params.part, r.faults[k].part);
            ++parts[f.params.part];
          }
          if (r.faults[k].EndNs() != kForever) {
            EXPECT_LE(r.faults[k].EndNs(), s.horizon_ns);
            ASSERT_TRUE(f.LatestEndNs().has_value());
            EXPECT_EQ(*f.LatestEndNs(), r.faults[k].EndNs());
          } else {
            EXPECT_TRUE(f.Permanent());
          }
          ++kinds[f.kind];
        }
      }
    }
    // Every kind of the space is drawn, and every part of a conn_corrupt kind.
    EXPECT_EQ(kinds.size(), s.kinds.size()) << name;
    for (const auto& k : s.kinds) {
      if (k.type == "conn_corrupt") {
        EXPECT_EQ(parts.size(), k.parts.size()) << name;
      }
    }
  }
}

// The two targeted spaces make the runs their comments promise: one_rail.yaml two or three
// outages of rail 0, one at a time, rail 1 never touched; both_rails.yaml, in most runs, two
// outages on different rails in effect at once (every path between the hosts lost a while).
TEST(Generator, TargetedSpacesMakeTheRunsTheyAreFor) {
  const FaultSpace one = Load("one_rail.yaml");
  const FaultSpace both = Load("both_rails.yaml");
  int several = 0, every_path_lost = 0;
  constexpr int kRuns = 100;
  for (int64_t i = 0; i < kRuns; ++i) {
    const RunFaults a = Generate(one, 2026, i);
    ASSERT_GE(a.faults.size(), 1u) << i;
    if (a.faults.size() >= 2) ++several;
    for (size_t x = 0; x < a.faults.size(); ++x) {
      EXPECT_EQ(a.faults[x].rail, 0) << i;
      if (x > 0) {
        EXPECT_GE(a.faults[x].at_ns, a.faults[x - 1].EndNs()) << i;
      }
    }
    const RunFaults b = Generate(both, 2026, i);
    bool lost = false;
    for (size_t x = 0; x < b.faults.size(); ++x) {
      for (size_t y = x + 1; y < b.faults.size(); ++y) {
        const GenFault& f = b.faults[x];
        const GenFault& g = b.faults[y];
        lost |= f.rail != g.rail && f.at_ns < g.EndNs() && g.at_ns < f.EndNs();
      }
    }
    if (lost) ++every_path_lost;
  }
  EXPECT_GE(several, kRuns * 9 / 10);
  EXPECT_GE(every_path_lost, kRuns / 2);
  std::printf("one_rail: %d of %d runs with 2+ outages; both_rails: %d with every path lost\n",
              several, kRuns, every_path_lost);
}

// relay.yaml (one NIC per rank): a nic_down is written as one link_down per rail of the same
// rank's ports, at once and for as long; the ports hit are those of both ranks of each host.
TEST(Generator, NicDownIsEveryPortOfOneRank) {
  const FaultSpace s = Load("relay.yaml");
  ASSERT_TRUE(s.base.topology.per_rank_nics());
  std::set<std::pair<int, int>> nics;  // (host, rank) of the nic_downs drawn
  int ports = 0;
  for (int64_t i = 0; i < 100; ++i) {
    const RunFaults r = Generate(s, 2026, i);
    ASSERT_GE(r.faults.size(), 1u) << i;
    EXPECT_TRUE(FitsSpace(s, r.faults)) << i;
    const std::string text = RenderScenario(s, r, {2026, i, ""});
    const ParseOutcome p = ParseScenario(text, "gen.yaml");
    ASSERT_TRUE(p.ok()) << text << "\n"
                        << (p.diagnostics.empty() ? "" : p.diagnostics[0].ToString());
    EXPECT_TRUE(p.scenario->topology.per_rank_nics());
    size_t k = 0;
    for (const auto& g : r.faults) {
      const int n = g.WholeNic() ? s.base.topology.rails : 1;
      if (g.WholeNic()) nics.insert({g.host, g.rank});
      if (!g.WholeNic()) ++ports;
      for (int rail = 0; rail < n; ++rail, ++k) {
        ASSERT_LT(k, p.scenario->faults.size()) << text;
        const FaultSpec& f = p.scenario->faults[k];
        EXPECT_EQ(f.kind, "link_down") << text;
        EXPECT_EQ(f.target.host, g.host);
        EXPECT_EQ(f.target.rank, g.rank) << text;
        EXPECT_TRUE(f.target.port) << text;
        EXPECT_EQ(f.target.rail, g.WholeNic() ? rail : g.rail) << text;
        EXPECT_EQ(f.target.side, g.side);
        EXPECT_EQ(f.at_ns, g.at_ns);
        ASSERT_TRUE(f.LatestEndNs().has_value());
        EXPECT_EQ(*f.LatestEndNs(), g.EndNs());
      }
    }
    EXPECT_EQ(k, p.scenario->faults.size()) << text;
  }
  EXPECT_EQ(nics.size(), 4u);  // both ranks of both hosts
  EXPECT_GT(ports, 0);
  // A nic_down and a fault on one of the same rank's ports overlap; another rank's do not.
  GenFault a{.id = "a", .type = "nic_down", .at_ns = 1'100'000'000, .for_ns = 800'000'000};
  GenFault b{.id = "b", .type = "link_down", .at_ns = 1'500'000'000, .for_ns = 300'000'000};
  b.rail = 1;
  FaultSpace two = s;  // relay.yaml has one fault at a time
  two.max_concurrent = 2;
  EXPECT_FALSE(FitsSpace(two, {a, b}));
  b.rank = 1;
  EXPECT_TRUE(FitsSpace(two, {a, b}));
  EXPECT_FALSE(FitsSpace(s, {a, b}));
  // A rank the topology does not have.
  b.rank = 2;
  EXPECT_FALSE(FitsSpace(s, {b}));
  EXPECT_EQ(Describe(a), "a nic_down h0 k0 host at 1100ms for 800ms");
}

// On shared NICs a nic_down is the host's NIC: every rail of the host at one instant, written
// without a rank (the port is the host's), and it overlaps any fault on any of its rails.
TEST(Generator, NicDownOnSharedNicsIsEveryRailOfTheHost) {
  FaultSpace s = Load("both_rails.yaml");
  ASSERT_FALSE(s.base.topology.per_rank_nics());
  ASSERT_EQ(s.base.topology.rails, 2);
  GenFault a{.id = "a", .type = "nic_down", .at_ns = 1'100'000'000, .for_ns = 500'000'000};
  a.host = 1;
  EXPECT_TRUE(FitsSpace(s, {a}));
  GenFault b{.id = "b", .type = "link_down", .at_ns = 1'300'000'000, .for_ns = 300'000'000};
  b.host = 1;
  b.rail = 1;
  EXPECT_FALSE(FitsSpace(s, {a, b}));
  b.host = 0;
  EXPECT_TRUE(FitsSpace(s, {a, b}));
  GenFault on_rail = a;
  on_rail.rail = 1;  // a whole NIC is drawn on rail 0 only
  EXPECT_FALSE(FitsSpace(s, {on_rail}));
  RunFaults run;
  run.scenario_seed = 7;
  run.faults = {a};
  const std::string text = RenderScenario(s, run, {2026, 0, ""});
  EXPECT_EQ(text.find("rank:"), std::string::npos) << text;
  const ParseOutcome p = ParseScenario(text, "gen.yaml");
  ASSERT_TRUE(p.ok()) << text << "\n" << (p.diagnostics.empty() ? "" : p.diagnostics[0].ToString());
  ASSERT_EQ(p.scenario->faults.size(), 2u) << text;
  for (int rail = 0; rail < 2; ++rail) {
    const FaultSpec& f = p.scenario->faults[static_cast<size_t>(rail)];
    EXPECT_EQ(f.id, "ar" + std::to_string(rail));
    EXPECT_EQ(f.kind, "link_down");
    EXPECT_EQ(f.target.host, 1);
    EXPECT_EQ(f.target.rail, rail);
    EXPECT_FALSE(f.target.rank.has_value()) << text;
    EXPECT_FALSE(f.target.port);
    EXPECT_EQ(f.target.side, LinkSide::kHost);
    EXPECT_EQ(f.at_ns, a.at_ns);
    ASSERT_TRUE(f.LatestEndNs().has_value());
    EXPECT_EQ(*f.LatestEndNs(), a.EndNs());
  }
}

TEST(Generator, FitsSpaceRefusesOverlapOnOneLink) {
  const FaultSpace s = Load("links.yaml");
  GenFault a{.id = "a", .type = "link_down", .at_ns = 1'000'000'000, .for_ns = 500'000'000};
  GenFault b = a;
  b.id = "b";
  b.at_ns = 1'200'000'000;
  b.side = LinkSide::kSwitch;  // the other end of the same link
  EXPECT_FALSE(FitsSpace(s, {a, b}));
  b.rail = 1;
  EXPECT_TRUE(FitsSpace(s, {a, b}));
  b.at_ns = 2'700'000'000;  // past the horizon (2800ms) by its end
  EXPECT_FALSE(FitsSpace(s, {a, b}));
}

}  // namespace
}  // namespace faultline::runner::explore
