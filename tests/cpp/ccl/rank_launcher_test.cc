// The launcher itself: exit codes, signals, reported failures and values, and the wall-clock
// bound that kills hung ranks.
#include "rank_launcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <set>
#include <string>

namespace ftccl::test {
namespace {

TEST(RankLauncherTest, CollectsExitCodesFailuresAndValues) {
  LaunchResult result = LaunchRanks(4, std::chrono::seconds(30), [](int rank, RankReporter& rep) {
    rep.Value("rank_squared", rank * rank);
    if (rank == 2) rep.Fail("rank two says no");
    if (rank == 3) return 7;
    return 0;
  });
  ASSERT_EQ(result.ranks.size(), 4u);
  EXPECT_FALSE(result.timed_out);
  EXPECT_FALSE(result.AllOk());
  EXPECT_TRUE(result.ranks[0].ok());
  EXPECT_TRUE(result.ranks[1].ok());
  EXPECT_FALSE(result.ranks[2].ok());
  ASSERT_EQ(result.ranks[2].failures.size(), 1u);
  EXPECT_EQ(result.ranks[2].failures[0], "rank two says no");
  EXPECT_EQ(result.ranks[2].exit_code, 1);
  EXPECT_EQ(result.ranks[3].exit_code, 7);
  EXPECT_EQ(result.Sum("rank_squared"), 0 + 1 + 4 + 9);
  EXPECT_NE(result.Describe().find("rank two says no"), std::string::npos);
}

TEST(RankLauncherTest, ReportsSignals) {
  LaunchResult result = LaunchRanks(2, std::chrono::seconds(30), [](int rank, RankReporter&) {
    if (rank == 1) kill(getpid(), SIGKILL);
    return 0;
  });
  ASSERT_EQ(result.ranks.size(), 2u);
  EXPECT_TRUE(result.ranks[0].ok());
  EXPECT_FALSE(result.ranks[1].exited);
  EXPECT_EQ(result.ranks[1].term_signal, SIGKILL);
  EXPECT_FALSE(result.ranks[1].killed_by_launcher);
}

TEST(RankLauncherTest, KillsHungRanksAtTheWallClockBound) {
  const Clock::time_point start = Clock::now();
  LaunchResult result =
      LaunchRanks(3, std::chrono::milliseconds(500), [](int rank, RankReporter& rep) {
        rep.Progress("about to hang");
        if (rank != 0) pause();
        return 0;
      });
  EXPECT_LT(MillisSince(start), 5000);
  EXPECT_TRUE(result.timed_out);
  ASSERT_EQ(result.ranks.size(), 3u);
  EXPECT_TRUE(result.ranks[0].ok());
  for (int r = 1; r < 3; ++r) {
    EXPECT_TRUE(result.ranks[r].killed_by_launcher);
    EXPECT_EQ(result.ranks[r].last_progress, "about to hang");
    // Reaped: the process no longer exists.
    EXPECT_EQ(kill(result.ranks[r].pid, 0), -1);
  }
}

TEST(RankLauncherTest, LargeOutputDoesNotBlockARank) {
  LaunchResult result = LaunchRanks(2, std::chrono::seconds(30), [](int, RankReporter& rep) {
    for (int i = 0; i < 20000; ++i) rep.Progress(std::string(100, 'x') + std::to_string(i));
    return 0;
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
  std::string last(100, 'x');
  last += "19999";
  EXPECT_EQ(result.ranks[1].last_progress, last);
}

TEST(RankLauncherTest, RailAddressesAreDistinct) {
  std::set<std::string> seen;
  for (int rank = 0; rank < 8; ++rank) {
    for (int rail = 0; rail < kDefaultRails; ++rail) {
      EXPECT_TRUE(seen.insert(RailAddress(rank, rail)).second) << RailAddress(rank, rail);
      EXPECT_EQ(RailAddress(rank, rail).rfind("127.0.0.", 0), 0u);
    }
  }
}

}  // namespace
}  // namespace ftccl::test
