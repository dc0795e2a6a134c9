// Inventory topologies (topology: {kind: inventory}): real hosts inline or from a host file
// resolved against the scenario's folder, every schema error at its file:line:column, fault
// targets checked against the inventory, packet-level faults refused on RDMA rails at the
// fault, and the committed examples under scenarios/inventory/ valid.
#include "runner/core/inventory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "runner/core/scenario.h"

namespace faultline::runner {
namespace {

int Col(const std::string& text, int line, const std::string& token) {
  std::istringstream in(text);
  std::string l;
  for (int i = 0; i < line; ++i) std::getline(in, l);
  size_t pos = l.find(token);
  EXPECT_NE(pos, std::string::npos) << "'" << token << "' not on line " << line;
  return static_cast<int>(pos) + 1;
}

std::string Dump(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) out += d.ToString() + "\n";
  return out;
}

const Diagnostic* Find(const std::vector<Diagnostic>& ds, int line, int col,
                       const std::string& text) {
  for (const Diagnostic& d : ds) {
    if (d.loc.line == line && d.loc.column == col && d.message.find(text) != std::string::npos) {
      return &d;
    }
  }
  return nullptr;
}

std::vector<Diagnostic> Errors(const std::string& yaml) {
  ParseOutcome r = ParseScenario(yaml, "t.yaml");
  EXPECT_FALSE(r.ok());
  return r.diagnostics;
}

// The error of `yaml` on `line` at `token` whose message has `text`.
#define EXPECT_ERROR_AT(yaml, line, token, text)                                           \
  do {                                                                                     \
    const std::string y_ = (yaml);                                                         \
    auto ds_ = Errors(y_);                                                                 \
    EXPECT_NE(Find(ds_, (line), Col(y_, (line), (token)), (text)), nullptr)                \
        << "want " << (line) << ":" << Col(y_, (line), (token)) << " '" << (text) << "'\n" \
        << Dump(ds_);                                                                      \
  } while (0)

// Two hosts, two rails each; rail 0 RDMA, rail 1 plain Ethernet (lines 1..12).
const char* kMixedHosts =
    "name: t\n"
    "topology:\n"
    "  kind: inventory\n"
    "  ranks_per_host: 2\n"
    "  hosts:\n"
    "    - name: node01\n"
    "      addr: 10.0.0.1\n"
    "      rails: [{netdev: ens1f0np0, rdma: mlx5_0, port: 1, addr: 10.10.0.1}, {netdev: eth1}]\n"
    "    - name: node02\n"
    "      rails: [{netdev: ens1f0np0, rdma: mlx5_0}, {netdev: eth1}]\n"
    "workload: {op: allreduce, bytes: 16MiB, duration: 8s}\n";
// The same, with faults to follow from line 13.
const std::string kMixed = std::string(kMixedHosts) + "faults:\n";

TEST(Inventory, InlineHostsParse) {
  ParseOutcome r = ParseScenario(kMixedHosts, "t.yaml");
  ASSERT_TRUE(r.ok()) << Dump(r.diagnostics);
  const Topology& t = r.scenario->topology;
  EXPECT_EQ(t.kind, TopologyKind::kInventory);
  EXPECT_TRUE(t.inventory_file.empty());
  EXPECT_EQ(t.hosts, 2);
  EXPECT_EQ(t.rails, 2);
  EXPECT_EQ(t.ranks_per_host, 2);
  EXPECT_EQ(t.world_size(), 4);
  ASSERT_EQ(t.inventory.size(), 2u);
  EXPECT_EQ(t.inventory[0].name, "node01");
  EXPECT_EQ(t.inventory[0].addr, "10.0.0.1");
  EXPECT_EQ(t.inventory[1].addr, "");
  const InventoryRail& r0 = t.inventory[0].rails[0];
  EXPECT_EQ(r0.netdev, "ens1f0np0");
  EXPECT_EQ(r0.rdma, "mlx5_0");
  EXPECT_EQ(r0.port, 1);
  EXPECT_EQ(r0.addr, "10.10.0.1");
  EXPECT_TRUE(r0.is_rdma());
  EXPECT_EQ(t.inventory[1].rails[0].port, 1);  // rdma without port: port 1
  EXPECT_FALSE(t.inventory[0].rails[1].is_rdma());
  EXPECT_EQ(t.inventory[0].rails[1].port, 0);
  EXPECT_EQ(t.InventoryRailAt(1, 1), &t.inventory[1].rails[1]);
  EXPECT_EQ(t.InventoryRailAt(2, 0), nullptr);
  EXPECT_EQ(t.InventoryRailAt(0, 2), nullptr);
}

TEST(Inventory, DefaultAndExplicitNetnsUnchanged) {
  for (const char* topo : {"topology: {hosts: 2, ranks_per_host: 2, rails: 2, rail_gbps: 5}\n",
                           "topology: {kind: netns, hosts: 2, ranks_per_host: 2, rails: 2, "
                           "rail_gbps: 5}\n"}) {
    const std::string yaml =
        std::string("name: t\n") + topo + "workload: {op: allreduce, bytes: 1MiB, duration: 2s}\n";
    ParseOutcome r = ParseScenario(yaml, "t.yaml");
    ASSERT_TRUE(r.ok()) << Dump(r.diagnostics);
    EXPECT_EQ(r.scenario->topology.kind, TopologyKind::kNetns);
    EXPECT_TRUE(r.scenario->topology.inventory.empty());
    EXPECT_DOUBLE_EQ(r.scenario->topology.rail_gbps, 5);
    EXPECT_EQ(r.scenario->topology.InventoryRailAt(0, 0), nullptr);
  }
  EXPECT_ERROR_AT(
      "name: t\n"
      "topology: {kind: fleet, hosts: 2, ranks_per_host: 2, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 2s}\n",
      2, "fleet", "unknown topology.kind 'fleet'");
  // The netns topology does not take inventory keys.
  EXPECT_ERROR_AT(
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 2, rails: 2, file: h.yaml}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 2s}\n",
      2, "file", "unknown key 'file' in topology");
}

