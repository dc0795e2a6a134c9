// Shrinking against a fake predicate: the minimal set, the simplifications and how often the
// predicate was asked are exact; k-of-n confirmation stops as soon as the answer is known.
#include "runner/explore/shrink.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace faultline::runner::explore {
namespace {

constexpr int64_t kMs = 1'000'000;

GenFault Down(const char* id, int host, int rail, int64_t at_ms) {
  GenFault f;
  f.id = id;
  f.type = "link_down";
  f.host = host;
  f.rail = rail;
  f.side = LinkSide::kSwitch;
  f.at_ns = at_ms * kMs;
  f.for_ns = 1000 * kMs;
  return f;
}

const GenFault* Find(const std::vector<GenFault>& fs, const std::string& id) {
  for (const auto& f : fs) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

// Fails iff faults f0 and f2 are both present and f0 lasts at least 300 ms.
CandidateVerdict AAndC(const std::vector<GenFault>& fs) {
  const GenFault* a = Find(fs, "f0");
  const GenFault* c = Find(fs, "f2");
  return a && c && a->for_ns >= 300 * kMs ? CandidateVerdict::kFails : CandidateVerdict::kPasses;
}

const ShrinkFits kAnything = [](const std::vector<GenFault>&) { return true; };

std::vector<GenFault> Four() {
  return {Down("f0", 1, 1, 2000), Down("f1", 1, 0, 2100), Down("f2", 0, 1, 2200),
          Down("f3", 0, 0, 2300)};
}

TEST(Shrink, FindsTheMinimalSetAndSimplifiesIt) {
  int asked = 0;
  ShrinkLimits limits;
  limits.earliest_ns = 1000 * kMs;
  const ShrinkResult r = Shrink(
      Four(),
      [&](const std::vector<GenFault>& fs) {
        ++asked;
        return AAndC(fs);
      },
      kAnything, limits);
  ASSERT_EQ(r.minimal.size(), 2u);
  const GenFault* a = Find(r.minimal, "f0");
  const GenFault* c = Find(r.minimal, "f2");
  ASSERT_TRUE(a && c);
  // f0 halves once (1000 -> 500 ms; 250 ms no longer fails); f2 halves to the floor.
  EXPECT_EQ(a->for_ns, 500 * kMs);
  EXPECT_EQ(c->for_ns, 62 * kMs);
  // Both move to within 50 ms of the earliest start, by halves: 2000 -> 1500 -> ... -> 1031.
  EXPECT_EQ(a->at_ns, 1031 * kMs);
  EXPECT_EQ(c->at_ns, 1037 * kMs);
  // And get the simplest target.
  for (const GenFault* f : {a, c}) {
    EXPECT_EQ(f->host, 0);
    EXPECT_EQ(f->rail, 0);
    EXPECT_EQ(f->side, LinkSide::kHost);
  }
  // ddmin: the empty set, 2 halves, 4 quarters, 2 complements of 4, 2 complements of 3 = 11;
  // then f0: halve (fails), halve (passes: f0 is stuck at 500 ms), 5 moves (2000 -> 1500 ->
  // 1250 -> 1125 -> 1062 -> 1031), host, rail, side = 10; f2: 4 halves (to 62 ms), 5 moves,
  // rail, side = 11 (its host is 0 already); a last pass over both asks nothing.
  std::string path;
  for (const auto& s : r.steps) path += s.action + (s.failed ? " FAILS\n" : " passes\n");
  EXPECT_EQ(r.asked, 11 + 10 + 11) << path;
  EXPECT_FALSE(r.out_of_budget);
  // The path: every accepted step fails; the last accepted one is the minimal set.
  const auto last = std::find_if(r.steps.rbegin(), r.steps.rend(),
                                 [](const ShrinkStep& s) { return s.accepted; });
  ASSERT_NE(last, r.steps.rend());
  EXPECT_EQ(last->faults, r.minimal);
  for (const auto& s : r.steps) EXPECT_EQ(s.accepted, s.failed);
}

TEST(Shrink, StopsAtItsBudgetWithTheBestSoFar) {
  ShrinkLimits limits;
  limits.max_candidates = 9;
  const ShrinkResult r = Shrink(Four(), AAndC, kAnything, limits);
  EXPECT_TRUE(r.out_of_budget);
  EXPECT_EQ(r.asked, 9);
  // After 9 answers ddmin has dropped f1 ([A, C, D] fails) but not yet f3.
  EXPECT_EQ(r.minimal.size(), 3u);
  EXPECT_EQ(AAndC(r.minimal), CandidateVerdict::kFails);
}

TEST(Shrink, StopsWhenThePredicateRunsOutOfBudget) {
  int asked = 0;
  const ShrinkResult r = Shrink(
      Four(),
      [&](const std::vector<GenFault>& fs) {
        return ++asked > 3 ? CandidateVerdict::kOutOfBudget : AAndC(fs);
      },
      kAnything, {});
  EXPECT_TRUE(r.out_of_budget);
  EXPECT_EQ(r.minimal.size(), 4u);
}

TEST(Shrink, CandidatesThatDoNotFitAreNeverAsked) {
  // Only sets that keep f1 fit: ddmin cannot drop it, the rest shrinks as before.
  const ShrinkFits keep_f1 = [](const std::vector<GenFault>& fs) { return Find(fs, "f1") != nullptr; };
  const ShrinkResult r = Shrink(
      Four(),
      [&](const std::vector<GenFault>& fs) {
        EXPECT_TRUE(Find(fs, "f1"));
        return AAndC(fs);
      },
      keep_f1, {});
  ASSERT_EQ(r.minimal.size(), 3u);
  EXPECT_TRUE(Find(r.minimal, "f0") && Find(r.minimal, "f1") && Find(r.minimal, "f2"));
}

TEST(Shrink, AFailureWithoutFaultsShrinksToNone) {
  const ShrinkResult r = Shrink(
      Four(), [](const std::vector<GenFault>&) { return CandidateVerdict::kFails; }, kAnything, {});
  EXPECT_TRUE(r.minimal.empty());
  EXPECT_EQ(r.asked, 1);
}

TEST(ConfirmKOfN, StopsAsSoonAsTheAnswerIsKnown) {
  auto pattern = [](std::vector<bool> answers, int* i) {
    return [answers, i] { return answers[static_cast<size_t>((*i)++)]; };
  };
  int i = 0, runs = 0;
  EXPECT_TRUE(ConfirmKOfN(pattern({true, true, false}, &i), 2, 3, &runs));
  EXPECT_EQ(runs, 2);
  i = 0;
  EXPECT_FALSE(ConfirmKOfN(pattern({false, false, true}, &i), 2, 3, &runs));
  EXPECT_EQ(runs, 2);  // two passes: two failures of three can no longer happen
  i = 0;
  EXPECT_TRUE(ConfirmKOfN(pattern({true, false, true}, &i), 2, 3, &runs));
  EXPECT_EQ(runs, 3);
  i = 0;
  EXPECT_FALSE(ConfirmKOfN(pattern({true, false, false}, &i), 2, 3, &runs));
  EXPECT_EQ(runs, 3);
  i = 0;
  EXPECT_TRUE(ConfirmKOfN(pattern({false, true, true, true, true}, &i), 4, 5, &runs));
  EXPECT_EQ(runs, 5);
}

}  // namespace
}  // namespace faultline::runner::explore

