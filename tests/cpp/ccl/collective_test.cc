// Correctness of every collective against analytically computed results, over
// collective x rank count x size; each rank is a separate process connected over loopback
// with two rails. Inside one launch the test loops over dtype (x reduction for the reducing
// collectives) on the same communicator, so process start-up is paid once per parameter set.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "collective_check.h"
#include "ftccl/ftccl.h"
#include "rank_launcher.h"
#include "reference.h"

namespace ftccl::test {
namespace {

enum class SizeClass { kZero, kOne, kOdd, kMiB, k16MiB, k64MiB };

const char* SizeClassName(SizeClass s) {
  switch (s) {
    case SizeClass::kZero:
      return "0B";
    case SizeClass::kOne:
      return "1elem";
    case SizeClass::kOdd:
      return "odd";
    case SizeClass::kMiB:
      return "1MiB";
    case SizeClass::k16MiB:
      return "16MiB";
    case SizeClass::k64MiB:
      return "64MiB";
  }
  return "?";
}

void PrintTo(SizeClass s, std::ostream* os) { *os << SizeClassName(s); }

constexpr size_t kMiB = size_t{1} << 20;
// An odd element count that is no multiple of any rank count and spans several chunks.
constexpr size_t kOddCount = 150001;

constexpr DataType kAllTypes[] = {DataType::kF32, DataType::kF64, DataType::kF16, DataType::kBF16,
                                  DataType::kI32, DataType::kI64, DataType::kU8};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                ReduceOp::kAvg};

// Sizes are the bytes of the larger of a rank's buffers: `count` for allreduce, broadcast and
// reduce, `count * size` for allgather, reducescatter and alltoall. Odd sizes stay odd counts.
size_t CountFor(CollKind kind, DataType dt, int ranks, SizeClass size) {
  const size_t blocks = HasBlocks(kind) ? static_cast<size_t>(ranks) : 1;
  const size_t es = DataTypeSize(dt);
  switch (size) {
    case SizeClass::kZero:
      return 0;
    case SizeClass::kOne:
      return 1;
    case SizeClass::kOdd:
      return (kOddCount / blocks) | 1;
    case SizeClass::kMiB:
      return std::max<size_t>(1, kMiB / (es * blocks));
    case SizeClass::k16MiB:
      return 16 * kMiB / (es * blocks);
    case SizeClass::k64MiB:
      return 64 * kMiB / (es * blocks);
  }
  return 0;
}

// Every dtype, and for reducing collectives every dtype x reduction. At 16 and 64 MiB a
// reduced subset keeps the suite within its time budget on a small machine: f32 sum, bf16 max
// and i64 prod for reducing collectives (one per float width class and one integer type), and
// f32, bf16 and u8 for data movement.
std::vector<CollCase> CasesFor(CollKind kind, int ranks, SizeClass size) {
  std::vector<std::pair<DataType, ReduceOp>> combos;
  if (size == SizeClass::k16MiB || size == SizeClass::k64MiB) {
    if (IsReducing(kind)) {
      combos = {{DataType::kF32, ReduceOp::kSum},
                {DataType::kBF16, ReduceOp::kMax},
                {DataType::kI64, ReduceOp::kProd}};
    } else {
      combos = {{DataType::kF32, ReduceOp::kSum},
                {DataType::kBF16, ReduceOp::kSum},
                {DataType::kU8, ReduceOp::kSum}};
    }
  } else {
    for (DataType dt : kAllTypes) {
      if (IsReducing(kind)) {
        for (ReduceOp op : kAllOps) combos.push_back({dt, op});
      } else {
        combos.push_back({dt, ReduceOp::kSum});
      }
    }
  }
  std::vector<CollCase> cases;
  for (size_t i = 0; i < combos.size(); ++i) {
    CollCase c;
    c.kind = kind;
    c.dt = combos[i].first;
    c.op = combos[i].second;
    c.count = CountFor(kind, c.dt, ranks, size);
    c.root = static_cast<int>(i % static_cast<size_t>(ranks));  // every root gets its turn
    c.salt = 1000 + i;
    c.null_recv_off_root = (i % 2) == 1;
    cases.push_back(c);
  }
  return cases;
}

std::chrono::milliseconds WallLimit(SizeClass size) {
  return size == SizeClass::k16MiB || size == SizeClass::k64MiB
             ? std::chrono::milliseconds(240000)
             : std::chrono::milliseconds(120000);
}

using CollParam = std::tuple<CollKind, int, SizeClass>;

class CollectiveTest : public ::testing::TestWithParam<CollParam> {};

TEST_P(CollectiveTest, MatchesReference) {
  // Plain variables, not a structured binding: the rank body captures them (clang before 16
  // cannot capture a binding).
  const CollKind kind = std::get<0>(GetParam());
  const int ranks = std::get<1>(GetParam());
  const SizeClass size = std::get<2>(GetParam());
  const std::vector<CollCase> cases = CasesFor(kind, ranks, size);
  CommLaunch launch;
  launch.size = ranks;
  launch.wall_limit = WallLimit(size);
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    if (comm.rank() != comm.options().rank || comm.size() != ranks) {
      return Internal("communicator reports rank " + std::to_string(comm.rank()) + " of " +
                      std::to_string(comm.size()));
    }
    if (comm.num_rails() != kDefaultRails) {
      rep.Fail("num_rails() = " + std::to_string(comm.num_rails()) + ", expected 2");
    }
    for (const CollCase& c : cases) {
      rep.Progress(c.Name());
      bool correct = false;
      Status st = RunAndCheck(comm, c, rep, &correct);
      if (!st.ok()) return st.WithContext(c.Name());
    }
    return Status::Ok();
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
  RecordProperty("elapsed_ms", static_cast<int>(result.elapsed.count()));
}

std::string ParamName(const ::testing::TestParamInfo<CollParam>& info) {
  const auto [kind, ranks, size] = info.param;
  return std::string(CollKindName(kind)) + "_" + RanksTag(ranks) + "_" + SizeClassName(size);
}

// Every collective x 1-8 ranks x every size class. `make test` runs up to 4 ranks and 1 MiB;
// the 8-rank matrix and the 64 MiB messages (over half of ftccl_test's time) are in the `Slow`
// instantiations, which only `make check` runs (cmake/FaultlineTests.cmake).
auto AllKinds() {
  return ::testing::Values(CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter,
                           CollKind::kBroadcast, CollKind::kReduce, CollKind::kAllToAll);
}
INSTANTIATE_TEST_SUITE_P(All, CollectiveTest,
                         ::testing::Combine(AllKinds(), ::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(SizeClass::kZero, SizeClass::kOne,
                                                              SizeClass::kOdd, SizeClass::kMiB)),
                         ParamName);
INSTANTIATE_TEST_SUITE_P(SlowLarge, CollectiveTest,
                         ::testing::Combine(AllKinds(), ::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(SizeClass::k64MiB)),
                         ParamName);
// 8 ranks at 16 MiB (2 MiB a rank's block: every ring step still spans two 1 MiB slices and
// eight 256 KiB chunks); 64 MiB is covered at 1 to 4 ranks above. 64 MiB at 8 ranks took
// 40 s of the check tier's time for allreduce alone on two cores.
INSTANTIATE_TEST_SUITE_P(Slow8Ranks, CollectiveTest,
                         ::testing::Combine(AllKinds(), ::testing::Values(8),
                                            ::testing::Values(SizeClass::kZero, SizeClass::kOne,
                                                              SizeClass::kOdd, SizeClass::kMiB,
                                                              SizeClass::k16MiB)),
                         ParamName);

// --- small-message allreduce (recursive doubling) -----------------------------------------

class SmallAllReduceTest : public ::testing::TestWithParam<int> {};

// Up to CommOptions::small_allreduce_bytes an allreduce runs recursive doubling: every dtype x
// reduction at sizes around the switch point, out of place and in place, matches the
// reference. Rank counts that are no power of two fold their extra ranks in and out.
TEST_P(SmallAllReduceTest, EveryTypeAndReductionMatchesReference) {
  const int ranks = GetParam();
  CommLaunch launch;
  launch.size = ranks;
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    const size_t limit = comm.options().small_allreduce_bytes;
    if (limit < 64) return Internal("small_allreduce_bytes is " + std::to_string(limit));
    uint64_t salt = 500;
    for (DataType dt : kAllTypes) {
      const size_t es = DataTypeSize(dt);
      // One element, an odd count, and the largest count that still takes recursive doubling.
      for (size_t count : {size_t{1}, size_t{4097} % (limit / es) | 1, limit / es}) {
        for (ReduceOp op : kAllOps) {
          CollCase c;
          c.kind = CollKind::kAllReduce;
          c.dt = dt;
          c.op = op;
          c.count = count;
          c.salt = salt++;
          c.misalign = (salt % 3) * 8;
          bool correct = false;
          Status st = RunAndCheck(comm, c, rep, &correct);
          if (!st.ok()) return st.WithContext(c.Name());
        }
      }
    }
    return Status::Ok();
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
}

// The small sizes really take recursive doubling: each of its ranks 0..p-1 sends the whole
// buffer once per exchange step (log2 p of them, p the largest power of two <= n), where the
// ring sends 2(n-1)/n of it in all; a rank folded in sends it once. The payload a rank sends
// is therefore at least those bytes (a resend only adds), which the ring never reaches.
TEST_P(SmallAllReduceTest, SmallSizesSendTheWholeBufferEveryStep) {
  const int ranks = GetParam();
  CommLaunch launch;
  launch.size = ranks;
  constexpr size_t kCount = 4096;  // f32: 16 KiB
  constexpr int kRounds = 20;
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    std::vector<float> buf(kCount, 1.0f);
    auto sent = [&comm] {
      uint64_t total = 0;
      for (uint64_t b : comm.Stats().payload_bytes_sent_per_rail) total += b;
      return total;
    };
    FTCCL_RETURN_IF_ERROR(comm.Barrier());
    const uint64_t before = sent();
    for (int i = 0; i < kRounds; ++i) {
      FTCCL_RETURN_IF_ERROR(
          comm.AllReduce(buf.data(), buf.data(), kCount, DataType::kF32, ReduceOp::kMax));
    }
    rep.Value("sent", static_cast<int64_t>(sent() - before));
    return comm.Barrier();
  });
  ASSERT_TRUE(result.AllOk()) << result.Describe();
  int p = 1;
  int steps = 0;
  while (p * 2 <= ranks) {
    p *= 2;
    ++steps;
  }
  const int64_t bytes = static_cast<int64_t>(kCount * sizeof(float));
  for (size_t r = 0; r < result.ranks.size(); ++r) {
    const int rank = static_cast<int>(r);
    const int64_t per_round = rank >= p ? bytes : (steps + (rank + p < ranks ? 1 : 0)) * bytes;
    EXPECT_GE(result.ranks[r].value("sent"), kRounds * per_round) << "rank " << rank;
  }
}

