// The verbs transport: collectives over RC queue pairs, and recovery from a QP forced into the
// error state and from a rail's port going down. These run for real where RDMA devices carry
// the rail addresses below (the soft-RoCE lab, tests/rdma-lab/run, gives each rail a dummy
// netdev with an rxe device on it); elsewhere they skip and say why. The setup errors (no
// device for a rail, unknown transport) are checked everywhere.
//
// Failover latency: FailoverLatency.* inject 20 faults each (one per communicator, since a
// failed QP is not reconnected) and print p50/p99 of the time from the fault to the migration
// of the path's chunks and to the first acknowledgement after it.
#include <arpa/inet.h>
#include <execinfo.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <signal.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "collective_check.h"
#include "ftccl/ftccl.h"
#include "rank_launcher.h"
#include "transport/verbs/setup.h"

namespace ftccl::test {
namespace {

// A crashing rank prints its stack (the lab has no debugger): frames as binary(+offset).
void PrintStackAndDie(int sig) {
  void* frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  signal(sig, SIG_DFL);
  raise(sig);
}
const bool kStackOnCrash = [] {
  signal(SIGSEGV, PrintStackAndDie);
  signal(SIGABRT, PrintStackAndDie);
  return true;
}();

constexpr int kMaxRanks = 4;
constexpr int kRails = 2;

// The lab's rail addresses: rail r of rank k is 198.18.r.(10 + k).
std::string VerbsRail(int rank, int rail) {
  return "198.18." + std::to_string(rail) + "." + std::to_string(10 + rank);
}

// Empty when every rail address of up to kMaxRanks ranks is a RoCE v2 GID; else why not.
std::string NoRdmaReason() {
  if (!transport::verbs::Built()) return "ftccl was built without libibverbs";
  for (int rail = 0; rail < kRails; ++rail) {
    for (int rank = 0; rank < kMaxRanks; ++rank) {
      in_addr a{};
      inet_pton(AF_INET, VerbsRail(rank, rail).c_str(), &a);
      auto d = transport::verbs::FindRailDevice(a.s_addr);
      if (!d.ok()) return d.status().message() + " (the soft-RoCE lab provides them: tests/rdma-lab/run)";
    }
  }
  return "";
}

#define SKIP_WITHOUT_RDMA()                              \
  do {                                                   \
    static const std::string why = NoRdmaReason();       \
    if (!why.empty()) GTEST_SKIP() << why;               \
  } while (0)

// The lab's guest is emulated (TCG) on a shared host: everything runs one to two orders of
// magnitude slower than on hardware, so the timeouts that declare a silent path suspect or a
// peer lost are stretched; the faults under test are detected by events, not by these.
void UseVerbs(CommOptions& o) {
  o.transport = "verbs";
  o.suspect_floor = Millis(5000);
  o.suspect_ceiling = Millis(5000);
  o.abort_timeout = Millis(30000);
  o.verbs_qp_timeout = 16;  // 268 ms
  o.rails.clear();
  for (int rail = 0; rail < kRails; ++rail) o.rails.push_back(VerbsRail(o.rank, rail));
}

// The interface holding `ip`, or "".
std::string InterfaceOf(const std::string& ip) {
  std::string name;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return name;
  in_addr want{};
  inet_pton(AF_INET, ip.c_str(), &want);
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if (reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == want.s_addr) name = i->ifa_name;
  }
  freeifaddrs(list);
  return name;
}

// Sets an interface administratively up or down (the port of its rxe device follows).
bool SetLinkUp(const std::string& dev, bool up) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  ifreq r{};
  std::strncpy(r.ifr_name, dev.c_str(), IFNAMSIZ - 1);
  bool ok = ioctl(s, SIOCGIFFLAGS, &r) == 0;
  if (ok) {
    if (up) {
      r.ifr_flags |= IFF_UP;
    } else {
      r.ifr_flags &= ~IFF_UP;
    }
    ok = ioctl(s, SIOCSIFFLAGS, &r) == 0;
  }
  close(s);
  return ok;
}

// --- setup errors (everywhere) -------------------------------------------------------------

