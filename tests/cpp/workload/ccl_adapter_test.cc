// The one CCL adapter layer: each adapter built here joins a group of 2 real rank processes
// over loopback, runs checked collectives, a barrier and Finish; ftccl also hands on its
// counters; Abort makes later calls fail; the registry refuses unknown names and options an
// adapter does not have.
#include "workload/adapters/ccl_adapter.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "base/clock.h"
#include "ftccl/version.h"
#include "runner/exec/launcher.h"
#include "workload/check_values.h"

namespace faultline::workload::adapters {
namespace {

using std::chrono::milliseconds;

TEST(CclAdapterRegistryTest, KnowsItsAdaptersAndRefusesOthers) {
  const std::vector<std::string> built = AvailableCcls();
  ASSERT_FALSE(built.empty());
  EXPECT_EQ(built.front(), "ftccl");
  for (const std::string& name : built) {
    auto a = CreateCclAdapter(name);
    ASSERT_TRUE(a.ok()) << name;
    EXPECT_EQ((*a)->Name(), name);
  }
  auto mpi = CreateCclAdapter("mpi");
  EXPECT_EQ(mpi.status().code(), Code::kInvalidArgument);
  EXPECT_NE(mpi.status().message().find("built: ftccl"), std::string::npos)
      << mpi.status().ToString();
}

// The version each library reports about itself goes into report.json: never empty for the
// adapters built here, "MAJOR.MINOR.PATCH" first, and for ftccl the library's own.
TEST(CclAdapterRegistryTest, EveryAdapterSaysItsLibrarysVersion) {
  const std::regex semver(R"(^[0-9]+\.[0-9]+\.[0-9]+( \(.+\))?$)");
  for (const std::string& name : AvailableCcls()) {
    auto a = CreateCclAdapter(name);
    ASSERT_TRUE(a.ok()) << name;
    const std::string v = (*a)->Version();
    EXPECT_TRUE(std::regex_match(v, semver)) << name << ": '" << v << "'";
    if (name == "ftccl") {
      EXPECT_EQ(v, ftccl::Version());
      EXPECT_EQ(v, std::to_string(FTCCL_VERSION_MAJOR) + "." + std::to_string(FTCCL_VERSION_MINOR) +
                       "." + std::to_string(FTCCL_VERSION_PATCH));
    }
#ifdef FAULTLINE_GLOO_PACKAGE
    if (name == "gloo") {
      EXPECT_NE(v.find(std::string(" (") + FAULTLINE_GLOO_PACKAGE + ")"), std::string::npos) << v;
    }
#endif
    if (name == "nccl") {
      EXPECT_EQ(v.rfind("2.", 0), 0u) << v;  // NCCL 2.x
    }
  }
}

TEST(CclAdapterRegistryTest, RefusesOptionsTheLibraryHasNot) {
  CclInit init;
  init.size = 1;
  init.rails = {"127.0.0.1"};
  init.store_dir = "/nonexistent";
  init.allreduce_algorithm = "ring";
  auto ftccl = CreateCclAdapter("ftccl");
  ASSERT_TRUE(ftccl.ok());
  EXPECT_EQ((*ftccl)->Init(init).code(), Code::kInvalidArgument);
  auto gloo = CreateCclAdapter("gloo");
  if (gloo.ok()) {
    init.allreduce_algorithm = "no-such-algorithm";
    EXPECT_EQ((*gloo)->Init(init).code(), Code::kInvalidArgument);
    init.allreduce_algorithm.clear();
    init.fault_hook = "/tmp/x.hook";
    EXPECT_EQ((*gloo)->Init(init).code(), Code::kInvalidArgument);
  }
}

// One rank: joins, runs checked collectives, a barrier, then Abort or Finish. Returns 0 when
// everything held, else the number of the step that failed (the test names it).
int RankBody(const std::string& ccl, int rank, const std::string& bootstrap, int listen_fd,
             const std::string& store, bool abort) {
  auto created = CreateCclAdapter(ccl);
  if (!created.ok()) return 1;
  CclAdapter& a = **created;
  CclInit init;
  init.rank = rank;
  init.size = 2;
  init.bootstrap = bootstrap;
  init.bootstrap_listen_fd = rank == 0 ? listen_fd : -1;
  init.rails = {"127.0.1." + std::to_string(rank + 1), "127.0.2." + std::to_string(rank + 1)};
  init.store_dir = store;
  init.init_timeout = milliseconds(20000);
  init.op_timeout = milliseconds(20000);
  const bool joined = a.Init(init).ok();
  close(listen_fd);  // the adapter keeps its own copy
  if (!joined) return 2;
  for (Coll coll : {Coll::kAllReduce, Coll::kAllGather, Coll::kAllToAll}) {
    CheckSpec spec;
    spec.coll = coll;
    spec.ranks = 2;
    const SizeLayout l = LayoutFor(coll, DType::kF32, 2, 64 << 10);
    std::vector<float> send(l.send_elems), recv(l.recv_elems);
    FillInput(spec, l, rank, send.data());
    PoisonOutput(spec, l, recv.data());
    OpArgs args;
    args.coll = coll;
    args.send = send.data();
    args.recv = recv.data();
    args.count = l.count;
    if (!a.Prepare(args).ok()) return 3;
    if (!a.Run(args, milliseconds(20000)).ok()) return 4;
    if (CountWrong(spec, l, rank, recv.data()) != 0) return 5;
  }
  if (!a.Barrier(milliseconds(20000)).ok()) return 6;
  if (ccl == "ftccl") {
    bool sent = false;
    for (const auto& [name, value] : a.Stats()) sent |= name == "data_frames_sent" && value > 0;
    if (!sent) return 7;
  }
  if (abort) {
    a.Abort("the test is done");
    float one = 1, out = 0;
    OpArgs args;
    args.send = &one;
    args.recv = &out;
    args.count = 1;
    if (a.Run(args, milliseconds(2000)).ok()) return 8;
    return 0;
  }
  return a.Finish(milliseconds(20000)).ok() ? 0 : 9;
}

class CclAdapterGroupTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(CclAdapterGroupTest, TwoRanksRunCheckedCollectives) {
  // Plain copies: a lambda may not capture structured bindings before C++20's P1091 (clang 14).
  const std::string ccl = std::get<0>(GetParam());
  const bool abort = std::get<1>(GetParam());
  if (!CreateCclAdapter(ccl).ok()) GTEST_SKIP() << ccl << " is not built here";
  char tmpl[] = "/tmp/faultline_adapter_test_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string store = tmpl;
  // Rank 0's bootstrap listener, bound here so that no rank can connect before it listens.
  const int listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listen_fd, 16), 0);
  ASSERT_EQ(getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string bootstrap = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  auto launcher = runner::LocalNetnsLauncher::Create({""}, "");
  ASSERT_TRUE(launcher.ok());
  std::vector<runner::LaunchSpec> world(2);
  for (int r = 0; r < 2; ++r) {
    world[r].placement.global_rank = r;
    world[r].body = [&, r](int) { return RankBody(ccl, r, bootstrap, listen_fd, store, abort); };
  }
  ASSERT_TRUE((*launcher)->StartWorld(world).ok());
  close(listen_fd);
  runner::WaitAllReport report = (*launcher)->WaitAll(MonoNow() + 60'000'000'000LL);
  EXPECT_FALSE(report.hung());
  for (int r = 0; r < 2; ++r) {
    // The exit code names the step that failed (see RankBody).
    EXPECT_TRUE(report.statuses[r].success())
        << "rank " << r << ": " << report.statuses[r].ToString();
  }
  std::error_code ec;
  std::filesystem::remove_all(store, ec);
}

INSTANTIATE_TEST_SUITE_P(Adapters, CclAdapterGroupTest,
                         ::testing::Combine(::testing::Values("ftccl", "gloo"), ::testing::Bool()),
                         [](const auto& info) {
                           return std::get<0>(info.param) +
                                  (std::get<1>(info.param) ? "_abort" : "_finish");
                         });

// Grow through the adapter: 3 ranks; rank 2 leaves (Abort), ranks 0-1 shrink without it, then
// rank 2 comes back with a fresh adapter (as a relaunched process would) and joins the grown
// group through the id rank 0 wrote; a checked allreduce on the 3 ranks, and the events and
// ranks stay in the original numbers. Returns 0 or the number of the step that failed.
int GrowBody(int rank, const std::string& bootstrap, int listen_fd, const std::string& dir) {
  auto init_of = [&](int r) {
    CclInit init;
    init.rank = r;
    init.size = 3;
    init.bootstrap = bootstrap;
    init.bootstrap_listen_fd = r == 0 ? listen_fd : -1;
    init.rails = {"127.0.1." + std::to_string(r + 1), "127.0.2." + std::to_string(r + 1)};
    init.init_timeout = milliseconds(20000);
    init.op_timeout = milliseconds(20000);
    return init;
  };
  auto checked_allreduce = [](CclAdapter& a, int group_rank, int group_size) {
    CheckSpec spec;
    spec.coll = Coll::kAllReduce;
    spec.ranks = group_size;
    const SizeLayout l = LayoutFor(Coll::kAllReduce, DType::kF32, group_size, 64 << 10);
    std::vector<float> send(l.send_elems), recv(l.recv_elems);
    FillInput(spec, l, group_rank, send.data());
    PoisonOutput(spec, l, recv.data());
    OpArgs args;
    args.coll = Coll::kAllReduce;
    args.send = send.data();
    args.recv = recv.data();
    args.count = l.count;
    if (!a.Prepare(args).ok() || !a.Run(args, milliseconds(20000)).ok()) return false;
    return CountWrong(spec, l, group_rank, recv.data()) == 0;
  };
  const std::string id_file = dir + "/grow_id";
  auto created = CreateCclAdapter("ftccl");
  if (!created.ok()) return 1;
  std::unique_ptr<CclAdapter> a = std::move(created).value();
  const bool joined = a->Init(init_of(rank)).ok();
  close(listen_fd);
  if (!joined) return 2;
  if (!a->CanGrow()) return 3;
  if (!checked_allreduce(*a, rank, 3)) return 4;
  if (rank == 2) {
    a->Abort("leaving for a repair");
    a.reset();
    std::string id;
    for (int i = 0; i < 20000 && id.empty(); ++i) {
      FILE* f = std::fopen(id_file.c_str(), "r");
      char buf[200] = {};
      if (f != nullptr) {
        if (std::fgets(buf, sizeof(buf), f) != nullptr) id = buf;
        std::fclose(f);
      }
      if (id.empty()) usleep(1000);
    }
    if (id.empty()) return 5;
    auto fresh = CreateCclAdapter("ftccl");
    if (!fresh.ok()) return 6;
    a = std::move(fresh).value();
    if (!a->JoinGrown(init_of(2), id, {0, 1, 2}).ok()) return 7;
  } else {
    if (!a->Shrink({2}, milliseconds(10000)).ok()) return 8;
    if (!checked_allreduce(*a, rank, 2)) return 9;
    if (rank == 0) {
      auto id = a->GrowId({2});
      if (!id.ok()) return 10;
      const std::string tmp = id_file + ".tmp";
      FILE* f = std::fopen(tmp.c_str(), "w");
      if (f == nullptr) return 11;
      std::fputs(id.value().c_str(), f);
      std::fclose(f);
      if (std::rename(tmp.c_str(), id_file.c_str()) != 0) return 11;
    }
    std::string id;
    for (int i = 0; i < 20000 && id.empty(); ++i) {
      FILE* f = std::fopen(id_file.c_str(), "r");
      char buf[200] = {};
      if (f != nullptr) {
        if (std::fgets(buf, sizeof(buf), f) != nullptr) id = buf;
        std::fclose(f);
      }
      if (id.empty()) usleep(1000);
    }
    if (!a->Grow(id, {2}, milliseconds(10000)).ok()) return 12;
  }
  if (!checked_allreduce(*a, rank, 3)) return 13;
  // Rank 2 is a member again: growing by it is refused before anything happens, even with an
  // id that would start a real grow.
  auto again = a->GrowId({2});
  if (!again.ok()) return 15;
  if (a->Grow(again.value(), {2}, milliseconds(1000)).code() != Code::kInvalidArgument) return 16;
  return a->Finish(milliseconds(20000)).ok() ? 0 : 14;
}

TEST(CclAdapterGrowTest, ALeftOutRankRejoinsThroughGrowAndTheFullGroupIsExact) {
  char tmpl[] = "/tmp/faultline_adapter_grow_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const int listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listen_fd, 16), 0);
  ASSERT_EQ(getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string bootstrap = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  auto launcher = runner::LocalNetnsLauncher::Create({""}, "");
  ASSERT_TRUE(launcher.ok());
  std::vector<runner::LaunchSpec> world(3);
  for (int r = 0; r < 3; ++r) {
    world[r].placement.global_rank = r;
    world[r].body = [&, r](int) { return GrowBody(r, bootstrap, listen_fd, dir); };
  }
  ASSERT_TRUE((*launcher)->StartWorld(world).ok());
  close(listen_fd);
  runner::WaitAllReport report = (*launcher)->WaitAll(MonoNow() + 60'000'000'000LL);
  EXPECT_FALSE(report.hung());
  for (int r = 0; r < 3; ++r) {
    // The exit code names the step that failed (see GrowBody).
    EXPECT_TRUE(report.statuses[r].success()) << "rank " << r << ": " << report.statuses[r].ToString();
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace faultline::workload::adapters