class RingForwardTest : public ::testing::TestWithParam<int> {};

// A ring forwards what it received unchanged (allgather steps 1..n-2 of an allreduce, every
// step but the first of an allgather): those chunks keep the CRC checked on arrival instead
// of being read a second time. Per rank and allreduce of S bytes the sender computes CRCs
// over exactly S bytes (its own block and the n-1 partial sums, ... = 2(n-1)/n S sent, of
// which (n-2)/n S forwarded) and takes (n-2)/n S from received frames; per allgather of C
// bytes per rank, C computed and (n-2) C taken. The results stay exact.
TEST_P(RingForwardTest, ForwardedChunksKeepTheirCheckedCrc) {
  const int ranks = GetParam();
  CommLaunch launch;
  launch.size = ranks;
  constexpr size_t kCount = 3 * 4 * 5 * 16384;  // f32, divisible by 3, 4 and 5: 3.75 MiB
  constexpr int kRounds = 3;
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    std::vector<float> send(kCount), recv(kCount);
    for (size_t i = 0; i < kCount; ++i) send[i] = static_cast<float>((i * 7 + comm.rank()) % 1000);
    FTCCL_RETURN_IF_ERROR(comm.Barrier());
    CommStats before = comm.Stats();
    for (int i = 0; i < kRounds; ++i) {
      FTCCL_RETURN_IF_ERROR(comm.AllReduce(send.data(), recv.data(), kCount, DataType::kF32,
                                           ReduceOp::kSum));
    }
    CommStats after = comm.Stats();
    rep.Value("ar_computed", static_cast<int64_t>(after.tx_crc_bytes - before.tx_crc_bytes));
    rep.Value("ar_reused",
              static_cast<int64_t>(after.tx_crc_reused_bytes - before.tx_crc_reused_bytes));
    int64_t wrong = 0;
    for (size_t i = 0; i < kCount; ++i) {
      float want = 0;
      for (int r = 0; r < comm.size(); ++r) want += static_cast<float>((i * 7 + r) % 1000);
      wrong += recv[i] != want;
    }
    rep.Value("ar_wrong", wrong);
    const size_t per_rank = kCount / static_cast<size_t>(comm.size());
    std::vector<float> all(per_rank * static_cast<size_t>(comm.size()));
    before = comm.Stats();
    FTCCL_RETURN_IF_ERROR(comm.AllGather(send.data(), all.data(), per_rank, DataType::kF32));
    after = comm.Stats();
    rep.Value("ag_computed", static_cast<int64_t>(after.tx_crc_bytes - before.tx_crc_bytes));
    rep.Value("ag_reused",
              static_cast<int64_t>(after.tx_crc_reused_bytes - before.tx_crc_reused_bytes));
    wrong = 0;
    for (int r = 0; r < comm.size(); ++r) {
      for (size_t i = 0; i < per_rank; ++i) {
        wrong += all[r * per_rank + i] != static_cast<float>((i * 7 + r) % 1000);
      }
    }
    rep.Value("ag_wrong", wrong);
    return comm.Barrier();
  });
  ASSERT_TRUE(result.AllOk()) << result.Describe();
  const int64_t s = kCount * sizeof(float);
  const int64_t c = s / ranks;
  for (size_t r = 0; r < result.ranks.size(); ++r) {
    const RankOutcome& o = result.ranks[r];
    EXPECT_EQ(o.value("ar_wrong"), 0) << "rank " << r;
    EXPECT_EQ(o.value("ag_wrong"), 0) << "rank " << r;
    EXPECT_EQ(o.value("ar_computed"), kRounds * s) << "rank " << r;
    EXPECT_EQ(o.value("ar_reused"), kRounds * (ranks - 2) * s / ranks) << "rank " << r;
    EXPECT_EQ(o.value("ag_computed"), c) << "rank " << r;
    EXPECT_EQ(o.value("ag_reused"), (ranks - 2) * c) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(All, RingForwardTest, ::testing::Values(3, 4, 5),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return RanksTag(info.param);
                         });