// A temporary folder holding a scenario and its host file; removed by the destructor.
class HostFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/faultline_inventory_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::filesystem::create_directories(dir_ + "/hosts");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& text) {
    std::ofstream(dir_ + "/" + rel) << text;
  }
  std::string dir_;
};

const char* kScenarioWithFile =
    "name: t\n"
    "topology: {kind: inventory, ranks_per_host: 1, file: hosts/h.yaml}\n"
    "workload: {op: allreduce, bytes: 1MiB, duration: 4s}\n"
    "faults:\n"
    "  - {id: d, at: 1s, type: link_down, target: {host: b, rail: 1}, for: 1s}\n";

TEST_F(HostFileTest, ResolvedAgainstTheScenarioFolder) {
  Write("hosts/h.yaml",
        "hosts:\n"
        "  - {name: a, rails: [{netdev: eth1}, {netdev: eth2}]}\n"
        "  - {name: b, rails: [{netdev: eth1}, {netdev: eth2}]}\n");
  Write("s.yaml", kScenarioWithFile);
  ParseOutcome r = ParseScenarioFile(dir_ + "/s.yaml");
  ASSERT_TRUE(r.ok()) << Dump(r.diagnostics);
  const Topology& t = r.scenario->topology;
  EXPECT_EQ(t.inventory_file, dir_ + "/hosts/h.yaml");
  EXPECT_EQ(t.hosts, 2);
  EXPECT_EQ(t.rails, 2);
  ASSERT_EQ(r.scenario->faults.size(), 1u);
  EXPECT_EQ(r.scenario->faults[0].target.host, 1);  // named 'b'
  EXPECT_EQ(r.scenario->faults[0].target.rail, 1);
  // From another working directory the same file still finds its host file.
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path("/");
  ParseOutcome again = ParseScenarioFile(dir_ + "/s.yaml");
  std::filesystem::current_path(cwd);
  EXPECT_TRUE(again.ok()) << Dump(again.diagnostics);
}

TEST_F(HostFileTest, ErrorsNameTheHostFileAndItsPosition) {
  const std::string hosts =
      "hosts:\n"
      "  - {name: a, rails: [{netdev: eth1}, {netdev: eth2}]}\n"
      "  - {name: a, rails: [{netdev: eth1}, {netdev: eth1}]}\n";
  Write("hosts/h.yaml", hosts);
  Write("s.yaml", kScenarioWithFile);
  ParseOutcome r = ParseScenarioFile(dir_ + "/s.yaml");
  ASSERT_FALSE(r.ok());
  const std::string host_file = dir_ + "/hosts/h.yaml";
  const Diagnostic* dup =
      Find(r.diagnostics, 3, Col(hosts, 3, "a,"), "host name 'a' is listed twice");
  ASSERT_NE(dup, nullptr) << Dump(r.diagnostics);
  EXPECT_EQ(dup->file, host_file);
  const Diagnostic* nd =
      Find(r.diagnostics, 3, Col(hosts, 3, "eth1}]"), "netdev 'eth1' is already rail 0");
  ASSERT_NE(nd, nullptr) << Dump(r.diagnostics);
  EXPECT_EQ(nd->file, host_file);
  EXPECT_NE(nd->ToString().find(host_file + ":3:"), std::string::npos) << nd->ToString();
  // The scenario says which of its keys brought the host file in.
  const Diagnostic* at_file =
      Find(r.diagnostics, 2, Col(kScenarioWithFile, 2, "hosts/h.yaml"), "is not valid");
  ASSERT_NE(at_file, nullptr) << Dump(r.diagnostics);
  EXPECT_EQ(at_file->file, dir_ + "/s.yaml");
}

