// The namespace topology: built for 2x2 and 3x2, checked with ip/tc (never the builder's own
// netlink code), real TCP connections between hosts over every rail and over management (the
// client started by the launcher inside a host namespace), shaping measured by a transfer,
// torn down without leftovers; and a topology of a SIGKILLed process removed by the journal.
#include "runner/exec/topology.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "base/clock.h"
#include "injector/journal.h"
#include "injector/netns.h"
#include "injector/registry.h"
#include "runner/exec/launcher.h"
#include "tests/cpp/runner/net_test_util.h"

namespace faultline::runner::testing {
namespace {

// The root qdisc of a device from `tc -j qdisc show` (null when there is none).
nlohmann::json RootQdisc(const std::string& netns, const std::string& dev) {
  nlohmann::json q = ShJson("tc -j -n " + netns + " qdisc show dev " + dev);
  if (!q.is_array()) return nullptr;
  for (const auto& e : q) {
    if (e.value("root", false)) return e;
  }
  return nullptr;
}

// Asserts that `q` is the project's shaping tbf at `gbps`.
void ExpectShaped(const nlohmann::json& q, double gbps, const std::string& where) {
  ASSERT_FALSE(q.is_null()) << where << ": no root qdisc";
  EXPECT_EQ(q.value("kind", ""), "tbf") << where;
  EXPECT_EQ(q.value("handle", ""), "f1a0:") << where;
  EXPECT_EQ(q["options"].value("rate", uint64_t{0}), static_cast<uint64_t>(gbps * 1e9 / 8))
      << where;
}

void ExpectNotShaped(const nlohmann::json& q, const std::string& where) {
  if (q.is_null()) return;
  EXPECT_NE(q.value("handle", ""), "f1a0:") << where << ": " << q.dump();
  EXPECT_NE(q.value("kind", ""), "tbf") << where << ": " << q.dump();
}

// Nothing of run `run_id` is left: no namespace, no journal entry, nothing in the initial
// namespace (no project qdisc, no topology device, no project nft table).
void ExpectNothingLeft(const std::string& run_id, const std::string& journal_dir) {
  EXPECT_TRUE(NetnsWithPrefix("fl-" + run_id + "-").empty())
      << Sh("ip netns list | grep fl-" + run_id);
  auto j = Journal::Open(journal_dir);
  ASSERT_TRUE(j.ok());
  auto entries = (*j)->List();
  ASSERT_TRUE(entries.ok());
  EXPECT_TRUE(entries->empty()) << entries->size() << " journal entries left";
  EXPECT_EQ(Sh("tc qdisc show | grep -c 'f1a0:'"), "0\n");
  EXPECT_EQ(Sh("ip -o link show | grep -cE ': (rail[0-9]+|h[0-9]+r[0-9]+|h[0-9]+m)[:@]'"), "0\n");
  EXPECT_EQ(Sh("nft list tables 2>/dev/null | grep -c faultline"), "0\n");
}

struct Shape {
  int hosts;
  int rails;
};

class TopologyTest : public ::testing::TestWithParam<Shape> {};

TEST_P(TopologyTest, BuiltCheckedConnectedAndTornDown) {
  const Shape shape = GetParam();
  TempDir journal;
  ASSERT_FALSE(journal.path().empty());
  TopologyOptions o;
  o.run_id = NewRunId();
  o.hosts = shape.hosts;
  o.rails = shape.rails;
  o.rail_gbps = 1.0;
  std::string skip;
  auto topo = BuildOrSkip(o, journal.path(), &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  ASSERT_NE(topo, nullptr);
  const std::string sw = "fl-" + o.run_id + "-sw";

  // Namespaces, as `ip netns list` sees them, and the journal records each one.
  std::set<std::string> want = {sw};
  for (int h = 0; h < shape.hosts; ++h) want.insert("fl-" + o.run_id + "-h" + std::to_string(h));
  std::vector<std::string> listed = NetnsWithPrefix("fl-" + o.run_id + "-");
  EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()), want);
  auto j = Journal::Open(journal.path());
  ASSERT_TRUE(j.ok());
  for (const std::string& ns : want) EXPECT_TRUE((*j)->RecordsNetns(ns)) << ns;