INSTANTIATE_TEST_SUITE_P(All, SmallAllReduceTest, ::testing::Values(2, 3, 4, 5, 6),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return RanksTag(info.param);
                         });

// --- allreduce in place ---------------------------------------------------------------------

class InPlaceTest : public ::testing::TestWithParam<int> {};

// AllReduce with send == recv: every block of the buffer is input to the reduce-scatter and
// output of the allgather, so the ring must not receive into a block before it has read and
// sent it. Small slices give every block many slices in flight; several collectives in a row
// let a fast rank run ahead into the next one.
TEST_P(InPlaceTest, AllReduceInPlaceMatchesReference) {
  const int ranks = GetParam();
  CommLaunch launch;
  launch.size = ranks;
  launch.configure = [](CommOptions& o) {
    o.slice_bytes = 64 * 1024;
    o.chunk_bytes = 16 * 1024;
  };
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    const size_t count = 3 * kMiB / 4 + 17;  // f32: 3 MiB and a bit, an odd block split
    std::vector<float> buf(count);
    for (uint64_t round = 0; round < 3; ++round) {
      const ReduceRef ref(DataType::kF32, ReduceOp::kSum, 77 + round);
      for (size_t i = 0; i < count; ++i)
        StoreBits(buf.data(), DataType::kF32, i, ref.InputBits(comm.rank(), i));
      FTCCL_RETURN_IF_ERROR(
          comm.AllReduce(buf.data(), buf.data(), count, DataType::kF32, ReduceOp::kSum));
      size_t wrong = 0;
      for (size_t i = 0; i < count; ++i) {
        if (LoadBits(buf.data(), DataType::kF32, i) != ref.ExpectedBits(ranks, i)) {
          if (wrong++ == 0)
            rep.Fail("round " + std::to_string(round) + ": element " + std::to_string(i) +
                     " is wrong");
        }
      }
      rep.Value("wrong" + std::to_string(round), static_cast<int64_t>(wrong));
    }
    return Status::Ok();
  });
  ASSERT_TRUE(result.AllOk()) << result.Describe();
  for (const RankOutcome& r : result.ranks) {
    for (int round = 0; round < 3; ++round) EXPECT_EQ(r.value("wrong" + std::to_string(round)), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(All, InPlaceTest, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return RanksTag(info.param);
                         });

// --- barrier, asynchronous operations, unaligned buffers ---------------------------------

class RankCountTest : public ::testing::TestWithParam<int> {};

// Nobody leaves a barrier before everyone has entered it. Ranks enter at staggered times and
// report their CLOCK_MONOTONIC entry and exit times (shared by all processes of the host).
TEST_P(RankCountTest, BarrierWaitsForEveryRank) {
  const int ranks = GetParam();
  CommLaunch launch;
  launch.size = ranks;
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    FTCCL_RETURN_IF_ERROR(comm.Barrier());  // everyone is up
    for (int round = 0; round < 3; ++round) {
      const int late = (round + 1) % ranks;
      if (comm.rank() == late) usleep(200000);
      const auto entered = Clock::now().time_since_epoch();
      FTCCL_RETURN_IF_ERROR(comm.Barrier());
      const auto left = Clock::now().time_since_epoch();
      using std::chrono::duration_cast;
      using std::chrono::microseconds;
      rep.Value("enter" + std::to_string(round), duration_cast<microseconds>(entered).count());
      rep.Value("leave" + std::to_string(round), duration_cast<microseconds>(left).count());
    }
    return Status::Ok();
  });
  ASSERT_TRUE(result.AllOk()) << result.Describe();
  for (int round = 0; round < 3; ++round) {
    int64_t last_enter = 0;
    int64_t first_leave = INT64_MAX;
    for (const RankOutcome& r : result.ranks) {
      last_enter = std::max(last_enter, r.value("enter" + std::to_string(round)));
      first_leave = std::min(first_leave, r.value("leave" + std::to_string(round)));
    }
    EXPECT_GE(first_leave, last_enter) << "round " << round << ": a rank left the barrier "
                                       << (last_enter - first_leave) << " us before the last one "
                                       << "entered";
  }
}