TEST_F(HostFileTest, SyntaxErrorAndMissingFile) {
  Write("hosts/h.yaml", "hosts:\n  - {name: a, rails: [{netdev: eth1}\n");
  Write("s.yaml", kScenarioWithFile);
  ParseOutcome r = ParseScenarioFile(dir_ + "/s.yaml");
  ASSERT_FALSE(r.ok());
  bool syntax = false;
  for (const auto& d : r.diagnostics) {
    syntax |= d.file == dir_ + "/hosts/h.yaml" && d.loc.line >= 2 &&
              d.message.find("YAML syntax error") != std::string::npos;
  }
  EXPECT_TRUE(syntax) << Dump(r.diagnostics);
  std::filesystem::remove(dir_ + "/hosts/h.yaml");
  ParseOutcome gone = ParseScenarioFile(dir_ + "/s.yaml");
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(Find(gone.diagnostics, 2, Col(kScenarioWithFile, 2, "hosts/h.yaml"), "is not a file"),
            nullptr)
      << Dump(gone.diagnostics);
  // Not a mapping with hosts:.
  Write("hosts/h.yaml", "- {name: a, rails: [{netdev: eth1}]}\n");
  ParseOutcome list = ParseScenarioFile(dir_ + "/s.yaml");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(Find(list.diagnostics, 1, 1, "a host file must be a mapping with 'hosts:'"), nullptr)
      << Dump(list.diagnostics);
}

TEST_F(HostFileTest, OversizedHostFileIsRefusedUnread) {
  Write("hosts/h.yaml", "hosts:\n" + std::string(kMaxHostFileBytes, '#') + "\n");
  InventoryOutcome r = ParseInventoryFile(dir_ + "/hosts/h.yaml");
  ASSERT_EQ(r.diagnostics.size(), 1u) << Dump(r.diagnostics);
  EXPECT_NE(r.diagnostics[0].message.find("larger than 4 MiB"), std::string::npos)
      << Dump(r.diagnostics);
  // One byte under the limit is read and parsed (a comment after the hosts).
  Write("hosts/h.yaml",
        "hosts: [{name: a, rails: [{netdev: e1}]}]\n#" + std::string(kMaxHostFileBytes - 44, 'x'));
  InventoryOutcome fits = ParseInventoryFile(dir_ + "/hosts/h.yaml");
  EXPECT_TRUE(fits.ok()) << Dump(fits.diagnostics);
}

const char* kInvHead =
    "name: t\n"
    "topology:\n"
    "  kind: inventory\n"
    "  ranks_per_host: 1\n";
const char* kInvTail = "workload: {op: allreduce, bytes: 1MiB, duration: 4s}\n";

std::string Inv(const std::string& middle) { return kInvHead + middle + kInvTail; }

TEST(InventoryErrors, HostsListAndKeys) {
  EXPECT_ERROR_AT(Inv("  hosts: []\n"), 5, "[]", "hosts must be a non-empty list");
  EXPECT_ERROR_AT(Inv("  hosts: {name: a}\n"), 5, "{", "hosts must be a non-empty list");
  EXPECT_ERROR_AT(Inv("  hosts: [{name: a, rails: [{netdev: e1}], gpus: 8}]\n"), 5, "gpus",
                  "unknown key 'gpus' in host 0");
  EXPECT_ERROR_AT(Inv("  hosts: [{name: a, rails: [{netdev: e1, mtu: 9000}]}]\n"), 5, "mtu",
                  "unknown key 'mtu' in host 'a' rail 0");
  EXPECT_ERROR_AT(Inv("  hosts: [{rails: [{netdev: e1}]}]\n"), 5, "{rails",
                  "missing required key 'name' in host 0");
  EXPECT_ERROR_AT(Inv("  hosts: [{name: a}]\n"), 5, "{name", "missing required key 'rails'");
  EXPECT_ERROR_AT(Inv("  hosts: [{name: a, rails: []}]\n"), 5, "[]}",
                  "host 'a'.rails must be a non-empty list");
  EXPECT_ERROR_AT(Inv("  hosts: [{name: a, rails: [{rdma: mlx5_0}]}]\n"), 5, "{rdma",
                  "missing required key 'netdev'");
  EXPECT_ERROR_AT(Inv("  hosts: [{name: a, ranks: 4, rails: [{netdev: e1}]}]\n"), 5, "4",
                  "ranks are set once for every host");
  EXPECT_ERROR_AT(Inv("  hosts: [a, b]\n"), 5, "a,", "host 0 must be a mapping");
}

