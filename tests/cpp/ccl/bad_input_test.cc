// Bad input: wrong rank or size, an unreachable bootstrap address, collectives that differ
// between ranks, and invalid or misaligned counts. Every rank must get a clear error within
// its deadline, and the communicator (where one was created) must be destroyed cleanly: the
// destructor within its bound, no thread and no descriptor left behind.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
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

constexpr int64_t kSlackMs = 3000;      // scheduling noise on a loaded two-core machine
constexpr int64_t kImmediateMs = 1000;  // "nothing was started": argument checks are immediate
constexpr Millis kInitTimeout(3000);
constexpr Millis kOpTimeout(5000);

std::string CodeSetName(const std::set<Code>& codes) {
  std::string out;
  for (Code c : codes) out += std::string(out.empty() ? "" : "|") + CodeName(c);
  return out;
}

// Create() with `options` must fail with one of `codes` within `bound_ms`, and leave no thread
// or descriptor behind. Runs inside a rank process.
void ExpectCreateFails(const std::string& what, const CommOptions& options,
                       const std::set<Code>& codes, int64_t bound_ms, RankReporter& rep) {
  rep.Progress(what);
  const int fds_before = OpenFdCount();
  const int threads_before = ThreadCount();
  const Clock::time_point start = Clock::now();
  {
    auto created = Communicator::Create(options);
    const int64_t ms = MillisSince(start);
    if (created.ok()) {
      rep.Fail(what + ": Create succeeded");
    } else {
      rep.Value("create_ms", ms);
      rep.Value("code", static_cast<int>(created.status().code()));
      if (codes.count(created.status().code()) == 0) {
        rep.Fail(what + ": expected " + CodeSetName(codes) + ", got " +
                 created.status().ToString());
      }
      if (created.status().message().empty()) rep.Fail(what + ": the error has no message");
      if (ms > bound_ms) {
        rep.Fail(what + ": the error came after " + std::to_string(ms) + " ms (bound " +
                 std::to_string(bound_ms) + " ms): " + created.status().ToString());
      }
    }
  }
  if (ThreadCountSettled(threads_before) != threads_before)
    rep.Fail(what + ": threads left behind");
  if (OpenFdCount() > fds_before) rep.Fail(what + ": descriptors left behind");
}

// A loopback port on which nothing listens (bound, then closed again).
int ClosedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

CommOptions BaseOptions(int rank, int size, const std::string& bootstrap) {
  CommOptions o;
  o.rank = rank;
  o.size = size;
  o.bootstrap = bootstrap;
  o.rails = {RailAddress(rank, 0), RailAddress(rank, 1)};
  o.init_timeout = kInitTimeout;
  o.op_timeout = kOpTimeout;
  return o;
}

// --- options rejected before anything starts ----------------------------------------------