  // Switch: one bridge per rail plus mgmt, every switch port enslaved and up, shaped rails.
  nlohmann::json sw_links = ShJson("ip -d -j -n " + sw + " link show");
  ASSERT_TRUE(sw_links.is_array());
  const nlohmann::json* sw_lo = FindIf(sw_links, "lo");
  ASSERT_NE(sw_lo, nullptr);
  EXPECT_TRUE(HasFlag(*sw_lo, "UP"));
  for (int r = 0; r <= shape.rails; ++r) {
    std::string bridge = r < shape.rails ? "rail" + std::to_string(r) : "mgmt";
    const nlohmann::json* b = FindIf(sw_links, bridge);
    ASSERT_NE(b, nullptr) << bridge;
    EXPECT_EQ((*b)["linkinfo"].value("info_kind", ""), "bridge") << bridge;
    EXPECT_TRUE(HasFlag(*b, "UP")) << bridge;
    for (int h = 0; h < shape.hosts; ++h) {
      std::string port =
          "h" + std::to_string(h) + (r < shape.rails ? "r" + std::to_string(r) : "m");
      const nlohmann::json* p = FindIf(sw_links, port);
      ASSERT_NE(p, nullptr) << port;
      EXPECT_EQ((*p)["linkinfo"].value("info_kind", ""), "veth") << port;
      EXPECT_EQ(p->value("master", ""), bridge) << port;
      EXPECT_TRUE(HasFlag(*p, "UP")) << port;
      EXPECT_TRUE(HasFlag(*p, "LOWER_UP")) << port;
      if (r < shape.rails) {
        ExpectShaped(RootQdisc(sw, port), 1.0, sw + "/" + port);
      } else {
        ExpectNotShaped(RootQdisc(sw, port), sw + "/" + port);
      }
    }
  }
  // Exactly the expected links, nothing else.
  EXPECT_EQ(sw_links.size(), 1u + (shape.rails + 1) * (1u + shape.hosts));

  // Hosts: lo up, r<r> with 198.18.<r>.<h+1>/24 up and shaped, mgmt with 198.19.0.<h+1>/24.
  for (int h = 0; h < shape.hosts; ++h) {
    const HostNet& hn = topo->host(h);
    std::string ns = "fl-" + o.run_id + "-h" + std::to_string(h);
    EXPECT_EQ(hn.netns, ns);
    nlohmann::json addrs = ShJson("ip -j -n " + ns + " addr show");
    ASSERT_TRUE(addrs.is_array()) << ns;
    EXPECT_EQ(addrs.size(), 2u + shape.rails) << addrs.dump();
    const nlohmann::json* lo = FindIf(addrs, "lo");
    ASSERT_NE(lo, nullptr);
    EXPECT_TRUE(HasFlag(*lo, "UP"));
    EXPECT_EQ(V4Addrs(*lo), std::set<std::string>{"127.0.0.1/8"});
    for (int r = 0; r < shape.rails; ++r) {
      std::string dev = "r" + std::to_string(r);
      std::string addr = "198.18." + std::to_string(r) + "." + std::to_string(h + 1);
      EXPECT_EQ(hn.rail_devs[r], dev);
      EXPECT_EQ(hn.rail_addrs[r], addr);
      const nlohmann::json* l = FindIf(addrs, dev);
      ASSERT_NE(l, nullptr) << ns << "/" << dev;
      EXPECT_TRUE(HasFlag(*l, "UP") && HasFlag(*l, "LOWER_UP")) << l->dump();
      EXPECT_EQ(V4Addrs(*l), std::set<std::string>{addr + "/24"});
      ExpectShaped(RootQdisc(ns, dev), 1.0, ns + "/" + dev);
    }
    const nlohmann::json* m = FindIf(addrs, "mgmt");
    ASSERT_NE(m, nullptr) << ns;
    EXPECT_TRUE(HasFlag(*m, "UP") && HasFlag(*m, "LOWER_UP"));
    EXPECT_EQ(V4Addrs(*m), std::set<std::string>{"198.19.0." + std::to_string(h + 1) + "/24"});
    EXPECT_EQ(hn.mgmt_addr, "198.19.0." + std::to_string(h + 1));
    ExpectNotShaped(RootQdisc(ns, "mgmt"), ns + "/mgmt");
  }