TEST(VerbsSetup, UnknownTransportIsRejected) {
  CommOptions o;
  o.rank = 0;
  o.size = 1;
  o.rails = {"127.0.0.1"};
  o.transport = "ib";
  auto c = Communicator::Create(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
  EXPECT_NE(c.status().message().find("tcp or verbs"), std::string::npos) << c.status().ToString();

  setenv("FTCCL_TRANSPORT", "rdma", 1);
  CommOptions e;
  Status st = ApplyEnvOverrides(&e);
  unsetenv("FTCCL_TRANSPORT");
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  setenv("FTCCL_TRANSPORT", "verbs", 1);
  setenv("FTCCL_VERBS_RETRY_COUNT", "8", 1);
  st = ApplyEnvOverrides(&e);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << "retry count 8 is out of range";
  EXPECT_EQ(e.transport, "verbs");
  unsetenv("FTCCL_TRANSPORT");
  unsetenv("FTCCL_VERBS_RETRY_COUNT");
}

// Loopback rail addresses are no GID of any RDMA device (and there may be no device at all):
// every rank fails to create its communicator with an error that names the rail address.
TEST(VerbsSetup, RailWithoutRdmaDeviceIsAClearError) {
  CommLaunch launch;
  launch.size = 2;
  launch.init_timeout = Millis(10000);
  launch.configure = [](CommOptions& o) { o.transport = "verbs"; };
  LaunchResult r = LaunchWithOptions(launch, [](const CommOptions& o, RankReporter& rep) {
    auto start = Clock::now();
    auto c = Communicator::Create(o);
    if (c.ok()) {
      rep.Fail("Create succeeded with verbs on loopback rails");
      return 1;
    }
    const std::string text = c.status().ToString();
    const bool names_it = transport::verbs::Built()
                              ? text.find("no RDMA device for rail address 127.0.0.") != std::string::npos
                              : text.find("built without libibverbs") != std::string::npos;
    if (!names_it) rep.Fail("unclear error: " + text);
    if (MillisSince(start) > 8000) rep.Fail("the error took " + std::to_string(MillisSince(start)) + " ms");
    return 0;
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

// --- collectives -----------------------------------------------------------------------------

std::vector<CollCase> Cases(int ranks) {
  const CollKind kinds[] = {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter,
                            CollKind::kBroadcast, CollKind::kReduce,    CollKind::kAllToAll};
  // Bytes of the larger buffer: one element, an odd size over several chunks, 4 MiB.
  const size_t sizes[] = {0, 150001, size_t{4} << 20};
  std::vector<CollCase> cases;
  uint64_t salt = 900;
  for (size_t bytes : sizes) {
    for (CollKind k : kinds) {
      CollCase c;
      c.kind = k;
      c.dt = k == CollKind::kAllGather || k == CollKind::kAllToAll ? DataType::kU8 : DataType::kF32;
      c.op = k == CollKind::kReduce ? ReduceOp::kMax : ReduceOp::kSum;
      const size_t blocks = HasBlocks(k) ? static_cast<size_t>(ranks) : 1;
      c.count = bytes == 0 ? 1 : std::max<size_t>(1, bytes / (DataTypeSize(c.dt) * blocks));
      c.root = ranks - 1;
      c.salt = ++salt;
      cases.push_back(c);
    }
  }
  return cases;
}

class VerbsCollectiveTest : public ::testing::TestWithParam<int> {};

TEST_P(VerbsCollectiveTest, EveryCollectiveIsExact) {
  SKIP_WITHOUT_RDMA();
  const int ranks = GetParam();
  CommLaunch launch;
  launch.size = ranks;
  launch.wall_limit = std::chrono::milliseconds(240000);
  launch.op_timeout = Millis(60000);
  launch.configure = [](CommOptions& o) {
    UseVerbs(o);
    o.chunk_bytes = 64 * 1024;
  };
  LaunchResult r = LaunchCommunicators(launch, [ranks](Communicator& comm, RankReporter& rep) -> Status {
    for (const CollCase& c : Cases(ranks)) {
      rep.Progress(c.Name());
      bool correct = false;
      Status st = RunAndCheck(comm, c, rep, &correct);
      if (!st.ok()) return st.WithContext(c.Name());
      if (!correct) rep.Fail("wrong result: " + c.Name());
    }
    CommStats s = comm.Stats();
    for (int rail = 0; rail < kRails; ++rail) {
      if (s.payload_bytes_sent_per_rail.size() != kRails || s.payload_bytes_sent_per_rail[rail] == 0) {
        rep.Fail("rail " + std::to_string(rail) + " carried no payload");
      }
    }
    if (s.crc_errors != 0) rep.Fail("CRC errors on a clean run: " + std::to_string(s.crc_errors));
    return Status::Ok();
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

INSTANTIATE_TEST_SUITE_P(Ranks, VerbsCollectiveTest, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return RanksTag(info.param); });

// --- faults ----------------------------------------------------------------------------------

// f32 allreduce input of rank r: element i is (i % 1000) + r; the sum is exact.
void FillInput(std::vector<float>& v, int rank) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 1000 + rank);
}
size_t CountWrong(const std::vector<float>& out, int size) {
  size_t wrong = 0;
  const float base = static_cast<float>(size * (size - 1) / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] != static_cast<float>(size) * static_cast<float>(i % 1000) + base) ++wrong;
  }
  return wrong;
}

enum class Fault { kQpError, kPortDown };

// One fault during a live allreduce on a fresh communicator of `size` ranks. Rank 0 applies it
// to rail 0 once data flows. Returns the rank's status; on rank 0, *detect_ms and *resume_ms get
// the time from the fault to the migration of rail 0's chunks and to the next acknowledgement
// (-1 when not seen).
Status OneFault(const CommOptions& base, Fault fault, RankReporter& rep, double* detect_ms,
                double* resume_ms) {
  *detect_ms = *resume_ms = -1;
  // The buffers outlive the communicator: a failed collective may return before the progress
  // thread has let go of them.
  std::vector<float> in(size_t{8} << 20 >> 2), out(in.size());
  auto created = Communicator::Create(base);
  if (!created.ok()) return created.status().WithContext("Create");
  Communicator& comm = *created.value();
  const int rank = comm.rank(), size = comm.size();
  const std::string dev = InterfaceOf(VerbsRail(0, 0));
  FillInput(in, rank);
  Status st = comm.Barrier();
  if (!st.ok()) return st.WithContext("barrier before the fault");
  RequestPtr req = comm.AllReduceAsync(in.data(), out.data(), in.size(), DataType::kF32, ReduceOp::kSum);
  Clock::time_point t0{};
  if (rank == 0) {
    // Wait until chunks flow on rail 0, so the fault hits a live collective.
    auto give_up = Clock::now() + std::chrono::seconds(20);
    while (comm.Stats().payload_bytes_sent_per_rail.at(0) == 0 && Clock::now() < give_up && !req->Test()) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (req->Test()) rep.Fail("the allreduce finished before the fault could be applied");
    t0 = Clock::now();
    if (fault == Fault::kQpError) {
      Status inj = comm.InjectQpError(1, 0);
      if (!inj.ok()) rep.Fail("InjectQpError: " + inj.ToString());
    } else if (!SetLinkUp(dev, false)) {
      rep.Fail("cannot set " + dev + " down");
    }
  }
  st = req->Wait();
  if (rank == 0 && fault == Fault::kPortDown) SetLinkUp(dev, true);
  if (!st.ok()) return st.WithContext("allreduce under the fault");
  if (size_t w = CountWrong(out, size)) rep.Fail(std::to_string(w) + " wrong elements after the fault");
  // The communicator keeps working on the other rail.
  std::fill(out.begin(), out.end(), 0.0f);
  st = comm.AllReduce(in.data(), out.data(), in.size(), DataType::kF32, ReduceOp::kSum);
  if (!st.ok()) return st.WithContext("allreduce after the fault");
  if (size_t w = CountWrong(out, size)) rep.Fail(std::to_string(w) + " wrong elements in the next allreduce");
  if (rank == 0) {
    bool migrated = false;
    for (const Event& e : comm.DrainEvents()) {
      const double ms = (e.time_ns - std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count()) / 1e6;
      if (e.kind == EventKind::kMigrated && e.rail == 0 && *detect_ms < 0) {
        *detect_ms = ms;
        migrated = true;
      }
      if (e.kind == EventKind::kResumed && migrated && *resume_ms < 0) *resume_ms = ms;
    }
    if (!migrated) rep.Fail("no migration event for rail 0 after the fault");
    if (fault == Fault::kQpError) {
      auto states = comm.QpStates(1, 0);
      if (!states.ok() || states->empty() || states->front().find("ERR") == std::string::npos) {
        rep.Fail("QP to rank 1 on rail 0 is not in ERR: " +
                 (states.ok() ? (states->empty() ? std::string("none") : states->front()) : states.status().ToString()));
      }
      auto other = comm.QpStates(1, 1);
      if (!other.ok() || other->empty() || other->front().find("RTS") == std::string::npos) {
        rep.Fail("QP to rank 1 on rail 1 should still be RTS");
      }
    }
  }
  return Status::Ok();
}

// p-th percentile (nearest rank) of `v`.
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  size_t k = static_cast<size_t>(std::max(1.0, std::ceil(p / 100.0 * static_cast<double>(v.size()))));
  return v[std::min(k, v.size()) - 1];
}

// Runs `rounds` faults, one fresh communicator each, on `size` ranks; checks every result and
// reports rank 0's latencies.
void RunFaults(Fault fault, int size, int rounds, const char* name) {
  std::mt19937 rng(static_cast<unsigned>(getpid()));
  const int port_base = 20000 + static_cast<int>(rng() % 20000);
  LaunchResult r = LaunchRanks(size, std::chrono::milliseconds(60000 + 30000 * rounds),
                               [&](int rank, RankReporter& rep) -> int {
    std::vector<double> detect, resume;
    for (int i = 0; i < rounds; ++i) {
      CommOptions o;
      o.rank = rank;
      o.size = size;
      o.bootstrap = "127.0.0.1:" + std::to_string(port_base + i);
      UseVerbs(o);
      o.chunk_bytes = 64 * 1024;
      o.init_timeout = Millis(20000);
      o.op_timeout = Millis(30000);
      rep.Progress(std::string(name) + " round " + std::to_string(i));
      double d = -1, u = -1;
      Status st = OneFault(o, fault, rep, &d, &u);
      if (!st.ok()) {
        rep.Fail("round " + std::to_string(i) + ": " + st.ToString());
        return 1;
      }
      if (rank == 0) {
        if (d >= 0) detect.push_back(d);
        if (u >= 0) resume.push_back(u);
      }
    }
    if (rank == 0) {
      rep.Value("detect_p50_us", static_cast<int64_t>(Percentile(detect, 50) * 1000));
      rep.Value("detect_p99_us", static_cast<int64_t>(Percentile(detect, 99) * 1000));
      rep.Value("resume_p50_us", static_cast<int64_t>(Percentile(resume, 50) * 1000));
      rep.Value("resume_p99_us", static_cast<int64_t>(Percentile(resume, 99) * 1000));
      rep.Value("detected", static_cast<int64_t>(detect.size()));
      rep.Value("resumed", static_cast<int64_t>(resume.size()));
    }
    return 0;
  });
  ASSERT_TRUE(r.AllOk()) << r.Describe();
  const RankOutcome& r0 = r.ranks.at(0);
  EXPECT_EQ(r0.value("detected"), rounds) << "every fault must be followed by a migration";
  std::printf("[ verbs ] %s over %d faults (%d ranks): migrated after p50 %.2f ms p99 %.2f ms; "
              "acknowledged again after p50 %.2f ms p99 %.2f ms (%lld of %d measured)\n",
              name, rounds, size, r0.value("detect_p50_us") / 1000.0, r0.value("detect_p99_us") / 1000.0,
              r0.value("resume_p50_us") / 1000.0, r0.value("resume_p99_us") / 1000.0,
              static_cast<long long>(r0.value("resumed")), rounds);
  ::testing::Test::RecordProperty("detect_p50_us", std::to_string(r0.value("detect_p50_us")));
  ::testing::Test::RecordProperty("resume_p50_us", std::to_string(r0.value("resume_p50_us")));
}

int Rounds() {
  const char* v = std::getenv("FTCCL_VERBS_FAULT_ROUNDS");
  return v ? std::max(1, std::atoi(v)) : 3;
}

TEST(VerbsFaults, QpErrorOnLiveCollective) {
  SKIP_WITHOUT_RDMA();
  RunFaults(Fault::kQpError, 2, Rounds(), "qp_error");
}

TEST(VerbsFaults, QpErrorOnLiveCollectiveFourRanks) {
  SKIP_WITHOUT_RDMA();
  RunFaults(Fault::kQpError, 4, 1, "qp_error");
}

TEST(VerbsFaults, PortDownOnLiveCollective) {
  SKIP_WITHOUT_RDMA();
  RunFaults(Fault::kPortDown, 2, Rounds(), "port_down");
}

TEST(VerbsFaults, InjectQpErrorNeedsVerbs) {
  // A TCP communicator has no QP: a clear error, nothing else happens.
  CommLaunch launch;
  launch.size = 2;
  LaunchResult r = LaunchWithOptions(launch, [](const CommOptions& o, RankReporter& rep) -> int {
    auto comm = Communicator::Create(o);
    if (!comm.ok()) {
      rep.Fail("Create: " + comm.status().ToString());
      return 1;
    }
    Status st = (*comm)->InjectQpError(1 - o.rank, 0);
    if (st.code() != Code::kInvalidArgument || st.message().find("verbs") == std::string::npos) {
      rep.Fail("expected kInvalidArgument naming the verbs transport, got " + st.ToString());
    }
    auto states = (*comm)->QpStates(1 - o.rank, 0);
    if (states.ok()) rep.Fail("QpStates on a TCP communicator succeeded");
    st = (*comm)->Barrier();
    if (!st.ok()) rep.Fail("barrier after the refused injection: " + st.ToString());
    return 0;
  });
  EXPECT_TRUE(r.AllOk()) << r.Describe();
}

}  // namespace
}  // namespace ftccl::test