TEST(BadOptionsTest, RejectedImmediately) {
  const std::string bootstrap = "127.0.0.1:" + std::to_string(ClosedPort());
  struct Mutation {
    const char* name;
    std::function<void(CommOptions&)> apply;
    std::set<Code> codes;
  };
  const std::set<Code> invalid = {Code::kInvalidArgument};
  const std::set<Code> invalid_or_network = {Code::kInvalidArgument, Code::kNetwork};
  const std::vector<Mutation> mutations = {
      {"rank -1", [](CommOptions& o) { o.rank = -1; }, invalid},
      {"rank == size", [](CommOptions& o) { o.rank = o.size; }, invalid},
      {"rank > size", [](CommOptions& o) { o.rank = o.size + 5; }, invalid},
      {"size 0", [](CommOptions& o) { o.size = 0, o.rank = 0; }, invalid},
      {"size -2", [](CommOptions& o) { o.size = -2; }, invalid},
      {"no rails", [](CommOptions& o) { o.rails.clear(); }, invalid},
      {"empty bootstrap", [](CommOptions& o) { o.bootstrap.clear(); }, invalid},
      {"bootstrap without port", [](CommOptions& o) { o.bootstrap = "127.0.0.1"; }, invalid},
      {"bootstrap port 70000", [](CommOptions& o) { o.bootstrap = "127.0.0.1:70000"; }, invalid},
      {"bootstrap port not a number", [](CommOptions& o) { o.bootstrap = "127.0.0.1:http"; },
       invalid},
      {"bootstrap not an address", [](CommOptions& o) { o.bootstrap = "999.1.2.3:5000"; },
       invalid_or_network},
      {"rail not an address", [](CommOptions& o) { o.rails[1] = "127.0.0.300"; },
       invalid_or_network},
      {"channels_per_rail 0", [](CommOptions& o) { o.channels_per_rail = 0; }, invalid},
      {"chunk_bytes 0", [](CommOptions& o) { o.chunk_bytes = 0; }, invalid},
  };
  LaunchResult result = LaunchRanks(1, std::chrono::seconds(60), [&](int, RankReporter& rep) {
    for (const Mutation& m : mutations) {
      CommOptions o = BaseOptions(1, 2, bootstrap);
      m.apply(o);
      ExpectCreateFails(m.name, o, m.codes, kImmediateMs, rep);
    }
    return 0;
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
}

// Rank 0 given a descriptor that is not a listening socket.
TEST(BadOptionsTest, BootstrapListenFdNotASocket) {
  LaunchResult result = LaunchRanks(1, std::chrono::seconds(30), [&](int, RankReporter& rep) {
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    CommOptions o = BaseOptions(0, 2, "127.0.0.1:" + std::to_string(ClosedPort()));
    o.bootstrap_listen_fd = fd;
    ExpectCreateFails("listen fd is /dev/null", o, {Code::kInvalidArgument, Code::kNetwork},
                      kInitTimeout.count() + kSlackMs, rep);
    return 0;
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
}

// --- wrong rank or size between ranks, unreachable bootstrap ---------------------------------

// A group of 3 processes in which one is configured wrongly: every process must fail Create
// within init_timeout.
struct Sabotage {
  const char* name;
  std::function<void(CommOptions&)> apply;  // applied to the options of process 2
};

class GroupSetupTest : public ::testing::TestWithParam<int> {};

const Sabotage kSabotages[] = {
    {"process_2_claims_size_4", [](CommOptions& o) { o.size = 4; }},
    {"process_2_claims_size_2_rank_1", [](CommOptions& o) { o.size = 2, o.rank = 1; }},
    {"process_2_claims_rank_1",
     [](CommOptions& o) {
       o.rank = 1;
       o.rails = {RailAddress(2, 0), RailAddress(2, 1)};
     }},
    {"process_2_has_one_rail", [](CommOptions& o) { o.rails.resize(1); }},
};

TEST_P(GroupSetupTest, EveryRankFailsWithinInitTimeout) {
  const Sabotage& sabotage = kSabotages[GetParam()];
  CommLaunch launch;
  launch.size = 3;
  launch.init_timeout = kInitTimeout;
  launch.wall_limit = std::chrono::seconds(60);
  launch.configure = [&](CommOptions& o) {
    if (o.rank == 2) sabotage.apply(o);
  };
  LaunchResult result = LaunchWithOptions(launch, [&](const CommOptions& o, RankReporter& rep) {
    ExpectCreateFails(sabotage.name, o,
                      {Code::kInvalidArgument, Code::kMismatch, Code::kTimeout, Code::kNetwork,
                       Code::kAborted, Code::kPeerLost},
                      kInitTimeout.count() + kSlackMs, rep);
    return 0;
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
}

INSTANTIATE_TEST_SUITE_P(All, GroupSetupTest,
                         ::testing::Range(0, static_cast<int>(std::size(kSabotages))),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(kSabotages[info.param].name);
                         });

// A rank of a 3-rank group never starts: the two that did must fail within init_timeout.
TEST(BootstrapTest, MissingRankFailsEveryoneWithinInitTimeout) {
  CommLaunch launch;
  launch.size = 3;
  launch.init_timeout = kInitTimeout;
  launch.wall_limit = std::chrono::seconds(60);
  LaunchResult result = LaunchWithOptions(launch, [&](const CommOptions& o, RankReporter& rep) {
    if (o.rank == 2) return 0;  // never joins
    ExpectCreateFails("rank 2 never joins", o,
                      {Code::kTimeout, Code::kPeerLost, Code::kNetwork, Code::kAborted},
                      kInitTimeout.count() + kSlackMs, rep);
    return 0;
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
}

// Nothing listens at the bootstrap address (connection refused) / the address is not
// routable (TEST-NET-1, RFC 5737) / rank 0 cannot bind it: a clear error within init_timeout.
// The unroutable cases run in a fresh network namespace of their own (only a loopback device,
// down), so no packet for TEST-NET-1 ever leaves this machine.
TEST(BootstrapTest, UnreachableBootstrapAddress) {
  const int port = ClosedPort();
  LaunchResult result = LaunchRanks(1, std::chrono::seconds(60), [&](int, RankReporter& rep) {
    const std::set<Code> codes = {Code::kNetwork, Code::kTimeout};
    const int64_t bound = kInitTimeout.count() + kSlackMs;
    ExpectCreateFails("connection refused", BaseOptions(1, 2, "127.0.0.1:" + std::to_string(port)),
                      codes, bound, rep);
    if (unshare(CLONE_NEWNET) != 0) {
      rep.Fail("cannot create a private network namespace for the unroutable cases (unshare: " +
               std::string(strerror(errno)) + ")");
      return 1;
    }
    ExpectCreateFails("unroutable address", BaseOptions(1, 2, "192.0.2.1:9"), codes, bound, rep);
    // An address that is not local to rank 0 is also a bad option.
    ExpectCreateFails("rank 0 cannot bind", BaseOptions(0, 2, "192.0.2.1:29500"),
                      {Code::kNetwork, Code::kTimeout, Code::kInvalidArgument}, bound, rep);
    return 0;
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
}

// --- collectives that differ between ranks ---------------------------------------------------

// What the last rank does differently from the others (which run allreduce f32 sum, count
// 4099, or broadcast from root 0 for the root case).
enum class Mismatch { kCount, kDtype, kSameBytesOtherDtype, kOp, kCollective, kRoot, kBarrier };

const char* MismatchName(Mismatch m) {
  switch (m) {
    case Mismatch::kCount:
      return "count";
    case Mismatch::kDtype:
      return "dtype";
    case Mismatch::kSameBytesOtherDtype:
      return "same_bytes_other_dtype";
    case Mismatch::kOp:
      return "reduction";
    case Mismatch::kCollective:
      return "collective";
    case Mismatch::kRoot:
      return "root";
    case Mismatch::kBarrier:
      return "barrier";
  }
  return "?";
}

void PrintTo(Mismatch m, std::ostream* os) { *os << MismatchName(m); }

using MismatchParam = std::tuple<Mismatch, int>;

class MismatchTest : public ::testing::TestWithParam<MismatchParam> {};

TEST_P(MismatchTest, EveryRankGetsAnError) {
  // Plain variables: the rank body captures them (clang before 16 cannot capture a binding).
  const Mismatch mismatch = std::get<0>(GetParam());
  const int ranks = std::get<1>(GetParam());
  CommLaunch launch;
  launch.size = ranks;
  launch.op_timeout = kOpTimeout;
  launch.wall_limit = std::chrono::seconds(60);
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    // A matching collective first: the communicator works.
    CollCase warm;
    warm.count = 1000;
    bool correct = false;
    FTCCL_RETURN_IF_ERROR(RunAndCheck(comm, warm, rep, &correct).WithContext("warm-up"));

    CollCase c;
    c.kind = mismatch == Mismatch::kRoot ? CollKind::kBroadcast : CollKind::kAllReduce;
    c.dt = DataType::kF32;
    c.op = ReduceOp::kSum;
    c.count = 4099;
    c.root = 0;
    const bool odd_one = comm.rank() == ranks - 1;
    if (odd_one) {
      switch (mismatch) {
        case Mismatch::kCount:
          c.count += 1;
          break;
        case Mismatch::kDtype:
          c.dt = DataType::kI32;
          break;
        case Mismatch::kSameBytesOtherDtype:
          c.dt = DataType::kF16, c.count *= 2;
          break;
        case Mismatch::kOp:
          c.op = ReduceOp::kMax;
          break;
        case Mismatch::kCollective:
          c.kind = CollKind::kBroadcast;
          break;
        case Mismatch::kRoot:
          c.root = 1;
          break;
        case Mismatch::kBarrier:
          c.kind = CollKind::kBarrier;
          break;
      }
    }
    rep.Progress("mismatched " + c.Name());
    std::vector<uint8_t> send(2 * 4099 * 4 * static_cast<size_t>(ranks), 1);
    std::vector<uint8_t> recv(send.size());
    const Clock::time_point start = Clock::now();
    Status st = CallCollective(comm, c, send.data(), recv.data());
    const int64_t ms = MillisSince(start);
    rep.Value("code", static_cast<int>(st.code()));
    rep.Value("error_ms", ms);
    if (st.ok()) {
      rep.Fail("the mismatched collective succeeded on rank " + std::to_string(comm.rank()));
      return Status::Ok();
    }
    if (st.code() != Code::kMismatch && st.code() != Code::kAborted) {
      rep.Fail("expected kMismatch or kAborted, got " + st.ToString());
    }
    if (ms > kOpTimeout.count() + kSlackMs) {
      rep.Fail("the error came after " + std::to_string(ms) + " ms: " + st.ToString());
    }
    // Sticky: the next operation fails at once with the same error.
    const Clock::time_point again_start = Clock::now();
    Status again = comm.Barrier();
    const int64_t again_ms = MillisSince(again_start);
    if (again.ok() || again.code() != st.code()) {
      rep.Fail("not sticky: after " + st.ToString() + " a barrier returned " + again.ToString());
    } else if (again_ms > kImmediateMs) {
      rep.Fail("the sticky error took " + std::to_string(again_ms) + " ms");
    }
    return Status::Ok();
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
  int mismatch_reports = 0;
  for (const RankOutcome& r : result.ranks) {
    mismatch_reports += r.value("code") == static_cast<int>(Code::kMismatch) ? 1 : 0;
  }
  EXPECT_GE(mismatch_reports, 1) << "no rank reported kMismatch\n" << result.Describe();
}

INSTANTIATE_TEST_SUITE_P(All, MismatchTest,
                         ::testing::Combine(::testing::Values(Mismatch::kCount, Mismatch::kDtype,
                                                              Mismatch::kSameBytesOtherDtype,
                                                              Mismatch::kOp, Mismatch::kCollective,
                                                              Mismatch::kRoot, Mismatch::kBarrier),
                                            ::testing::Values(2, 3, 4)),
                         [](const ::testing::TestParamInfo<MismatchParam>& info) {
                           return std::string(MismatchName(std::get<0>(info.param))) + "_r" +
                                  std::to_string(std::get<1>(info.param));
                         });

// --- invalid arguments to collectives --------------------------------------------------------

class InvalidArgumentTest : public ::testing::TestWithParam<int> {};

// Every rank passes the same invalid arguments: each gets kInvalidArgument at once (nothing
// was started), and the communicator is still destroyed cleanly.
TEST_P(InvalidArgumentTest, RejectedOnEveryRank) {
  const int ranks = GetParam();
  CommLaunch launch;
  launch.size = ranks;
  launch.op_timeout = kOpTimeout;
  launch.wall_limit = std::chrono::seconds(60);
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    std::vector<uint8_t> send(4096), recv(4096 * static_cast<size_t>(ranks));
    const void* s = send.data();
    void* r = recv.data();
    const size_t huge = std::numeric_limits<size_t>::max() / 2 + 1;  // bytes overflow size_t
    const auto bad_dt = static_cast<DataType>(42);
    const auto bad_op = static_cast<ReduceOp>(42);
    struct Call {
      const char* name;
      std::function<Status()> call;
    };
    const std::vector<Call> calls = {
        {"allreduce invalid dtype",
         [&] { return comm.AllReduce(s, r, 16, bad_dt, ReduceOp::kSum); }},
        {"allreduce invalid reduction",
         [&] { return comm.AllReduce(s, r, 16, DataType::kF32, bad_op); }},
        {"allreduce null send",
         [&] { return comm.AllReduce(nullptr, r, 16, DataType::kF32, ReduceOp::kSum); }},
        {"allreduce null recv",
         [&] { return comm.AllReduce(s, nullptr, 16, DataType::kF32, ReduceOp::kSum); }},
        {"allreduce count overflows bytes",
         [&] { return comm.AllReduce(s, r, huge, DataType::kF32, ReduceOp::kSum); }},
        {"allgather count * size overflows",
         [&] { return comm.AllGather(s, r, huge, DataType::kU8); }},
        {"alltoall count * size overflows",
         [&] { return comm.AllToAll(s, r, huge, DataType::kF64); }},
        {"broadcast root == size", [&] { return comm.Broadcast(s, r, 16, DataType::kF32, ranks); }},
        {"broadcast root -1", [&] { return comm.Broadcast(s, r, 16, DataType::kF32, -1); }},
        {"reduce root == size",
         [&] { return comm.Reduce(s, r, 16, DataType::kF32, ReduceOp::kSum, ranks); }},
        {"reducescatter invalid dtype",
         [&] { return comm.ReduceScatter(s, r, 16, bad_dt, ReduceOp::kSum); }},
    };
    for (const Call& c : calls) {
      rep.Progress(c.name);
      const Clock::time_point start = Clock::now();
      Status st = c.call();
      const int64_t ms = MillisSince(start);
      if (st.code() != Code::kInvalidArgument) {
        rep.Fail(std::string(c.name) + ": expected kInvalidArgument, got " + st.ToString());
      } else if (ms > kImmediateMs) {
        rep.Fail(std::string(c.name) + ": took " + std::to_string(ms) + " ms");
      }
    }
    return Status::Ok();
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
}

// Only the last rank passes an out-of-range root: it gets kInvalidArgument at once; the others
// get an error within their deadline instead of waiting for it forever.
TEST_P(InvalidArgumentTest, OneRankWithBadRoot) {
  const int ranks = GetParam();
  if (ranks == 1) GTEST_SKIP() << "needs a second rank";
  CommLaunch launch;
  launch.size = ranks;
  launch.op_timeout = kOpTimeout;
  launch.wall_limit = std::chrono::seconds(60);
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    std::vector<float> send(1000, 1.0f), recv(1000);
    const bool odd_one = comm.rank() == ranks - 1;
    const Clock::time_point start = Clock::now();
    Status st =
        comm.Broadcast(send.data(), recv.data(), send.size(), DataType::kF32, odd_one ? ranks : 0);
    const int64_t ms = MillisSince(start);
    if (odd_one) {
      if (st.code() != Code::kInvalidArgument) {
        rep.Fail("expected kInvalidArgument, got " + st.ToString());
      } else if (ms > kImmediateMs) {
        rep.Fail("kInvalidArgument took " + std::to_string(ms) + " ms");
      }
    } else if (st.ok()) {
      rep.Fail("broadcast succeeded although rank " + std::to_string(ranks - 1) +
               " never took part");
    } else if (ms > kOpTimeout.count() + kSlackMs) {
      rep.Fail("the error came after " + std::to_string(ms) + " ms: " + st.ToString());
    }
    return Status::Ok();
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
}

// The last rank never issues the collective (it idles past the others' deadline): the others
// must fail by the per-call timeout (kTimeout, or kAborted when told of another rank's
// timeout), a timeout never before the deadline and no error much after it.
class DeadlineTest : public ::testing::TestWithParam<int> {};

TEST_P(DeadlineTest, PeerNeverCallsPerCallTimeout) {
  const int ranks = GetParam();
  constexpr Millis kCallTimeout(1000);
  CommLaunch launch;
  launch.size = ranks;
  launch.op_timeout = Millis(30000);  // the per-call timeout must override this
  launch.wall_limit = std::chrono::seconds(60);
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    if (comm.rank() == ranks - 1) {
      usleep(static_cast<useconds_t>((kCallTimeout.count() + 1500) * 1000));
      return Status::Ok();
    }
    std::vector<float> send(1000, 1.0f), recv(1000);
    const Clock::time_point start = Clock::now();
    Status st = comm.AllReduce(send.data(), recv.data(), send.size(), DataType::kF32,
                               ReduceOp::kSum, kCallTimeout);
    const int64_t ms = MillisSince(start);
    rep.Value("code", static_cast<int>(st.code()));
    // A rank whose own deadline has not passed yet may hear of another's timeout first.
    if (st.code() != Code::kTimeout && st.code() != Code::kAborted) {
      rep.Fail("expected kTimeout (or kAborted by a peer's timeout), got " + st.ToString());
    } else if (ms > kCallTimeout.count() + kSlackMs ||
               (st.code() == Code::kTimeout && ms < kCallTimeout.count() - 50)) {
      rep.Fail(st.ToString() + " after " + std::to_string(ms) + " ms for a " +
               std::to_string(kCallTimeout.count()) + " ms timeout");
    }
    return Status::Ok();
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
  int timeouts = 0;
  for (const RankOutcome& r : result.ranks) {
    timeouts += r.value("code") == static_cast<int>(Code::kTimeout) ? 1 : 0;
  }
  EXPECT_GE(timeouts, 1) << "no rank reported kTimeout\n" << result.Describe();
}

INSTANTIATE_TEST_SUITE_P(All, DeadlineTest, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return RanksTag(info.param);
                         });

INSTANTIATE_TEST_SUITE_P(All, InvalidArgumentTest, ::testing::Values(1, 2, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return RanksTag(info.param);
                         });

}  // namespace
}  // namespace ftccl::test
