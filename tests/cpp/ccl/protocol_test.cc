// Wire protocol under damage: corrupted frames are detected, duplicated and reordered chunks
// still give exact results, and a rank killed with SIGKILL mid-collective makes every other
// rank return an error within its deadline. The damage is real: senders corrupt, duplicate or
// reorder their own frames (CommOptions::wire_faults), and CommStats must show it happened.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <ostream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "collective_check.h"
#include "ftccl/ftccl.h"
#include "rank_launcher.h"

namespace ftccl::test {
namespace {

// Scheduling noise on a loaded two-core machine: how late an error may come after a deadline.
constexpr int64_t kSlackMs = 3000;
// Small chunks so that every collective is many frames, and two connections per rail so that
// a duplicate can travel on another connection.
constexpr size_t kChunkBytes = 16 * 1024;
constexpr int kChannelsPerRail = 2;

// Every collective, with ~1 MiB per rank buffer, twice with different data.
std::vector<CollCase> ProtocolCases(int ranks) {
  struct Spec {
    CollKind kind;
    DataType dt;
    ReduceOp op;
  };
  const Spec specs[] = {
      {CollKind::kAllReduce, DataType::kF32, ReduceOp::kSum},
      {CollKind::kAllReduce, DataType::kBF16, ReduceOp::kAvg},
      {CollKind::kAllGather, DataType::kU8, ReduceOp::kSum},
      {CollKind::kReduceScatter, DataType::kI64, ReduceOp::kSum},
      {CollKind::kBroadcast, DataType::kF64, ReduceOp::kSum},
      {CollKind::kReduce, DataType::kF16, ReduceOp::kProd},
      {CollKind::kAllToAll, DataType::kI32, ReduceOp::kSum},
  };
  std::vector<CollCase> cases;
  uint64_t salt = 500;
  for (int round = 0; round < 2; ++round) {
    for (const Spec& s : specs) {
      CollCase c;
      c.kind = s.kind;
      c.dt = s.dt;
      c.op = s.op;
      const size_t blocks = HasBlocks(s.kind) ? static_cast<size_t>(ranks) : 1;
      c.count = (size_t{1} << 20) / (DataTypeSize(s.dt) * blocks) + 3;
      c.root = (round + 1) % ranks;
      c.salt = ++salt;
      cases.push_back(c);
    }
  }
  return cases;
}

enum class Damage { kDuplicate, kReorder };

void PrintTo(Damage d, std::ostream* os) {
  *os << (d == Damage::kDuplicate ? "duplicate" : "reorder");
}

using DamageParam = std::tuple<Damage, int>;

class WireDamageTest : public ::testing::TestWithParam<DamageParam> {};

TEST_P(WireDamageTest, ResultsStayExact) {
  const auto [damage, ranks] = GetParam();
  CommLaunch launch;
  launch.size = ranks;
  launch.configure = [damage = damage](CommOptions& o) {
    o.chunk_bytes = kChunkBytes;
    o.channels_per_rail = kChannelsPerRail;
    o.wire_faults.seed = 17 + static_cast<uint64_t>(o.rank);
    if (damage == Damage::kDuplicate) o.wire_faults.duplicate = 0.2;
    if (damage == Damage::kReorder) o.wire_faults.reorder = 0.2;
  };
  const std::vector<CollCase> cases = ProtocolCases(ranks);
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    for (const CollCase& c : cases) {
      rep.Progress(c.Name());
      bool correct = false;
      Status st = RunAndCheck(comm, c, rep, &correct);
      if (!st.ok()) {
        ReportStats(comm, rep);
        return st.WithContext(c.Name());
      }
    }
    ReportStats(comm, rep);
    return Status::Ok();
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
  if (damage == Damage::kDuplicate) {
    EXPECT_GT(result.Sum("duplicates_dropped"), 0)
        << "frames were duplicated but no rank dropped a duplicate";
  } else {
    EXPECT_GT(result.Sum("out_of_order"), 0) << "frames were reordered but no rank saw it";
  }
}

INSTANTIATE_TEST_SUITE_P(All, WireDamageTest,
                         ::testing::Combine(::testing::Values(Damage::kDuplicate, Damage::kReorder),
                                            ::testing::Values(2, 3, 4)),
                         [](const ::testing::TestParamInfo<DamageParam>& info) {
                           const Damage damage = std::get<0>(info.param);
                           return std::string(damage == Damage::kDuplicate ? "duplicate"
                                                                           : "reorder") +
                                  "_" + RanksTag(std::get<1>(info.param));
                         });

class CorruptionTest : public ::testing::TestWithParam<int> {};

// Some frames of every rank are corrupted after their CRC was computed. Every corrupted frame
// must be caught: a collective either succeeds with exact results (the chunk was resent) or
// fails with kCorrupt (or kAborted, told by the rank that saw it); it never returns wrong data.
TEST_P(CorruptionTest, CorruptedFramesAreDetected) {
  const int ranks = GetParam();
  CommLaunch launch;
  launch.size = ranks;
  launch.op_timeout = Millis(10000);
  launch.configure = [](CommOptions& o) {
    o.chunk_bytes = kChunkBytes;
    o.wire_faults.seed = 91 + static_cast<uint64_t>(o.rank);
    o.wire_faults.corrupt = 0.05;
  };
  const std::vector<CollCase> cases = ProtocolCases(ranks);
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    for (const CollCase& c : cases) {
      rep.Progress(c.Name());
      bool correct = false;
      const Clock::time_point start = Clock::now();
      Status st = RunAndCheck(comm, c, rep, &correct);
      if (!st.ok()) {
        const int64_t ms = MillisSince(start);
        rep.Value("error_code", static_cast<int>(st.code()));
        if (st.code() != Code::kCorrupt && st.code() != Code::kAborted) {
          rep.Fail(c.Name() + ": expected kCorrupt or kAborted, got " + st.ToString());
        }
        if (ms > launch.op_timeout.count() + kSlackMs) {
          rep.Fail(c.Name() + ": the error came after " + std::to_string(ms) + " ms");
        }
        break;  // The communicator is in its sticky error state now.
      }
    }
    ReportStats(comm, rep);
    return Status::Ok();
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
  EXPECT_GT(result.Sum("crc_errors"), 0) << "frames were corrupted but no CRC error was counted";
  bool any_error = false, any_corrupt = false;
  for (const RankOutcome& r : result.ranks) {
    const int64_t code = r.value("error_code");
    any_error |= code >= 0;
    any_corrupt |= code == static_cast<int>(Code::kCorrupt);
  }
  if (any_error) {
    EXPECT_TRUE(any_corrupt) << "ranks failed, but none with kCorrupt\n" << result.Describe();
  } else {
    EXPECT_GT(result.Sum("chunks_retransmitted"), 0)
        << "every collective succeeded though frames were corrupted, yet nothing was resent";
  }
}

// Every data frame rank 0 sends is corrupted (WireFaults::corrupt = 1). Whether a resent
// frame is damaged again is not part of the contract, so either outcome is allowed: exact
// results (every damaged frame caught and resent) or an error on every rank within the
// deadline. Never wrong data, never a hang, and the CRC errors must be counted.
TEST_P(CorruptionTest, EveryFrameOfOneRankCorrupted) {
  const int ranks = GetParam();
  CommLaunch launch;
  launch.size = ranks;
  launch.op_timeout = Millis(5000);
  launch.configure = [](CommOptions& o) {
    o.chunk_bytes = kChunkBytes;
    if (o.rank == 0) o.wire_faults.corrupt = 1.0;
  };
  const std::vector<CollCase> cases = ProtocolCases(ranks);
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    for (const CollCase& c : cases) {
      rep.Progress(c.Name());
      bool correct = false;
      const Clock::time_point start = Clock::now();
      Status st = RunAndCheck(comm, c, rep, &correct);
      const int64_t ms = MillisSince(start);
      if (st.ok()) continue;
      rep.Value("error_code", static_cast<int>(st.code()));
      const std::set<Code> allowed = {Code::kCorrupt, Code::kAborted, Code::kTimeout,
                                      Code::kPeerLost};
      if (allowed.count(st.code()) == 0) rep.Fail(c.Name() + ": unexpected " + st.ToString());
      if (ms > launch.op_timeout.count() + kSlackMs) {
        rep.Fail(c.Name() + ": the error came after " + std::to_string(ms) +
                 " ms: " + st.ToString());
      }
      break;
    }
    ReportStats(comm, rep);
    return Status::Ok();
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
  EXPECT_GT(result.Sum("crc_errors"), 0);
  int failed = 0;
  for (const RankOutcome& r : result.ranks) failed += r.value("error_code") >= 0 ? 1 : 0;
  EXPECT_TRUE(failed == 0 || failed == ranks)
      << failed << " of " << ranks << " ranks failed: an error must reach every rank\n"
      << result.Describe();
}

INSTANTIATE_TEST_SUITE_P(All, CorruptionTest, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return RanksTag(info.param);
                         });

// --- a rank dies mid-collective -------------------------------------------------------------

using DeathParam = std::tuple<int, bool>;  // rank count, whether the victim is the last rank

class PeerDeathTest : public ::testing::TestWithParam<DeathParam> {};

// The victim takes part in a few allreduces, issues one more and kills itself with SIGKILL
// while it is in flight. Every other rank's allreduce must fail within its deadline, later
// operations must fail fast with the same (sticky) error, and the communicator must be
// destroyed within its bound, leaving no thread and no descriptor behind.
TEST_P(PeerDeathTest, OthersFailWithinDeadline) {
  const auto [ranks, victim_last] = GetParam();
  const int victim = victim_last ? ranks - 1 : 0;
  constexpr Millis kOpTimeout(10000);
  constexpr size_t kCount = 4 << 20;  // 16 MiB of f32
  constexpr int kWarmRounds = 3;
  CommLaunch launch;
  launch.size = ranks;
  launch.op_timeout = kOpTimeout;
  LaunchResult result = LaunchWithOptions(launch, [&](const CommOptions& options,
                                                      RankReporter& rep) {
    const int fds_before = OpenFdCount();
    const int threads_before = ThreadCount();
    auto created = Communicator::Create(options);
    if (!created.ok()) {
      rep.Fail("Create: " + created.status().ToString());
      return 1;
    }
    std::unique_ptr<Communicator> comm = std::move(created).value();
    std::vector<float> send(kCount, 1.0f), recv(kCount);
    if (options.rank == victim) {
      for (int k = 0; k < kWarmRounds; ++k) {
        Status st =
            comm->AllReduce(send.data(), recv.data(), kCount, DataType::kF32, ReduceOp::kSum);
        if (!st.ok()) rep.Fail("victim, round " + std::to_string(k) + ": " + st.ToString());
      }
      RequestPtr in_flight =
          comm->AllReduceAsync(send.data(), recv.data(), kCount, DataType::kF32, ReduceOp::kSum);
      usleep(5000);
      kill(getpid(), SIGKILL);
      _exit(3);  // not reached
    }
    int failed_round = -1;
    Status error;
    for (int k = 0; k < kWarmRounds + 5; ++k) {
      rep.Progress("allreduce round " + std::to_string(k));
      const Clock::time_point start = Clock::now();
      Status st = comm->AllReduce(send.data(), recv.data(), kCount, DataType::kF32, ReduceOp::kSum);
      const int64_t ms = MillisSince(start);
      if (st.ok()) continue;
      failed_round = k;
      error = st;
      rep.Value("failed_round", k);
      rep.Value("error_code", static_cast<int>(st.code()));
      rep.Value("error_ms", ms);
      if (ms > kOpTimeout.count() + kSlackMs) {
        rep.Fail("the error came after " + std::to_string(ms) + " ms (deadline " +
                 std::to_string(kOpTimeout.count()) + " ms): " + st.ToString());
      }
      const std::set<Code> allowed = {Code::kPeerLost, Code::kAborted, Code::kTimeout,
                                      Code::kNetwork};
      if (allowed.count(st.code()) == 0) rep.Fail("unexpected error " + st.ToString());
      break;
    }
    if (failed_round < 0) {
      rep.Fail("every allreduce succeeded after rank " + std::to_string(victim) + " died");
    } else {
      const Clock::time_point start = Clock::now();
      Status again = comm->Barrier();
      const int64_t ms = MillisSince(start);
      if (again.ok() || again.code() != error.code()) {
        rep.Fail("not sticky: after " + error.ToString() + " a barrier returned " +
                 again.ToString());
      } else if (ms > 1000) {
        rep.Fail("the sticky error took " + std::to_string(ms) + " ms to return");
      }
    }
    rep.Progress("destroying the communicator");
    const Clock::time_point start = Clock::now();
    comm.reset();
    const int64_t destroy_ms = MillisSince(start);
    if (destroy_ms > kDestroyBound.count()) {
      rep.Fail("~Communicator took " + std::to_string(destroy_ms) + " ms");
    }
    if (const int threads_after = ThreadCountSettled(threads_before);
        threads_after != threads_before) {
      rep.Fail(std::to_string(threads_after - threads_before) + " threads left after destruction");
    }
    if (OpenFdCount() > fds_before) {
      rep.Fail(std::to_string(OpenFdCount() - fds_before) + " descriptors left after destruction");
    }
    return 0;
  });
  ASSERT_EQ(result.ranks.size(), static_cast<size_t>(ranks)) << result.Describe();
  const RankOutcome& dead = result.ranks[victim];
  EXPECT_FALSE(dead.exited) << "the victim did not die: " << result.Describe();
  EXPECT_EQ(dead.term_signal, SIGKILL);
  EXPECT_FALSE(dead.killed_by_launcher) << result.Describe();
  EXPECT_FALSE(result.timed_out) << result.Describe();
  for (const RankOutcome& r : result.ranks) {
    if (r.rank == victim) continue;
    EXPECT_TRUE(r.ok()) << result.Describe();
    const std::string tag = "rank" + std::to_string(r.rank);
    RecordProperty(tag + "_failed_round", static_cast<int>(r.value("failed_round")));
    RecordProperty(tag + "_error_code", static_cast<int>(r.value("error_code")));
    RecordProperty(tag + "_error_ms", static_cast<int>(r.value("error_ms")));
  }
}

INSTANTIATE_TEST_SUITE_P(All, PeerDeathTest,
                         ::testing::Combine(::testing::Values(2, 3, 4, 8), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<DeathParam>& info) {
                           return RanksTag(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_kill_last" : "_kill_0");
                         });

}  // namespace
}  // namespace ftccl::test