// Several asynchronous collectives in flight at once complete in order with correct results.
TEST_P(RankCountTest, AsyncOperationsInFlight) {
  const int ranks = GetParam();
  CommLaunch launch;
  launch.size = ranks;
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    constexpr int kInFlight = 4;
    constexpr size_t kCount = 100003;
    std::vector<std::vector<float>> send(kInFlight, std::vector<float>(kCount));
    std::vector<std::vector<float>> recv(kInFlight, std::vector<float>(kCount, -1.0f));
    std::vector<RequestPtr> requests;
    for (int k = 0; k < kInFlight; ++k) {
      for (size_t i = 0; i < kCount; ++i) {
        send[k][i] = static_cast<float>((comm.rank() + 1) * (k + 1)) + static_cast<float>(i % 7);
      }
      requests.push_back(comm.AllReduceAsync(send[k].data(), recv[k].data(), kCount, DataType::kF32,
                                             ReduceOp::kSum));
    }
    for (int k = 0; k < kInFlight; ++k) {
      if (requests[k] == nullptr) return Internal("AllReduceAsync returned null");
      FTCCL_RETURN_IF_ERROR(requests[k]->Wait().WithContext("request " + std::to_string(k)));
      if (!requests[k]->Test()) rep.Fail("Test() is false after a successful Wait()");
    }
    const float rank_sum = static_cast<float>(ranks * (ranks + 1) / 2);
    for (int k = 0; k < kInFlight; ++k) {
      for (size_t i = 0; i < kCount; ++i) {
        const float want = rank_sum * static_cast<float>(k + 1) +
                           static_cast<float>(ranks) * static_cast<float>(i % 7);
        if (recv[k][i] != want) {
          rep.Fail("request " + std::to_string(k) + " element " + std::to_string(i) + ": got " +
                   std::to_string(recv[k][i]) + ", expected " + std::to_string(want));
          break;
        }
      }
    }
    RequestPtr barrier = comm.BarrierAsync();
    if (barrier == nullptr) return Internal("BarrierAsync returned null");
    return barrier->WaitUntil(Clock::now() + std::chrono::seconds(30));
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
}

