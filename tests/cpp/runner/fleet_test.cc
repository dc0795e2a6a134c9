// Fleet mode's pure parts: the clock offset of a 4-timestamp exchange, the one-box cluster's
// slurm.conf and its description's round trip, and where an inventory's hosts are reached.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <string>
#include <vector>

#include "runner/exec/agent_client.h"
#include "runner/exec/fleet_site.h"
#include "runner/exec/slurm_cluster.h"

namespace faultline::runner {
namespace {

// A sample of an agent whose clock is `offset` ahead, with one-way delays `out` and `back`
// and `serve` spent inside the agent.
std::array<int64_t, 4> Sample(int64_t t1, int64_t offset, int64_t out, int64_t serve,
                              int64_t back) {
  const int64_t t2 = t1 + out + offset;
  const int64_t t3 = t2 + serve;
  const int64_t t4 = t3 - offset + back;
  return {t1, t2, t3, t4};
}

TEST(BestOffset, SymmetricPathGivesTheExactOffset) {
  ClockOffset c = BestOffset({Sample(1000, 5'000'000, 40'000, 7'000, 40'000)});
  EXPECT_EQ(c.offset_ns, 5'000'000);
  EXPECT_EQ(c.uncertainty_ns, 40'000);  // half the round trip, the agent's time excluded
  EXPECT_EQ(c.rounds, 1);
}

TEST(BestOffset, KeepsTheSampleWithTheShortestRoundTrip) {
  // An asymmetric slow sample is off by half its asymmetry; the fast one is nearly exact.
  ClockOffset c = BestOffset({Sample(0, -3'000'000, 900'000, 1'000, 100'000),
                              Sample(2'000'000, -3'000'000, 10'000, 50'000, 12'000),
                              Sample(4'000'000, -3'000'000, 400'000, 1'000, 400'000)});
  EXPECT_EQ(c.offset_ns, -3'000'000 - 1'000);
  EXPECT_EQ(c.uncertainty_ns, 11'000);
  EXPECT_EQ(c.rounds, 3);
  // The true offset is always within the stated uncertainty.
  EXPECT_LE(std::abs(c.offset_ns - (-3'000'000)), c.uncertainty_ns);
}

ClusterInfo TwoHosts() {
  ClusterInfo c;
  c.dir = "/run/faultline/cluster";
  c.run_id = "abc123";
  c.cluster_name = "flabc123";
  c.hosts = 2;
  c.ranks_per_host = 4;
  c.rails = 2;
  c.rail_gbps = 1;
  c.partition = "fl";
  c.nodes = {"h0", "h1"};
  c.host_netns = {"fl-abc123-h0", "fl-abc123-h1"};
  c.ctl_netns = "fl-abc123-sw";
  c.slurm_conf = c.dir + "/slurm.conf";
  c.munge_socket = c.dir + "/munge/socket";
  c.journal_dir = "/run/faultline/journal";
  c.journal_ids = {"1", "2"};
  return c;
}

TEST(SlurmConf, NamesOnlyTheClustersOwnFilesAndAddresses) {
  const std::string conf = SlurmConfText(TwoHosts(), "box");
  EXPECT_NE(conf.find("SlurmctldHost=box(198.19.0.254)\n"), std::string::npos);
  EXPECT_NE(conf.find("AuthInfo=socket=/run/faultline/cluster/munge/socket\n"), std::string::npos);
  EXPECT_NE(conf.find("NodeName=h0 NodeAddr=198.19.0.1\n"), std::string::npos);
  EXPECT_NE(conf.find("NodeName=h1 NodeAddr=198.19.0.2\n"), std::string::npos);
  EXPECT_NE(conf.find("CPUs=5 "), std::string::npos);  // 4 ranks + the agent
  EXPECT_NE(conf.find("SlurmdSpoolDir=/run/faultline/cluster/spool/%n\n"), std::string::npos);
  EXPECT_NE(conf.find("PartitionName=fl Nodes=h0,h1 "), std::string::npos);
  EXPECT_EQ(conf.find("/etc/"), std::string::npos);
}

TEST(ClusterInfo, RoundTripsAndRejectsInconsistentDescriptions) {
  const ClusterInfo c = TwoHosts();
  auto back = ClusterInfo::FromJson(c.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToJson(), c.ToJson());
  nlohmann::json bad = c.ToJson();
  bad["hosts"] = 3;
  EXPECT_EQ(ClusterInfo::FromJson(bad).status().code(), Code::kInvalidArgument);
  bad = c.ToJson();
  bad.erase("ctl_netns");
  EXPECT_EQ(ClusterInfo::FromJson(bad).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ClusterInfo::FromJson(nlohmann::json::array()).status().code(),
            Code::kInvalidArgument);
}

// Outside an allocation: each inventory host's management address is its addr, else its name
// resolved; a name that does not resolve is bad input that names the host and the fix.
TEST(SiteOfInventory, ManagementAddressIsTheAddrElseTheResolvedName) {
  ::unsetenv("SLURM_JOB_ID");
  Topology t;
  t.kind = TopologyKind::kInventory;
  auto host = [](std::string name, std::string addr) {
    InventoryHost h;
    h.name = std::move(name);
    h.addr = std::move(addr);
    h.rails.emplace_back();
    h.rails.back().netdev = "eth1";
    return h;
  };
  t.inventory = {host("node01", "10.0.0.7"), host("localhost", "")};
  t.hosts = 2;
  t.rails = 1;
  t.ranks_per_host = 1;
  auto s = SiteOfInventory(t, "gpu");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->nodes, (std::vector<std::string>{"node01", "localhost"}));
  EXPECT_EQ(s->mgmt_addrs, (std::vector<std::string>{"10.0.0.7", "127.0.0.1"}));
  EXPECT_EQ(s->partition, "gpu");
  EXPECT_EQ(s->allocation, "");
  EXPECT_EQ(s->netns, "");
  t.inventory[1].name = "no-such-host.invalid";
  auto bad = SiteOfInventory(t, "");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'no-such-host.invalid'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("addr"), std::string::npos) << bad.status().message();
  t.inventory[1] = host("node02", "fd00::2");
  auto v6 = SiteOfInventory(t, "");
  ASSERT_FALSE(v6.ok());
  EXPECT_NE(v6.status().message().find("not an IPv4 address"), std::string::npos)
      << v6.status().message();
  t.kind = TopologyKind::kNetns;
  EXPECT_FALSE(SiteOfInventory(t, "").ok());
}

}  // namespace
}  // namespace faultline::runner
