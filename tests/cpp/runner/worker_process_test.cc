// faultline-worker as the runner starts it: 2 and 3 real worker processes over loopback rails
// (rail r of rank k at 127.0.(r+1).(k+1)), for ftccl and for gloo. A checked run logs every
// collective with increasing times and no wrong element; a killed or stopped peer ends the
// others with the error exit code within their deadline; the checker does count wrong
// elements; a bad command line starts nothing.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "runner/exec/launcher.h"
#include "runner/worker/worker.h"
#include "runner/core/worker_log.h"
#include "tests/cpp/runner/worker_group.h"

namespace faultline::runner {
namespace {

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC, the clock of the worker logs

int64_t MonotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}
using std::chrono::milliseconds;

// A free TCP port on 127.0.0.1 for rank 0's bootstrap listener.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) close(fd);
    return 0;
  }
  close(fd);
  return ntohs(a.sin_port);
}


// One group of worker processes, killed and reaped on destruction.
class Group {
 public:
  Group(std::string ccl, int ranks, std::vector<std::string> extra)
      : ccl_(std::move(ccl)), ranks_(ranks), extra_(std::move(extra)) {
    char tmpl[] = "/tmp/faultline_worker_test_XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::filesystem::create_directory(dir_ + "/store");
  }
  ~Group() {
    launcher_.reset();  // kills and reaps every rank still running
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  std::string LogPath(int rank) const { return dir_ + "/rank" + std::to_string(rank) + ".log"; }

  // Starts every rank; `seed_of(rank)` lets a test give ranks different inputs.
  void Start(const std::vector<uint64_t>& seeds = {}) {
    const std::string bootstrap = "127.0.0.1:" + std::to_string(FreePort());
    std::vector<LaunchSpec> world;
    for (int r = 0; r < ranks_; ++r) {
      std::vector<std::string> args = {
          FAULTLINE_WORKER_BIN,
          "--ccl",
          ccl_,
          "--rank",
          std::to_string(r),
          "--size",
          std::to_string(ranks_),
          "--bootstrap",
          bootstrap,
          "--rails",
          "127.0.1." + std::to_string(r + 1) + ",127.0.2." + std::to_string(r + 1),
          "--store-dir",
          dir_ + "/store",
          "--log",
          LogPath(r),
          "--init-timeout",
          "20s",
          "--seed",
          std::to_string(seeds.empty() ? 0 : seeds[r])};
      args.insert(args.end(), extra_.begin(), extra_.end());
      LaunchSpec spec;
      spec.argv = std::move(args);
      spec.placement.global_rank = r;
      world.push_back(std::move(spec));
    }
    auto launcher = LocalNetnsLauncher::Create({""}, "");
    ASSERT_TRUE(launcher.ok()) << launcher.status().ToString();
    launcher_ = std::move(launcher).value();
    auto handles = launcher_->StartWorld(world);
    ASSERT_TRUE(handles.ok()) << handles.status().ToString();
  }

  pid_t pid(int rank) const { return launcher_->LocalPid(rank).value_or(-1); }

  // Waits for `rank` until `limit` from now; kills it when it is still running then.
  Exit Wait(int rank, milliseconds limit) { return WaitOrKill(*launcher_, rank, limit); }

  // Waits until every rank has logged at least `ops` collectives (false after `limit`).
  bool WaitForOps(size_t ops, milliseconds limit) {
    const auto start = Clock::now();
    while (Clock::now() - start < limit) {
      bool all = true;
      for (int r = 0; r < ranks_ && all; ++r) {
        auto log = LoadWorkerLog(LogPath(r));
        all = log.ok() && log->ops.size() >= ops;
      }
      if (all) return true;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
  }

 private:
  std::string ccl_;
  int ranks_;
  std::vector<std::string> extra_;
  std::string dir_;
  std::unique_ptr<LocalNetnsLauncher> launcher_;
};

class WorkerProcessTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  std::string ccl() const { return std::get<0>(GetParam()); }
  int ranks() const { return std::get<1>(GetParam()); }
};

TEST_P(WorkerProcessTest, CheckedRunLogsEveryCollectiveInOrder) {
  constexpr int kWarmup = 1;
  constexpr int kIters = 4;
  // Reducescatter on 3 ranks also covers Gloo's classic algorithm path.
  const std::string op = ranks() == 3 ? "reducescatter" : "allreduce";
  Group g(ccl(), ranks(),
          {"--op", op, "--dtype", "f32", "--bytes", "192KiB", "--iters", std::to_string(kIters),
           "--warmup", std::to_string(kWarmup), "--check", "--timeout", "10s"});
  g.Start();
  for (int r = 0; r < ranks(); ++r) {
    const Exit e = g.Wait(r, milliseconds(30000));
    EXPECT_TRUE(e.exited) << "rank " << r << " signal " << e.signal;
    EXPECT_EQ(e.code, kWorkerExitOk) << "rank " << r;
  }
  for (int r = 0; r < ranks(); ++r) {
    auto log = LoadWorkerLog(g.LogPath(r));
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_EQ(log->header.rank, r);
    EXPECT_EQ(log->header.size, ranks());
    EXPECT_EQ(log->header.ccl, ccl());
    EXPECT_EQ(log->header.op, op);
    EXPECT_EQ(log->header.bytes, 192u << 10);
    EXPECT_GT(log->header.busbw_factor, 0);
    // ftccl reports its data path's events; Gloo has none to report.
    EXPECT_EQ(log->header.events, ccl() == "ftccl");
    EXPECT_TRUE(log->header.check);
    ASSERT_EQ(log->ops.size(), static_cast<size_t>(kWarmup + kIters)) << "rank " << r;
    for (size_t i = 0; i < log->ops.size(); ++i) {
      const OpRecord& op_rec = log->ops[i];
      EXPECT_EQ(op_rec.index, static_cast<int64_t>(i));
      EXPECT_EQ(op_rec.rank, r);
      EXPECT_TRUE(op_rec.ok);
      EXPECT_FALSE(op_rec.wrong) << "rank " << r << " op " << i;
      EXPECT_GT(op_rec.start_ns, 0);
      EXPECT_LE(op_rec.start_ns, op_rec.end_ns);
      if (i > 0) {
        EXPECT_GE(op_rec.start_ns, log->ops[i - 1].end_ns);
      }
    }
    EXPECT_EQ(log->wrong_elements, 0u);
    ASSERT_TRUE(log->end.has_value());
    EXPECT_EQ(log->end->exit, RankExit::kCompleted) << log->end_message;
    EXPECT_GE(log->end->end_ns, log->ops.back().end_ns);
    EXPECT_FALSE(log->truncated);
  }
}

TEST_P(WorkerProcessTest, DurationRunEndsOnTheSameCollectiveOnEveryRank) {
  Group g(ccl(), ranks(),
          {"--op", "allgather", "--bytes", "96KiB", "--duration", "600ms", "--warmup", "2",
           "--check", "--timeout", "10s"});
  g.Start();
  for (int r = 0; r < ranks(); ++r) EXPECT_EQ(g.Wait(r, milliseconds(30000)).code, 0);
  std::optional<size_t> count;
  for (int r = 0; r < ranks(); ++r) {
    auto log = LoadWorkerLog(g.LogPath(r));
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    ASSERT_TRUE(log->end.has_value());
    EXPECT_EQ(log->end->exit, RankExit::kCompleted);
    EXPECT_EQ(log->wrong_elements, 0u);
    EXPECT_GT(log->ops.size(), 2u);
    const int64_t span = log->ops.back().end_ns - log->ops.front().start_ns;
    EXPECT_GE(span, 600'000'000 - 50'000'000) << "stopped early";
    if (!count) count = log->ops.size();
    EXPECT_EQ(log->ops.size(), *count) << "rank " << r;
  }
}

// Killing a peer: the others log the failed call and exit with the error code by their
// deadline (the collective's timeout plus the watchdog's grace), never hang.
TEST_P(WorkerProcessTest, KilledPeerEndsTheOthersWithAnErrorInTime) {
  const milliseconds timeout(2000);
  Group g(ccl(), ranks(),
          {"--op", "allreduce", "--bytes", "256KiB", "--duration", "60s", "--check", "--timeout",
           "2s"});
  g.Start();
  ASSERT_TRUE(g.WaitForOps(3, milliseconds(20000))) << "the group never got going";
  const int victim = ranks() - 1;
  const int64_t killed_ns = MonotonicNs();
  kill(g.pid(victim), SIGKILL);
  const milliseconds bound = timeout + WatchdogGrace(timeout) + milliseconds(2000);
  for (int r = 0; r < ranks(); ++r) {
    if (r == victim) continue;
    const Exit e = g.Wait(r, bound);
    EXPECT_TRUE(e.exited) << "rank " << r << " still running (or signalled) after " << bound.count()
                          << " ms";
    EXPECT_EQ(e.code, kWorkerExitCclError) << "rank " << r;
    auto log = LoadWorkerLog(g.LogPath(r));
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    ASSERT_TRUE(log->end.has_value());
    EXPECT_EQ(log->end->exit, RankExit::kError);
    ASSERT_TRUE(log->end->first_error_ns.has_value());
    EXPECT_EQ(log->wrong_elements, 0u);
    const milliseconds after((log->end->end_ns - killed_ns) / 1000000);
    EXPECT_LE(after, timeout + WatchdogGrace(timeout)) << "rank " << r;
    RecordProperty("rank" + std::to_string(r) + "_after_ms", static_cast<int>(after.count()));
    RecordProperty("rank" + std::to_string(r) + "_error", log->end_message);
    std::printf("[ %s rank %d ] ended %lld ms after the kill: %s\n", ccl().c_str(), r,
                static_cast<long long>(after.count()), log->end_message.c_str());
  }
  EXPECT_EQ(g.Wait(victim, milliseconds(1000)).signal, SIGKILL);
  // The killed rank's log is a valid prefix without an end line.
  auto victim_log = LoadWorkerLog(g.LogPath(victim));
  ASSERT_TRUE(victim_log.ok()) << victim_log.status().ToString();
  EXPECT_FALSE(victim_log->end.has_value());
  EXPECT_GE(victim_log->ops.size(), 3u);
}

// A stopped peer sends nothing and closes nothing: only deadlines can end the others. For
// ftccl its own deadline; for gloo whichever comes first, Gloo's timeout or the watchdog
// (reducescatter, Gloo's classic algorithm, is ended by the watchdog).
TEST_P(WorkerProcessTest, StoppedPeerEndsTheOthersByTheDeadline) {
  const milliseconds timeout(1500);
  const std::string op = ranks() == 3 ? "reducescatter" : "allreduce";
  Group g(ccl(), ranks(),
          {"--op", op, "--bytes", "256KiB", "--duration", "60s", "--timeout", "1500ms"});
  g.Start();
  ASSERT_TRUE(g.WaitForOps(3, milliseconds(20000))) << "the group never got going";
  const int64_t stopped_ns = MonotonicNs();
  kill(g.pid(0), SIGSTOP);
  const milliseconds bound = timeout + WatchdogGrace(timeout) + milliseconds(2000);
  for (int r = 1; r < ranks(); ++r) {
    const Exit e = g.Wait(r, bound);
    EXPECT_EQ(e.code, kWorkerExitCclError) << "rank " << r;
    auto log = LoadWorkerLog(g.LogPath(r));
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    ASSERT_TRUE(log->end.has_value());
    const milliseconds after((log->end->end_ns - stopped_ns) / 1000000);
    EXPECT_GE(after, timeout - milliseconds(100)) << "rank " << r << " gave up before its deadline";
    EXPECT_LE(after, timeout + WatchdogGrace(timeout) + milliseconds(200)) << "rank " << r;
    EXPECT_EQ(log->end->exit, RankExit::kError);
    const bool by_watchdog = log->end_message.find("worker deadline") != std::string::npos;
    if (ccl() == "ftccl") {
      EXPECT_FALSE(by_watchdog) << log->end_message;
    }
    RecordProperty("rank" + std::to_string(r) + "_error", log->end_message);
    std::printf("[ %s %s rank %d ] ended %lld ms after the stop (%s): %s\n", ccl().c_str(),
                op.c_str(), r, static_cast<long long>(after.count()),
                by_watchdog ? "worker watchdog" : "library deadline", log->end_message.c_str());
  }
  kill(g.pid(0), SIGKILL);
}

// Ranks with different seeds feed different inputs than each expects: every rank's check
// must find wrong elements while every call succeeds.
TEST_P(WorkerProcessTest, CheckCountsWrongElements) {
  Group g(ccl(), ranks(),
          {"--op", "allreduce", "--bytes", "64KiB", "--iters", "2", "--check", "--timeout", "10s"});
  std::vector<uint64_t> seeds;
  for (int r = 0; r < ranks(); ++r) seeds.push_back(100 + r);
  g.Start(seeds);
  for (int r = 0; r < ranks(); ++r) EXPECT_EQ(g.Wait(r, milliseconds(30000)).code, 0);
  for (int r = 0; r < ranks(); ++r) {
    auto log = LoadWorkerLog(g.LogPath(r));
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    ASSERT_EQ(log->ops.size(), 2u);
    for (const OpRecord& op : log->ops) {
      EXPECT_TRUE(op.ok);
      EXPECT_TRUE(op.wrong);
    }
    EXPECT_GT(log->wrong_elements, (64u << 10) / 4 / 4) << "rank " << r;
  }
}

// Gloo where it was built (the worker's gloo adapter exists only there).
#ifdef FAULTLINE_HAVE_GLOO
#define FAULTLINE_TEST_CCLS ::testing::Values("ftccl", "gloo")
#else
#define FAULTLINE_TEST_CCLS ::testing::Values("ftccl")
#endif
INSTANTIATE_TEST_SUITE_P(CclsAndRanks, WorkerProcessTest,
                         ::testing::Combine(FAULTLINE_TEST_CCLS, ::testing::Values(2, 3)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

TEST(WorkerCommandLineTest, BadCommandLinesStartNothing) {
  auto run = [](std::vector<std::string> args) {
    args.insert(args.begin(), FAULTLINE_WORKER_BIN);
    auto launcher = LocalNetnsLauncher::Create({""}, "");
    if (!launcher.ok()) return -2;
    LaunchSpec spec;
    spec.argv = std::move(args);
    auto h = (*launcher)->Start(spec);
    if (!h.ok()) return -3;
    auto status = (*launcher)->Wait(*h, INT64_MAX);
    return status.ok() && status->state == ExitStatus::State::kExited ? status->code : -1;
  };
  const std::vector<std::string> base = {
      "--rank",      "0",       "--size",    "2",     "--bootstrap",
      "127.0.0.1:1", "--rails", "127.0.1.1", "--log", "/nonexistent/never-written.log",
      "--iters",     "1"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = base;
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  EXPECT_EQ(run(with({"--ccl", "gloo"})), kWorkerExitUsage);  // no --store-dir, or not built
  EXPECT_EQ(run(with({"--ccl", "mpi"})), kWorkerExitUsage);
  EXPECT_EQ(run(with({"--ccl", "ftccl", "--op", "reduce"})), kWorkerExitUsage);
  EXPECT_EQ(run(with({"--ccl", "ftccl", "--bytes", "lots"})), kWorkerExitUsage);
  EXPECT_EQ(run(with({"--ccl", "ftccl", "--duration", "1s"})), kWorkerExitUsage);  // and --iters
  EXPECT_EQ(run(with({"--ccl", "ftccl", "--timeout", "5"})), kWorkerExitUsage);    // no unit
  EXPECT_EQ(run({"--ccl", "ftccl", "--rank", "2", "--size", "2", "--bootstrap", "127.0.0.1:1",
                 "--rails", "127.0.1.1", "--log", "/tmp/x", "--iters", "1"}),
            kWorkerExitUsage);
  // A valid command line whose log cannot be written: the worker's own failure.
  EXPECT_EQ(run(with({"--ccl", "ftccl"})), kWorkerExitInternal);
}

}  // namespace
}  // namespace faultline::runner