// The API puts no alignment requirement on buffers: byte-offset buffers give the same results.
TEST_P(RankCountTest, UnalignedBuffers) {
  const int ranks = GetParam();
  CommLaunch launch;
  launch.size = ranks;
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    const CollKind kinds[] = {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter,
                              CollKind::kBroadcast, CollKind::kReduce,    CollKind::kAllToAll};
    uint64_t salt = 7000;
    for (CollKind kind : kinds) {
      for (size_t misalign : {1, 3}) {
        CollCase c;
        c.kind = kind;
        c.dt = misalign == 1 ? DataType::kF64 : DataType::kBF16;
        c.op = ReduceOp::kSum;
        c.count = 12347;
        c.root = ranks - 1;
        c.misalign = misalign;
        c.salt = ++salt;
        rep.Progress(c.Name());
        bool correct = false;
        FTCCL_RETURN_IF_ERROR(RunAndCheck(comm, c, rep, &correct).WithContext(c.Name()));
      }
    }
    return Status::Ok();
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
}

// Both rails carry payload on every rank, and a run without injected damage sees no CRC
// error. A duplicate needs a second copy of a chunk, and without injected damage a second copy
// is only ever a resend: under CPU load a slow but live path can be declared down and its
// chunks resent while the first copies still arrive. So the duplicates dropped over all ranks
// are at most the chunks resent over all ranks (none resent: no duplicate), whatever the load.
TEST_P(RankCountTest, BothRailsCarryTraffic) {
  const int ranks = GetParam();
  if (ranks == 1) GTEST_SKIP() << "a single rank sends nothing";
  CommLaunch launch;
  launch.size = ranks;
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    CollCase c;
    c.kind = CollKind::kAllReduce;
    c.dt = DataType::kF32;
    c.count = 4 << 20;  // 16 MiB: many chunks
    bool correct = false;
    FTCCL_RETURN_IF_ERROR(RunAndCheck(comm, c, rep, &correct));
    const CommStats stats = comm.Stats();
    if (stats.payload_bytes_sent_per_rail.size() != kDefaultRails) {
      rep.Fail("payload_bytes_sent_per_rail has " +
               std::to_string(stats.payload_bytes_sent_per_rail.size()) + " entries");
    }
    for (size_t rail = 0; rail < stats.payload_bytes_sent_per_rail.size(); ++rail) {
      if (stats.payload_bytes_sent_per_rail[rail] == 0) {
        rep.Fail("rail " + std::to_string(rail) + " carried no payload");
      }
    }
    if (stats.crc_errors != 0) {
      rep.Fail("undamaged run: crc_errors " + std::to_string(stats.crc_errors));
    }
    if (stats.data_frames_sent == 0 || stats.data_frames_received == 0) {
      rep.Fail("no data frames counted");
    }
    // The resends are counted after a barrier: every duplicate a peer counted before the
    // barrier came from a resend made before it (a resend is counted before its copy goes out).
    rep.Value("duplicates_dropped", static_cast<int64_t>(stats.duplicates_dropped));
    FTCCL_RETURN_IF_ERROR(comm.Barrier());
    rep.Value("chunks_retransmitted", static_cast<int64_t>(comm.Stats().chunks_retransmitted));
    return Status::Ok();
  });
  ASSERT_TRUE(result.AllOk()) << result.Describe();
  const int64_t dups = result.Sum("duplicates_dropped");
  const int64_t resent = result.Sum("chunks_retransmitted");
  EXPECT_LE(dups, resent) << "undamaged run: " << dups
                          << " duplicates dropped, but only " << resent
                          << " chunks resent (every second copy must be a resend)";
}

