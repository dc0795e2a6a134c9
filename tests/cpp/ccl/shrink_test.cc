// Revoke and Shrink: a rank is killed (SIGKILL) or paused (SIGSTOP) in the middle of a
// collective; the survivors see their collective fail, shrink the communicator without it and
// run every collective on the new one, each result checked element by element. Also: bad
// arguments leave the communicator untouched, a rank that excludes other ranks is refused
// without breaking the survivors' group, and a survivor that never joins fails the shrink in
// bounded time.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <atomic>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "collective_check.h"
#include "ftccl/communicator.h"
#include "rank_launcher.h"

namespace ftccl::test {
namespace {

// Shared between the rank processes (inherited over fork): the victim's pid, so that a survivor
// can resume a paused victim once the shrink is over.
struct Shared {
  std::atomic<pid_t> victim_pid{0};
};

class SharedPage {
 public:
  SharedPage() {
    void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    if (p != MAP_FAILED) shared_ = new (p) Shared();
  }
  ~SharedPage() {
    if (shared_ != nullptr) munmap(shared_, sizeof(Shared));
  }
  Shared* get() const { return shared_; }

 private:
  Shared* shared_ = nullptr;
};

enum class Strike { kKill, kPause };

struct ShrinkCase {
  Strike strike = Strike::kKill;
  int size = 2;
  int victim = 0;
};

void PrintTo(const ShrinkCase& c, std::ostream* os) {
  *os << (c.strike == Strike::kKill ? "rank_kill" : "rank_pause") << "_" << RanksTag(c.size)
      << "_victim" << c.victim;
}

// Every collective once on `comm`, results checked; the roots of broadcast and reduce are the
// new communicator's last rank, so renumbering mistakes show.
Status RunEveryCollective(Communicator& comm, RankReporter& rep) {
  const CollKind kinds[] = {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter,
                            CollKind::kBroadcast, CollKind::kReduce,    CollKind::kAllToAll,
                            CollKind::kBarrier};
  uint64_t salt = 7;
  for (CollKind kind : kinds) {
    CollCase c;
    c.kind = kind;
    c.dt = DataType::kF32;
    c.op = ReduceOp::kSum;
    c.root = comm.size() - 1;
    c.count = kind == CollKind::kBarrier ? 0 : 70001;
    c.salt = ++salt;
    bool correct = false;
    rep.Progress("after the shrink: " + c.Name());
    Status st = RunAndCheck(comm, c, rep, &correct);
    if (!st.ok()) return st.WithContext("after the shrink: " + c.Name());
    if (!correct && kind != CollKind::kBarrier) {
      rep.Fail("after the shrink: " + c.Name() + " gave a wrong result");
    }
    rep.Value("checked_" + std::string(CollKindName(kind)), 1);
  }
  return Status::Ok();
}

class ShrinkTest : public ::testing::TestWithParam<ShrinkCase> {};

TEST_P(ShrinkTest, SurvivorsShrinkAndEveryCollectiveIsExactAfterwards) {
  const ShrinkCase tc = GetParam();
  SharedPage page;
  ASSERT_NE(page.get(), nullptr) << "mmap failed";
  Shared* shared = page.get();
  CommLaunch launch;
  launch.size = tc.size;
  launch.op_timeout = Millis(15000);
  launch.wall_limit = std::chrono::seconds(120);
  launch.configure = [](CommOptions& o) {
    o.chunk_bytes = 64 * 1024;
    o.abort_timeout = Millis(1000);
  };
  constexpr size_t kCount = 1 << 21;  // 8 MiB of f32 per rank: the collective is in flight
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    std::vector<float> send(kCount, 1.0f), recv(kCount);
    const bool victim = comm.rank() == tc.victim;
    if (victim) shared->victim_pid = getpid();
    // Everyone runs all-reduces; from the third one on, the victim is struck 2 ms into the
    // first one that is still in flight then.
    Status failed;
    int iters = 0;
    for (; iters < 200; ++iters) {
      RequestPtr req = comm.AllReduceAsync(send.data(), recv.data(), kCount, DataType::kF32,
                                           ReduceOp::kSum);
      if (victim && iters >= 2) usleep(2 * 1000);
      if (victim && iters >= 2 && !req->Test()) {
        rep.Value("struck_at", iters);
        if (tc.strike == Strike::kKill) kill(getpid(), SIGKILL);
        kill(getpid(), SIGSTOP);
        // Resumed by a survivor once the shrink is over: the old communicator is revoked
        // (or its peers are gone); the collective must end with an error, not hang.
        const auto resumed = Clock::now();
        Status st = req->Wait();
        rep.Value("victim_wait_ms", MillisSince(resumed));
        rep.Value("victim_code", static_cast<int>(st.code()));
        if (st.ok()) {
          // It may have completed just before the pause; the next one cannot.
          st = comm.AllReduce(send.data(), recv.data(), kCount, DataType::kF32, ReduceOp::kSum);
          rep.Value("victim_code", static_cast<int>(st.code()));
        }
        if (st.ok()) rep.Fail("the excluded rank's collective succeeded after the shrink");
        rep.Progress("excluded rank: " + st.ToString());
        return Status::Ok();
      }
      Status st = req->Wait();
      if (!st.ok()) {
        failed = st;
        break;
      }
    }
    if (failed.ok()) return Internal("no collective failed in 200 iterations");
    rep.Progress("collective #" + std::to_string(iters) + " failed: " + failed.ToString());
    rep.Value("failed_at", iters);
    rep.Value("failed_code", static_cast<int>(failed.code()));
    // Every survivor learns which rank was lost, from its own detection or a peer's abort.
    rep.Value("lost_peer", comm.LostPeer());
    if (comm.LostPeer() != tc.victim) {
      rep.Fail("LostPeer() is " + std::to_string(comm.LostPeer()) + ", not the victim " +
               std::to_string(tc.victim) + " (" + failed.ToString() + ")");
    }
    const auto start = Clock::now();
    auto shrunk = comm.Shrink({tc.victim}, Millis(10000));
    if (!shrunk.ok()) return shrunk.status();
    rep.Value("shrink_ms", MillisSince(start));
    if (!comm.revoked()) rep.Fail("the old communicator is not revoked after Shrink");
    Communicator& next = *shrunk.value();
    const int expected_rank = comm.rank() - (comm.rank() > tc.victim ? 1 : 0);
    rep.Value("new_rank", next.rank());
    rep.Value("new_size", next.size());
    if (next.rank() != expected_rank || next.size() != tc.size - 1) {
      rep.Fail("shrunk to rank " + std::to_string(next.rank()) + " of " +
               std::to_string(next.size()) + ", expected " + std::to_string(expected_rank) +
               " of " + std::to_string(tc.size - 1));
    }
    // The old communicator fails fast: it is revoked.
    Status old = comm.Barrier(Millis(5000));
    if (old.ok() || old.code() != Code::kAborted) {
      rep.Fail("a collective on the revoked communicator returned " + old.ToString());
    }
    Status st = RunEveryCollective(next, rep);
    if (!st.ok()) return st;
    // Both groups at once: a second round on the new communicator after everyone checked.
    st = next.Barrier();
    if (!st.ok()) return st.WithContext("final barrier");
    if (tc.strike == Strike::kPause && next.rank() == 0) {
      pid_t v = shared->victim_pid.load();
      if (v > 0) kill(v, SIGCONT);
    }
    shrunk.value().reset();
    return Status::Ok();
  });
  ASSERT_EQ(result.ranks.size(), static_cast<size_t>(tc.size)) << result.Describe();
  int64_t shrink_ms_max = 0;
  for (const RankOutcome& o : result.ranks) shrink_ms_max = std::max(shrink_ms_max, o.value("shrink_ms", 0));
  if (tc.strike == Strike::kPause) {
    std::printf("excluded rank resumed: its collective ended in %lld ms\n",
                static_cast<long long>(result.ranks[tc.victim].value("victim_wait_ms")));
  }
  std::printf("shrink of %d ranks to %d: %lld ms (slowest survivor, from its failed collective's "
              "return to the new communicator ready)\n",
              tc.size, tc.size - 1, static_cast<long long>(shrink_ms_max));
  for (int r = 0; r < tc.size; ++r) {
    const RankOutcome& o = result.ranks[r];
    if (r == tc.victim) {
      if (tc.strike == Strike::kKill) {
        EXPECT_EQ(o.term_signal, SIGKILL) << result.Describe();
      } else {
        EXPECT_TRUE(o.ok()) << result.Describe();
        EXPECT_NE(o.value("victim_code", 0), 0) << result.Describe();
      }
      continue;
    }
    EXPECT_TRUE(o.ok()) << result.Describe();
    // The dead or stopped peer is given up on by abort_timeout (PEER_LOST, or ABORTED when a
    // survivor told this one first), not found out by the collective's own deadline.
    EXPECT_NE(o.value("failed_code"), static_cast<int>(Code::kTimeout)) << result.Describe();
    EXPECT_EQ(o.value("new_size"), tc.size - 1) << result.Describe();
    EXPECT_EQ(o.value("checked_alltoall", 0), 1) << result.Describe();
  }
  EXPECT_FALSE(result.timed_out) << result.Describe();
}

