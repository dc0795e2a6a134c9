// The incident importer (runner/incident/incident_import.h): per-host clocks aligned by their
// wall - kernel offsets, switch ports, symptoms turned into a reproduce: verdict, and the
// verdict itself (CheckReproduce).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runner/core/checks.h"
#include "runner/incident/incident_import.h"
#include "runner/incident/link_log.h"
#include "runner/core/scenario.h"

namespace faultline::runner {
namespace {

std::string ReadFixture(const std::string& name) {
  std::ifstream in(std::string(FAULTLINE_SOURCE_DIR) + "/tests/data/incidents/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Diags(const std::vector<Diagnostic>& d) {
  std::string out;
  for (const auto& x : d) out += x.ToString() + "\n";
  return out;
}

// Every run of the imported scenario validates; returns them.
std::vector<Scenario> Runs(const ImportResult& r) {
  ExpandOutcome e = ExpandScenario(r.yaml, "imported.yaml");
  EXPECT_TRUE(e.ok()) << Diags(e.diagnostics) << r.yaml;
  return e.runs;
}

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000'000'000;

LinkEvent Link(const std::string& node, const std::string& dev, bool up, int64_t wall_ns,
               LinkSource src = LinkSource::kKernel, int64_t res = kS / 1000) {
  LinkEvent e;
  e.file = node + ".log";
  e.line = 1;
  e.text = node + " " + dev + (up ? " up" : " down");
  e.node = node;
  e.names = {dev};
  e.up = up;
  e.source = src;
  e.wall_ns = wall_ns;
  e.wall_res_ns = res;
  return e;
}

Symptom Sym(const std::string& node, int local, const std::string& kind,
            std::optional<int64_t> wall_ns) {
  Symptom s;
  s.file = "job.out";
  s.line = 7;
  s.text = "NCCL WARN ...";
  s.node = node;
  s.local_rank = local;
  s.kind = kind;
  s.wall_ns = wall_ns;
  s.wall_res_ns = wall_ns ? 1000 : 0;
  return s;
}

const int64_t kT0 = 1'764'299'647LL * kS;  // 2025-11-28T03:14:07Z

// The acceptance sample: two hosts' syslog lines interleaved, a 200 ms outage on one and a
// 3.5 s outage on the other by their kernel clocks, wall stamps of one second.
TEST(IncidentImport, TwoHostSyslogKeepsSubSecondOutagesByTheKernelClock) {
  ParsedLog log = ParseIncidentLog(ReadFixture("two-host-syslog.log"), "two-host-syslog.log", "", 2026);
  ASSERT_EQ(log.links.size(), 4u);
  ImportOptions o;
  o.map["gpu-node-17:ens1f0np0"] = {0, 0, LinkSide::kHost};
  o.map["gpu-node-18:ens1f1np1"] = {1, 1, LinkSide::kHost};
  auto r = ImportIncident({log}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto runs = Runs(*r);
  ASSERT_EQ(runs.size(), 1u);
  const Scenario& s = runs[0];
  ASSERT_EQ(s.faults.size(), 2u);
  // Lengths within 1 ms (the wall stamps alone say 0 s and 4 s).
  EXPECT_EQ(s.faults[0].target.host, 0);
  EXPECT_NEAR(static_cast<double>(*s.faults[0].for_ns), 200.0 * kMs, 1.0 * kMs);
  EXPECT_EQ(s.faults[1].target.host, 1);
  EXPECT_NEAR(static_cast<double>(*s.faults[1].for_ns), 3500.0 * kMs, 1.0 * kMs);
  // The hosts' true distance is 1.5 s; the alignment is good to the precision it states.
  ASSERT_EQ(r->clocks.size(), 2u);
  for (const ClockDomain& d : r->clocks) {
    EXPECT_TRUE(d.kernel) << d.name;
    EXPECT_TRUE(d.consistent) << d.name;
    ASSERT_TRUE(d.precision_ns.has_value()) << d.name;
  }
  EXPECT_EQ(r->clocks[0].name, "gpu-node-17");
  EXPECT_EQ(r->clocks[0].samples, 5);
  // Fractions .776544 .226544 .4 .6 .276544 of the true wall time: offset in a 450 ms interval.
  EXPECT_NEAR(static_cast<double>(*r->clocks[0].precision_ns), 225.0 * kMs, 0.01 * kMs);
  EXPECT_EQ(r->clocks[1].samples, 4);
  EXPECT_NEAR(static_cast<double>(*r->clocks[1].precision_ns), 100.0 * kMs, 0.01 * kMs);
  const double gap = static_cast<double>(s.faults[1].at_ns - s.faults[0].at_ns);
  EXPECT_NEAR(gap, 1500.0 * kMs, 225.0 * kMs + 100.0 * kMs);
  EXPECT_NE(r->yaml.find("+-225.0 ms"), std::string::npos) << r->yaml;
  EXPECT_NE(r->yaml.find("aligned within"), std::string::npos) << r->yaml;
}

TEST(IncidentImport, SingleDmesgStaysOnItsKernelClock) {
  ParsedLog log = ParseIncidentLog(
      "[  100.000000] mlx5_core 0000:08:00.0 eth2: Link down\n"
      "[  100.150000] mlx5_core 0000:08:00.0 eth2: Link up\n",
      "dmesg");
  ImportOptions o;
  o.map["eth2"] = {0, 1, LinkSide::kHost};
  auto r = ImportIncident({log}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto runs = Runs(*r);
  ASSERT_EQ(runs[0].faults.size(), 1u);
  EXPECT_EQ(*runs[0].faults[0].for_ns, 150 * kMs);
  EXPECT_NE(r->yaml.find("its kernel clock (no line carries a wall-clock time"), std::string::npos);
}

TEST(IncidentImport, TwoKernelHostsWithoutWallTimesCannotBeAligned) {
  ParsedLog a = ParseIncidentLog("[  100.000000] mlx5_core 0000:08:00.0 eth2: Link down\n", "a.log",
                                 "node-a");
  ParsedLog b = ParseIncidentLog("[  200.000000] mlx5_core 0000:08:00.0 eth2: Link down\n", "b.log",
                                 "node-b");
  ImportOptions o;
  o.map["node-a:eth2"] = {0, 0, LinkSide::kHost};
  o.map["node-b:eth2"] = {1, 0, LinkSide::kHost};
  auto r = ImportIncident({a, b}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kernel clock cannot be put on the common timeline"), std::string::npos)
      << r.status().message();
}

TEST(IncidentImport, DisagreeingClockSamplesAreSaidAndWidenThePrecision) {
  // A logging daemon that stamped one line 3 s late: the intervals do not intersect.
  ParsedLog log;
  log.links.push_back(Link("h", "eth2", false, kT0));
  log.links.back().kernel_s = 1000.0;
  log.links.push_back(Link("h", "eth2", true, kT0 + kS));
  log.links.back().kernel_s = 1000.5;
  log.links.back().line = 2;
  for (int i = 0; i < 3; ++i) {
    ClockSample c;
    c.node = "h";
    c.file = "h.log";
    c.line = 3 + i;
    c.kernel_s = 1001.0 + i;
    c.wall_ns = kT0 + (1 + i) * kS + (i == 2 ? 3 * kS : 0);
    c.wall_res_ns = kS;
    log.clocks.push_back(c);
  }
  ImportOptions o;
  o.map["h:eth2"] = {0, 0, LinkSide::kHost};
  auto r = ImportIncident({log}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->clocks.size(), 1u);
  EXPECT_FALSE(r->clocks[0].consistent);
  EXPECT_GE(*r->clocks[0].precision_ns, 2 * kS);  // half the 3 s spread + half a second
  EXPECT_NE(r->yaml.find("the lines disagree"), std::string::npos);
  EXPECT_EQ(*Runs(*r)[0].faults[0].for_ns, 500 * kMs);  // lengths still by the kernel clock
}

TEST(IncidentImport, SwitchPortOnItsOwnIsTheSwitchSide) {
  ParsedLog log;
  log.links.push_back(Link("leaf1", "Ethernet1/1", false, kT0, LinkSource::kSwitch));
  log.links.push_back(Link("leaf1", "Ethernet1/1", true, kT0 + 700 * kMs, LinkSource::kSwitch));
  // The same port name on another switch is not mapped.
  log.links.push_back(Link("leaf2", "Ethernet1/1", false, kT0, LinkSource::kSwitch));
  ImportOptions o;
  o.switch_map["leaf1:Ethernet1/1"] = {1, 0, LinkSide::kSwitch};
  auto r = ImportIncident({log}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto runs = Runs(*r);
  ASSERT_EQ(runs[0].faults.size(), 1u);
  EXPECT_EQ(runs[0].faults[0].target.side, LinkSide::kSwitch);
  EXPECT_EQ(runs[0].faults[0].target.host, 1);
  EXPECT_EQ(*runs[0].faults[0].for_ns, 700 * kMs);
  ASSERT_EQ(r->unmapped.size(), 1u);
  EXPECT_EQ(r->unmapped[0], "switch leaf2:Ethernet1/1");
  // A switch port is never looked up in the host devices' map.
  ImportOptions host_only;
  host_only.map["Ethernet1/1"] = {0, 0, LinkSide::kHost};
  EXPECT_FALSE(ImportIncident({log}, host_only).ok());
}

TEST(IncidentImport, TheSwitchViewOfAHostOutageIsCitedNotDoubled) {
  ParsedLog log;
  log.links.push_back(Link("gpu1", "ens1f0", false, kT0 + 10 * kMs));
  log.links.push_back(Link("gpu1", "ens1f0", true, kT0 + 2 * kS));
  log.links.push_back(Link("leaf1", "Ethernet4", false, kT0, LinkSource::kSwitch, kS));
  log.links.push_back(Link("leaf1", "Ethernet4", true, kT0 + 2 * kS, LinkSource::kSwitch, kS));
  ImportOptions o;
  o.map["gpu1:ens1f0"] = {0, 1, LinkSide::kHost};
  o.switch_map["leaf1:Ethernet4"] = {0, 1, LinkSide::kSwitch};
  auto r = ImportIncident({log}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto runs = Runs(*r);
  ASSERT_EQ(runs[0].faults.size(), 1u) << r->yaml;
  EXPECT_EQ(runs[0].faults[0].target.side, LinkSide::kHost);
  EXPECT_NE(r->yaml.find("also seen by the switch"), std::string::npos) << r->yaml;
  // On another rail the switch's outage is its own fault.
  o.switch_map["leaf1:Ethernet4"] = {0, 0, LinkSide::kSwitch};
  r = ImportIncident({log}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Runs(*r)[0].faults.size(), 2u);
}

TEST(IncidentImport, SymptomsBecomeAReproduceVerdictBesideTheSurvivalExpectation) {
  ParsedLog log;
  log.links.push_back(Link("gpu-node-17", "ens1f0np0", false, kT0));
  log.symptoms.push_back(Sym("gpu-node-17", 1, "ib_completion_error", kT0 + 22 * kS));
  log.symptoms.push_back(Sym("gpu-node-18", 1, "ib_completion_error", kT0 + 24 * kS));
  log.symptoms.push_back(Sym("gpu-node-18", 5, "abort", kT0 + 25 * kS));  // not mapped
  ImportOptions o;
  o.map["gpu-node-17:ens1f0np0"] = {0, 0, LinkSide::kHost};
  o.rank_map["gpu-node-17:1"] = {0, 1};
  o.rank_map["gpu-node-18:1"] = {1, 1};
  auto r = ImportIncident({log}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto runs = Runs(*r);
  ASSERT_EQ(runs.size(), 2u) << r->yaml;
  EXPECT_EQ(runs[0].ccl, CclName::kFtccl);
  EXPECT_FALSE(runs[0].JudgedByReproduce(runs[0].ccl));
  EXPECT_EQ(runs[1].ccl, CclName::kGloo);
  ASSERT_TRUE(runs[1].JudgedByReproduce(runs[1].ccl));
  const Reproduce& rep = *runs[1].reproduce;
  EXPECT_EQ(rep.outcome, "aborted_clean");
  EXPECT_EQ(rep.ranks, (std::vector<int>{1, 3}));
  // 1.5 x the incident's 24 s, rounded up to a second.
  EXPECT_EQ(rep.within_ns, 36 * kS);
  EXPECT_EQ(runs[0].topology.ranks_per_host, 2);
  ASSERT_EQ(r->symptoms.size(), 2u);
  EXPECT_NE(std::find(r->unmapped.begin(), r->unmapped.end(), "process gpu-node-18:5"),
            r->unmapped.end());
  EXPECT_NE(r->yaml.find("+24.000 s after the first fault"), std::string::npos) << r->yaml;
}

TEST(IncidentImport, TimeoutsAloneAreAHangAndOverridesApply) {
  ParsedLog log;
  log.links.push_back(Link("n", "eth0", false, kT0));
  log.symptoms.push_back(Sym("n", 0, "timeout", kT0 + 5 * kS));
  log.symptoms.push_back(Sym("n", 1, "timeout", std::nullopt));
  ImportOptions o;
  o.map["n:eth0"] = {0, 0, LinkSide::kHost};
  o.rank_map["n:0"] = {0, 0};
  o.rank_map["n:1"] = {0, 1};
  auto r = ImportIncident({log}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto runs = Runs(*r);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1].reproduce->outcome, "hung");
  EXPECT_EQ(runs[1].reproduce->within_ns, 30 * kS);  // the floor
  o.reproduce_outcome = "aborted_clean";
  o.within_ns = 12 * kS;
  r = ImportIncident({log}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  runs = Runs(*r);
  EXPECT_EQ(runs[1].reproduce->outcome, "aborted_clean");
  EXPECT_EQ(runs[1].reproduce->within_ns, 12 * kS);
}

TEST(IncidentImport, BadMappingsAreRefusedWithTheReason) {
  EXPECT_FALSE(ParseSwitchMapping("Ethernet1=host0/rail0").ok());
  EXPECT_FALSE(ParseRankMapping("node:x=host0/rank0").ok());
  auto sw = ParseSwitchMapping("leaf1:Ethernet1/1=host2/rail1");
  ASSERT_TRUE(sw.ok());
  EXPECT_EQ(sw->first, "leaf1:Ethernet1/1");
  EXPECT_EQ(sw->second.side, LinkSide::kSwitch);
  auto rk = ParseRankMapping("gpu-node-17:03=host1/rank1");
  ASSERT_TRUE(rk.ok());
  EXPECT_EQ(rk->first, "gpu-node-17:3");
  ParsedLog log;
  log.links.push_back(Link("n", "eth0", false, kT0));
  ImportOptions o;
  o.map["n:eth0"] = {0, 0, LinkSide::kHost};
  o.hosts = 2;
  o.rank_map["n:0"] = {5, 0};
  auto r = ImportIncident({log}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--hosts is 2"), std::string::npos) << r.status().message();
}

TEST(IncidentImport, ARebootStartsANewClockAndKeepsTheOrder) {
  // Outage A before a reboot, outage B an hour later on a fresh kernel clock.
  const char* log =
      "2026-11-28T03:00:00.100000+0000 h kernel: [ 1000.000000] mlx5_core 0000:08:00.0 eth2: Link down\n"
      "2026-11-28T03:00:01.100000+0000 h kernel: [ 1001.000000] mlx5_core 0000:08:00.0 eth2: Link up\n"
      "2026-11-28T04:00:00.200000+0000 h kernel: [   15.000000] mlx5_core 0000:08:00.0 eth2: Link down\n"
      "2026-11-28T04:00:00.700000+0000 h kernel: [   15.500000] mlx5_core 0000:08:00.0 eth2: Link up\n";
  ParsedLog parsed = ParseIncidentLog(log, "h.log");
  ASSERT_EQ(parsed.links.size(), 4u);
  ImportOptions o;
  o.map["h:eth2"] = {0, 0, LinkSide::kHost};
  auto r = ImportIncident({parsed}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->clocks.size(), 2u);
  for (const auto& d : r->clocks) EXPECT_TRUE(d.consistent) << d.name;
  auto runs = Runs(*r);
  ASSERT_EQ(runs[0].faults.size(), 2u);
  EXPECT_EQ(runs[0].faults[0].at_ns, 2 * kS);
  EXPECT_EQ(*runs[0].faults[0].for_ns, 1 * kS);
  EXPECT_NEAR(static_cast<double>(runs[0].faults[1].at_ns), 2.0 * kS + 3600.1 * kS, 1.0 * kMs);
  EXPECT_EQ(*runs[0].faults[1].for_ns, 500 * kMs);
  ASSERT_FALSE(r->warnings.empty());
  EXPECT_NE(r->warnings[0].reason.find("restarts here (a reboot)"), std::string::npos);
  EXPECT_EQ(r->warnings[0].line, 3);
}

TEST(IncidentImport, AnInterfaceNameOnSeveralHostsNeedsItsHost) {
  ParsedLog log;
  log.links.push_back(Link("nodeA", "eth2", false, kT0));
  log.links.push_back(Link("nodeB", "eth2", false, kT0 + kS));
  ImportOptions o;
  o.map["eth2"] = {0, 0, LinkSide::kHost};
  auto r = ImportIncident({log}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("matches eth2 on several hosts (nodeA, nodeB)"),
            std::string::npos)
      << r.status().message();
}

TEST(IncidentImport, TheTimelineStartsAtTheFirstDownNotAtAnEarlierUp) {
  ParsedLog log;
  log.links.push_back(Link("n", "eth0", true, kT0));  // the log starts mid-outage
  log.links.push_back(Link("n", "eth0", false, kT0 + 60 * kS));
  log.symptoms.push_back(Sym("n", 0, "ib_completion_error", kT0 + 80 * kS));
  ImportOptions o;
  o.map["n:eth0"] = {0, 0, LinkSide::kHost};
  o.rank_map["n:0"] = {0, 0};
  auto r = ImportIncident({log}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto runs = Runs(*r);
  EXPECT_EQ(runs[0].faults[0].at_ns, 2 * kS);
  EXPECT_EQ(runs[1].reproduce->within_ns, 30 * kS);  // 20 s after the down, not 80
  EXPECT_NE(r->yaml.find("+20.000 s after the first fault"), std::string::npos) << r->yaml;
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].reason.find("up without an outage open"), std::string::npos);
}

TEST(IncidentImport, AnOutageEndsWhenEveryViewOfTheLinkIsBack) {
  // The netdev's carrier returns at +1 s, the RDMA port (what RoCE traffic needs) at +3 s.
  ParsedLog log;
  log.links.push_back(Link("n", "ens1f0", false, kT0));
  log.links.push_back(Link("n", "mlx5_0/1", false, kT0 + 1 * kMs, LinkSource::kRdmaPort));
  log.links.push_back(Link("n", "ens1f0", true, kT0 + kS));
  log.links.push_back(Link("n", "mlx5_0/1", true, kT0 + 3 * kS, LinkSource::kRdmaPort));
  ImportOptions o;
  o.map["n:ens1f0"] = {0, 1, LinkSide::kHost};
  o.map["n:mlx5_0/1"] = {0, 1, LinkSide::kHost};
  auto r = ImportIncident({log}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto runs = Runs(*r);
  ASSERT_EQ(runs[0].faults.size(), 1u);
  EXPECT_EQ(*runs[0].faults[0].for_ns, 3 * kS);
  EXPECT_NE(r->yaml.find("another view: "), std::string::npos) << r->yaml;
}

TEST(IncidentImport, AGlobalRankMapsLinesThatNameOnlyTheRank) {
  ParsedLog log;
  log.links.push_back(Link("n", "eth0", false, kT0));
  Symptom s = Sym("", 0, "timeout", kT0 + 5 * kS);
  s.local_rank.reset();
  s.global_rank = 12;
  log.symptoms.push_back(s);
  ImportOptions o;
  o.map["n:eth0"] = {0, 0, LinkSide::kHost};
  auto rk = ParseRankMapping("rank12=host1/rank1");
  ASSERT_TRUE(rk.ok()) << rk.status().ToString();
  o.rank_map[rk->first] = rk->second;
  auto r = ImportIncident({log}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto runs = Runs(*r);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1].reproduce->ranks, (std::vector<int>{3}));
  EXPECT_EQ(runs[1].reproduce->outcome, "hung");
  // An explicit --ranks-per-host below the mapped ranks is refused, not raised.
  o.ranks_per_host = 1;
  auto bad = ImportIncident({log}, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--ranks-per-host is 1"), std::string::npos);
}

TEST(IncidentImport, AHostWithDmesgSyslogAndIpMonitorTimesEachEventOnItsOwn) {
  // dmesg (kernel only), syslog (both: the offset) and ip monitor (wall only) of one host.
  ParsedLog dmesg = ParseIncidentLog("[ 5000.100000] mlx5_core 0000:08:00.0 eth2: Link down\n"
                                     "[ 5000.350000] mlx5_core 0000:08:00.0 eth2: Link up\n",
                                     "h.dmesg", "h");
  ParsedLog syslog = ParseIncidentLog(
      "2026-11-28T03:00:00.500000+0000 h kernel: [ 4999.500000] EXT4-fs (sda1): re-mounted\n"
      "2026-11-28T03:00:02.000000+0000 h kernel: [ 5001.000000] EXT4-fs (sda1): re-mounted\n",
      "h.syslog", "h");
  ParsedLog ipmon = ParseIncidentLog(
      "[2026-11-28T03:00:05.000000] 3: eth3: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 state DOWN\n",
      "h.ipmon", "h");
  ImportOptions o;
  o.map["h:eth2"] = {0, 0, LinkSide::kHost};
  o.map["h:eth3"] = {0, 1, LinkSide::kHost};
  auto r = ImportIncident({dmesg, syslog, ipmon}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto runs = Runs(*r);
  ASSERT_EQ(runs[0].faults.size(), 2u) << r->yaml;
  EXPECT_EQ(*runs[0].faults[0].for_ns, 250 * kMs);  // by the kernel clock
  // eth3 went down 3:00:05.000 by the wall clock; eth2 at kernel 5000.1 = 3:00:01.1.
  EXPECT_NEAR(static_cast<double>(runs[0].faults[1].at_ns), 2.0 * kS + 3.9 * kS, 2.0 * kMs);
}

// --- the verdict --------------------------------------------------------------------------

History Replay(const std::vector<RankEnd>& ends) {
  History h;
  h.faults.emplace_back();
  h.faults.back().applied_ns = 2 * kS;
  h.ranks = ends;
  return h;
}

RankEnd End(int rank, RankExit exit, std::optional<int64_t> first_error_ns, int64_t end_ns) {
  RankEnd e;
  e.rank = rank;
  e.exit = exit;
  e.first_error_ns = first_error_ns;
  e.end_ns = end_ns;
  return e;
}

TEST(CheckReproduce, EveryListedRankMustFailWithinTheBound) {
  Reproduce rep;
  rep.outcome = "aborted_clean";
  rep.ranks = {1, 3};
  rep.within_ns = 30 * kS;
  RunMetrics m;
  m.outcome = Outcome::kAbortedClean;
  History h = Replay({End(0, RankExit::kError, 12 * kS, 13 * kS),
                      End(1, RankExit::kError, 12 * kS, 13 * kS),
                      End(2, RankExit::kCompleted, std::nullopt, 13 * kS),
                      End(3, RankExit::kError, 12500 * kMs, 13 * kS)});
  auto c = CheckReproduce(rep, m, h);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_TRUE(c[0].pass);
  EXPECT_TRUE(c[1].pass) << c[1].value.dump();
  EXPECT_DOUBLE_EQ(c[1].value["3"].get<double>(), 10500.0);
  // A listed rank that did not fail.
  rep.ranks = {1, 2};
  c = CheckReproduce(rep, m, h);
  EXPECT_FALSE(c[1].pass);
  EXPECT_EQ(c[1].value["2"], "did not fail");
  // Too late.
  rep.ranks = {1};
  rep.within_ns = 5 * kS;
  EXPECT_FALSE(CheckReproduce(rep, m, h)[1].pass);
  // Another outcome.
  m.outcome = Outcome::kSurvived;
  EXPECT_FALSE(CheckReproduce(rep, m, h)[0].pass);
  // Failed before the fault: not the incident's symptom.
  History early = Replay({End(1, RankExit::kError, 1 * kS, 13 * kS)});
  rep.ranks = {1};
  EXPECT_FALSE(CheckReproduce(rep, m, early)[1].pass);
  // A hang is not timed: a rank the run's watchdog ended long after the bound still hung.
  Reproduce hang = rep;
  hang.outcome = "hung";
  hang.within_ns = 5 * kS;
  RunMetrics hung_m;
  hung_m.outcome = Outcome::kHung;
  History hung_h = Replay({End(1, RankExit::kCrashed, std::nullopt, 90 * kS)});
  c = CheckReproduce(hang, hung_m, hung_h);
  EXPECT_TRUE(c[0].pass && c[1].pass) << c[1].ToJson().dump();
  EXPECT_FALSE(c[1].limit.contains("within_ms"));
  // No fault applied: nothing to count from.
  History none = h;
  none.faults.clear();
  rep.within_ns = 30 * kS;
  m.outcome = Outcome::kAbortedClean;
  c = CheckReproduce(rep, m, none);
  EXPECT_FALSE(c[1].pass);
  EXPECT_TRUE(c[1].value.is_null());
}

TEST(ReproduceKey, ParsedAndCheckedWithItsPlace) {
  const std::string base = R"(name: r
topology: {hosts: 2, ranks_per_host: 2, rails: 2}
matrix: {ccl: [ftccl, gloo]}
workload: {op: allreduce, bytes: 1MiB, duration: 4s}
faults:
  - {id: f, at: 1s, type: link_down, target: {host: 0, rail: 0}}
expect: {outcome: survive}
)";
  ExpandOutcome ok = ExpandScenario(base + "reproduce: {ccl: gloo, outcome: aborted_clean, ranks: [3, 1, 3], within: 20s}\n", "r.yaml");
  ASSERT_TRUE(ok.ok()) << Diags(ok.diagnostics);
  ASSERT_EQ(ok.runs.size(), 2u);
  EXPECT_EQ(ok.runs[1].reproduce->ranks, (std::vector<int>{3, 1}));
  EXPECT_EQ(ok.runs[1].reproduce->within_ns, 20 * kS);
  EXPECT_TRUE(ok.runs[1].JudgedByReproduce(CclName::kGloo));
  EXPECT_FALSE(ok.runs[0].JudgedByReproduce(CclName::kFtccl));

  auto err = [&](const std::string& rep) {
    ExpandOutcome e = ExpandScenario(base + rep, "r.yaml");
    EXPECT_FALSE(e.ok()) << rep;
    return Diags(e.diagnostics);
  };
  EXPECT_NE(err("reproduce: {ccl: gloo, outcome: aborted_clean, ranks: [4]}\n")
                .find("r.yaml:8:56: reproduce.ranks: rank 4 is not in the topology (4 ranks)"),
            std::string::npos)
      << err("reproduce: {ccl: gloo, outcome: aborted_clean, ranks: [4]}\n");
  EXPECT_NE(err("reproduce: {ccl: gloo, outcome: survived}\n").find("r.yaml:8:"),
            std::string::npos);
  EXPECT_NE(err("reproduce: {outcome: hung}\n").find("ccl"), std::string::npos);
  EXPECT_NE(err("reproduce: {ccl: gloo, outcome: hung, within: 0s}\n").find("longer than 0"),
            std::string::npos);
  EXPECT_NE(err("reproduce: {ccl: gloo, outcome: hung, when: 1s}\n").find("when"),
            std::string::npos);
  // An expectation Gloo cannot measure is fine where Gloo is judged by reproduce:.
  const std::string ftccl_only = R"(name: r
topology: {hosts: 2, ranks_per_host: 2, rails: 2}
matrix: {ccl: [ftccl, gloo]}
workload: {op: allreduce, bytes: 1MiB, duration: 4s}
faults:
  - {id: f, at: 1s, type: link_down, target: {host: 0, rail: 0}}
expect: {outcome: survive, detection_ms: {max: 500}}
)";
  EXPECT_FALSE(ExpandScenario(ftccl_only, "r.yaml").ok());
  ExpandOutcome judged =
      ExpandScenario(ftccl_only + "reproduce: {ccl: gloo, outcome: aborted_clean}\n", "r.yaml");
  EXPECT_TRUE(judged.ok()) << Diags(judged.diagnostics);
}

}  // namespace
}  // namespace faultline::runner