namespace faultline::runner::explore {
namespace {

TEST(ShrinkTopology, FewerRanksHostsRailsAndASmallerMessageWhileItStillFails) {
  const TopologyShape start{4, 2, 3, 1 << 20};
  // Fails while there are at least 2 rails and messages of at least 64 KiB.
  std::vector<TopologyShape> asked;
  const auto r = ShrinkTopology(
      start, {Down("f0", 1, 1, 2000)},
      [&](const TopologyShape& s) {
        asked.push_back(s);
        return s.rails >= 2 && s.bytes >= 65536 ? CandidateVerdict::kFails
                                                : CandidateVerdict::kPasses;
      },
      20);
  EXPECT_EQ(r.minimal, (TopologyShape{2, 1, 2, 65536}));
  EXPECT_FALSE(r.out_of_budget);
  // 1 rank per host, 2 hosts, 2 rails (1 rail is not asked: f0 is on rail 1), then the
  // message halved from 512 KiB down to 32 KiB, which passes and ends it.
  ASSERT_EQ(r.steps.size(), 8u);
  EXPECT_EQ(r.steps[0].action, "1 rank per host");
  EXPECT_EQ(r.steps[1].action, "2 hosts");
  EXPECT_EQ(r.steps[2].action, "2 rails");
  EXPECT_EQ(r.steps[3].action, "halve the message to 524288 B");
  EXPECT_EQ(r.steps.back().action, "halve the message to 32768 B");
  EXPECT_FALSE(r.steps.back().failed);
  EXPECT_EQ(asked.size(), r.steps.size());
}

TEST(ShrinkTopology, KeepsWhatTheFaultsTargetAndStopsAtItsBudget) {
  const TopologyShape start{3, 1, 2, 8192};
  // A fault on host 2 keeps 3 hosts; one on rail 1 keeps 2 rails: only the message is asked.
  const auto r = ShrinkTopology(
      start, {Down("f0", 2, 1, 2000)},
      [](const TopologyShape&) { return CandidateVerdict::kFails; }, 20);
  EXPECT_EQ(r.minimal, (TopologyShape{3, 1, 2, 4096}));
  ASSERT_EQ(r.steps.size(), 1u);
  const auto cut = ShrinkTopology(
      TopologyShape{4, 2, 2, 1 << 20}, {Down("f0", 0, 0, 2000)},
      [](const TopologyShape&) { return CandidateVerdict::kFails; }, 2);
  EXPECT_TRUE(cut.out_of_budget);
  EXPECT_EQ(cut.minimal, (TopologyShape{2, 1, 2, 1 << 20}));
}

// A corrupted frame names a pair of hosts: moving it to host 0 keeps the pair (the frame now
// goes from host 0 to the host it came from), and topology shrinking keeps the peer's host.
TEST(Shrink, AConnCorruptKeepsItsPairOfHosts) {
  GenFault f;
  f.id = "f0";
  f.type = "conn_corrupt";
  f.host = 2;
  f.peer_host = 0;
  f.rail = 1;
  f.part = "header";
  f.at_ns = 1000 * kMs;
  std::vector<std::vector<GenFault>> asked;
  ShrinkLimits limits;
  limits.earliest_ns = 1000 * kMs;  // nothing to move earlier; a one-shot has no length
  const ShrinkResult r = Shrink(
      {f},
      [&](const std::vector<GenFault>& fs) {
        asked.push_back(fs);
        return fs.size() == 1 && fs[0].part == "header" ? CandidateVerdict::kFails
                                                        : CandidateVerdict::kPasses;
      },
      kAnything, limits);
  ASSERT_EQ(r.minimal.size(), 1u);
  EXPECT_EQ(r.minimal[0].host, 0);
  EXPECT_EQ(r.minimal[0].peer_host, 2);
  EXPECT_EQ(r.minimal[0].rail, 0);
  EXPECT_EQ(r.minimal[0].part, "header");
  EXPECT_EQ(r.minimal[0].side, LinkSide::kHost);  // no side is asked for
  for (const auto& fs : asked) {
    for (const auto& g : fs) EXPECT_NE(g.host, g.peer_host);
  }
  GenFault g = f;
  g.host = 0;
  g.peer_host = 2;
  const auto t = ShrinkTopology(
      TopologyShape{4, 1, 2, 8192}, {g},
      [](const TopologyShape&) { return CandidateVerdict::kFails; }, 20);
  EXPECT_EQ(t.minimal.hosts, 3);
}

}  // namespace
}  // namespace faultline::runner::explore