  // Fault targets map to (netns, dev) on either side.
  auto host_side = topo->RailLink(1, shape.rails - 1, LinkSide::kHost);
  ASSERT_TRUE(host_side.ok());
  EXPECT_EQ(host_side->netns, "fl-" + o.run_id + "-h1");
  EXPECT_EQ(host_side->dev, "r" + std::to_string(shape.rails - 1));
  FaultTarget target;
  target.host = 1;
  target.rail = 0;
  target.side = LinkSide::kSwitch;
  auto switch_side = topo->Resolve(target);
  ASSERT_TRUE(switch_side.ok());
  EXPECT_EQ(switch_side->netns, sw);
  EXPECT_EQ(switch_side->dev, "h1r0");
  auto mgmt_sw = topo->MgmtLink(0, LinkSide::kSwitch);
  ASSERT_TRUE(mgmt_sw.ok());
  EXPECT_EQ(mgmt_sw->dev, "h0m");
  EXPECT_FALSE(topo->RailLink(shape.hosts, 0, LinkSide::kHost).ok());
  EXPECT_FALSE(topo->RailLink(0, shape.rails, LinkSide::kHost).ok());
  target.rail.reset();
  EXPECT_FALSE(topo->Resolve(target).ok());

  // Real TCP over every rail and management: host h connects to host h+1 (ring), the client
  // runs as a process started by the launcher in host h's namespace.
  TempDir logs;
  {
    std::vector<std::string> host_netns;
    for (int h = 0; h < shape.hosts; ++h) host_netns.push_back(topo->host(h).netns);
    auto launcher = LocalNetnsLauncher::Create(host_netns, logs.path());
    ASSERT_TRUE(launcher.ok()) << launcher.status().ToString();
    for (int h = 0; h < shape.hosts; ++h) {
      int peer = (h + 1) % shape.hosts;
      for (int r = 0; r <= shape.rails; ++r) {
        bool mgmt = r == shape.rails;
        std::string src = mgmt ? topo->host(h).mgmt_addr : topo->host(h).rail_addrs[r];
        std::string dst = mgmt ? topo->host(peer).mgmt_addr : topo->host(peer).rail_addrs[r];
        Listener listener(topo->host(peer).netns, dst);
        ASSERT_TRUE(listener.ok());
        std::string msg = "hello from " + src;
        LaunchSpec spec;
        spec.argv = {"bash", "-c",
                     "echo '" + msg + "' >/dev/tcp/" + dst + "/" + std::to_string(listener.port())};
        spec.placement.host = h;
        spec.name = "h" + std::to_string(h) + (mgmt ? "m" : "r" + std::to_string(r));
        auto handle = (*launcher)->Start(spec);
        ASSERT_TRUE(handle.ok()) << handle.status().ToString();
        std::string from, data;
        int64_t n = listener.AcceptAndDrain(5000, &from, &data);
        EXPECT_EQ(n, static_cast<int64_t>(msg.size() + 1)) << spec.name;
        EXPECT_EQ(from, src) << spec.name;
        EXPECT_EQ(data, msg + "\n") << spec.name;
        auto st = (*launcher)->Wait(*handle, MonoNow() + 5'000'000'000);
        ASSERT_TRUE(st.ok());
        EXPECT_TRUE(st->success()) << spec.name << ": " << st->ToString() << " "
                                   << Sh("cat " + (*launcher)->StderrPath(*handle));
      }
    }
    // A rail is its own subnet: rail 0 of host 0 has no route to rail 1 of host 1.
    if (shape.rails > 1) {
      std::string routes = Sh("ip -n " + topo->host(0).netns + " -4 route show dev r0");
      EXPECT_EQ(routes.find("198.18.1."), std::string::npos) << routes;
    }
  }

  EXPECT_TRUE(topo->Teardown().ok());
  ExpectNothingLeft(o.run_id, journal.path());
  EXPECT_TRUE(topo->Teardown().ok()) << "a second teardown is a no-op";
}

INSTANTIATE_TEST_SUITE_P(Shapes, TopologyTest, ::testing::Values(Shape{2, 2}, Shape{3, 2}),
                         [](const ::testing::TestParamInfo<Shape>& p) {
                           return std::to_string(p.param.hosts) + "x" +
                                  std::to_string(p.param.rails);
                         });

// The tbf on the rail, not the CPU, limits a transfer; the unshaped management network does
// not have that limit. The destructor tears down.
TEST(Topology, RailsAreShapedManagementIsNot) {
  TempDir journal;
  TopologyOptions o;
  o.run_id = NewRunId();
  o.hosts = 2;
  o.rails = 1;
  o.rail_gbps = 0.05;  // 50 Mbit/s
  std::string skip;
  {
    auto topo = BuildOrSkip(o, journal.path(), &skip);
    if (!skip.empty()) GTEST_SKIP() << skip;
    ASSERT_NE(topo, nullptr);
    TempDir logs;
    auto launcher =
        LocalNetnsLauncher::Create({topo->host(0).netns, topo->host(1).netns}, logs.path());
    ASSERT_TRUE(launcher.ok());
    constexpr int64_t kBytes = 4'000'000;
    double rate_bps[2] = {0, 0};
    for (int net = 0; net < 2; ++net) {
      std::string dst = net == 0 ? topo->host(1).rail_addrs[0] : topo->host(1).mgmt_addr;
      Listener listener(topo->host(1).netns, dst);
      ASSERT_TRUE(listener.ok());
      LaunchSpec spec;
      spec.argv = {"bash", "-c",
                   "head -c " + std::to_string(kBytes) + " /dev/zero >/dev/tcp/" + dst + "/" +
                       std::to_string(listener.port())};
      spec.placement.host = 0;
      spec.name = net == 0 ? "rail" : "mgmt";
      auto h = (*launcher)->Start(spec);
      ASSERT_TRUE(h.ok());
      std::string from;
      double secs = 0;
      EXPECT_EQ(listener.AcceptAndDrain(20000, &from, nullptr, &secs), kBytes) << spec.name;
      rate_bps[net] = static_cast<double>(kBytes) * 8 / secs;
      auto st = (*launcher)->Wait(*h, MonoNow() + 10'000'000'000);
      ASSERT_TRUE(st.ok());
      EXPECT_TRUE(st->success()) << st->ToString();
    }
    // The bucket (64 KiB) and the queues let a little more through than the rate at first.
    EXPECT_LT(rate_bps[0], 0.05e9 * 1.25) << "rail not shaped";
    EXPECT_GT(rate_bps[0], 0.05e9 * 0.5) << "rail far below its shaped rate";
    EXPECT_GT(rate_bps[1], 0.05e9 * 2) << "management looks shaped";
  }
  ExpectNothingLeft(o.run_id, journal.path());
}

TEST(Topology, ZeroGbpsIsUnshapedAndNoManagementMeansNone) {
  TempDir journal;
  TopologyOptions o;
  o.run_id = NewRunId();
  o.hosts = 2;
  o.rails = 1;
  o.rail_gbps = 0;
  o.management = false;
  std::string skip;
  {
    auto topo = BuildOrSkip(o, journal.path(), &skip);
    if (!skip.empty()) GTEST_SKIP() << skip;
    ASSERT_NE(topo, nullptr);
    ExpectNotShaped(RootQdisc(topo->host(0).netns, "r0"), "host r0");
    ExpectNotShaped(RootQdisc(topo->switch_netns(), "h0r0"), "switch h0r0");
    EXPECT_TRUE(
        ShJson("ip -j -n " + topo->host(0).netns + " link show mgmt 2>/dev/null").is_null());
    EXPECT_TRUE(
        ShJson("ip -j -n " + topo->switch_netns() + " link show mgmt 2>/dev/null").is_null());
    EXPECT_TRUE(topo->host(0).mgmt_addr.empty());
    EXPECT_FALSE(topo->MgmtLink(0, LinkSide::kHost).ok());
  }
  ExpectNothingLeft(o.run_id, journal.path());
}

// arp_retrans_ms lands on every rail port of every host namespace, and only there (the
// management port keeps the kernel's value); out of range, nothing is built.
TEST(Topology, ArpRetransIsSetOnEveryRailPort) {
  TempDir journal;
  TopologyOptions o;
  o.run_id = NewRunId();
  o.hosts = 2;
  o.rails = 2;
  o.rail_gbps = 0;
  o.arp_retrans_ms = 100;  // a multiple of every HZ's tick: the kernel keeps jiffies
  std::string skip;
  {
    auto topo = BuildOrSkip(o, journal.path(), &skip);
    if (!skip.empty()) GTEST_SKIP() << skip;
    ASSERT_NE(topo, nullptr);
    for (int h = 0; h < 2; ++h) {
      ASSERT_EQ(topo->host(h).rail_devs.size(), 2u);
      for (const std::string& dev : topo->host(h).rail_devs) {
        EXPECT_EQ(Sysctl(topo->host(h).netns, "neigh/" + dev + "/retrans_time_ms"), "100")
            << "host " << h << " " << dev;
      }
      EXPECT_NE(Sysctl(topo->host(h).netns, "neigh/mgmt/retrans_time_ms"), "100");
    }
    EXPECT_EQ(topo->ToJson().value("arp_retrans_ms", 0), 100);
  }
  ExpectNothingLeft(o.run_id, journal.path());
  o.arp_retrans_ms = 5;
  o.run_id = NewRunId();
  EXPECT_EQ(NetTopology::Build(o).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(NetnsWithPrefix("fl-" + o.run_id + "-").empty());
}

TEST(Topology, RefusesATakenRunIdAndTouchesNothing) {
  TempDir journal;
  TopologyOptions o;
  o.run_id = NewRunId();
  o.hosts = 2;
  o.rails = 1;
  o.journal_dir = journal.path();
  auto squatter = OwnedNetns::Create(NetTopology::HostNetnsName(o.run_id, 1));
  if (!squatter.ok()) GTEST_SKIP() << "cannot create namespaces: " << squatter.status().ToString();
  auto topo = NetTopology::Build(o);
  ASSERT_FALSE(topo.ok());
  EXPECT_EQ(topo.status().code(), Code::kAlreadyExists) << topo.status().ToString();
  EXPECT_EQ(NetnsWithPrefix("fl-" + o.run_id + "-"), std::vector<std::string>{squatter->name()});
  auto j = Journal::Open(journal.path());
  ASSERT_TRUE(j.ok());
  EXPECT_TRUE((*j)->List()->empty());
}

// A step that fails halfway (here the kernel-side tbf check: a rate under 8 bit/s, after
// every namespace and bridge exists) removes everything built so far and its journal entries.
TEST(Topology, FailedBuildRemovesWhatItCreated) {
  TempDir journal;
  TopologyOptions o;
  o.run_id = NewRunId();
  o.hosts = 3;
  o.rails = 2;
  o.rail_gbps = 1e-9;  // 1 bit/s
  o.journal_dir = journal.path();
  auto topo = NetTopology::Build(o);
  ASSERT_FALSE(topo.ok());
  if (topo.status().code() == Code::kPermissionDenied) GTEST_SKIP() << topo.status().ToString();
  EXPECT_EQ(topo.status().code(), Code::kInvalidArgument) << topo.status().ToString();
  EXPECT_NE(topo.status().message().find("host 0: rail 0: shape r0"), std::string::npos)
      << topo.status().ToString();
  ExpectNothingLeft(o.run_id, journal.path());
}

TEST(Topology, RejectsBadOptions) {
  TopologyOptions o;
  o.run_id = "ABC";  // upper case
  o.hosts = 2;
  o.rails = 1;
  EXPECT_EQ(NetTopology::Build(o).status().code(), Code::kInvalidArgument);
  o.run_id = "123456789";  // too long for readable interface and namespace names
  EXPECT_EQ(NetTopology::Build(o).status().code(), Code::kInvalidArgument);
  o.run_id = "abc123";
  o.hosts = 251;
  EXPECT_EQ(NetTopology::Build(o).status().code(), Code::kInvalidArgument);
  o.hosts = 2;
  o.rails = 0;
  EXPECT_EQ(NetTopology::Build(o).status().code(), Code::kInvalidArgument);
  o.rails = 1;
  o.rail_gbps = -1;
  EXPECT_EQ(NetTopology::Build(o).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(NetnsWithPrefix("fl-abc123-").empty());
}

TEST(Topology, NewRunIdIsSixHexCharacters) {
  std::set<std::string> seen;
  for (int i = 0; i < 32; ++i) {
    std::string id = NewRunId();
    EXPECT_EQ(id.size(), 6u);
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    seen.insert(id);
  }
  EXPECT_GT(seen.size(), 28u);
  // The longest names still fit IFNAMSIZ (15 characters + NUL).
  EXPECT_LE(NetTopology::SwitchRailDev(249, 249).size(), 15u);
}

// A child builds a topology and is SIGKILLed: the namespaces outlive it, CleanupJournal
// removes every one of them and a second cleanup is a no-op.
TEST(Topology, CleanupRemovesTheTopologyOfAKilledProcess) {
  TempDir journal;
  TopologyOptions o;
  o.run_id = NewRunId();
  o.hosts = 3;
  o.rails = 2;
  o.rail_gbps = 1;
  o.journal_dir = journal.path();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(ready[0]);
    auto topo = NetTopology::Build(o);
    char c = topo.ok() ? 'k' : (topo.status().code() == Code::kPermissionDenied ? 'p' : 'f');
    if (topo.ok()) (void)std::move(topo).value().release();  // the kill comes first
    if (::write(ready[1], &c, 1) != 1) ::_exit(2);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  ssize_t n = ::read(ready[0], &c, 1);
  ::close(ready[0]);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_EQ(n, 1);
  if (c == 'p') GTEST_SKIP() << "cannot create network namespaces here";
  ASSERT_EQ(c, 'k') << "the child could not build the topology";

  EXPECT_EQ(NetnsWithPrefix("fl-" + o.run_id + "-").size(), 4u);
  EXPECT_FALSE(RootQdisc("fl-" + o.run_id + "-h2", "r1").is_null());
  auto j = Journal::Open(journal.path());
  ASSERT_TRUE(j.ok());
  ASSERT_EQ((*j)->List()->size(), 4u);

  CleanupReport first = CleanupJournal(**j);
  EXPECT_EQ(first.undone, 4);
  EXPECT_EQ(first.failed, 0) << first.ToJson().dump();
  ExpectNothingLeft(o.run_id, journal.path());
  CleanupReport second = CleanupJournal(**j);
  EXPECT_EQ(second.undone, 0);
  EXPECT_EQ(second.failed, 0);
}

}  // namespace
}  // namespace faultline::runner::testing