TEST(InventoryErrors, DuplicatesAndMismatches) {
  EXPECT_ERROR_AT(Inv("  hosts:\n"
                      "    - {name: a, rails: [{netdev: e1}]}\n"
                      "    - {name: a, rails: [{netdev: e1}]}\n"),
                  7, "a,", "host name 'a' is listed twice (also host 0)");
  EXPECT_ERROR_AT(Inv("  hosts: [{name: a, rails: [{netdev: e1}, {netdev: e2}, {netdev: e1}]}]\n"),
                  5, "e1}]", "netdev 'e1' is already rail 0");
  EXPECT_ERROR_AT(Inv("  hosts: [{name: a, rails: [{netdev: e1, rdma: m0}, {netdev: e2, rdma: m0, "
                      "port: 1}]}]\n"),
                  5, "m0, port", "RDMA port m0/1 is already rail 0");
  // The same device on two ports is two rails.
  ParseOutcome two_ports = ParseScenario(
      Inv("  hosts: [{name: a, rails: [{netdev: e1, rdma: m0, port: 1}, {netdev: e2, rdma: m0, "
          "port: 2}]}]\n"),
      "t.yaml");
  EXPECT_TRUE(two_ports.ok()) << Dump(two_ports.diagnostics);
  // The same netdev name on two hosts is normal.
  const std::string mismatch =
      Inv("  hosts:\n"
          "    - {name: a, rails: [{netdev: e1}, {netdev: e2}]}\n"
          "    - {name: b, rails: [{netdev: e1}]}\n"
          "    - {name: c, rails: [{netdev: e1}, {netdev: e2}]}\n");
  auto ds = Errors(mismatch);
  EXPECT_NE(Find(ds, 7, Col(mismatch, 7, "[{"), "host 'b' has 1 rail, host 'a' has 2"), nullptr)
      << Dump(ds);
  EXPECT_EQ(ds.size(), 1u) << Dump(ds);
}

TEST(InventoryErrors, PortNeedsRdma) {
  EXPECT_ERROR_AT(Inv("  hosts: [{name: a, rails: [{netdev: e1, port: 1}]}]\n"), 5, "1}]",
                  "port needs 'rdma'");
  EXPECT_ERROR_AT(Inv("  hosts: [{name: a, rails: [{netdev: e1, rdma: m0, port: 0}]}]\n"), 5, "0}",
                  "port must be in [1, 255]");
}

TEST(InventoryErrors, BadNames) {
  EXPECT_ERROR_AT(Inv("  hosts: [{name: a, rails: [{netdev: abcdefghijklmnop}]}]\n"), 5,
                  "abcdefghijklmnop", "is not a valid interface name");
  EXPECT_ERROR_AT(Inv("  hosts: [{name: a, rails: [{netdev: eth/1}]}]\n"), 5, "eth/1",
                  "is not a valid interface name");
  EXPECT_ERROR_AT(Inv("  hosts: [{name: a, rails: [{netdev: 'eth 1'}]}]\n"), 5, "'eth 1'",
                  "is not a valid interface name");
  EXPECT_ERROR_AT(Inv("  hosts: [{name: a, rails: [{netdev: 'eth1:0'}]}]\n"), 5, "'eth1:0'",
                  "is not a valid interface name");
  EXPECT_ERROR_AT(Inv("  hosts: [{name: a, rails: [{netdev: ..}]}]\n"), 5, "..",
                  "is not a valid interface name");
  EXPECT_ERROR_AT(Inv("  hosts: [{name: a, rails: [{netdev: e1, rdma: 'ml x5'}]}]\n"), 5, "'ml x5'",
                  "is not a valid RDMA device name");
  EXPECT_ERROR_AT(Inv("  hosts: [{name: -a, rails: [{netdev: e1}]}]\n"), 5, "-a",
                  "is not a valid host name");
  EXPECT_ERROR_AT(Inv("  hosts: [{name: a, addr: 10.0.0.300, rails: [{netdev: e1}]}]\n"), 5,
                  "10.0.0.300", "is not an IP address");
  EXPECT_ERROR_AT(Inv("  hosts: [{name: a, rails: [{netdev: e1, addr: node}]}]\n"), 5, "node}",
                  "is not an IP address");
  ParseOutcome v6 = ParseScenario(
      Inv("  hosts: [{name: a.b_c-1, addr: 'fd00::1', rails: [{netdev: abcdefghijklmno, addr: "
          "'fd00:1::1'}]}]\n"),
      "t.yaml");
  EXPECT_TRUE(v6.ok()) << Dump(v6.diagnostics);
}

