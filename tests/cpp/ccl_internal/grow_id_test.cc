// The grow id (src/grow_id.h): it round-trips, every field is checked, a key that does not
// match its fields is refused, and the keys of two grows differ. Then the root's admission
// rules that a joiner cannot reach through the public API (which checks its rank first): a
// process that holds the joiners' key but claims a member's rank is refused on its connection
// only, and the group forms with the real joiner.
#include "grow_id.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "bootstrap.h"
#include "ftccl/communicator.h"
#include "rank_launcher.h"

namespace ftccl {
namespace {

GrowTicket Ticket() {
  GrowTicket t;
  t.comm_id = 0x0123456789abcdefull;
  t.epoch = 2;
  t.old_size = 3;
  t.new_size = 4;
  t.root = *net::ParseEndpoint("127.0.0.1:4567");
  t.key = GrowKey(t.comm_id, t.epoch, t.old_size, t.new_size);
  return t;
}

TEST(GrowIdTest, RoundTrips) {
  const GrowTicket t = Ticket();
  auto p = ParseGrowId(t.ToString());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->comm_id, t.comm_id);
  EXPECT_EQ(p->epoch, 2u);
  EXPECT_EQ(p->old_size, 3);
  EXPECT_EQ(p->new_size, 4);
  EXPECT_EQ(p->root.ToString(), "127.0.0.1:4567");
  EXPECT_EQ(p->key, t.key);
}

TEST(GrowIdTest, KeysDifferByEveryInputAndJoinersHoldAnother) {
  const uint64_t k = GrowKey(1, 1, 3, 4);
  EXPECT_NE(k, GrowKey(2, 1, 3, 4));
  EXPECT_NE(k, GrowKey(1, 2, 3, 4));
  EXPECT_NE(k, GrowKey(1, 1, 2, 4));
  EXPECT_NE(k, GrowKey(1, 1, 3, 5));
  EXPECT_NE(JoinerKey(k), k);
  EXPECT_NE(JoinerKey(k), 0u);
}

TEST(GrowIdTest, RefusesMalformedAndInconsistentIds) {
  const std::string good = Ticket().ToString();
  const std::string bad[] = {
      "",
      "ftccl-grow:2:" + good.substr(13),                                   // another version
      good.substr(0, good.rfind(':')),                                     // a field missing
      good + ":7",                                                         // a field too many
      good.substr(0, good.size() - 1) + (good.back() == '0' ? "1" : "0"),  // tampered key
  };
  for (const std::string& s : bad) {
    auto p = ParseGrowId(s);
    EXPECT_FALSE(p.ok()) << s;
    if (!p.ok()) {
      EXPECT_EQ(p.status().code(), Code::kInvalidArgument) << s;
    }
  }
  GrowTicket t = Ticket();
  t.new_size = t.old_size;  // not a grow
  t.key = GrowKey(t.comm_id, t.epoch, t.old_size, t.new_size);
  EXPECT_FALSE(ParseGrowId(t.ToString()).ok());
  t = Ticket();
  t.epoch = 0;
  t.key = GrowKey(t.comm_id, t.epoch, t.old_size, t.new_size);
  EXPECT_FALSE(ParseGrowId(t.ToString()).ok());
  auto tampered = ParseGrowId(bad[4]);
  ASSERT_FALSE(tampered.ok());
  EXPECT_NE(tampered.status().message().find("inconsistent"), std::string::npos);
}

struct Shared {
  std::atomic<int> ready{0};
  std::atomic<int> fake_done{0};
  char id[160] = {};
};

// Members 0-1 grow to 3. Process 2 holds the joiners' key but claims rank 1 (a member's);
// process 3 is the real joiner and comes after the refusal.
TEST(GrowAdmissionTest, AJoinerClaimingAMembersRankIsRefusedOnItsConnectionOnly) {
  void* mem =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  Shared* shared = new (mem) Shared();
  test::CommLaunch launch;
  launch.size = 4;
  launch.wall_limit = std::chrono::seconds(60);
  launch.configure = [](CommOptions& o) { o.size = 2; };
  auto await = [](std::atomic<int>& v, int n) {
    for (int i = 0; i < 30000 && v.load() < n; ++i) usleep(1000);
    return v.load() >= n;
  };
  test::LaunchResult result =
      test::LaunchWithOptions(launch, [&](const CommOptions& options, test::RankReporter& rep) {
        if (options.rank >= 2) {
          if (!await(shared->ready, 1)) return 1;
          const std::string id = shared->id;
          auto t = ParseGrowId(id);
          if (!t.ok()) return 1;
          if (options.rank == 2) {
            CommOptions o = options;
            o.rank = 1;
            o.size = 3;
            o.bootstrap = t->root.ToString();
            GroupKey lie;
            lie.key = JoinerKey(t->key);  // sent as if a member's key
            std::vector<net::Endpoint> rails(o.rails.size(), *net::ParseEndpoint("127.0.0.9:9"));
            auto b = Bootstrap::Join(o, rails, lie, Clock::now() + std::chrono::seconds(5));
            rep.Value("code", b.ok() ? 0 : static_cast<int>(b.status().code()));
            rep.Progress(b.ok() ? "admitted" : b.status().ToString());
            shared->fake_done = 1;
            return 0;
          }
          if (!await(shared->fake_done, 1)) return 1;
          CommOptions o = options;
          o.rank = 2;
          o.size = 0;
          auto joined = Communicator::Join(o, id);
          if (!joined.ok()) {
            rep.Fail("Join: " + joined.status().ToString());
            return 1;
          }
          rep.Value("new_size", joined.value()->size());
          std::vector<int32_t> v(1, 1), sum(1);
          Status st =
              joined.value()->AllReduce(v.data(), sum.data(), 1, DataType::kI32, ReduceOp::kSum);
          rep.Value("sum", st.ok() ? sum[0] : -1);
          return 0;
        }
        auto comm = Communicator::Create(options);
        if (!comm.ok()) return 1;
        if (options.rank == 0) {
          auto id = comm.value()->GrowId(3);
          if (!id.ok()) return 1;
          std::snprintf(shared->id, sizeof(shared->id), "%s", id.value().c_str());
          shared->ready = 1;
        }
        if (!await(shared->ready, 1)) return 1;
        auto grown = comm.value()->Grow(shared->id, Millis(15000));
        if (!grown.ok()) {
          rep.Fail("Grow: " + grown.status().ToString());
          return 1;
        }
        rep.Value("new_size", grown.value()->size());
        std::vector<int32_t> v(1, 1), sum(1);
        Status st =
            grown.value()->AllReduce(v.data(), sum.data(), 1, DataType::kI32, ReduceOp::kSum);
        rep.Value("sum", st.ok() ? sum[0] : -1);
        return 0;
      });
  munmap(mem, sizeof(Shared));
  EXPECT_FALSE(result.timed_out) << result.Describe();
  EXPECT_EQ(result.ranks[2].value("code"), static_cast<int>(Code::kInvalidArgument))
      << result.Describe();
  EXPECT_NE(result.ranks[2].last_progress.find("claimed rank 1"), std::string::npos)
      << result.ranks[2].last_progress;
  for (int p : {0, 1, 3}) {
    EXPECT_TRUE(result.ranks[p].ok()) << result.Describe();
    EXPECT_EQ(result.ranks[p].value("new_size"), 3) << result.Describe();
    EXPECT_EQ(result.ranks[p].value("sum"), 3) << result.Describe();
  }
}

// Members 0-2 grow to 4; the joiner gets through the bootstrap (hello sent, address table
// received) and dies before the connections are set up. Every member's Grow fails within its
// timeout plus a margin, and the parent still works.
TEST(GrowAdmissionTest, AJoinerThatDiesAfterItsHelloFailsTheGrowInBoundedTime) {
  void* mem =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  Shared* shared = new (mem) Shared();
  constexpr int kTimeoutMs = 3000;
  test::CommLaunch launch;
  launch.size = 4;
  launch.wall_limit = std::chrono::seconds(60);
  launch.configure = [](CommOptions& o) { o.size = 3; };
  auto await = [](std::atomic<int>& v, int n) {
    for (int i = 0; i < 30000 && v.load() < n; ++i) usleep(1000);
    return v.load() >= n;
  };
  test::LaunchResult result =
      test::LaunchWithOptions(launch, [&](const CommOptions& options, test::RankReporter& rep) {
        if (options.rank == 3) {
          if (!await(shared->ready, 1)) return 1;
          auto t = ParseGrowId(shared->id);
          if (!t.ok()) return 1;
          CommOptions o = options;
          o.size = 4;
          o.bootstrap = t->root.ToString();
          GroupKey group;
          group.key = t->key;
          group.joiner_key = JoinerKey(t->key);
          group.first_joiner = 3;
          // Listeners that exist, so that the members' dials are not refused at once: the joiner
          // is gone while they set up their connections.
          std::vector<net::Endpoint> rails;
          for (const std::string& r : o.rails) {
            auto ip = net::ResolveRailAddress(r);
            if (!ip.ok()) return 1;
            auto l = net::Listen(ip.value(), 0);
            if (!l.ok()) return 1;
            rails.push_back(l->second);
            l->first.Release();
          }
          auto b = Bootstrap::Join(o, rails, group, Clock::now() + std::chrono::seconds(10));
          if (!b.ok()) {
            rep.Fail("the joiner's bootstrap: " + b.status().ToString());
            return 1;
          }
          kill(getpid(), SIGKILL);
          return 1;
        }
        auto comm = Communicator::Create(options);
        if (!comm.ok()) return 1;
        if (options.rank == 0) {
          auto id = comm.value()->GrowId(4);
          if (!id.ok()) return 1;
          std::snprintf(shared->id, sizeof(shared->id), "%s", id.value().c_str());
          shared->ready = 1;
        }
        if (!await(shared->ready, 1)) return 1;
        const auto start = Clock::now();
        auto grown = comm.value()->Grow(shared->id, Millis(kTimeoutMs));
        rep.Value("grow_ms", test::MillisSince(start));
        rep.Value("code", grown.ok() ? 0 : static_cast<int>(grown.status().code()));
        rep.Progress(grown.ok() ? "grown" : grown.status().ToString());
        std::vector<int32_t> v(1, 1), sum(1);
        Status st =
            comm.value()->AllReduce(v.data(), sum.data(), 1, DataType::kI32, ReduceOp::kSum);
        rep.Value("parent_sum", st.ok() ? sum[0] : -1);
        return 0;
      });
  munmap(mem, sizeof(Shared));
  EXPECT_FALSE(result.timed_out) << result.Describe();
  EXPECT_EQ(result.ranks[3].term_signal, SIGKILL) << result.Describe();
  for (int r = 0; r < 3; ++r) {
    const test::RankOutcome& o = result.ranks[r];
    EXPECT_TRUE(o.ok()) << result.Describe();
    EXPECT_NE(o.value("code"), 0) << "member " << r << " grew with a dead joiner";
    EXPECT_LT(o.value("grow_ms"), kTimeoutMs + 2500) << result.Describe();
    EXPECT_EQ(o.value("parent_sum"), 3) << result.Describe();
    std::printf("member %d: grow with a joiner dead after its hello failed after %lld ms: %s\n", r,
                static_cast<long long>(o.value("grow_ms")), o.last_progress.c_str());
  }
}

}  // namespace
}  // namespace ftccl
