// What every rank process has around its CCL calls (runner/worker/rank_io.h): the log file's
// whole lines, revocable page-aligned buffers, and the watchdog that ends the process with the
// failed call's op line and the end line when a call outlives its deadline (death tests).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "runner/worker/rank_io.h"
#include "runner/worker/worker.h"

namespace faultline::runner {
namespace {

std::string TempPath(const char* name) {
  return ::testing::TempDir() + "/" + name + "." + std::to_string(getpid());
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(WorkerRankIo, TheLogIsTruncatedAndTakesWholeLines) {
  const std::string path = TempPath("rank_io_log");
  {
    std::ofstream(path) << "stale\n";
    LogFile log;
    ASSERT_TRUE(log.Open(path).ok());
    EXPECT_TRUE(log.Write("{\"a\":1}\n"));
    EXPECT_TRUE(log.Write("{\"b\":2}\n"));
  }
  EXPECT_EQ(ReadAll(path), "{\"a\":1}\n{\"b\":2}\n");
  unlink(path.c_str());
  LogFile nowhere;
  const Status st = nowhere.Open("/nonexistent-dir/x.jsonl");
  EXPECT_FALSE(st.ok());
}

TEST(WorkerRankIo, BuffersArePageAlignedZeroedAndRevocable) {
  AlignedBuffer b(10);
  ASSERT_NE(b.data, nullptr);
  EXPECT_EQ(b.rounded, 4096u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data) % 4096, 0u);
  EXPECT_EQ(static_cast<unsigned char*>(b.data)[4095], 0);
  AlignedBuffer c(4097);
  EXPECT_EQ(c.rounded, 8192u);
  EXPECT_DEATH(
      {
        AlignedBuffer r(64);
        r.Revoke();
        static_cast<volatile char*>(r.data)[0] = 1;
      },
      "");
}

TEST(WorkerRankIo, ClockHelpers) {
  EXPECT_EQ(ToNs(std::chrono::milliseconds(3)), 3000000);
  const int64_t t0 = NowNs();
  SleepUntilNs(t0 + 2000000);
  EXPECT_GE(NowNs() - t0, 2000000);
  SleepUntilNs(t0);  // in the past: at once
}

TEST(WorkerRankIoDeathTest, TheWatchdogEndsACallPastItsDeadlineWithItsLines) {
  const std::string path = TempPath("rank_io_watchdog");
  EXPECT_EXIT(
      {
        LogFile log;
        if (!log.Open(path).ok()) _exit(99);
        Watchdog w(&log);
        WorkerOp op;
        op.index = 7;
        op.start_ns = NowNs();
        w.Arm(NowNs() + 20000000, "collective 7", op);
        sleep(5);
        _exit(0);  // not reached: the watchdog ends the process first
      },
      ::testing::ExitedWithCode(kWorkerExitCclError), "collective 7 did not return");
  const std::string text = ReadAll(path);
  EXPECT_NE(text.find("\"type\":\"op\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"index\":7"), std::string::npos) << text;
  EXPECT_NE(text.find("\"watchdog\":true"), std::string::npos) << text;
  unlink(path.c_str());
}

TEST(WorkerRankIoDeathTest, ADisarmedWatchdogNeverFiresAndTheTeardownExitsWithItsCode) {
  EXPECT_EXIT(
      {
        LogFile log;
        Watchdog w(&log);
        w.Arm(NowNs() + 20000000, "init", std::nullopt);
        w.Disarm();
        usleep(100000);
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        LogFile log;
        Watchdog w(&log);
        w.ArmTeardown(NowNs() + 10000000, kWorkerExitRestart);
        sleep(5);
        _exit(0);
      },
      ::testing::ExitedWithCode(kWorkerExitRestart), "teardown did not end in time");
}

}  // namespace
}  // namespace faultline::runner