INSTANTIATE_TEST_SUITE_P(
    All, ShrinkTest,
    ::testing::Values(ShrinkCase{Strike::kKill, 2, 0}, ShrinkCase{Strike::kKill, 4, 0},
                      ShrinkCase{Strike::kKill, 4, 2}, ShrinkCase{Strike::kKill, 8, 5},
                      ShrinkCase{Strike::kPause, 3, 1}, ShrinkCase{Strike::kPause, 4, 0},
                      ShrinkCase{Strike::kPause, 8, 7}),
    [](const ::testing::TestParamInfo<ShrinkCase>& info) {
      std::ostringstream os;
      PrintTo(info.param, &os);
      return os.str();
    });

// Bad arguments are refused before anything happens: the communicator is not revoked and
// still works.
TEST(ShrinkArgsTest, BadExcludedListsLeaveTheCommunicatorWorking) {
  CommLaunch launch;
  launch.size = 3;
  LaunchResult result = LaunchCommunicators(launch, [](Communicator& comm, RankReporter& rep) {
    const std::vector<std::vector<int>> bad = {{3}, {-1}, {comm.rank()}, {(comm.rank() + 1) % 3,
                                               (comm.rank() + 1) % 3}};
    for (const auto& ex : bad) {
      auto r = comm.Shrink(ex);
      if (r.ok() || r.status().code() != Code::kInvalidArgument) {
        rep.Fail("Shrink of a bad list returned " +
                 (r.ok() ? std::string("a communicator") : r.status().ToString()));
      } else {
        rep.Progress(r.status().message());
      }
    }
    if (comm.revoked()) rep.Fail("a refused shrink revoked the communicator");
    CollCase c;
    c.count = 1000;
    bool correct = false;
    Status st = RunAndCheck(comm, c, rep, &correct);
    if (st.ok() && !correct) rep.Fail("wrong result after refused shrinks");
    return st;
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
}

// Rank 3 believes rank 2 is gone, the others believe rank 3 is: rank 3 is refused by the new
// rank 0 with a clear reason, and ranks 0-2 form their group of three anyway.
TEST(ShrinkArgsTest, ARankThatExcludesOtherRanksIsRefusedAndTheOthersGoOn) {
  CommLaunch launch;
  launch.size = 4;
  LaunchResult result = LaunchCommunicators(launch, [](Communicator& comm, RankReporter& rep) {
    const bool dissenter = comm.rank() == 3;
    auto r = comm.Shrink(dissenter ? std::vector<int>{2} : std::vector<int>{3}, Millis(8000));
    if (dissenter) {
      // Refused by the new rank 0 (kInvalidArgument), or, when the others were done before its
      // hello was read, its connection closed unanswered with the listener (kNetwork).
      rep.Value("code", r.ok() ? 0 : static_cast<int>(r.status().code()));
      if (r.ok()) {
        rep.Fail("the dissenting rank joined a group");
      } else if (!(r.status().code() == Code::kInvalidArgument &&
                   r.status().message().find("another group") != std::string::npos) &&
                 !(r.status().code() == Code::kNetwork &&
                   r.status().message().find("did not admit this rank") != std::string::npos)) {
        rep.Fail("unclear refusal: " + r.status().ToString());
      }
      return Status::Ok();
    }
    if (!r.ok()) return r.status();
    rep.Value("new_size", r.value()->size());
    CollCase c;
    c.count = 4096;
    bool correct = false;
    Status st = RunAndCheck(*r.value(), c, rep, &correct);
    if (st.ok() && !correct) rep.Fail("wrong result in the group of three");
    return st;
  });
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(result.ranks[r].ok()) << result.Describe();
  EXPECT_NE(result.ranks[3].value("code"), 0) << result.Describe();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(result.ranks[r].value("new_size"), 3) << result.Describe();
}

// A survivor that never calls Shrink: the others' shrink ends with kTimeout naming it, within
// the timeout they gave (plus a margin for a loaded machine), not at some default.
TEST(ShrinkArgsTest, ASurvivorThatNeverJoinsFailsTheShrinkInBoundedTime) {
  CommLaunch launch;
  launch.size = 3;
  LaunchResult result = LaunchCommunicators(launch, [](Communicator& comm, RankReporter& rep) {
    if (comm.rank() == 2) {
      usleep(4000 * 1000);  // alive, but busy elsewhere
      return Status::Ok();
    }
    const auto start = Clock::now();
    auto r = comm.Shrink({}, Millis(1500));
    rep.Value("shrink_ms", MillisSince(start));
    rep.Value("code", r.ok() ? 0 : static_cast<int>(r.status().code()));
    rep.Progress(r.ok() ? "shrunk" : r.status().ToString());
    if (r.ok()) rep.Fail("the shrink succeeded without rank 2");
    if (comm.rank() == 0 && !r.ok() && r.status().message().find("missing ranks: 2") == std::string::npos) {
      rep.Fail("the failure does not name the missing rank: " + r.status().ToString());
    }
    return Status::Ok();
  });
  EXPECT_TRUE(result.AllOk()) << result.Describe();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(result.ranks[r].value("code"), static_cast<int>(Code::kTimeout)) << result.Describe();
    EXPECT_LT(result.ranks[r].value("shrink_ms"), 1500 + 2500) << result.Describe();
  }
}

}  // namespace
}  // namespace ftccl::test
