// The per-rank NIC topology (nics: per_rank): names, addresses, shaping, policy rules and
// their tables, ARP sysctls, checked with ip/tc and /proc (never the builder's own netlink
// code); traffic from a port's address leaves through that port and no other (interface
// counters), and a port that is down or gone fails its traffic instead of leaking it through
// the neighbour's port; torn down without leftovers.
#include <set>
#include <thread>

#include "injector/journal.h"
#include "runner/exec/topology.h"
#include "tests/cpp/runner/net_test_util.h"

namespace faultline::runner::testing {
namespace {

// Bytes sent by `dev` in `netns` so far (-1 when it cannot be read). Bytes, not packets:
// veth hands TCP segments of up to 64 KiB over as one packet.
int64_t TxBytes(const std::string& netns, const std::string& dev) {
  nlohmann::json j = ShJson("ip -j -s -n " + netns + " link show dev " + dev);
  if (!j.is_array() || j.empty()) return -1;
  return j[0]["stats64"]["tx"].value("bytes", int64_t{-1});
}

// Sends `count` UDP datagrams of 1000 bytes from `src` to dst:9 inside `netns`; "ok" or the
// first error. A strong signal on the interface counters (count x 1 KB) next to the few
// bytes of background traffic (IPv6 neighbour discovery).
std::string UdpBurst(const std::string& netns, const std::string& src, const std::string& dst,
                     int count) {
  const std::string py =
      "import socket\n"
      "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
      "try:\n"
      "  s.bind(('" +
      src +
      "',0))\n"
      "  for i in range(" +
      std::to_string(count) + "): s.sendto(b'x'*1000,('" + dst +
      "',9))\n"
      "  print('ok')\n"
      "except Exception as e:\n"
      "  print(type(e).__name__+': '+str(e))\n";
  std::string out = Sh("ip netns exec " + netns + " /usr/bin/python3 -c \"" + py + "\" 2>&1");
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Asserts that a failed connect failed for want of a route (the port's unreachable entry).
void ExpectNoRoute(const std::string& r) {
  EXPECT_TRUE(r.find("Errno 113") != std::string::npos || r.find("Errno 101") != std::string::npos)
      << "expected EHOSTUNREACH or ENETUNREACH, got: " << r;
}

// Connects from `src` (bound) to dst:port inside `netns` and sends `bytes` bytes; returns
// "ok" or the Python exception's name ("OSError: [Errno 101] ...", "timeout", ...).
std::string SendFrom(const std::string& netns, const std::string& src, const std::string& dst,
                     uint16_t port, int bytes, double timeout_s) {
  const std::string py =
      "import socket,sys\n"
      "s=socket.socket()\n"
      "s.settimeout(" +
      std::to_string(timeout_s) +
      ")\n"
      "try:\n"
      "  s.bind(('" +
      src +
      "',0))\n"
      "  s.connect(('" +
      dst + "'," + std::to_string(port) +
      "))\n"
      "  s.sendall(b'x'*" +
      std::to_string(bytes) +
      ")\n"
      "  s.close()\n"
      "  print('ok')\n"
      "except Exception as e:\n"
      "  print(type(e).__name__+': '+str(e))\n";
  std::string out = Sh("ip netns exec " + netns + " /usr/bin/python3 -c \"" + py + "\" 2>&1");
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void ExpectNothingLeft(const std::string& run_id, const std::string& journal_dir) {
  EXPECT_TRUE(NetnsWithPrefix("fl-" + run_id + "-").empty())
      << Sh("ip netns list | grep fl-" + run_id);
  auto j = Journal::Open(journal_dir);
  ASSERT_TRUE(j.ok());
  auto entries = (*j)->List();
  ASSERT_TRUE(entries.ok());
  EXPECT_TRUE(entries->empty()) << entries->size() << " journal entries left";
  EXPECT_EQ(
      Sh("ip -o link show | grep -cE ': (rail[0-9]+|h[0-9]+n[0-9]+r[0-9]+|n[0-9]+r[0-9]+)[:@]'"),
      "0\n");
  // Rules and tables lived in the host namespaces; nothing of them in this one.
  EXPECT_EQ(Sh("ip rule show | grep -c '198\\.18\\.'"), "0\n");
  EXPECT_EQ(Sh("ip route show table all | grep -c '198\\.18\\.'"), "0\n");
}

TopologyOptions PerRank(int hosts, int ranks, int rails) {
  TopologyOptions o;
  o.run_id = NewRunId();
  o.hosts = hosts;
  o.ranks_per_host = ranks;
  o.rails = rails;
  o.rail_gbps = 1.0;
  o.nics = NicLayout::kPerRank;
  return o;
}

TEST(NicPerRank, NamesAddressesRulesAndShaping) {
  TempDir journal;
  TopologyOptions o = PerRank(2, 2, 2);
  o.arp_retrans_ms = 200;  // a multiple of every HZ's tick: the kernel keeps jiffies
  std::string skip;
  {
    auto topo = BuildOrSkip(o, journal.path(), &skip);
    if (!skip.empty()) GTEST_SKIP() << skip;
    ASSERT_NE(topo, nullptr);
    EXPECT_TRUE(topo->per_rank_nics());
    const std::string sw = topo->switch_netns();
    nlohmann::json sw_links = ShJson("ip -d -j -n " + sw + " link show");
    ASSERT_TRUE(sw_links.is_array());
    // lo, 2 rail bridges, mgmt bridge, 2 x 2 x 2 ports, 2 management ports.
    EXPECT_EQ(sw_links.size(), 1u + 2 + 1 + 8 + 2) << sw_links.dump();
    for (int h = 0; h < 2; ++h) {
      const HostNet& hn = topo->host(h);
      const std::string ns = hn.netns;
      EXPECT_TRUE(hn.rail_devs.empty());
      EXPECT_TRUE(hn.rail_addrs.empty());
      ASSERT_EQ(hn.rank_rail_devs.size(), 2u);
      nlohmann::json addrs = ShJson("ip -j -n " + ns + " addr show");
      ASSERT_TRUE(addrs.is_array());
      EXPECT_EQ(addrs.size(), 1u + 4 + 1) << "lo, four ports, mgmt: " << addrs.dump();
      EXPECT_EQ(FindIf(addrs, "r0"), nullptr) << "no shared rail port";
      std::string rules = Sh("ip -n " + ns + " -4 rule show");
      for (int l = 0; l < 2; ++l) {
        for (int r = 0; r < 2; ++r) {
          const std::string dev = "n" + std::to_string(l) + "r" + std::to_string(r);
          const std::string addr =
              "198.18." + std::to_string(r) + "." + std::to_string(h * 2 + l + 1);
          EXPECT_EQ(hn.rank_rail_devs[l][r], dev);
          EXPECT_EQ(hn.rank_rail_addrs[l][r], addr);
          EXPECT_EQ(topo->RankRailAddrs(h, l)[r], addr);
          const nlohmann::json* link = FindIf(addrs, dev);
          ASSERT_NE(link, nullptr) << ns << "/" << dev;
          EXPECT_EQ(Sysctl(ns, "neigh/" + dev + "/retrans_time_ms"), "200")
              << ns << "/" << dev;
          EXPECT_TRUE(HasFlag(*link, "UP") && HasFlag(*link, "LOWER_UP")) << link->dump();
          EXPECT_EQ(V4Addrs(*link), std::set<std::string>{addr + "/24"});
          // Shaped on both ends.
          EXPECT_NE(Sh("tc -n " + ns + " qdisc show dev " + dev).find("tbf f1a0:"),
                    std::string::npos)
              << ns << "/" << dev;
          const std::string sdev = "h" + std::to_string(h) + dev;
          const nlohmann::json* sp = FindIf(sw_links, sdev);
          ASSERT_NE(sp, nullptr) << sdev;
          EXPECT_EQ(sp->value("master", ""), "rail" + std::to_string(r)) << sdev;
          EXPECT_NE(Sh("tc -n " + sw + " qdisc show dev " + sdev).find("tbf f1a0:"),
                    std::string::npos)
              << sdev;
          // The port's rule and table.
          const uint32_t table = topo->PortTable(l, r);
          EXPECT_EQ(table, 1000u + l * 2 + r);
          EXPECT_NE(rules.find("1000:\tfrom " + addr + " lookup " + std::to_string(table)),
                    std::string::npos)
              << rules;
          std::string routes = Sh("ip -n " + ns + " -4 route show table " + std::to_string(table));
          EXPECT_NE(routes.find("198.18." + std::to_string(r) + ".0/24 dev " + dev +
                                " proto static scope link src " + addr),
                    std::string::npos)
              << routes;
          EXPECT_NE(routes.find("unreachable 198.18.0.0/15"), std::string::npos) << routes;
          // Fault targets.
          auto hs = topo->PortLink(h, l, r, LinkSide::kHost);
          ASSERT_TRUE(hs.ok());
          EXPECT_EQ(hs->netns, ns);
          EXPECT_EQ(hs->dev, dev);
          FaultTarget t;
          t.host = h;
          t.rank = l;
          t.rail = r;
          t.port = true;
          t.side = LinkSide::kSwitch;
          auto ss = topo->Resolve(t);
          ASSERT_TRUE(ss.ok()) << ss.status().ToString();
          EXPECT_EQ(ss->netns, sw);
          EXPECT_EQ(ss->dev, sdev);
          EXPECT_EQ(Sysctl(ns, "conf/" + dev + "/arp_ignore"), "1");
          EXPECT_EQ(Sysctl(ns, "conf/" + dev + "/arp_announce"), "2");
          EXPECT_EQ(Sysctl(ns, "conf/" + dev + "/rp_filter"), "0");
        }
      }
      EXPECT_EQ(Sysctl(ns, "conf/all/arp_ignore"), "1");
      EXPECT_EQ(Sysctl(ns, "conf/all/arp_announce"), "2");
      EXPECT_EQ(Sysctl(ns, "conf/all/rp_filter"), "0");
    }
    // A link target needs its rank; the shared-rail helpers refuse.
    FaultTarget no_rank;
    no_rank.host = 0;
    no_rank.rail = 0;
    EXPECT_FALSE(topo->Resolve(no_rank).ok());
    EXPECT_FALSE(topo->RailLink(0, 0, LinkSide::kHost).ok());
    EXPECT_FALSE(topo->PortLink(0, 2, 0, LinkSide::kHost).ok());
    EXPECT_FALSE(topo->PortLink(0, 0, 2, LinkSide::kHost).ok());
    // The report lists the ports.
    nlohmann::json j = topo->ToJson();
    EXPECT_EQ(j.value("nics", ""), "per_rank");
    ASSERT_EQ(j["hosts"][1]["ports"].size(), 4u);
    EXPECT_EQ(j["hosts"][1]["ports"][3].value("dev", ""), "n1r1");
    EXPECT_EQ(j["hosts"][1]["ports"][3].value("addr", ""), "198.18.1.4");
    EXPECT_EQ(j["hosts"][1]["ports"][3].value("switch_dev", ""), "h1n1r1");
    EXPECT_FALSE(j["hosts"][1].contains("rails"));
  }
  ExpectNothingLeft(o.run_id, journal.path());
}

// Shared NICs keep their names and report exactly (no per-rank fields).
TEST(NicPerRank, SharedModeUnchanged) {
  TempDir journal;
  TopologyOptions o;
  o.run_id = NewRunId();
  o.hosts = 2;
  o.ranks_per_host = 2;
  o.rails = 2;
  std::string skip;
  {
    auto topo = BuildOrSkip(o, journal.path(), &skip);
    if (!skip.empty()) GTEST_SKIP() << skip;
    ASSERT_NE(topo, nullptr);
    EXPECT_FALSE(topo->per_rank_nics());
    EXPECT_TRUE(topo->host(1).rank_rail_devs.empty());
    EXPECT_EQ(topo->RankRailAddrs(1, 1), (std::vector<std::string>{"198.18.0.2", "198.18.1.2"}));
    nlohmann::json j = topo->ToJson();
    EXPECT_FALSE(j.contains("nics"));
    EXPECT_FALSE(j["hosts"][0].contains("ports"));
    EXPECT_EQ(j["hosts"][0]["rails"][1].value("dev", ""), "r1");
    EXPECT_EQ(Sh("ip -n " + topo->host(0).netns + " -4 rule show | grep -c lookup"),
              "3\n");  // local, main, default only
    EXPECT_FALSE(topo->PortLink(0, 0, 0, LinkSide::kHost).ok());
    EXPECT_TRUE(topo->RestorePortRoutes(0).ok());
  }
  ExpectNothingLeft(o.run_id, journal.path());
}

TEST(NicPerRank, RejectsMoreRanksThanARailSubnetHolds) {
  TopologyOptions o = PerRank(126, 2, 1);  // 252 ports on each rail
  o.journal_dir = "/nonexistent";          // never reached
  auto t = NetTopology::Build(o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Code::kInvalidArgument);
  EXPECT_NE(t.status().message().find("hosts x ranks_per_host"), std::string::npos)
      << t.status().ToString();
}

// Traffic from a port's address leaves through that port only; a port that is down or gone
// fails its traffic (no leak through the neighbour's port on the same rail); a port that
// comes back up gets its table route back from RestorePortRoutes.
TEST(NicPerRank, EachPortKeepsItsTrafficAndADeadPortDoesNotLeak) {
  TempDir journal;
  TopologyOptions o = PerRank(2, 2, 2);
  std::string skip;
  {
    auto topo = BuildOrSkip(o, journal.path(), &skip);
    if (!skip.empty()) GTEST_SKIP() << skip;
    ASSERT_NE(topo, nullptr);
    const std::string h0 = topo->host(0).netns;
    const std::string h1 = topo->host(1).netns;
    const std::string dst = topo->host(1).rank_rail_addrs[0][0];  // 198.18.0.3
    constexpr int kBytes = 2'000'000;                             // > 1000 packets

    // Rank 1's port n1r0 is the one the main table does not prefer (n0r0 came first): its
    // traffic must still leave through n1r0. Rank 0's through n0r0.
    for (int l = 0; l < 2; ++l) {
      const std::string own = topo->host(0).rank_rail_devs[l][0];
      const std::string other = topo->host(0).rank_rail_devs[1 - l][0];
      const std::string src = topo->host(0).rank_rail_addrs[l][0];
      Listener listener(h1, dst);
      ASSERT_TRUE(listener.ok());
      const int64_t own0 = TxBytes(h0, own), other0 = TxBytes(h0, other);
      ASSERT_GE(own0, 0);
      ASSERT_GE(other0, 0);
      std::string from;
      int64_t got = -2;
      std::thread drain([&] { got = listener.AcceptAndDrain(15000, &from, nullptr); });
      EXPECT_EQ(SendFrom(h0, src, dst, listener.port(), kBytes, 10), "ok") << src;
      drain.join();
      EXPECT_EQ(got, kBytes) << src;
      EXPECT_EQ(from, src);
      const int64_t own_d = TxBytes(h0, own) - own0, other_d = TxBytes(h0, other) - other0;
      EXPECT_GT(own_d, kBytes) << src << " left through " << own << "? " << own_d;
      EXPECT_LT(other_d, 5000) << src << " leaked through " << other << ": " << other_d;
    }

    // n0r0 down (host side, as link_down does it): a connect from its address fails at once
    // and nothing goes out of n1r0.
    const std::string src0 = topo->host(0).rank_rail_addrs[0][0];
    {
      Listener listener(h1, dst);
      ASSERT_TRUE(listener.ok());
      Sh("ip -n " + h0 + " link set n0r0 down");
      EXPECT_EQ(Sh("ip -n " + h0 + " -4 route show table " + std::to_string(topo->PortTable(0, 0))),
                "unreachable 198.18.0.0/15 proto static \n")
          << "the kernel dropped the port's route with the port";
      const int64_t other0 = TxBytes(h0, "n1r0");
      ExpectNoRoute(SendFrom(h0, src0, dst, listener.port(), 1000, 3));
      ExpectNoRoute(UdpBurst(h0, src0, dst, 200));
      EXPECT_LT(TxBytes(h0, "n1r0") - other0, 5000) << "leaked through n1r0";
      // Up again: the main table's route comes back by itself, the port table's from
      // RestorePortRoutes, and the port works again.
      Sh("ip -n " + h0 + " link set n0r0 up");
      EXPECT_TRUE(topo->RestorePortRoutes(0).ok());
      EXPECT_TRUE(topo->RestorePortRoutes(0).ok()) << "idempotent";
      std::string from;
      int64_t got = -2;
      std::thread drain([&] { got = listener.AcceptAndDrain(15000, &from, nullptr); });
      EXPECT_EQ(SendFrom(h0, src0, dst, listener.port(), 1000, 5), "ok");
      drain.join();
      EXPECT_EQ(got, 1000);
      EXPECT_EQ(from, src0);
    }

    // Switch side down (the host port loses its carrier; routes stay): the connect times out
    // on the dead port and nothing leaks.
    {
      Listener listener(h1, dst);
      ASSERT_TRUE(listener.ok());
      Sh("ip -n " + topo->switch_netns() + " link set h0n0r0 down");
      const int64_t own0 = TxBytes(h0, "n0r0"), other0 = TxBytes(h0, "n1r0");
      std::string r = SendFrom(h0, src0, dst, listener.port(), 1000, 1.5);
      EXPECT_NE(r, "ok");
      // Sent into the dead port (its carrier is off), not through the neighbour.
      EXPECT_EQ(UdpBurst(h0, src0, dst, 200), "ok");
      EXPECT_LT(TxBytes(h0, "n1r0") - other0, 5000) << "leaked through n1r0: " << r;
      EXPECT_GE(TxBytes(h0, "n0r0") - own0, 0);
      Sh("ip -n " + topo->switch_netns() + " link set h0n0r0 up");
    }

    // The port deleted (port_drop with remove): the address is gone and so is any way out.
    {
      Listener listener(h1, dst);
      ASSERT_TRUE(listener.ok());
      Sh("ip -n " + h0 + " link del n0r0");
      const int64_t other0 = TxBytes(h0, "n1r0");
      std::string r = SendFrom(h0, src0, dst, listener.port(), 1000, 2);
      EXPECT_NE(r, "ok");
      EXPECT_NE(UdpBurst(h0, src0, dst, 200), "ok") << "the address is gone with the port";
      EXPECT_LT(TxBytes(h0, "n1r0") - other0, 5000) << "leaked through n1r0: " << r;
      EXPECT_TRUE(topo->RestorePortRoutes(0).ok()) << "a dropped port is skipped";
    }
    EXPECT_TRUE(topo->Teardown().ok());
  }
  ExpectNothingLeft(o.run_id, journal.path());
}

}  // namespace
}  // namespace faultline::runner::testing
