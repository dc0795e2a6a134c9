// Grow: a communicator shrunk after a rank was killed grows back when a fresh process (the
// repaired host's relaunched rank) joins; the joiner takes the state it missed from a member by
// broadcast, and every collective on the full group is exact, with the joiner as a root too.
// Also: a joiner that never comes fails the grow on every member in bounded time and leaves
// the parent usable, and a later grow with a new joiner succeeds; joiners that
// lie (a member's rank, a stale id, a tampered id) get a clear error and do not stop the group.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "collective_check.h"
#include "ftccl/communicator.h"
#include "rank_launcher.h"

namespace ftccl::test {
namespace {

// Shared between the processes of one test (inherited over fork).
struct Shared {
  std::atomic<int> id_ready{0};  // how many grow ids were published
  char grow_id[2][160] = {};
  std::atomic<int> growing{0};  // members about to call Grow, per attempt
  std::atomic<int> liars_done{0};
};

class SharedPage {
 public:
  SharedPage() {
    void* p =
        mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) shared_ = new (p) Shared();
  }
  ~SharedPage() {
    if (shared_ != nullptr) munmap(shared_, sizeof(Shared));
  }
  Shared* get() const { return shared_; }

 private:
  Shared* shared_ = nullptr;
};

void Publish(Shared* s, int attempt, const std::string& id) {
  std::snprintf(s->grow_id[attempt], sizeof(s->grow_id[attempt]), "%s", id.c_str());
  s->id_ready.store(attempt + 1);
}

// The grow id of `attempt` once published, or an empty string after `limit`.
std::string AwaitId(Shared* s, int attempt, Millis limit = Millis(60000)) {
  const auto until = Clock::now() + limit;
  while (s->id_ready.load() <= attempt) {
    if (Clock::now() >= until) return "";
    usleep(2000);
  }
  return s->grow_id[attempt];
}

bool AwaitCount(std::atomic<int>& v, int at_least, Millis limit = Millis(60000)) {
  const auto until = Clock::now() + limit;
  while (v.load() < at_least) {
    if (Clock::now() >= until) return false;
    usleep(2000);
  }
  return true;
}

// The state a joiner missed, as the training loop hands it over: step and parameters, sent by
// the new group's rank 0 (a member) to everyone.
constexpr size_t kStateCount = 50000;
float StateValue(int step, size_t i) {
  return static_cast<float>(step) * 0.5f + static_cast<float>(i % 977);
}

Status TakeState(Communicator& comm, int step_on_members, RankReporter& rep) {
  std::vector<float> mine(kStateCount + 1, -1.0f), state(kStateCount + 1, -1.0f);
  if (comm.rank() == 0) {
    mine[0] = static_cast<float>(step_on_members);
    for (size_t i = 0; i < kStateCount; ++i) mine[i + 1] = StateValue(step_on_members, i);
  }
  Status st = comm.Broadcast(mine.data(), state.data(), state.size(), DataType::kF32, 0);
  if (!st.ok()) return st.WithContext("state broadcast");
  const int step = static_cast<int>(state[0]);
  rep.Value("state_step", step);
  size_t wrong = 0;
  for (size_t i = 0; i < kStateCount; ++i) wrong += state[i + 1] != StateValue(step, i);
  if (step != step_on_members || wrong != 0) {
    rep.Fail("state after the grow: step " + std::to_string(step) + " (expected " +
             std::to_string(step_on_members) + "), " + std::to_string(wrong) + " wrong values");
  }
  return Status::Ok();
}

// Every collective once, results checked; the roots alternate between the joiner (last rank)
// and rank 0 so that a renumbering mistake shows.
Status RunEveryCollective(Communicator& comm, RankReporter& rep) {
  const CollKind kinds[] = {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter,
                            CollKind::kBroadcast, CollKind::kReduce,    CollKind::kAllToAll,
                            CollKind::kBroadcast, CollKind::kReduce,    CollKind::kBarrier};
  uint64_t salt = 11;
  int checked = 0;
  for (CollKind kind : kinds) {
    CollCase c;
    c.kind = kind;
    c.dt = DataType::kF32;
    c.op = ReduceOp::kSum;
    c.root = (salt % 2 == 0) ? 0 : comm.size() - 1;
    c.count = kind == CollKind::kBarrier ? 0 : 70001;
    c.salt = ++salt;
    bool correct = false;
    rep.Progress("after the grow: " + c.Name());
    Status st = RunAndCheck(comm, c, rep, &correct);
    if (!st.ok()) return st.WithContext("after the grow: " + c.Name());
    if (!correct && kind != CollKind::kBarrier) {
      rep.Fail("after the grow: " + c.Name() + " gave a wrong result");
    } else {
      ++checked;
    }
  }
  rep.Value("checked", checked);
  return Status::Ok();
}

struct GrowCase {
  int size = 4;
  int victim = 3;
};

void PrintTo(const GrowCase& c, std::ostream* os) {
  *os << RanksTag(c.size) << "_victim" << c.victim;
}

class GrowTest : public ::testing::TestWithParam<GrowCase> {};

// Processes 0..size-1 are the communicator's ranks; process `size` is the victim's replacement.
TEST_P(GrowTest, ShrinkThenGrowBackAndEveryCollectiveIsExactOnTheFullGroup) {
  const GrowCase tc = GetParam();
  SharedPage page;
  ASSERT_NE(page.get(), nullptr) << "mmap failed";
  Shared* shared = page.get();
  CommLaunch launch;
  launch.size = tc.size + 1;
  launch.op_timeout = Millis(15000);
  launch.wall_limit = std::chrono::seconds(120);
  launch.configure = [&](CommOptions& o) {
    o.size = tc.size;
    o.chunk_bytes = 64 * 1024;
    o.abort_timeout = Millis(1000);
  };
  constexpr int kStepsBefore = 5;
  LaunchResult result =
      LaunchWithOptions(launch, [&](const CommOptions& options, RankReporter& rep) {
        if (options.rank == tc.size) {
          // The replacement: joins as the last rank of the grown group.
          const std::string id = AwaitId(shared, 0);
          if (id.empty()) {
            rep.Fail("no grow id was published");
            return 1;
          }
          CommOptions o = options;
          o.rank = tc.size - 1;
          o.size = 0;
          const auto start = Clock::now();
          rep.Progress("Join");
          auto joined = Communicator::Join(o, id);
          if (!joined.ok()) {
            rep.Fail("Join: " + joined.status().ToString());
            return 1;
          }
          rep.Value("join_ms", MillisSince(start));
          rep.Value("new_rank", joined.value()->rank());
          rep.Value("new_size", joined.value()->size());
          Status st = TakeState(*joined.value(), kStepsBefore, rep);
          if (st.ok()) st = RunEveryCollective(*joined.value(), rep);
          if (!st.ok()) rep.Fail(st.ToString());
          return rep.failed() ? 1 : 0;
        }
        auto created = Communicator::Create(options);
        if (!created.ok()) {
          rep.Fail("Create: " + created.status().ToString());
          return 1;
        }
        Communicator& comm = *created.value();
        std::vector<float> send(1 << 18, 1.0f), recv(send.size());
        // A few steps on the full group, then the victim dies.
        Status failed;
        for (int i = 0; i < 200 && failed.ok(); ++i) {
          if (comm.rank() == tc.victim && i == kStepsBefore) kill(getpid(), SIGKILL);
          failed =
              comm.AllReduce(send.data(), recv.data(), send.size(), DataType::kF32, ReduceOp::kSum);
        }
        if (failed.ok()) {
          rep.Fail("no collective failed after the victim died");
          return 1;
        }
        auto shrunk = comm.Shrink({tc.victim}, Millis(10000));
        if (!shrunk.ok()) {
          rep.Fail("Shrink: " + shrunk.status().ToString());
          return 1;
        }
        Communicator& small = *shrunk.value();
        Status st =
            small.AllReduce(send.data(), recv.data(), send.size(), DataType::kF32, ReduceOp::kSum);
        if (!st.ok() || recv[0] != static_cast<float>(tc.size - 1)) {
          rep.Fail("the shrunk group's allreduce: " + st.ToString());
          return 1;
        }
        const int shrunk_rank = small.rank();
        if (shrunk_rank == 0) {
          auto id = small.GrowId(tc.size);
          if (!id.ok()) {
            rep.Fail("GrowId: " + id.status().ToString());
            return 1;
          }
          Publish(shared, 0, id.value());
        }
        const std::string id = AwaitId(shared, 0);
        const auto start = Clock::now();
        rep.Progress("Grow");
        auto grown = small.Grow(id, Millis(10000));
        if (!grown.ok()) {
          rep.Fail("Grow: " + grown.status().ToString());
          return 1;
        }
        rep.Value("grow_ms", MillisSince(start));
        rep.Value("new_rank", grown.value()->rank());
        rep.Value("new_size", grown.value()->size());
        if (grown.value()->rank() != shrunk_rank) rep.Fail("a member changed its rank in the grow");
        shrunk.value().reset();  // the shrunk group is done once the grown one is ready
        st = TakeState(*grown.value(), kStepsBefore, rep);
        if (st.ok()) st = RunEveryCollective(*grown.value(), rep);
        if (!st.ok()) rep.Fail(st.ToString());
        return rep.failed() ? 1 : 0;
      });
  ASSERT_EQ(result.ranks.size(), static_cast<size_t>(tc.size + 1)) << result.Describe();
  EXPECT_FALSE(result.timed_out) << result.Describe();
  EXPECT_EQ(result.ranks[tc.victim].term_signal, SIGKILL) << result.Describe();
  int64_t grow_ms = 0;
  for (int p = 0; p <= tc.size; ++p) {
    if (p == tc.victim) continue;
    const RankOutcome& o = result.ranks[p];
    EXPECT_TRUE(o.ok()) << "process " << p << "\n" << result.Describe();
    EXPECT_EQ(o.value("new_size"), tc.size) << result.Describe();
    EXPECT_EQ(o.value("state_step"), kStepsBefore) << result.Describe();
    EXPECT_EQ(o.value("checked"), 9) << result.Describe();
    grow_ms = std::max(grow_ms, o.value("grow_ms", 0));
  }
  EXPECT_EQ(result.ranks[tc.size].value("new_rank"), tc.size - 1) << result.Describe();
  std::printf(
      "grow of %d ranks to %d: %lld ms (slowest member, Grow called to the new "
      "communicator ready; the joiner's Join took %lld ms)\n",
      tc.size - 1, tc.size, static_cast<long long>(grow_ms),
      static_cast<long long>(result.ranks[tc.size].value("join_ms")));
}

INSTANTIATE_TEST_SUITE_P(All, GrowTest,
                         ::testing::Values(GrowCase{2, 1}, GrowCase{4, 3}, GrowCase{4, 1},
                                           GrowCase{3, 0}, GrowCase{8, 5}),
                         [](const ::testing::TestParamInfo<GrowCase>& info) {
                           std::ostringstream os;
                           PrintTo(info.param, &os);
                           return os.str();
                         });

// Members 0-2 grow to 4; the first joiner dies before it joins (its host failed again). Every
// member's Grow fails with kTimeout naming the missing rank, within its timeout plus a margin;
// the parent still gives exact results, and a second grow (a new id) with another joiner
// succeeds. (A joiner that dies after its hello: grow_id_test.cc, which can stop a joiner
// there.)
TEST(GrowFailureTest, AJoinerThatNeverComesFailsTheGrowInBoundedTimeAndTheParentGoesOn) {
  SharedPage page;
  ASSERT_NE(page.get(), nullptr);
  Shared* shared = page.get();
  constexpr int kMembers = 3;
  constexpr int kGrowTimeoutMs = 3000;
  CommLaunch launch;
  launch.size = kMembers + 2;
  launch.wall_limit = std::chrono::seconds(90);
  launch.configure = [](CommOptions& o) { o.size = kMembers; };
  LaunchResult result =
      LaunchWithOptions(launch, [&](const CommOptions& options, RankReporter& rep) {
        if (options.rank == kMembers) {
          // Dies once the members are in Grow, before it joins.
          if (!AwaitCount(shared->growing, kMembers)) return 1;
          kill(getpid(), SIGKILL);
          return 1;
        }
        if (options.rank == kMembers + 1) {
          const std::string id = AwaitId(shared, 1);
          CommOptions o = options;
          o.rank = kMembers;
          o.size = kMembers + 1;
          auto joined = Communicator::Join(o, id);
          if (!joined.ok()) {
            rep.Fail("second Join: " + joined.status().ToString());
            return 1;
          }
          Status st = RunEveryCollective(*joined.value(), rep);
          if (!st.ok()) rep.Fail(st.ToString());
          return rep.failed() ? 1 : 0;
        }
        auto created = Communicator::Create(options);
        if (!created.ok()) {
          rep.Fail("Create: " + created.status().ToString());
          return 1;
        }
        Communicator& comm = *created.value();
        for (int attempt = 0; attempt < 2; ++attempt) {
          if (comm.rank() == 0) {
            auto id = comm.GrowId(kMembers + 1);
            if (!id.ok()) {
              rep.Fail("GrowId: " + id.status().ToString());
              return 1;
            }
            Publish(shared, attempt, id.value());
          }
          const std::string id = AwaitId(shared, attempt);
          if (attempt == 0) shared->growing.fetch_add(1);
          const auto start = Clock::now();
          auto grown = comm.Grow(id, Millis(kGrowTimeoutMs));
          const int64_t ms = MillisSince(start);
          if (attempt == 0) {
            rep.Value("failed_grow_ms", ms);
            rep.Value("failed_grow_code", grown.ok() ? 0 : static_cast<int>(grown.status().code()));
            rep.Progress(grown.ok() ? "the first grow succeeded" : grown.status().ToString());
            if (grown.ok()) {
              rep.Fail("the grow succeeded although its joiner died");
              return 1;
            }
            if (grown.status().code() != Code::kTimeout ||
                grown.status().message().find("missing ranks: 3") == std::string::npos) {
              rep.Fail("unclear failure of the grow: " + grown.status().ToString());
            }
            if (comm.revoked()) rep.Fail("a failed grow revoked the parent");
            // The parent still works, exactly.
            CollCase c;
            c.count = 4096;
            bool correct = false;
            Status st = RunAndCheck(comm, c, rep, &correct);
            if (!st.ok() || !correct)
              rep.Fail("the parent after the failed grow: " + st.ToString());
            rep.Value("parent_ok", st.ok() && correct ? 1 : 0);
            continue;
          }
          if (!grown.ok()) {
            rep.Fail("the second grow: " + grown.status().ToString());
            return 1;
          }
          rep.Value("new_size", grown.value()->size());
          Status st = RunEveryCollective(*grown.value(), rep);
          if (!st.ok()) rep.Fail(st.ToString());
        }
        return rep.failed() ? 1 : 0;
      });
  EXPECT_FALSE(result.timed_out) << result.Describe();
  EXPECT_EQ(result.ranks[kMembers].term_signal, SIGKILL) << result.Describe();
  for (int r = 0; r < kMembers; ++r) {
    const RankOutcome& o = result.ranks[r];
    EXPECT_TRUE(o.ok()) << result.Describe();
    EXPECT_NE(o.value("failed_grow_code", 0), 0) << result.Describe();
    EXPECT_LT(o.value("failed_grow_ms"), kGrowTimeoutMs + 2500) << result.Describe();
    EXPECT_EQ(o.value("parent_ok"), 1) << result.Describe();
    EXPECT_EQ(o.value("new_size"), kMembers + 1) << result.Describe();
    EXPECT_EQ(o.value("checked"), 9) << result.Describe();
    std::printf("member %d: the grow without its joiner failed after %lld ms\n", r,
                static_cast<long long>(o.value("failed_grow_ms")));
  }
  EXPECT_TRUE(result.ranks[kMembers + 1].ok()) << result.Describe();
}

// Members 0-1 grow to 3. Before the real joiner comes, three liars try: one claims a member's
// rank, one holds an id for another size (consistent, but another group), one holds a tampered
// id. Each gets kInvalidArgument saying why; the real joiner is admitted and the group is
// exact.
TEST(GrowFailureTest, LyingJoinersGetAClearErrorAndTheGroupFormsWithoutThem) {
  SharedPage page;
  ASSERT_NE(page.get(), nullptr);
  Shared* shared = page.get();
  constexpr int kMembers = 2;
  CommLaunch launch;
  launch.size = kMembers + 4;
  launch.wall_limit = std::chrono::seconds(90);
  launch.configure = [](CommOptions& o) {
    o.size = kMembers;
    o.init_timeout = Millis(8000);
  };
  LaunchResult result =
      LaunchWithOptions(launch, [&](const CommOptions& options, RankReporter& rep) {
        const int p = options.rank;
        if (p >= kMembers) {
          const std::string id = AwaitId(shared, 0);
          const std::string other = AwaitId(shared, 1);
          if (!AwaitCount(shared->growing, kMembers)) return 1;
          CommOptions o = options;
          o.size = 0;
          std::string use = id;
          const int real = kMembers + 3;
          if (p == kMembers) {
            o.rank = 1;  // a member's rank
          } else if (p == kMembers + 1) {
            o.rank = kMembers + 1;  // an id for a group of 4, not 3
            use = other;
          } else if (p == kMembers + 2) {
            o.rank = kMembers;
            use = id.substr(0, id.size() - 1) + (id.back() == '0' ? "1" : "0");  // tampered key
          } else {
            o.rank = kMembers;
            if (!AwaitCount(shared->liars_done, 3)) return 1;
          }
          auto joined = Communicator::Join(o, use);
          if (p != real) {
            shared->liars_done.fetch_add(1);
            rep.Value("code", joined.ok() ? 0 : static_cast<int>(joined.status().code()));
            rep.Progress(joined.ok() ? "admitted" : joined.status().ToString());
            if (joined.ok()) rep.Fail("a lying joiner was admitted");
            return 0;
          }
          if (!joined.ok()) {
            rep.Fail("Join: " + joined.status().ToString());
            return 1;
          }
          rep.Value("new_size", joined.value()->size());
          Status st = RunEveryCollective(*joined.value(), rep);
          if (!st.ok()) rep.Fail(st.ToString());
          return rep.failed() ? 1 : 0;
        }
        auto created = Communicator::Create(options);
        if (!created.ok()) {
          rep.Fail("Create: " + created.status().ToString());
          return 1;
        }
        Communicator& comm = *created.value();
        if (comm.rank() == 0) {
          auto id = comm.GrowId(kMembers + 1);
          auto other = comm.GrowId(kMembers + 2);
          if (!id.ok() || !other.ok()) {
            rep.Fail("GrowId failed");
            return 1;
          }
          Publish(shared, 0, id.value());
          Publish(shared, 1, other.value());
        }
        const std::string id = AwaitId(shared, 0);
        shared->growing.fetch_add(1);
        auto grown = comm.Grow(id, Millis(15000));
        if (!grown.ok()) {
          rep.Fail("Grow: " + grown.status().ToString());
          return 1;
        }
        rep.Value("new_size", grown.value()->size());
        Status st = RunEveryCollective(*grown.value(), rep);
        if (!st.ok()) rep.Fail(st.ToString());
        return rep.failed() ? 1 : 0;
      });
  EXPECT_FALSE(result.timed_out) << result.Describe();
  for (int p : {0, 1, kMembers + 3}) {
    EXPECT_TRUE(result.ranks[p].ok()) << result.Describe();
    EXPECT_EQ(result.ranks[p].value("new_size"), kMembers + 1) << result.Describe();
    EXPECT_EQ(result.ranks[p].value("checked"), 9) << result.Describe();
  }
  const char* why[] = {"is not a joiner's rank", "another group", "inconsistent"};
  for (int i = 0; i < 3; ++i) {
    const RankOutcome& o = result.ranks[kMembers + i];
    EXPECT_TRUE(o.ok()) << result.Describe();
    EXPECT_EQ(o.value("code"), static_cast<int>(Code::kInvalidArgument)) << result.Describe();
    EXPECT_NE(o.last_progress.find(why[i]), std::string::npos)
        << "liar " << i << ": " << o.last_progress;
  }
}

}  // namespace
}  // namespace ftccl::test
