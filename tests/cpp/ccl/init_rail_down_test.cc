// A rail down when the communicator starts: the job must start on the rails that work instead
// of waiting out init_timeout, and take the rail up once it works. Three ranks on two rails;
// rail 1 of rank 1 is cut off before the ranks start by an nftables table of this test that
// drops every packet to that address (a SYN to it, and the SYN-ACK of its own connects), as a
// dead NIC port would. Every rank must be ready well within init_timeout, see the missing
// paths as down from the start, compute exactly over rail 0, and, once rank 0 has deleted the
// table, see rank 1's rail-1 paths come up (set up by the higher rank of each pair) and carry
// collectives again.
#include <gtest/gtest.h>
#include <nftables/libnftables.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "collective_check.h"
#include "ftccl/ftccl.h"
#include "injector/nft.h"
#include "rank_launcher.h"

namespace ftccl::test {
namespace {

constexpr int kRanks = 3;
constexpr int kCutRank = 1;
constexpr Millis kInitTimeout{20000};

// This test's own rail-1 addresses (127.0.3.x): no other test uses them, so the drop rule
// touches nothing else running at the same time.
std::string OwnRail1(int rank) { return "127.0.3." + std::to_string(10 + rank); }

// nft commands in this process's own network namespace (libnftables); "" or nft's error.
std::string Nft(const std::string& commands) {
  nft_ctx* ctx = nft_ctx_new(NFT_CTX_DEFAULT);
  if (ctx == nullptr) return "nft_ctx_new failed";
  nft_ctx_buffer_output(ctx);
  nft_ctx_buffer_error(ctx);
  std::string err;
  if (nft_run_cmd_from_buffer(ctx, commands.c_str()) != 0) {
    err = nft_ctx_get_error_buffer(ctx);
    if (err.empty()) err = "nft failed";
  }
  nft_ctx_free(ctx);
  return err;
}

// The nftables table of this test; deleted when the test ends, whatever happened.
class CutTable {
 public:
  CutTable() : name_(faultline::NewNftTableName("initrail")) {}
  ~CutTable() { Delete(); }
  const std::string& name() const { return name_; }
  // "" when it is gone (or was never made).
  std::string Delete() const {
    const std::string err = Nft("delete table ip " + name_);
    return err.find("No such file or directory") != std::string::npos ? "" : err;
  }

 private:
  std::string name_;
};

// Whether this rank has seen every path of rail 1 to/from kCutRank down, and up again.
struct Rail1View {
  int down_at_init = 0;
  int up = 0;
};

void Note(Communicator& comm, Rail1View* v) {
  for (const Event& e : comm.DrainEvents()) {
    if (e.rail != 1 || (comm.rank() != kCutRank && e.peer != kCutRank)) continue;
    if (e.kind == EventKind::kPathDown && e.reason == "not connected at init") ++v->down_at_init;
    if (e.kind == EventKind::kPathUp) ++v->up;
  }
}

TEST(InitRailDownTest, StartsOnTheRailsThatWorkAndTakesTheRailUpWhenItWorks) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for nftables";
  CutTable table;
  const std::string made =
      Nft("add table ip " + table.name() + "\n" + "add chain ip " + table.name() +
          " out { type filter hook output priority 0; }\n" + "add rule ip " + table.name() +
          " out ip daddr " + OwnRail1(kCutRank) + " drop\n");
  ASSERT_EQ(made, "") << "cannot cut the rail with nftables";
  CommLaunch launch;
  launch.size = kRanks;
  launch.init_timeout = kInitTimeout;
  launch.op_timeout = Millis(10000);
  launch.wall_limit = std::chrono::seconds(60);
  launch.configure = [](CommOptions& o) {
    o.rails[1] = OwnRail1(o.rank);
    o.init_path_grace = Millis(500);
  };
  const auto launched = std::chrono::steady_clock::now();
  LaunchResult result = LaunchCommunicators(launch, [&](Communicator& comm, RankReporter& rep) {
    rep.Value("ready_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - launched)
                              .count());
    Rail1View v;
    Note(comm, &v);
    rep.Value("down_at_init", v.down_at_init);
    // Four checked allreduces of `base` + i elements.
    int ops = 0;
    auto four = [&](size_t base, uint64_t salt, const std::string& when) -> Status {
      for (int i = 0; i < 4; ++i, ++ops) {
        CollCase c;
        c.count = base + static_cast<size_t>(i);
        c.salt = salt + static_cast<uint64_t>(i);
        bool correct = false;
        rep.Progress("collective " + std::to_string(i) + " " + when);
        FTCCL_RETURN_IF_ERROR(RunAndCheck(comm, c, rep, &correct));
      }
      return Status::Ok();
    };
    // Exact over rail 0 while rail 1 of rank 1 is cut.
    FTCCL_RETURN_IF_ERROR(four(size_t{1} << 18, 100, "with rail 1 cut"));
    if (comm.rank() == 0) {
      const std::string err = table.Delete();
      if (!err.empty()) rep.Fail("deleting the table: " + err);
    }
    // Until every rank has seen its rail-1 paths of rank 1 up (all ranks agree through a min
    // allreduce, so they run the same collectives), at most 500 rounds of 20 ms.
    const int want = comm.rank() == kCutRank ? kRanks - 1 : 1;
    int32_t all_up = 0;
    for (int round = 0; all_up == 0 && round < 500; ++round) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      Note(comm, &v);
      int32_t mine = v.up >= want ? 1 : 0;
      FTCCL_RETURN_IF_ERROR(comm.AllReduce(&mine, &all_up, 1, DataType::kI32, ReduceOp::kMin));
    }
    rep.Value("rail1_up", v.up);
    rep.Value("all_up", all_up);
    auto rail1 = [&comm]() -> uint64_t {
      const CommStats s = comm.Stats();
      return s.payload_bytes_sent_per_rail.size() > 1 ? s.payload_bytes_sent_per_rail[1] : 0;
    };
    const uint64_t rail1_before = rail1();
    FTCCL_RETURN_IF_ERROR(four(size_t{1} << 20, 200, "with rail 1 back"));
    const uint64_t rail1_after = rail1();
    rep.Value("rail1_bytes_after", static_cast<int64_t>(rail1_after - rail1_before));
    rep.Value("ops", ops);
    return Status::Ok();
  });
  ASSERT_FALSE(result.timed_out) << result.Describe();
  ASSERT_TRUE(result.AllOk()) << result.Describe();
  for (const RankOutcome& r : result.ranks) {
    // Started after the grace, not after init_timeout.
    EXPECT_LT(r.value("ready_ms"), kInitTimeout.count() / 2) << "rank " << r.rank;
    // Rank 1 misses its rail-1 path to each peer; each peer misses its path to rank 1.
    EXPECT_EQ(r.value("down_at_init"), r.rank == kCutRank ? kRanks - 1 : 1) << "rank " << r.rank;
    EXPECT_EQ(r.value("all_up"), 1) << "rail 1 of rank 1 should be set up once it works\n"
                                    << result.Describe();
    EXPECT_EQ(r.value("ops"), 8);
  }
  // Rail 1 carries rank 1's traffic again.
  EXPECT_GT(result.ranks[kCutRank].value("rail1_bytes_after"), 0) << result.Describe();
}

}  // namespace
}  // namespace ftccl::test
