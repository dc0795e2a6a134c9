// The one logger (base/log.h): the line format per level, level parsing, and that a level
// filters what is written.
#include "base/log.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace faultline::log {
namespace {

TEST(Log, InfoIsThePlainComponentLine) {
  EXPECT_EQ(Format(Level::kInfo, "run", "runner/exec/x.cc", 7, "restart 1: rank 2 died"),
            "faultline run: restart 1: rank 2 died");
}

TEST(Log, WarnAndErrorCarryTheLevelAndFileLine) {
  EXPECT_EQ(Format(Level::kWarn, "agent", "runner/exec/agent.cc", 42, "slow peer"),
            "faultline agent: WARN: slow peer (agent.cc:42)");
  EXPECT_EQ(Format(Level::kError, "run", "a/b/c.cc", 1, "no topology"),
            "faultline run: ERROR: no topology (c.cc:1)");
}

TEST(Log, DebugCarriesTheLevelButNoFileLine) {
  EXPECT_EQ(Format(Level::kDebug, "suite", "s.cc", 3, "combination 4"),
            "faultline suite: DEBUG: combination 4");
}

TEST(Log, ParsesTheFourLevelNamesOnly) {
  Level l = Level::kInfo;
  EXPECT_TRUE(ParseLevel("debug", &l));
  EXPECT_EQ(l, Level::kDebug);
  EXPECT_TRUE(ParseLevel("error", &l));
  EXPECT_EQ(l, Level::kError);
  EXPECT_FALSE(ParseLevel("verbose", &l));
  EXPECT_EQ(l, Level::kError) << "an unknown name leaves the level alone";
}

TEST(Log, TheLevelFiltersWhatIsWritten) {
  const Level saved = CurrentLevel();
  SetLevel(Level::kWarn);
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  FL_INFO("run", "hidden %d", 1);
  FL_DEBUG("run", "hidden %d", 2);
  FL_WARN("run", "shown %d", 3);
  const std::string out = testing::internal::GetCapturedStdout();
  const std::string err = testing::internal::GetCapturedStderr();
  SetLevel(Level::kDebug);
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  FL_INFO("run", "now %s", "shown");
  FL_DEBUG("run", "debug %s", "too");
  const std::string out2 = testing::internal::GetCapturedStdout();
  const std::string err2 = testing::internal::GetCapturedStderr();
  SetLevel(saved);
  EXPECT_EQ(out, "");
  EXPECT_NE(err.find("faultline run: WARN: shown 3 (log_test.cc:"), std::string::npos) << err;
  EXPECT_EQ(err.find("hidden"), std::string::npos) << err;
  EXPECT_EQ(out2, "faultline run: now shown\n");
  EXPECT_EQ(err2, "faultline run: DEBUG: debug too\n");
}

}  // namespace
}  // namespace faultline::log
