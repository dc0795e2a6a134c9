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

// Destroys every TCP connection whose local address is `address`.
Result<int> ResetAddress(const std::string& address) {
  auto conns = faultline::ListTcpConnections("");
  if (!conns.ok()) return Internal(conns.status().ToString());
  std::vector<faultline::TcpSocketInfo> mine;
  faultline::TcpFilter f;
  f.src = address;
  for (const auto& s : conns.value()) {
    if (f.Matches(s)) mine.push_back(s);
  }
  auto n = faultline::DestroyTcpSockets("", mine);
  if (!n.ok()) return Internal(n.status().ToString());
  return n.value();
}

// Destroys every TCP connection whose local address is `rank`'s address on `rail`.
Result<int> ResetRail(int rank, int rail) { return ResetAddress(RailAddress(rank, rail)); }

// The damping test's rail addresses: 127.0.0.200 + 10 x rail + rank.
std::string DampingRail(int rank, size_t rail) {
  return "127.0.0." + std::to_string(200 + 10 * static_cast<int>(rail) + rank);
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

// Flap damping as CommStats reports it: rank 1's rail-0 connection to rank 0 is reset three
// times, each time after it was back in use, so it goes down three times within the flap
// window. Its pair (peer 0, rail 0) then shows 3 downs, the oldest at the first reset, and a
// hold-down of holddown x 2^2 from the third; rail 1, never down, shows none.
TEST(ConnResetDamping, StatsReportEachPathsDownsAndHoldDown) {
  CommLaunch launch;
  launch.size = 2;
  launch.op_timeout = Millis(5000);
  launch.wall_limit = std::chrono::seconds(60);
  launch.configure = [](CommOptions& o) {
    // Rail addresses of their own (127.0.0.20x), so that the other tests' resets of the usual
    // ones, run alongside, do not add downs here.
    for (size_t rail = 0; rail < o.rails.size(); ++rail) o.rails[rail] = DampingRail(o.rank, rail);
    o.failback_holddown = Millis(40);
    o.failback_holddown_max = Millis(5000);
    o.flap_window = Millis(20000);
  };
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    const int rank = comm.rank();
    auto run = [&](int i) {
      CollCase c;
      c.kind = CollKind::kAllReduce;
      c.dt = DataType::kI32;
      c.op = ReduceOp::kSum;
      c.count = 1 << 16;
      c.salt = 9100 + static_cast<uint64_t>(i);
      bool correct = false;
      return RunAndCheck(comm, c, rep, &correct);
    };
    int64_t first_reset_ns = 0;
    for (int i = 0; i < 3; ++i) {
      FTCCL_RETURN_IF_ERROR(run(10 * i));
      if (rank == 1) {
        const int64_t at =
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
                .count();
        auto n = ResetAddress(DampingRail(1, 0));
        if (!n.ok()) {
          rep.Value("reset_unavailable", 1);
          rep.Progress("conn_reset: " + n.status().ToString());
          return Status::Ok();
        }
        if (i == 0) first_reset_ns = at;
      }
      // Until the path is back in use (redialled, answered, its hold-down over): collectives
      // keep data flowing so that the next reset is a new down, not the same one.
      for (int k = 1; k <= 8; ++k) {
        FTCCL_RETURN_IF_ERROR(run(10 * i + k));
        std::this_thread::sleep_for(std::chrono::milliseconds(60));
      }
    }
    if (rank == 1) {
      const CommStats s = comm.Stats();
      const size_t rails = static_cast<size_t>(comm.num_rails());
      rep.Value("slots", static_cast<int64_t>(s.path_downs_in_window.size()));
      rep.Value("downs_rail0", s.path_downs_in_window[0 * rails + 0]);
      rep.Value("downs_rail1", s.path_downs_in_window[0 * rails + 1]);
      rep.Value("first_down_after_reset_ms", (s.path_first_down_ns[0] - first_reset_ns) / 1000000);
      rep.Value("hold_ms", (s.path_hold_until_ns[0] - s.path_first_down_ns[0]) / 1000000);
      rep.Value("hold_rail1", s.path_hold_until_ns[1]);
      rep.Value("self_downs", s.path_downs_in_window[1 * rails + 0]);
    }
    return Status::Ok();
  });
  if (result.ranks.size() > 1 && result.ranks[1].value("reset_unavailable", 0) == 1) {
    GTEST_SKIP() << "this kernel cannot destroy sockets (SOCK_DESTROY): "
                 << result.ranks[1].last_progress;
  }
  ASSERT_TRUE(result.AllOk()) << result.Describe();
  const RankOutcome& r1 = result.ranks[1];
  EXPECT_EQ(r1.value("slots"), 2 * 2) << result.Describe();
  EXPECT_EQ(r1.value("downs_rail0"), 3) << result.Describe();
  EXPECT_EQ(r1.value("downs_rail1"), 0) << result.Describe();
  EXPECT_EQ(r1.value("hold_rail1"), 0) << result.Describe();
  EXPECT_EQ(r1.value("self_downs"), 0) << result.Describe();
  // The first down is the first reset, seen at once (the reset fails the socket here).
  EXPECT_GE(r1.value("first_down_after_reset_ms"), 0) << result.Describe();
  EXPECT_LT(r1.value("first_down_after_reset_ms"), 200) << result.Describe();
  // The hold-down earned by the third down, 40 ms x 4, counted from that down, which came at
  // least two rounds of 8 x 60 ms after the first.
  EXPECT_GE(r1.value("hold_ms"), 2 * 8 * 60 + 160) << result.Describe();
}

INSTANTIATE_TEST_SUITE_P(All, ConnResetTest,
                         ::testing::Values(Copies::kSingle, Copies::kDuplicates),
                         [](const ::testing::TestParamInfo<Copies>& info) {
                           return info.param == Copies::kSingle ? "single" : "duplicates";
                         });

}  // namespace
}  // namespace ftccl::test