TEST(InventoryErrors, NameRules) {
  EXPECT_TRUE(ValidNetdevName("ens1f0np0"));
  EXPECT_TRUE(ValidNetdevName("ib0.8001"));
  EXPECT_TRUE(ValidNetdevName(std::string(15, 'x')));
  EXPECT_FALSE(ValidNetdevName(std::string(16, 'x')));
  EXPECT_FALSE(ValidNetdevName(""));
  EXPECT_FALSE(ValidNetdevName("."));
  EXPECT_FALSE(ValidNetdevName("a\tb"));
  EXPECT_TRUE(ValidRdmaDeviceName("mlx5_0"));
  EXPECT_FALSE(ValidRdmaDeviceName(std::string(64, 'x')));
  EXPECT_FALSE(ValidRdmaDeviceName("a/b"));
  EXPECT_TRUE(ValidHostName("gpu-node07.cluster"));
  EXPECT_FALSE(ValidHostName(""));
  EXPECT_FALSE(ValidHostName("a b"));
  EXPECT_TRUE(ValidIpAddress("198.18.0.1"));
  EXPECT_FALSE(ValidIpAddress("198.18.0"));
}

TEST(InventoryErrors, ShapingAndNetnsKeysRefused) {
  EXPECT_ERROR_AT(Inv("  rail_gbps: 10\n  hosts: [{name: a, rails: [{netdev: e1}]}]\n"), 5,
                  "rail_gbps", "topology.rail_gbps shapes the emulated network");
  EXPECT_ERROR_AT(Inv("  nics: per_rank\n  hosts: [{name: a, rails: [{netdev: e1}]}]\n"), 5, "nics",
                  "topology.nics shapes the emulated network");
  EXPECT_ERROR_AT(Inv("  arp_retrans_ms: 100\n  hosts: [{name: a, rails: [{netdev: e1}]}]\n"), 5,
                  "arp_retrans_ms", "does not apply to kind: inventory");
  EXPECT_ERROR_AT(Inv("  rails: 2\n  hosts: [{name: a, rails: [{netdev: e1}]}]\n"), 5, "rails",
                  "topology.rails is not set under kind: inventory");
  EXPECT_ERROR_AT(Inv("  file: h.yaml\n  hosts: [{name: a, rails: [{netdev: e1}]}]\n"), 5, "file",
                  "both 'hosts' and 'file'");
  EXPECT_ERROR_AT(Inv("  racks: 2\n  hosts: [{name: a, rails: [{netdev: e1}]}]\n"), 5, "racks",
                  "unknown key 'racks' in topology");
  const std::string neither = std::string(kInvHead) + kInvTail;
  EXPECT_ERROR_AT(neither, 3, "kind", "needs 'hosts' or 'file'");
  EXPECT_ERROR_AT(
      "name: t\n"
      "topology: {kind: inventory, hosts: [{name: a, rails: [{netdev: e1}]}]}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 4s}\n",
      2, "{kind", "missing required key 'ranks_per_host'");
}

TEST(InventoryTargets, MustExistInTheInventory) {
  const std::string& base = kMixed;
  EXPECT_ERROR_AT(base + "  - {id: f, at: 1s, type: link_down, target: {host: 2, rail: 0}}\n", 13,
                  "2,", "host 2 does not exist: the topology has 2 hosts");
  EXPECT_ERROR_AT(base + "  - {id: f, at: 1s, type: link_down, target: {host: node3, rail: 0}}\n",
                  13, "node3", "host 'node3' is not in the inventory");
  EXPECT_ERROR_AT(base + "  - {id: f, at: 1s, type: link_down, target: {host: 0, rail: 2}}\n", 13,
                  "2}", "rail 2 does not exist: the topology has 2 rails");
  EXPECT_ERROR_AT(base + "  - {id: f, at: 1s, type: rank_kill, target: {host: node01, rank: 2}}\n",
                  13, "2}", "rank 2 does not exist");
  EXPECT_ERROR_AT(base +
                      "  - {id: f, at: 1s, type: link_down, target: {host: 0, rail: 0, side: "
                      "switch}}\n",
                  13, "switch", "side: switch does not apply to an inventory host");
  // A real NIC's netdev cannot be deleted: port_drop keeps it and takes the port down.
  EXPECT_ERROR_AT(base +
                      "  - {id: f, at: 1s, type: port_drop, target: {host: 0, rail: 1}, remove: "
                      "true}\n",
                  13, "true", "remove: true does not apply to an inventory host");
  EXPECT_TRUE(ParseScenario(base + "  - {id: f, at: 1s, type: port_drop, target: {host: 0, rail: "
                                   "1}, remove: false}\n",
                            "t.yaml")
                  .ok());
  ParseOutcome named = ParseScenario(
      base + "  - {id: f, at: 1s, type: link_down, target: {host: node02, rail: 0}, for: 1s}\n",
      "t.yaml");
  ASSERT_TRUE(named.ok()) << Dump(named.diagnostics);
  EXPECT_EQ(named.scenario->faults[0].target.host, 1);
}