// A message of about one chunk is cut into a piece per path: at 1 MiB over 4 ranks a ring
// step is a single 256 KiB chunk, which went out on rail 0 every time while rail 1 carried
// nothing but probes. Over a run of such collectives each rail carries a fair part.
TEST_P(RankCountTest, BothRailsCarryMessagesOfAboutOneChunk) {
  const int ranks = GetParam();
  if (ranks == 1) GTEST_SKIP() << "a single rank sends nothing";
  CommLaunch launch;
  launch.size = ranks;
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    CollCase c;
    c.kind = CollKind::kAllReduce;
    c.dt = DataType::kF32;
    c.count = 256 << 10;  // 1 MiB: over the small-message switch, so a ring
    for (int i = 0; i < 20; ++i) {
      bool correct = false;
      FTCCL_RETURN_IF_ERROR(RunAndCheck(comm, c, rep, &correct));
    }
    const CommStats stats = comm.Stats();
    for (size_t rail = 0; rail < stats.payload_bytes_sent_per_rail.size(); ++rail) {
      if (stats.payload_bytes_sent_per_rail[rail] == 0) {
        rep.Fail("rail " + std::to_string(rail) + " carried no payload");
      }
      rep.Value("rail" + std::to_string(rail),
                static_cast<int64_t>(stats.payload_bytes_sent_per_rail[rail]));
    }
    return Status::Ok();
  });
  ASSERT_TRUE(result.AllOk()) << result.Describe();
  // Over all ranks: the striping follows each path's measured rate, so one rank's split may
  // lean to a rail its neighbour's progress thread kept busier; the job as a whole uses both.
  int64_t total = 0;
  for (int rail = 0; rail < kDefaultRails; ++rail)
    total += result.Sum("rail" + std::to_string(rail));
  for (int rail = 0; rail < kDefaultRails; ++rail) {
    const int64_t bytes = result.Sum("rail" + std::to_string(rail));
    EXPECT_GE(bytes * 5, total) << "rail " << rail << " carried " << bytes << " of " << total
                                << " payload bytes";
  }
}

