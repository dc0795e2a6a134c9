// Connections reset again and again under a stream of collectives: four ranks on two rails run
// reducescatters back to back while ranks 1 and 2 destroy their rail-0 connections (sock_diag,
// as the injector's conn_reset: this end ECONNABORTED, the peer a RST) every 20-120 ms, so
// that resets meet every state of a chunk and of its acknowledgement on both ends: queued,
// partly written, partly read, written but unacknowledged, delivered but held by a receiver
// that has not begun its collective, acknowledged. Small socket buffers keep frames arriving
// in pieces, so a reset often strikes a chunk halfway read. Rail 1 stays healthy, so every
// collective must complete in time with an exact result: a chunk or an acknowledgement lost
// with a connection shows as a collective that times out.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "collective_check.h"
#include "ftccl/ftccl.h"
#include "injector/sock_diag.h"
#include "rank_launcher.h"

namespace ftccl::test {
namespace {

constexpr int kRanks = 4;
// Collectives every rank runs while the resets go on (about 10 s on a loaded two-core machine).
constexpr int kOps = 24;

// Destroys every TCP connection whose local address is `rank`'s address on `rail`.
Result<int> ResetRail(int rank, int rail) {
  auto conns = faultline::ListTcpConnections("");
  if (!conns.ok()) return Internal(conns.status().ToString());
  std::vector<faultline::TcpSocketInfo> mine;
  faultline::TcpFilter f;
  f.src = RailAddress(rank, rail);
  for (const auto& s : conns.value()) {
    if (f.Matches(s)) mine.push_back(s);
  }
  auto n = faultline::DestroyTcpSockets("", mine);
  if (!n.ok()) return Internal(n.status().ToString());
  return n.value();
}

// kDuplicates: every chunk also goes out a second time on the other connection (wire_faults), so
// the receiver often reads two copies of a chunk at once and keeps the one it began last; a
// reset then strikes that copy, which need not be the copy the sender last sent.
enum class Copies { kSingle, kDuplicates };

class ConnResetTest : public ::testing::TestWithParam<Copies> {};

TEST_P(ConnResetTest, RepeatedRail0ResetsLoseNoChunkAndNoAcknowledgement) {
  const Copies copies = GetParam();
  CommLaunch launch;
  launch.size = kRanks;
  // Rail 1 always works: a collective that needs longer than this waits on something lost.
  launch.op_timeout = Millis(5000);
  launch.wall_limit = std::chrono::seconds(90);
  launch.configure = [copies](CommOptions& o) {
    o.chunk_bytes = 256 * 1024;
    if (copies == Copies::kDuplicates) o.wire_faults.duplicate = 1.0;
    o.socket_buffer_bytes = 32 * 1024;  // frames arrive in pieces
    // A path that answers again is back in use at once, so that the next reset finds data
    // on it rather than a path still held down by flap damping.
    o.failback_holddown = Millis(10);
    o.failback_holddown_max = Millis(20);
    o.flap_window = Millis(50);
  };
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    const int rank = comm.rank();
    std::atomic<bool> stop{false};
    std::thread striker;
    if (rank == 1 || rank == 2) {
      // Rank 2's rail 0 and rank 1's, each every 20-120 ms (a fixed pseudo-random sequence
      // per rank): resets strike connections in every phase, also ones just re-established.
      striker = std::thread([&, rank] {
        int resets = 0;
        std::mt19937 rng(static_cast<uint32_t>(rank));
        std::uniform_int_distribution<int> pause_ms(20, 120);
        while (!stop.load()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(rng)));
          auto n = ResetRail(rank, 0);
          if (!n.ok()) {
            rep.Value("reset_unavailable", 1);
            rep.Progress("conn_reset: " + n.status().ToString());
            return;
          }
          resets += n.value();
          rep.Value("resets", resets);
        }
      });
    }
    const auto start = Clock::now();
    int ops = 0;
    Status st;
    for (; ops < kOps; ++ops) {
      CollCase c;
      c.kind = CollKind::kReduceScatter;
      c.dt = DataType::kI32;
      c.op = ReduceOp::kSum;
      c.count = (size_t{1} << 20) + 3 * static_cast<size_t>(ops % 5);  // 4 MiB blocks
      c.salt = 7000 + static_cast<uint64_t>(ops);
      bool correct = false;
      rep.Progress("collective " + std::to_string(ops) + ": " + c.Name());
      st = RunAndCheck(comm, c, rep, &correct);
      if (!st.ok()) {
        rep.Fail("collective " + std::to_string(ops) + " (" + c.Name() + ") after " +
                 std::to_string(MillisSince(start)) + " ms: " + st.ToString());
        break;
      }
    }
    stop = true;
    if (striker.joinable()) striker.join();
    rep.Value("ops", ops);
    ReportStats(comm, rep);
    return Status::Ok();
  });
  for (int r : {1, 2}) {
    if (result.ranks.size() > static_cast<size_t>(r) &&
        result.ranks[r].value("reset_unavailable", 0) == 1) {
      GTEST_SKIP() << "this kernel cannot destroy sockets (SOCK_DESTROY): "
                   << result.ranks[r].last_progress;
    }
  }
  EXPECT_FALSE(result.timed_out) << result.Describe();
  EXPECT_TRUE(result.AllOk()) << result.Describe();
  ASSERT_EQ(result.ranks.size(), static_cast<size_t>(kRanks));
  EXPECT_GT(result.ranks[1].value("resets", 0) + result.ranks[2].value("resets", 0), 10)
      << "too few connections were reset\n"
      << result.Describe();
  for (const RankOutcome& r : result.ranks) EXPECT_EQ(r.value("ops", 0), kOps) << result.Describe();
}

INSTANTIATE_TEST_SUITE_P(All, ConnResetTest,
                         ::testing::Values(Copies::kSingle, Copies::kDuplicates),
                         [](const ::testing::TestParamInfo<Copies>& info) {
                           return info.param == Copies::kSingle ? "single" : "duplicates";
                         });

}  // namespace
}  // namespace ftccl::test
