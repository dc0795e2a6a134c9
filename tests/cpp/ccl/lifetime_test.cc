// Buffer lifetime and Abort(): once a collective's Wait returns, ftccl never touches that
// collective's buffers again, whatever happened to it; Abort() ends the running collective on
// every rank.
//
// The buffers are whole pages of their own (GuardedBuffer). Right after a Wait returns, the
// test revokes every access to them (mprotect PROT_NONE) and keeps the communicator alive while
// the fault plays out: peers still send, resend, reset and reconnect. Any later read or write
// by the library is a SIGSEGV in the rank, which fails the test in every build, with or without
// a sanitizer.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ftccl/ftccl.h"
#include "injector/sock_diag.h"
#include "rank_launcher.h"

namespace ftccl::test {
namespace {

constexpr int64_t kSlackMs = 3000;  // scheduling noise on a loaded two-core machine

// Pages of their own, so that access can be revoked without touching anything else.
class GuardedBuffer final {
 public:
  explicit GuardedBuffer(size_t bytes) : bytes_(RoundUp(bytes)) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  }
  ~GuardedBuffer() {
    if (data_ != nullptr) munmap(data_, bytes_);
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  bool ok() const { return data_ != nullptr; }
  float* floats() { return reinterpret_cast<float*>(data_); }
  // From now on any access is a SIGSEGV. The pages stay mapped (never reused by the allocator).
  bool Revoke() { return mprotect(data_, bytes_, PROT_NONE) == 0; }

 private:
  static size_t RoundUp(size_t n) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (std::max<size_t>(n, 1) + page - 1) / page * page;
  }
  size_t bytes_;
  uint8_t* data_ = nullptr;
};

// Send and receive buffers of one all-reduce of `count` floats.
struct Buffers {
  explicit Buffers(size_t count) : count(count), send(count * 4), recv(count * 4) {
    if (ok()) {
      for (size_t i = 0; i < count; ++i) send.floats()[i] = 1.0f;
    }
  }
  bool ok() const { return send.ok() && recv.ok(); }
  bool Revoke() { return send.Revoke() && recv.Revoke(); }
  size_t count;
  GuardedBuffer send, recv;
};

// --- a collective queued behind a long one ---------------------------------------------------

// Rank 0 issues a collective with a long deadline, then one with a short deadline; rank 1
// calls both only long after the short deadline. The short one's Wait must return at its
// deadline, and the collective must never start afterwards on the buffers the caller has taken
// back (revoked here); the long one completes.
TEST(BufferLifetimeTest, QueuedCollectiveNeverStartsAfterItsWaitReturned) {
  constexpr Millis kShort(1000);
  constexpr int64_t kLateMs = 7000;  // past the short deadline and any grace a Wait may take
  CommLaunch launch;
  launch.size = 2;
  launch.op_timeout = Millis(30000);
  launch.wall_limit = std::chrono::seconds(60);
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    Buffers first(1 << 16), second(1 << 16);
    if (!first.ok() || !second.ok()) return Internal("mmap failed");
    if (comm.rank() == 1) {
      usleep(kLateMs * 1000);
      rep.Progress("rank 1: the first collective");
      Status st = comm.AllReduce(first.send.floats(), first.recv.floats(), first.count,
                                 DataType::kF32, ReduceOp::kSum);
      if (!st.ok()) rep.Fail("the first collective failed: " + st.ToString());
      const Clock::time_point start = Clock::now();
      st = comm.AllReduce(second.send.floats(), second.recv.floats(), second.count, DataType::kF32,
                          ReduceOp::kSum, kShort);
      if (st.ok()) {
        rep.Fail("the second collective succeeded although rank 0 dropped it");
      } else if (MillisSince(start) > kSlackMs) {
        rep.Fail("rank 0's abort of the second collective took " +
                 std::to_string(MillisSince(start)) + " ms to reach rank 1: " + st.ToString());
      }
      return Status::Ok();
    }
    RequestPtr a = comm.AllReduceAsync(first.send.floats(), first.recv.floats(), first.count,
                                       DataType::kF32, ReduceOp::kSum);
    const Clock::time_point start = Clock::now();
    RequestPtr b = comm.AllReduceAsync(second.send.floats(), second.recv.floats(), second.count,
                                       DataType::kF32, ReduceOp::kSum, kShort);
    rep.Progress("rank 0: waiting for the short collective");
    Status st = b->Wait();
    const int64_t ms = MillisSince(start);
    if (!second.Revoke()) return Internal("mprotect failed");
    if (st.code() != Code::kTimeout) {
      rep.Fail("the short collective: expected kTimeout, got " + st.ToString());
    } else if (ms < kShort.count() - 50 || ms > kShort.count() + kSlackMs) {
      rep.Fail("the short collective's Wait returned after " + std::to_string(ms) + " ms for a " +
               std::to_string(kShort.count()) + " ms deadline");
    }
    rep.Progress("rank 0: waiting for the long collective (its buffers of the short one revoked)");
    st = a->Wait();
    if (!st.ok()) rep.Fail("the long collective failed: " + st.ToString());
    for (size_t i = 0; i < first.count && st.ok(); ++i) {
      if (first.recv.floats()[i] != 2.0f) {
        rep.Fail("wrong sum at " + std::to_string(i));
        break;
      }
    }
    usleep(500 * 1000);  // whatever would still run, runs now
    return Status::Ok();
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
}

// --- faults in the middle of a collective ------------------------------------------------------

enum class Fault { kRankKill, kCorruptEveryFrame, kConnReset };

void PrintTo(Fault f, std::ostream* os) {
  *os << (f == Fault::kRankKill ? "rank_kill"
                                : f == Fault::kCorruptEveryFrame ? "corrupt" : "conn_reset");
}

constexpr size_t kBigCount = size_t{4} << 20;  // 16 MiB of floats: many frames in flight

// Resets every TCP connection of this process's rail `rail` (sock_diag destroy, as the
// injector's conn_reset): the peers get a RST, this end ECONNABORTED.
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

class FaultLifetimeTest : public ::testing::TestWithParam<Fault> {};

// Every surviving rank runs one big all-reduce while the fault strikes; whatever it returns,
// its buffers are revoked at once, and the communicator lives on for a while (peers resend,
// reconnect, abort) before it is destroyed.
TEST_P(FaultLifetimeTest, BuffersUntouchedOnceWaitReturns) {
  const Fault fault = GetParam();
  constexpr int kRanks = 3;
  CommLaunch launch;
  launch.size = kRanks;
  // Far above the collective's length (under TSan, with every chunk of rank 1 sent twice, 3 to
  // 4 s in CI): a deadline near it times the collective out on one rank after another rank
  // completed it, and that rank's next collective then fails with the first one's abort (a
  // CI failure; 1 of 3 runs here with the deadline at 3 s). Deadlines have tests of their own.
  launch.op_timeout = Millis(20000);
  launch.wall_limit = std::chrono::seconds(60);
  launch.configure = [fault](CommOptions& o) {
    o.chunk_bytes = 64 * 1024;
    o.abort_timeout = Millis(1000);
    if (fault == Fault::kCorruptEveryFrame && o.rank == 1) o.wire_faults.corrupt = 1.0;
  };
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    Buffers buf(kBigCount);
    if (!buf.ok()) return Internal("mmap failed");
    RequestPtr req = comm.AllReduceAsync(buf.send.floats(), buf.recv.floats(), buf.count,
                                         DataType::kF32, ReduceOp::kSum);
    std::thread striker;
    if (fault == Fault::kRankKill && comm.rank() == kRanks - 1) {
      // Mid-collective: as soon as its first frames are out, long before its share of the
      // 16 MiB is. A fixed delay (it was 100 ms) can outlast the whole collective on loopback.
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (comm.Stats().data_frames_sent == 0 && std::chrono::steady_clock::now() < give_up) {
        usleep(200);
      }
      kill(getpid(), SIGKILL);
    }
    if (fault == Fault::kConnReset && comm.rank() == 0) {
      // Both rails, one after the other, while the data is in flight.
      striker = std::thread([&rep, rank = comm.rank()] {
        for (int rail = 0; rail < kDefaultRails; ++rail) {
          usleep(40 * 1000);
          auto n = ResetRail(rank, rail);
          if (!n.ok()) {
            rep.Value("reset_unavailable", 1);
            rep.Progress("conn_reset: " + n.status().ToString());
            return;
          }
          rep.Value("reset_rail" + std::to_string(rail), n.value());
        }
      });
    }
    rep.Progress("waiting for the collective");
    Status st = req->Wait();
    if (!buf.Revoke()) return Internal("mprotect failed");
    rep.Value("code", static_cast<int>(st.code()));
    if (striker.joinable()) striker.join();
    rep.Progress("collective returned " + st.ToString() + "; buffers revoked, communicator lives on");
    if (fault == Fault::kRankKill && st.ok()) rep.Fail("the collective succeeded despite the fault");
    // Whatever the library would still do with the buffers, it does now.
    usleep(1500 * 1000);
    // The communicator stays usable for new buffers where it did not fail.
    if (st.ok()) {
      Buffers again(1 << 14);
      Status st2 = comm.AllReduce(again.send.floats(), again.recv.floats(), again.count,
                                  DataType::kF32, ReduceOp::kSum);
      if (!st2.ok()) rep.Fail("a collective after the reset failed: " + st2.ToString());
    }
    return Status::Ok();
  });
  if (fault == Fault::kRankKill) {
    ASSERT_EQ(result.ranks.size(), static_cast<size_t>(kRanks));
    EXPECT_EQ(result.ranks[kRanks - 1].term_signal, SIGKILL) << result.Describe();
    for (int r = 0; r < kRanks - 1; ++r) EXPECT_TRUE(result.ranks[r].ok()) << result.Describe();
    return;
  }
  if (fault == Fault::kConnReset && result.ranks[0].value("reset_unavailable", 0) == 1) {
    GTEST_SKIP() << "this kernel cannot destroy sockets (SOCK_DESTROY): "
                 << result.ranks[0].last_progress;
  }
  EXPECT_TRUE(result.AllOk()) << result.Describe();
  if (fault == Fault::kConnReset) {
    EXPECT_GT(result.ranks[0].value("reset_rail0", 0) + result.ranks[0].value("reset_rail1", 0), 0)
        << "no connection was reset\n"
        << result.Describe();
  }
}