// The per-peer throughput (CommStats::peer_rate_bytes_per_s): one entry per rank, 0 for this
// rank, and measured (> 0) for a peer this rank sends to once the traffic has lasted a few
// sampling periods (100 ms each).
TEST_P(RankCountTest, PeerRatesAreMeasuredForThePeersSentTo) {
  const int ranks = GetParam();
  if (ranks == 1) GTEST_SKIP() << "a single rank sends nothing";
  CommLaunch launch;
  launch.size = ranks;
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    CollCase c;
    c.kind = CollKind::kAllReduce;
    c.dt = DataType::kF32;
    c.count = 4 << 20;
    const auto until = Clock::now() + std::chrono::milliseconds(800);
    int rounds = 0;
    // Every rank runs as many rounds: on while any rank's own clock says so (the ranks start at
    // different times; one more allreduce on one rank alone is a mismatch).
    for (float more = 1; more > 0;) {
      bool correct = false;
      FTCCL_RETURN_IF_ERROR(RunAndCheck(comm, c, rep, &correct));
      ++rounds;
      float mine = Clock::now() < until || rounds < 3 ? 1.0f : 0.0f;
      FTCCL_RETURN_IF_ERROR(comm.AllReduce(&mine, &more, 1, DataType::kF32, ReduceOp::kSum));
    }
    const std::vector<double> rates = comm.Stats().peer_rate_bytes_per_s;
    // No rank leaves (closing its paths, whose rates then no longer count) before every rank
    // has read its own.
    FTCCL_RETURN_IF_ERROR(comm.Barrier());
    if (rates.size() != static_cast<size_t>(ranks)) {
      rep.Fail("peer_rate_bytes_per_s has " + std::to_string(rates.size()) + " entries");
      return Status::Ok();
    }
    int measured = 0;
    for (int r = 0; r < ranks; ++r) {
      const double v = rates[static_cast<size_t>(r)];
      if (!(v >= 0) || std::isinf(v)) {
        rep.Fail("rate to rank " + std::to_string(r) + " is " + std::to_string(v));
      }
      if (r == comm.rank() && v != 0) rep.Fail("a rate to itself: " + std::to_string(v));
      if (r != comm.rank() && v > 0) ++measured;
    }
    rep.Value("peers_measured", measured);
    for (int r = 0; r < ranks; ++r)
      rep.Value("rate_to_" + std::to_string(r),
                static_cast<int64_t>(rates[static_cast<size_t>(r)]));
    return Status::Ok();
  });
  ASSERT_TRUE(result.AllOk()) << result.Describe();
  for (const RankOutcome& r : result.ranks) {
    std::string rates;
    for (int p = 0; p < ranks; ++p) {
      rates.push_back(' ');
      rates.append(std::to_string(r.value("rate_to_" + std::to_string(p))));
    }
    EXPECT_GE(r.value("peers_measured"), 1) << "rates:" << rates;
  }
}

INSTANTIATE_TEST_SUITE_P(All, RankCountTest, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return RanksTag(info.param);
                         });

}  // namespace
}  // namespace ftccl::test
