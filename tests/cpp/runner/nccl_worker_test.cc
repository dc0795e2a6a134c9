// faultline-worker with --ccl nccl. Without a CUDA device the worker ends at once with the CCL
// error exit code and a log whose end line says that no device is visible (no hang, no crash).
// With devices, short checked allreduce and allgather runs end with no wrong element: 2 ranks
// on 2 devices, or 1 rank where only one device exists (NCCL refuses two ranks of one
// communicator on the same device).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "runner/exec/launcher.h"
#include "runner/worker/worker.h"
#include "runner/core/worker_log.h"
#include "tests/cpp/runner/worker_group.h"

namespace faultline::runner {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int VisibleDevices() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

// A group of nccl workers sharing a temporary store directory; killed and removed at the end.
class NcclGroup {
 public:
  NcclGroup(int ranks, std::vector<std::string> extra) : ranks_(ranks), extra_(std::move(extra)) {
    char tmpl[] = "/tmp/faultline_nccl_test_XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::filesystem::create_directory(dir_ + "/store");
  }
  ~NcclGroup() {
    launcher_.reset();  // kills and reaps every rank still running
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  std::string LogPath(int rank) const { return dir_ + "/rank" + std::to_string(rank) + ".log"; }

  void Start() {
    std::vector<LaunchSpec> world;
    for (int r = 0; r < ranks_; ++r) {
      std::vector<std::string> args = {FAULTLINE_WORKER_BIN,
                                       "--ccl",
                                       "nccl",
                                       "--rank",
                                       std::to_string(r),
                                       "--size",
                                       std::to_string(ranks_),
                                       "--bootstrap",
                                       "127.0.0.1:1",
                                       "--rails",
                                       "127.0.0.1",
                                       "--store-dir",
                                       dir_ + "/store",
                                       "--log",
                                       LogPath(r)};
      args.insert(args.end(), extra_.begin(), extra_.end());
      LaunchSpec spec;
      spec.argv = std::move(args);
      spec.env = {"LOCAL_RANK=" + std::to_string(r)};
      spec.placement.global_rank = r;
      spec.placement.local_rank = r;
      world.push_back(std::move(spec));
    }
    auto launcher = LocalNetnsLauncher::Create({""}, "");
    ASSERT_TRUE(launcher.ok()) << launcher.status().ToString();
    launcher_ = std::move(launcher).value();
    auto handles = launcher_->StartWorld(world);
    ASSERT_TRUE(handles.ok()) << handles.status().ToString();
  }

  // Waits for `rank` until `limit`; kills it when it is still running then.
  Exit Wait(int rank, milliseconds limit) { return WaitOrKill(*launcher_, rank, limit); }

 private:
  int ranks_;
  std::vector<std::string> extra_;
  std::string dir_;
  std::unique_ptr<LocalNetnsLauncher> launcher_;
};

TEST(NcclWorkerTest, NoDeviceEndsWithAClearErrorInTime) {
  if (VisibleDevices() > 0) GTEST_SKIP() << "a CUDA device is visible; the no-device path is not";
  NcclGroup g(1, {"--op", "allreduce", "--bytes", "64KiB", "--iters", "2", "--check", "--timeout",
                  "5s", "--init-timeout", "20s"});
  g.Start();
  const Exit e = g.Wait(0, milliseconds(10000));
  ASSERT_TRUE(e.exited) << "still running after 10 s (or signal " << e.signal << ")";
  EXPECT_EQ(e.code, kWorkerExitCclError);
  EXPECT_LT(e.after, milliseconds(5000)) << "the error took too long";
  auto log = LoadWorkerLog(g.LogPath(0));
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(log->header.ccl, "nccl");
  EXPECT_FALSE(log->header.events);
  EXPECT_TRUE(log->ops.empty());
  ASSERT_TRUE(log->end.has_value()) << "no end line";
  EXPECT_EQ(log->end->exit, RankExit::kError);
  EXPECT_NE(log->end_message.find("init: "), std::string::npos) << log->end_message;
  EXPECT_NE(log->end_message.find("nccl: no CUDA device visible (cudaGetDeviceCount: "),
            std::string::npos)
      << log->end_message;
  EXPECT_FALSE(log->truncated);
}

class NcclCheckedRunTest : public ::testing::TestWithParam<std::string> {};

TEST_P(NcclCheckedRunTest, CheckedRunHasNoWrongElement) {
  const int devices = VisibleDevices();
  if (devices < 1) GTEST_SKIP() << "no CUDA device visible (cudaGetDeviceCount)";
  const int ranks = devices >= 2 ? 2 : 1;  // one rank per device
  constexpr int kWarmup = 1;
  constexpr int kIters = 5;
  NcclGroup g(ranks, {"--op", GetParam(), "--dtype", "f32", "--bytes", "1MiB", "--iters",
                      std::to_string(kIters), "--warmup", std::to_string(kWarmup), "--check",
                      "--timeout", "20s", "--init-timeout", "60s"});
  g.Start();
  for (int r = 0; r < ranks; ++r) {
    const Exit e = g.Wait(r, milliseconds(90000));
    EXPECT_TRUE(e.exited) << "rank " << r << " signal " << e.signal;
    EXPECT_EQ(e.code, kWorkerExitOk) << "rank " << r;
  }
  for (int r = 0; r < ranks; ++r) {
    auto log = LoadWorkerLog(g.LogPath(r));
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_EQ(log->header.ccl, "nccl");
    EXPECT_EQ(log->header.op, GetParam());
    ASSERT_TRUE(log->end.has_value());
    EXPECT_EQ(log->end->exit, RankExit::kCompleted) << log->end_message;
    ASSERT_EQ(log->ops.size(), static_cast<size_t>(kWarmup + kIters)) << "rank " << r;
    for (const OpRecord& op : log->ops) {
      EXPECT_TRUE(op.ok) << "rank " << r << " op " << op.index;
      EXPECT_FALSE(op.wrong) << "rank " << r << " op " << op.index;
    }
    EXPECT_EQ(log->wrong_elements, 0u) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Colls, NcclCheckedRunTest, ::testing::Values("allreduce", "allgather"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace faultline::runner