namespace faultline::runner::explore {
namespace {

// A rank's own NIC (nics: per_rank) is simplified to rank 0 of its host when that still
// fails, and topology shrinking keeps as many ranks per host as the faults name.
TEST(Shrink, ARankTargetMovesToRankZeroAndKeepsItsRank) {
  GenFault f = Down("f0", 1, 0, 1000);
  f.type = "nic_down";
  f.rank = 1;
  f.side = LinkSide::kHost;
  ShrinkLimits limits;
  limits.earliest_ns = 1000 * kMs;
  limits.min_length_ns = 1000 * kMs;  // only the target is simplified
  std::vector<std::string> actions;
  const ShrinkResult r = Shrink(
      {f},
      [](const std::vector<GenFault>& fs) {
        return fs.size() == 1 ? CandidateVerdict::kFails : CandidateVerdict::kPasses;
      },
      kAnything, limits);
  ASSERT_EQ(r.minimal.size(), 1u);
  EXPECT_EQ(r.minimal[0].host, 0);
  EXPECT_EQ(r.minimal[0].rank, 0);
  for (const auto& s : r.steps) actions.push_back(s.action);
  EXPECT_NE(std::find(actions.begin(), actions.end(), "f0: rank 0 of its host"), actions.end());
  // A failure that needs rank 1's NIC keeps it, and 2 ranks per host with it.
  const ShrinkResult kept = Shrink(
      {f},
      [](const std::vector<GenFault>& fs) {
        return fs.size() == 1 && fs[0].rank == 1 ? CandidateVerdict::kFails
                                                 : CandidateVerdict::kPasses;
      },
      kAnything, limits);
  ASSERT_EQ(kept.minimal.size(), 1u);
  EXPECT_EQ(kept.minimal[0].rank, 1);
  std::vector<TopologyShape> asked;
  const auto t = ShrinkTopology(
      TopologyShape{2, 4, 2, 8192}, kept.minimal,
      [&](const TopologyShape& s) {
        asked.push_back(s);
        return CandidateVerdict::kFails;
      },
      20);
  EXPECT_EQ(t.minimal.ranks_per_host, 2);
  ASSERT_FALSE(t.steps.empty());
  EXPECT_EQ(t.steps[0].action, "2 ranks per host");
  for (const auto& s : asked) EXPECT_GE(s.ranks_per_host, 2);
}

}  // namespace
}  // namespace faultline::runner::explore