// A packet-level kind with its parameters, as a fault line against `target`.
struct PacketFault {
  const char* type;
  const char* rest;
};

class PacketFaultOnRdma : public ::testing::TestWithParam<PacketFault> {};

TEST_P(PacketFaultOnRdma, RefusedAtTheFault) {
  const PacketFault& p = GetParam();
  const std::string line = std::string("  - {id: f, at: 1s, type: ") + p.type +
                           ", target: {host: 1, rail: 0}" + p.rest + "}\n";
  const std::string yaml = kMixed + line;
  auto ds = Errors(yaml);
  const Diagnostic* d = Find(ds, 13, Col(yaml, 13, "{id"),
                             std::string(p.type) +
                                 " cannot act on host 'node02' "
                                 "rail 0 (ens1f0np0, RDMA mlx5_0 "
                                 "port 1)");
  ASSERT_NE(d, nullptr) << Dump(ds);
  EXPECT_NE(d->message.find("would have no effect"), std::string::npos) << d->message;
  EXPECT_NE(d->hint.find("qp_error"), std::string::npos) << d->hint;
  EXPECT_EQ(ds.size(), 1u) << Dump(ds);
  // The same fault on the host's plain Ethernet rail acts, so it is accepted.
  const std::string eth = kMixed + std::string("  - {id: f, at: 1s, type: ") + p.type +
                          ", target: {host: 1, rail: 1}" + p.rest + "}\n";
  ParseOutcome r = ParseScenario(eth, "t.yaml");
  EXPECT_TRUE(r.ok()) << Dump(r.diagnostics);
}

INSTANTIATE_TEST_SUITE_P(Kinds, PacketFaultOnRdma,
                         ::testing::Values(PacketFault{"loss", ", percent: 5%, for: 1s"},
                                           PacketFault{"blackhole", ", for: 1s"},
                                           PacketFault{"bandwidth", ", rate: 1Gbps, for: 1s"},
                                           PacketFault{"delay", ", delay: 10ms, for: 1s"},
                                           PacketFault{"jitter", ", jitter: 5ms, for: 1s"},
                                           PacketFault{"corrupt", ", percent: 1%, for: 1s"},
                                           PacketFault{"reorder", ", percent: 5%, for: 1s"},
                                           PacketFault{"conn_reset", ""}),
                         [](const ::testing::TestParamInfo<PacketFault>& i) {
                           return std::string(i.param.type);
                         });

TEST(InventoryFaults, LinkHookAndRankFaultsActOnRdmaRails) {
  const std::string yaml = kMixed +
                           "  - {id: a, at: 1s, type: link_down, target: {host: 0, rail: 0}, for: "
                           "500ms}\n"
                           "  - {id: b, at: 2s, type: link_flap, target: {host: 0, rail: 0}, down: "
                           "100ms, up: 100ms, count: 2}\n"
                           "  - {id: c, at: 3s, type: qp_error, target: {host: 0, rank: 0, rail: "
                           "0}, peer: 2}\n"
                           "  - {id: d, at: 3s, type: conn_corrupt, target: {host: 1, rank: 1, "
                           "rail: 0}, peer: 0}\n"
                           "  - {id: e, at: 4s, type: rank_pause, target: {host: 1, rank: 0}, for: "
                           "100ms}\n"
                           "  - {id: g, at: 6s, type: port_drop, target: {host: 1, rail: 0}}\n";
  ParseOutcome r = ParseScenario(yaml, "t.yaml");
  ASSERT_TRUE(r.ok()) << Dump(r.diagnostics);
  EXPECT_EQ(r.scenario->faults.size(), 6u);
}

TEST(InventoryFaults, MatrixOverRanksPerHost) {
  const std::string yaml =
      "name: t\n"
      "topology: {kind: inventory, hosts: [{name: a, rails: [{netdev: e1}]}, {name: b, rails: "
      "[{netdev: e1}]}]}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 4s}\n"
      "matrix: {ranks_per_host: [1, 4]}\n";
  ExpandOutcome e = ExpandScenario(yaml, "t.yaml");
  ASSERT_TRUE(e.ok()) << Dump(e.diagnostics);
  ASSERT_EQ(e.runs.size(), 2u);
  EXPECT_EQ(e.runs[1].topology.world_size(), 8);
  EXPECT_EQ(e.runs[1].topology.kind, TopologyKind::kInventory);
}