INSTANTIATE_TEST_SUITE_P(All, FaultLifetimeTest,
                         ::testing::Values(Fault::kRankKill, Fault::kCorruptEveryFrame,
                                           Fault::kConnReset),
                         [](const ::testing::TestParamInfo<Fault>& info) {
                           std::ostringstream os;
                           PrintTo(info.param, &os);
                           return os.str();
                         });

// Destroying the communicator while a collective waits (a peer never calls it) ends that
// collective with kAborted at once; the destructor does not wait for the collective's
// deadline, and the buffers are not touched after the request completed.
TEST(BufferLifetimeTest, DestroyMidCollectiveEndsItAtOnce) {
  CommLaunch launch;
  launch.size = 2;
  launch.op_timeout = Millis(30000);
  launch.wall_limit = std::chrono::seconds(60);
  LaunchResult result = LaunchWithOptions(launch, [&](const CommOptions& o, RankReporter& rep) {
    auto created = Communicator::Create(o);
    if (!created.ok()) {
      rep.Fail("Create: " + created.status().ToString());
      return 1;
    }
    std::unique_ptr<Communicator> comm = std::move(created.value());
    if (o.rank == 1) {
      usleep(3000 * 1000);  // never calls; stays until rank 0 is done
      return 0;
    }
    Buffers buf(1 << 16);
    if (!buf.ok()) return 1;
    RequestPtr req = comm->AllReduceAsync(buf.send.floats(), buf.recv.floats(), buf.count,
                                          DataType::kF32, ReduceOp::kSum);
    usleep(200 * 1000);
    const Clock::time_point start = Clock::now();
    comm.reset();
    const int64_t destroy_ms = MillisSince(start);
    if (!req->Test()) rep.Fail("the request is not complete after the destructor");
    Status st = req->Wait();
    if (!buf.Revoke()) return 1;
    rep.Value("destroy_ms", destroy_ms);
    if (st.code() != Code::kAborted) rep.Fail("expected kAborted, got " + st.ToString());
    if (destroy_ms > 2000) rep.Fail("the destructor took " + std::to_string(destroy_ms) + " ms");
    return 0;
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
}

// --- Abort() -------------------------------------------------------------------------------------

// Three ranks in one all-reduce that cannot finish yet (rank 2 comes late). Rank 0 aborts from
// another thread while its main thread waits: the running collective ends with kAborted on
// rank 0 at once and on rank 1 as soon as the abort reaches it, long before rank 2 arrives;
// rank 2 then fails at once; later collectives fail fast with kAborted.
TEST(AbortTest, AbortsTheRunningCollectiveOnEveryRank) {
  constexpr int kRanks = 3;
  constexpr int64_t kAbortAtMs = 300;
  constexpr int64_t kLateMs = 5000;
  CommLaunch launch;
  launch.size = kRanks;
  launch.op_timeout = Millis(30000);
  launch.wall_limit = std::chrono::seconds(60);
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    const Millis abort_bound = comm.options().abort_timeout;
    Buffers buf(1 << 16);
    if (!buf.ok()) return Internal("mmap failed");
    if (comm.rank() == kRanks - 1) usleep(kLateMs * 1000);
    std::thread aborter;
    const Clock::time_point start = Clock::now();
    if (comm.rank() == 0) {
      aborter = std::thread([&comm] {
        usleep(kAbortAtMs * 1000);
        comm.Abort("the test aborts");
      });
    }
    Status st = comm.AllReduce(buf.send.floats(), buf.recv.floats(), buf.count, DataType::kF32,
                               ReduceOp::kSum);
    const int64_t ms = MillisSince(start);
    if (!buf.Revoke()) return Internal("mprotect failed");
    if (aborter.joinable()) aborter.join();
    rep.Value("ms", ms);
    if (st.code() != Code::kAborted) {
      rep.Fail("expected kAborted, got " + st.ToString());
    } else if (comm.rank() == kRanks - 1 ? ms > 1000
                                          : ms > kAbortAtMs + abort_bound.count() + kSlackMs / 2) {
      rep.Fail("kAborted after " + std::to_string(ms) + " ms");
    } else if (st.message().find("the test aborts") == std::string::npos) {
      rep.Fail("the abort's reason is not in the status: " + st.ToString());
    }
    const Clock::time_point later = Clock::now();
    Status next = comm.Barrier(Millis(10000));
    if (next.code() != Code::kAborted || MillisSince(later) > 500) {
      rep.Fail("a later collective: expected kAborted at once, got " + next.ToString() + " after " +
               std::to_string(MillisSince(later)) + " ms");
    }
    usleep(500 * 1000);
    return Status::Ok();
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
}

// Abort from several threads at once while collectives run on another: every request ends,
// each either done or kAborted, and no buffer is touched after its Wait (revoked each time);
// collectives go on until the abort has struck.
// Run under ThreadSanitizer by the sanitizer suite.
TEST(AbortTest, ConcurrentAbortsWhileCollectivesRun) {
  constexpr int kOps = 40;
  CommLaunch launch;
  launch.size = 2;
  launch.op_timeout = Millis(10000);
  launch.wall_limit = std::chrono::seconds(60);
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    std::atomic<bool> go{false};
    std::vector<std::thread> aborters;
    if (comm.rank() == 0) {
      for (int t = 0; t < 3; ++t) {
        aborters.emplace_back([&comm, &go, t] {
          while (!go.load()) std::this_thread::yield();
          usleep(static_cast<useconds_t>(20000 + 7000 * t));
          comm.Abort("thread " + std::to_string(t));
          (void)comm.Stats();
        });
      }
    }
    int aborted = 0, done = 0;
    // At least kOps, and on until this rank has seen the abort (rank 0's threads strike 20 to
    // 34 ms in; on loopback kOps small collectives can all be over by then).
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < kOps || (aborted == 0 && MillisSince(start) < 10000); ++i) {
      Buffers buf(1 << 15);
      if (!buf.ok()) return Internal("mmap failed");
      RequestPtr req = comm.AllReduceAsync(buf.send.floats(), buf.recv.floats(), buf.count,
                                           DataType::kF32, ReduceOp::kSum);
      go = true;
      Status st = req->Wait();
      if (!buf.Revoke()) return Internal("mprotect failed");
      if (st.ok()) {
        ++done;
      } else if (st.code() == Code::kAborted) {
        ++aborted;
      } else {
        rep.Fail("collective " + std::to_string(i) + ": " + st.ToString());
      }
    }
    for (auto& t : aborters) t.join();
    rep.Value("aborted", aborted);
    rep.Value("done", done);
    if (aborted == 0) rep.Fail("no collective was aborted");
    return Status::Ok();
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
}

}  // namespace
}  // namespace ftccl::test