TEST(InventoryDescribe, ListsHostsRailsAndRdma) {
  ParseOutcome r = ParseScenario(kMixedHosts, "t.yaml");
  ASSERT_TRUE(r.ok()) << Dump(r.diagnostics);
  const std::string text = DescribeInventory(r.scenario->topology, "  ");
  EXPECT_EQ(text,
            "  topology: inventory (inline), 2 hosts, 2 ranks per host, 2 rails\n"
            "    host 0 node01 addr 10.0.0.1\n"
            "      rail 0 ens1f0np0 RDMA mlx5_0 port 1 addr 10.10.0.1\n"
            "      rail 1 eth1\n"
            "    host 1 node02\n"
            "      rail 0 ens1f0np0 RDMA mlx5_0 port 1\n"
            "      rail 1 eth1\n");
}

// The committed examples: every scenario under scenarios/inventory/ validates against its host
// file, and the host files parse on their own.
TEST(InventoryExamples, Validate) {
  const std::string dir = std::string(FAULTLINE_SOURCE_DIR) + "/scenarios/inventory";
  int scenarios = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".yaml") continue;
    ExpandOutcome r = ExpandScenarioFile(e.path().string());
    EXPECT_TRUE(r.ok()) << e.path() << "\n" << Dump(r.diagnostics);
    if (r.ok()) {
      EXPECT_TRUE(r.runs[0].topology.is_inventory()) << e.path();
    }
    ++scenarios;
  }
  EXPECT_GE(scenarios, 2);
  int host_files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/hosts")) {
    InventoryOutcome r = ParseInventoryFile(e.path().string());
    EXPECT_TRUE(r.ok()) << e.path() << "\n" << Dump(r.diagnostics);
    ++host_files;
  }
  EXPECT_GE(host_files, 1);
  // The RDMA example refuses a packet fault on its rails, at the fault.
  ParseOutcome qp = ParseScenarioFile(dir + "/qp_error.yaml");
  ASSERT_TRUE(qp.ok()) << Dump(qp.diagnostics);
  EXPECT_TRUE(qp.scenario->topology.inventory[1].rails[1].is_rdma());
}

// --inventory: a netns scenario placed on a host file of its shape.
InventoryPlacement Placement(const std::string& hosts_yaml) {
  InventoryOutcome inv = ParseInventory(hosts_yaml, "hosts.yaml");
  EXPECT_TRUE(inv.ok()) << Dump(inv.diagnostics);
  return {inv.hosts, "/abs/hosts.yaml"};
}

const char* kRdmaHosts =
    "hosts:\n"
    "  - {name: lab0, addr: 127.0.0.1, rails: [{netdev: r0k0, rdma: rxe_r0k0}, {netdev: r1k0, "
    "rdma: rxe_r1k0}]}\n"
    "  - {name: lab1, addr: 127.0.0.1, rails: [{netdev: r0k1, rdma: rxe_r0k1}, {netdev: r1k1, "
    "rdma: rxe_r1k1}]}\n";

// Lines 1..4; faults from line 5.
const std::string kNetns2x2 =
    "name: t\n"
    "topology: {hosts: 2, ranks_per_host: 3, rails: 2, rail_gbps: 5, arp_retrans_ms: 100}\n"
    "workload: {op: allreduce, bytes: 1MiB, duration: 4s}\n"
    "faults:\n";

TEST(InventoryPlacementTest, NetnsScenarioRunsOnTheHostFile) {
  const InventoryPlacement place = Placement(kRdmaHosts);
  const std::string yaml =
      kNetns2x2 +
      "  - {id: q, at: 1s, type: qp_error, target: {host: 1, rank: 1, rail: 1}, peer: 0}\n" +
      "  - {id: l, at: 2s, type: link_down, target: {host: 0, rail: 0}, for: 500ms}\n";
  ExpandOutcome e = ExpandScenario(yaml, "t.yaml", &place);
  ASSERT_TRUE(e.ok()) << Dump(e.diagnostics);
  const Topology& t = e.runs[0].topology;
  EXPECT_TRUE(t.is_inventory());
  EXPECT_EQ(t.hosts, 2);
  EXPECT_EQ(t.rails, 2);
  EXPECT_EQ(t.ranks_per_host, 3);  // the scenario's
  EXPECT_EQ(t.inventory_file, "/abs/hosts.yaml");
  EXPECT_EQ(t.inventory[1].rails[1].netdev, "r1k1");
  EXPECT_FALSE(t.arp_retrans_ms.has_value());  // shaping of the emulated network: dropped
  EXPECT_TRUE(IsLocalInventory(t));
  EXPECT_TRUE(InventoryAllRdma(t));
  // Without the placement the same text stays on namespaces.
  ExpandOutcome own = ExpandScenario(yaml, "t.yaml");
  ASSERT_TRUE(own.ok()) << Dump(own.diagnostics);
  EXPECT_FALSE(own.runs[0].topology.is_inventory());
  EXPECT_FALSE(IsLocalInventory(own.runs[0].topology));
}

TEST(InventoryPlacementTest, PacketFaultOnAnRdmaRailRefusedAtTheScenariosLine) {
  const InventoryPlacement place = Placement(kRdmaHosts);
  const std::string yaml =
      kNetns2x2 + "  - {id: b, at: 1s, type: blackhole, target: {host: 1, rail: 0}, for: 1s}\n";
  ExpandOutcome e = ExpandScenario(yaml, "t.yaml", &place);
  ASSERT_FALSE(e.ok());
  ASSERT_NE(Find(e.diagnostics, 5, Col(yaml, 5, "{id"),
                 "blackhole cannot act on host 'lab1' rail 0 (r0k1, RDMA rxe_r0k1 port 1)"),
            nullptr)
      << Dump(e.diagnostics);
  // A switch-side link fault cannot reach an inventory host's switch either.
  const std::string sw =
      kNetns2x2 +
      "  - {id: s, at: 1s, type: link_down, target: {host: 1, rail: 0, side: switch}, "
      "for: 1s}\n";
  EXPECT_FALSE(ExpandScenario(sw, "t.yaml", &place).ok());
  EXPECT_TRUE(ExpandScenario(sw, "t.yaml").ok());
}

TEST(InventoryPlacementTest, MisfitsAreErrorsAtTheTopology) {
  const InventoryPlacement place = Placement(kRdmaHosts);
  struct Case {
    const char* topology;
    const char* text;
  } cases[] = {
      {"{hosts: 3, ranks_per_host: 1, rails: 2}", "it wants 3 hosts, the inventory lists 2"},
      {"{hosts: 2, ranks_per_host: 1, rails: 1}", "it wants 1 rails, the inventory's hosts have 2"},
      {"{hosts: 2, ranks_per_host: 2, rails: 2, nics: per_rank}", "a NIC per rank"},
  };
  for (const Case& c : cases) {
    const std::string yaml = std::string("name: t\ntopology: ") + c.topology +
                             "\nworkload: {op: allreduce, bytes: 1MiB, duration: 4s}\n";
    ExpandOutcome e = ExpandScenario(yaml, "t.yaml", &place);
    ASSERT_FALSE(e.ok()) << c.topology;
    EXPECT_NE(Find(e.diagnostics, 2, Col(yaml, 2, "{"), c.text), nullptr) << c.topology << "\n"
                                                                          << Dump(e.diagnostics);
    EXPECT_NE(e.diagnostics[0].message.find("/abs/hosts.yaml"), std::string::npos);
  }
  // A scenario that names its hosts already is not placed again.
  const std::string inv = std::string(kMixedHosts);
  ExpandOutcome e = ExpandScenario(inv, "t.yaml", &place);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(Find(e.diagnostics, 3, Col(inv, 3, "inventory"), "names its hosts already"), nullptr)
      << Dump(e.diagnostics);
}

TEST(InventoryPlacementTest, LocalOnlyWhenEveryHostIsOnLoopback) {
  ParseOutcome mixed = ParseScenario(kMixedHosts, "t.yaml");
  ASSERT_TRUE(mixed.ok()) << Dump(mixed.diagnostics);
  EXPECT_FALSE(IsLocalInventory(mixed.scenario->topology));  // 10.0.0.1, and no addr
  EXPECT_FALSE(InventoryAllRdma(mixed.scenario->topology));  // eth1 has no rdma
  InventoryPlacement place = Placement(kRdmaHosts);
  Topology t;
  t.kind = TopologyKind::kInventory;
  t.inventory = place.hosts;
  t.inventory[0].addr = "127.0.0.53";
  EXPECT_TRUE(IsLocalInventory(t));
  t.inventory[1].addr = "";
  EXPECT_FALSE(IsLocalInventory(t));
  t.inventory[1].addr = "::1";  // the bootstrap's address is IPv4
  EXPECT_FALSE(IsLocalInventory(t));
  t.inventory[1].addr = "128.0.0.1";
  EXPECT_FALSE(IsLocalInventory(t));
  t.inventory[1].addr = "127.255.0.1";
  EXPECT_TRUE(IsLocalInventory(t));
  t.inventory[1].rails[0].rdma.clear();
  EXPECT_FALSE(InventoryAllRdma(t));
}

}  // namespace
}  // namespace faultline::runner
