// The scenario library's pure parts: matrix expansion (combinations, names, values, errors
// with line:column) and `requires:`, and the link-log importer over every log format it
// reads, with the scenario it writes validated.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runner/incident/incident_import.h"
#include "runner/incident/link_log.h"
#include "runner/exec/requirements.h"
#include "runner/core/scenario.h"
#include "workload/adapters/ccl_traits.h"

namespace faultline::runner {
namespace {

std::string Diags(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) out += d.ToString() + "\n";
  return out;
}

const char* kMatrix = R"(name: nightly-link
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
matrix: {op: [allreduce, allgather], bytes: [1MiB, 64MiB], seed: [1, 2, 3]}
workload: {duration: 8s, warmup: 1s}
faults:
  - {id: d, at: 2s, type: link_down, target: {host: 0, rail: 1}, for: 1s}
expect: {outcome: survive, wrong_results: 0}
)";

TEST(Matrix, ExpandsEveryCombinationFirstKeySlowest) {
  ExpandOutcome e = ExpandScenario(kMatrix, "m.yaml");
  ASSERT_TRUE(e.ok()) << Diags(e.diagnostics);
  ASSERT_EQ(e.runs.size(), 12u);
  EXPECT_EQ(e.runs[0].name, "nightly-link[op=allreduce,bytes=1MiB,seed=1]");
  EXPECT_EQ(e.runs[1].name, "nightly-link[op=allreduce,bytes=1MiB,seed=2]");
  EXPECT_EQ(e.runs[3].name, "nightly-link[op=allreduce,bytes=64MiB,seed=1]");
  const Scenario& s = e.runs[10];
  EXPECT_EQ(s.name, "nightly-link[op=allgather,bytes=64MiB,seed=2]");
  EXPECT_EQ(s.base_name, "nightly-link");
  EXPECT_EQ(s.MatrixLabel(), "op=allgather,bytes=64MiB,seed=2");
  EXPECT_EQ(s.workload.op, CollOp::kAllGather);
  EXPECT_EQ(s.workload.bytes, 64u << 20);
  EXPECT_EQ(s.seed, 2u);
  EXPECT_EQ(s.faults.size(), 1u);
  // Everything not in the matrix is the same in every run.
  for (const auto& r : e.runs) {
    EXPECT_EQ(*r.workload.duration_ns, 8'000'000'000);
    EXPECT_EQ(r.topology.rails, 2);
  }
}

TEST(Matrix, TopologyAndCclKeys) {
  ExpandOutcome e = ExpandScenario(R"(name: t
matrix: {ranks_per_host: [1, 2], ccl: [ftccl, gloo]}
topology: {hosts: 2, rails: 2}
workload: {op: broadcast, bytes: 1MiB, iters: 10}
)",
                                   "t.yaml");
  ASSERT_TRUE(e.ok()) << Diags(e.diagnostics);
  ASSERT_EQ(e.runs.size(), 4u);
  EXPECT_EQ(e.runs[3].topology.ranks_per_host, 2);
  EXPECT_EQ(e.runs[3].ccl, CclName::kGloo);
  EXPECT_EQ(e.runs[0].ccl, CclName::kFtccl);
}

TEST(Matrix, FileWithoutMatrixIsOneRunWithItsOwnName) {
  ExpandOutcome e = ExpandScenario(R"(name: plain
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
workload: {op: allreduce, bytes: 1MiB, duration: 3s}
)",
                                   "p.yaml");
  ASSERT_TRUE(e.ok()) << Diags(e.diagnostics);
  ASSERT_EQ(e.runs.size(), 1u);
  EXPECT_EQ(e.runs[0].name, "plain");
  EXPECT_TRUE(e.runs[0].matrix.empty());
  EXPECT_EQ(e.runs[0].MatrixLabel(), "");
}

TEST(Matrix, ParseScenarioRefusesSeveralRunsButTakesOne) {
  ParseOutcome r = ParseScenario(kMatrix, "m.yaml");
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_NE(r.diagnostics[0].message.find("expands to 12 runs"), std::string::npos);
  ParseOutcome one = ParseScenario(R"(name: one
matrix: {op: [allgather]}
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
workload: {bytes: 1MiB, duration: 3s}
)",
                                   "one.yaml");
  ASSERT_TRUE(one.ok()) << Diags(one.diagnostics);
  EXPECT_EQ(one.scenario->name, "one[op=allgather]");
}

TEST(Matrix, KeyAndValueErrorsHaveLineAndColumn) {
  ExpandOutcome e = ExpandScenario(R"(name: bad
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
matrix: {bites: [1MiB], seed: [1, 1], rails: 2, op: [allreduce, {x: 1}]}
workload: {bytes: 2MiB, duration: 8s}
)",
                                   "bad.yaml");
  EXPECT_FALSE(e.ok());
  EXPECT_TRUE(e.runs.empty());
  const std::string d = Diags(e.diagnostics);
  EXPECT_NE(d.find("bad.yaml:3:10: unknown key 'bites' in matrix (did you mean 'bytes'?)"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("bad.yaml:3:35: matrix.seed: value '1' is listed twice"), std::string::npos)
      << d;
  EXPECT_NE(d.find("bad.yaml:3:46: matrix.rails must be a non-empty list"), std::string::npos)
      << d;
  EXPECT_NE(d.find("bad.yaml:3:65: matrix.op: every value must be a plain value"),
            std::string::npos)
      << d;
  // The rest of the file is still checked, with the matrix's first values in place: no
  // complaint about a missing op.
  EXPECT_EQ(d.find("missing required key 'op'"), std::string::npos) << d;
}

// A matrix whose file lacks the section a key lands in (workload, topology): the missing
// section is reported with its line, not a YAML exception out of the matrix handling.
TEST(Matrix, MissingOrMisspelledSectionIsADiagnostic) {
  for (const char* text : {R"(name: no-workload
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
matrix: {op: [allreduce, allgather], bytes: [1MiB, 4MiB]}
)",
                           R"(name: misspelled
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
matrix: {op: [allreduce], hosts: [2, 3]}
wrkload: {bytes: 1MiB, duration: 2s}
)",
                           R"(name: bad-matrix
matrix: {op: [allreduce, allreduce], rails: [2]}
)"}) {
    ExpandOutcome e = ExpandScenario(text, "m.yaml");
    EXPECT_FALSE(e.ok());
    const std::string d = Diags(e.diagnostics);
    EXPECT_NE(d.find("missing required key"), std::string::npos) << d;
    for (const auto& diag : e.diagnostics) EXPECT_GT(diag.loc.line, 0) << d;
  }
}

TEST(Matrix, KeySetTwiceIsAnError) {
  ExpandOutcome e = ExpandScenario(R"(name: twice
seed: 4
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
matrix: {seed: [1, 2], op: [allreduce]}
workload: {op: allgather, bytes: 1MiB, duration: 8s}
)",
                                   "twice.yaml");
  const std::string d = Diags(e.diagnostics);
  EXPECT_NE(d.find("twice.yaml:2:7: seed is also set by matrix.seed"), std::string::npos) << d;
  EXPECT_NE(d.find("twice.yaml:5:16: workload.op is also set by matrix.op"), std::string::npos)
      << d;
}

TEST(Matrix, BadValuePointsIntoTheMatrixAndNamesItsCombination) {
  ExpandOutcome e = ExpandScenario(R"(name: v
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
matrix: {op: [allreduce, alltogether], bytes: [1MiB, 64]}
workload: {duration: 8s}
)",
                                   "v.yaml");
  EXPECT_FALSE(e.ok());
  const std::string d = Diags(e.diagnostics);
  EXPECT_NE(d.find("v.yaml:3:26: unknown workload.op 'alltogether' (in matrix combination "
                   "op=alltogether,bytes=1MiB) (did you mean 'allgather'?)"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("v.yaml:3:54: workload.bytes: "), std::string::npos) << d;
  // Each problem once, however many combinations share it.
  EXPECT_EQ(e.diagnostics.size(), 2u) << d;
}

TEST(Matrix, ValuesThatBreakOnlySomeCombinations) {
  // Host 1 does not exist when hosts is 1.
  ExpandOutcome e = ExpandScenario(R"(name: h
matrix: {hosts: [2, 1]}
topology: {ranks_per_host: 1, rails: 2}
workload: {op: allreduce, bytes: 1MiB, duration: 8s}
faults:
  - {id: d, at: 2s, type: link_down, target: {host: 1, rail: 0}, for: 1s}
)",
                                   "h.yaml");
  const std::string d = Diags(e.diagnostics);
  ASSERT_EQ(e.diagnostics.size(), 1u) << d;
  EXPECT_NE(d.find("h.yaml:6:53: host 1 does not exist: the topology has 1 hosts (in matrix "
                   "combination hosts=1)"),
            std::string::npos)
      << d;
}

TEST(Matrix, TooManyCombinations) {
  std::string list = "[";
  for (int i = 0; i < 40; ++i) list += (i ? ", " : "") + std::to_string(i);
  list += "]";
  ExpandOutcome e = ExpandScenario("name: big\nmatrix: {seed: " + list + ", root: " + list +
                                       "}\ntopology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
                                       "workload: {op: broadcast, bytes: 1MiB, iters: 5}\n",
                                   "big.yaml");
  const std::string d = Diags(e.diagnostics);
  EXPECT_NE(d.find("big.yaml:2:9: matrix expands to more than 1000 runs"), std::string::npos)
      << d;
}

TEST(Requires, HookFaultsImplyTheirFeatures) {
  ExpandOutcome e = ExpandScenario(R"(name: h
requires: [sch_netem]
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
workload: {op: allreduce, bytes: 1MiB, duration: 3s}
faults:
  - {id: c, at: 1s, type: conn_corrupt, part: header, target: {host: 0, rank: 0, rail: 0}, peer: 1}
  - {id: q, at: 2s, type: qp_error, target: {host: 1, rank: 0, rail: 1}, peer: 0}
)",
                                   "h.yaml");
  ASSERT_TRUE(e.ok()) << Diags(e.diagnostics);
  EXPECT_EQ(e.runs[0].faults[0].params.part, "header");
  EXPECT_EQ(e.runs[0].faults[1].params.part, "");
  EXPECT_EQ(RequiredFeatures(e.runs[0]),
            (std::vector<std::string>{"sch_netem", "fault_hook", "verbs"}));
  ExpandOutcome plain = ExpandScenario(R"(name: p
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
workload: {op: allreduce, bytes: 1MiB, duration: 3s}
)",
                                       "p.yaml");
  ASSERT_TRUE(plain.ok()) << Diags(plain.diagnostics);
  EXPECT_TRUE(RequiredFeatures(plain.runs[0]).empty());
}

TEST(Requires, ConnCorruptPartIsChecked) {
  ExpandOutcome bad = ExpandScenario(R"(name: b
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
workload: {op: allreduce, bytes: 1MiB, duration: 3s}
faults:
  - {id: c, at: 1s, type: conn_corrupt, part: tail, target: {host: 0, rank: 0, rail: 0}, peer: 1}
  - {id: q, at: 2s, type: qp_error, part: header, target: {host: 1, rank: 0, rail: 1}, peer: 0}
)",
                                     "b.yaml");
  const std::string d = Diags(bad.diagnostics);
  EXPECT_NE(d.find("b.yaml:5:47: unknown fault 'c'.part 'tail' (expected one of: payload, header)"), std::string::npos) << d;
  EXPECT_NE(d.find("b.yaml:6:37: unknown key 'part' in fault 'q'"), std::string::npos) << d;
}

TEST(Requires, OnlyFtcclServesTheFaultHook) {
  const std::string worker =
      std::filesystem::read_symlink("/proc/self/exe").parent_path() / "faultline-worker";
  ASSERT_EQ(access(worker.c_str(), X_OK), 0) << worker << " is not built";
  RequirementChecker checker(worker);
  EXPECT_EQ(checker.Missing({"fault_hook"}, "ftccl"), std::nullopt);
  auto gloo = checker.Missing({"fault_hook"}, "gloo");
  ASSERT_TRUE(gloo.has_value());
  EXPECT_NE(gloo->find("ccl gloo serves no fault hook"), std::string::npos) << *gloo;
  auto verbs = checker.Missing({"fault_hook", "verbs"}, "ftccl");
  ASSERT_TRUE(verbs.has_value());
  // The machine's own answer: the reason VerbsMissingReason gives for it.
  EXPECT_EQ(*verbs, VerbsMissingReason()) << *verbs;
  EXPECT_EQ(verbs->find("no verbs transport"), std::string::npos) << *verbs;
  // A worker without the option (here: a program that prints nothing of the kind).
  RequirementChecker old("/bin/true");
  auto missing = old.Missing({"fault_hook"}, "ftccl");
  ASSERT_TRUE(missing.has_value());
  EXPECT_NE(missing->find("no --fault-hook option"), std::string::npos) << *missing;
}

TEST(Requires, KnownFeaturesAndErrors) {
  ExpandOutcome ok = ExpandScenario(R"(name: r
requires: [sch_netem, fault_hook, sch_netem]
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
workload: {op: allreduce, bytes: 1MiB, duration: 3s}
)",
                                    "r.yaml");
  ASSERT_TRUE(ok.ok()) << Diags(ok.diagnostics);
  EXPECT_EQ(ok.runs[0].requirements, (std::vector<std::string>{"sch_netem", "fault_hook"}));
  ExpandOutcome bad = ExpandScenario(R"(name: r
requires: [sch_netme]
topology: {hosts: 2, ranks_per_host: 1, rails: 2}
workload: {op: allreduce, bytes: 1MiB, duration: 3s}
)",
                                     "r.yaml");
  const std::string d = Diags(bad.diagnostics);
  EXPECT_NE(d.find("r.yaml:2:12: unknown requirement 'sch_netme' (did you mean 'sch_netem'?)"),
            std::string::npos)
      << d;
}

// What `faultline run` refuses from the CCL traits table: a library not built here, with how
// to build it; one that needs a GPU per rank, where fewer show (a fake /dev); a launch style
// the run driver does not drive.
TEST(Requires, CclRunRefusalFollowsTheTraitsTable) {
  using workload::adapters::CclTraits;
  using workload::adapters::CclTraitsOf;
  const std::filesystem::path dev =
      std::filesystem::temp_directory_path() / ("faultline_gpu_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dev);
  for (const char* node : {"nvidia0", "nvidiactl", "nvidia-uvm"}) {
    std::ofstream(dev / node).put('\n');
  }
  unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(VisibleGpus(dev.string()), 1);

  EXPECT_EQ(CclRunRefusal(CclTraitsOf(CclName::kFtccl), 4, true, dev.string()), std::nullopt);
  for (const CclTraits& t : workload::adapters::AllCclTraits()) {
    if (t.built_here) continue;
    auto why = CclRunRefusal(t, 1, true, dev.string());
    ASSERT_TRUE(why.has_value()) << t.name;
    EXPECT_EQ(*why, "ccl " + std::string(t.name) + " needs " + std::string(t.built_from) +
                        ", which this build does not have (" + std::string(t.how_to_build) + ")");
  }
  // nccl as a build that has it sees it.
  CclTraits nccl = CclTraitsOf(CclName::kNccl);
  ASSERT_TRUE(nccl.needs_own_gpu);
  nccl.built_here = true;
  auto shared = CclRunRefusal(nccl, 2, true, dev.string());
  ASSERT_TRUE(shared.has_value());
  EXPECT_NE(shared->find("ccl nccl needs a GPU of its own for each rank"), std::string::npos)
      << *shared;
  EXPECT_NE(shared->find("puts 2 ranks on this machine, which shows 1"), std::string::npos)
      << *shared;
  EXPECT_EQ(CclRunRefusal(nccl, 1, true, dev.string()), std::nullopt);
  EXPECT_EQ(CclRunRefusal(nccl, 2, false, dev.string()), std::nullopt);  // ranks on other hosts
  std::ofstream(dev / "nvidia1").put('\n');
  EXPECT_EQ(VisibleGpus(dev.string()), 2);
  EXPECT_EQ(CclRunRefusal(nccl, 2, true, dev.string()), std::nullopt);
  setenv("CUDA_VISIBLE_DEVICES", "1", 1);
  EXPECT_EQ(VisibleGpus(dev.string()), 1);
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  EXPECT_EQ(VisibleGpus(dev.string()), 0);
  unsetenv("CUDA_VISIBLE_DEVICES");
  std::filesystem::remove_all(dev);

  // A library started by mpirun runs on this machine's namespaces, not through Slurm yet.
  CclTraits mpi = CclTraitsOf(CclName::kFtccl);
  mpi.launch = workload::adapters::LaunchStyle::kMpiLauncher;
  EXPECT_EQ(CclRunRefusal(mpi, 2, true), std::nullopt);
  auto launcher = CclRunRefusal(mpi, 2, false);
  ASSERT_TRUE(launcher.has_value());
  EXPECT_NE(launcher->find("through its own launcher (mpirun)"), std::string::npos) << *launcher;
}

// ---------------------------------------------------------------------------------------
// The importer.

ImportOptions Map(std::initializer_list<std::pair<const char*, RailRef>> m) {
  ImportOptions o;
  for (const auto& [k, v] : m) o.map[k] = v;
  return o;
}

// The scenario written must validate; returns it.
Scenario Imported(const ImportResult& r) {
  ParseOutcome p = ParseScenario(r.yaml, "imported.yaml");
  EXPECT_TRUE(p.ok()) << Diags(p.diagnostics) << r.yaml;
  return p.ok() ? *p.scenario : Scenario{};
}

TEST(LinkLog, DmesgMlx5IceI40eIxgbe) {
  const char* log = R"([ 8121.004512] mlx5_core 0000:08:00.0: mlx5_cmd_out_err:838:(pid 1432): QUERY_VPORT_COUNTER(0x770) op_mod(0x0) failed
[ 8123.402113] mlx5_core 0000:08:00.0 eth2: Link down
[ 8123.402561] bond0: (slave eth2): link status definitely down, disabling slave
[ 8124.913877] mlx5_core 0000:08:00.0 eth2: Link up
[ 8124.914002] bond0: (slave eth2): link status definitely up, 100000 Mbps full duplex
[ 8125.010442] ice 0000:3b:00.0 ens1f0: NIC Link is Down
[ 8125.771004] ice 0000:3b:00.0 ens1f0: NIC Link is up 100 Gbps Full Duplex, Requested FEC: RS-FEC, Negotiated FEC: RS-FEC, Autoneg Advertised: On, Autoneg Negotiated: False, Flow Control: None
[ 8126.120000] i40e 0000:5e:00.1 ens2f1: NIC Link is Down
[ 8126.320000] i40e 0000:5e:00.1 ens2f1: NIC Link is Up, 40 Gbps Full Duplex, Flow Control: None
[ 8127.000000] ixgbe 0000:02:00.0 enp2s0f0: NIC Link is Down
[ 8127.250500] ixgbe 0000:02:00.0 enp2s0f0: NIC Link is Up 10 Gbps, Flow Control: RX/TX
[ 8127.250533] IPv6: ADDRCONF(NETDEV_CHANGE): enp2s0f0: link becomes ready
)";
  std::vector<LinkEvent> ev = ParseLinkLog(log, "dmesg.txt");
  ASSERT_EQ(ev.size(), 11u);
  EXPECT_FALSE(ev[0].up);
  EXPECT_EQ(ev[0].names, (std::vector<std::string>{"eth2", "0000:08:00.0"}));
  EXPECT_EQ(ev[0].line, 2);
  EXPECT_DOUBLE_EQ(*ev[0].kernel_s, 8123.402113);
  EXPECT_FALSE(ev[0].wall_ns.has_value());
  EXPECT_EQ(ev[1].names, (std::vector<std::string>{"eth2"}));  // the bond's view
  EXPECT_FALSE(ev[4].up);
  EXPECT_EQ(ev[4].names.front(), "ens1f0");
  EXPECT_TRUE(ev[5].up);
  EXPECT_TRUE(ev[10].up);  // addrconf

  ImportOptions o = Map({{"eth2", {0, 1, LinkSide::kHost}},
                         {"ens1f0", {1, 0, LinkSide::kHost}},
                         {"ens2f1", {1, 1, LinkSide::kSwitch}},
                         {"enp2s0f0", {0, 0, LinkSide::kHost}}});
  auto r = ImportLinkEvents(ev, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->faults, 4);
  EXPECT_EQ(r->permanent, 0);
  Scenario s = Imported(*r);
  ASSERT_EQ(s.faults.size(), 4u);
  EXPECT_EQ(s.faults[0].id, "eth2-down1");
  EXPECT_EQ(s.faults[0].kind, "link_down");
  EXPECT_EQ(s.faults[0].at_ns, 2'000'000'000);  // --at default
  EXPECT_EQ(*s.faults[0].for_ns, 1'512'000'000);  // 8124.913877 - 8123.402113
  EXPECT_EQ(s.faults[0].target.host, 0);
  EXPECT_EQ(*s.faults[0].target.rail, 1);
  EXPECT_EQ(s.faults[1].at_ns, 3'608'000'000);  // 8125.010442 - 8123.402113 + 2s
  EXPECT_EQ(*s.faults[1].for_ns, 761'000'000);
  EXPECT_EQ(s.faults[2].target.side, LinkSide::kSwitch);
  EXPECT_EQ(*s.faults[2].for_ns, 200'000'000);
  EXPECT_EQ(*s.faults[3].for_ns, 250'000'000);  // 5598 ms to 5848 ms, both rounded
  EXPECT_EQ(s.topology.hosts, 2);
  EXPECT_EQ(s.topology.rails, 2);
  // The run lasts past the last event (5.85 s) by the tail (3 s), rounded up to whole seconds.
  EXPECT_EQ(*s.workload.duration_ns, 9'000'000'000);
  EXPECT_NE(r->yaml.find("# Source lines:"), std::string::npos);
  EXPECT_NE(r->yaml.find("dmesg.txt:2: [ 8123.402113] mlx5_core 0000:08:00.0 eth2: Link down"),
            std::string::npos);
}

TEST(LinkLog, UnmatchedDownIsPermanentAndAtOffsetApplies) {
  const char* log = R"([  301.000100] mlx5_core 0000:08:00.1 eth3: Link down
[  301.500100] mlx5_core 0000:08:00.1 eth3: Link up
[  305.250100] mlx5_core 0000:08:00.1 eth3: Link down
)";
  ImportOptions o = Map({{"eth3", {1, 1, LinkSide::kHost}}});
  o.at_ns = 5'000'000'000;
  auto r = ImportLinkEvents(ParseLinkLog(log, "k.log"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->permanent, 1);
  Scenario s = Imported(*r);
  ASSERT_EQ(s.faults.size(), 2u);
  EXPECT_EQ(s.faults[0].at_ns, 5'000'000'000);
  EXPECT_EQ(*s.faults[0].for_ns, 500'000'000);
  EXPECT_EQ(s.faults[1].id, "eth3-down2");
  EXPECT_EQ(s.faults[1].at_ns, 9'250'000'000);
  EXPECT_FALSE(s.faults[1].for_ns.has_value());
  EXPECT_TRUE(s.faults[1].Permanent());
  EXPECT_NE(r->yaml.find("never came back up"), std::string::npos);
}

TEST(LinkLog, Mlx5ModuleEventsAndPortStateByPciAddress) {
  const char* log = R"([32704.121294] mlx5_core 0000:01:00.0: Port module event: module 0, Cable unplugged
[32705.500000] mlx5_core 0000:01:00.1: mlx5_port_module_event:1140:(pid 0): Port module event[error]: module 1, Cable error, High Temperature
[32707.399693] mlx5_core 0000:01:00.0: Port module event: module 0, Cable plugged
[32708.000000] mlx5_core 0000:01:00.1: Port state changed to ACTIVE
[32710.060490] mlx5_core 0000:01:00.0 enp1s0f0: Link up
)";
  std::vector<LinkEvent> ev = ParseLinkLog(log, "dmesg");
  ASSERT_EQ(ev.size(), 5u);
  EXPECT_EQ(ev[0].names, (std::vector<std::string>{"0000:01:00.0"}));
  EXPECT_FALSE(ev[1].up);
  EXPECT_TRUE(ev[3].up);
  // The interface and its PCI function are one link when they map to one rail: the later
  // "Link up" of enp1s0f0 does not open a second outage.
  ImportOptions o = Map({{"0000:01:00.0", {0, 0, LinkSide::kHost}},
                         {"enp1s0f0", {0, 0, LinkSide::kHost}},
                         {"0000:01:00.1", {0, 1, LinkSide::kHost}}});
  auto r = ImportLinkEvents(ev, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Scenario s = Imported(*r);
  ASSERT_EQ(s.faults.size(), 2u);
  EXPECT_EQ(s.faults[0].id, "0000-01-00-0-down1");
  EXPECT_EQ(*s.faults[0].for_ns, 3'278'000'000);
  EXPECT_EQ(*s.faults[1].target.rail, 1);
  EXPECT_EQ(*s.faults[1].for_ns, 2'500'000'000);
}

TEST(LinkLog, JournalShortIsoFromTwoHostsUsesTheWallClock) {
  // journalctl -k -o short-iso on two nodes, concatenated; the kernel clocks differ.
  const char* a = R"(2024-03-05T10:15:02+0000 gpu-node17 kernel: mlx5_core 0000:08:00.0 eth2: Link down
2024-03-05T10:15:04+0000 gpu-node17 kernel: mlx5_core 0000:08:00.0 eth2: Link up
)";
  const char* b = R"(2024-03-05T11:15:03.250000+01:00 gpu-node18 kernel: ice 0000:3b:00.0 eth2: NIC Link is Down
2024-03-05T11:15:03.750000+01:00 gpu-node18 kernel: ice 0000:3b:00.0 eth2: NIC Link is up 100 Gbps Full Duplex, Requested FEC: RS-FEC, Negotiated FEC: RS-FEC, Autoneg Advertised: On, Autoneg Negotiated: False, Flow Control: None
)";
  std::vector<LinkEvent> ev = ParseLinkLog(a, "node17.log");
  auto evb = ParseLinkLog(b, "node18.log");
  ev.insert(ev.end(), evb.begin(), evb.end());
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[0].node, "gpu-node17");
  EXPECT_EQ(*ev[0].wall_ns, 1709633702LL * 1'000'000'000);
  EXPECT_EQ(*ev[2].wall_ns, 1709633703LL * 1'000'000'000 + 250'000'000);  // +01:00 applied
  // The same interface name on two nodes: told apart by NODE:DEVICE.
  ImportOptions o = Map({{"gpu-node17:eth2", {0, 1, LinkSide::kHost}},
                         {"gpu-node18:eth2", {1, 1, LinkSide::kHost}}});
  auto r = ImportLinkEvents(ev, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Scenario s = Imported(*r);
  ASSERT_EQ(s.faults.size(), 2u);
  EXPECT_EQ(s.faults[0].target.host, 0);
  EXPECT_EQ(*s.faults[0].for_ns, 2'000'000'000);
  EXPECT_EQ(s.faults[1].target.host, 1);
  // A stamp of whole seconds stands for the middle of its second (the clock was truncated):
  // node17's down at 10:15:02.5, node18's at 10:15:03.25.
  EXPECT_EQ(s.faults[1].at_ns, 2'750'000'000);
  EXPECT_EQ(*s.faults[1].for_ns, 500'000'000);
  EXPECT_NE(r->yaml.find("its wall clock"), std::string::npos);
}

TEST(LinkLog, SyslogWithKernelTimestampsPrefersTheKernelClock) {
  const char* log = R"(Mar  5 10:15:02 gpu-node17 kernel: [ 8123.402113] mlx5_core 0000:08:00.0 eth2: Link down
Mar  5 10:15:02 gpu-node17 NetworkManager[812]: <info>  [1709633702.4031] device (eth2): state change: activated -> unavailable (reason 'carrier-changed', sys-iface-state: 'managed')
Mar  5 10:15:03 gpu-node17 kernel: [ 8123.652113] mlx5_core 0000:08:00.0 eth2: Link up
)";
  std::vector<LinkEvent> ev = ParseLinkLog(log, "syslog");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].node, "gpu-node17");
  ASSERT_TRUE(ev[0].wall_ns.has_value());
  ASSERT_TRUE(ev[0].kernel_s.has_value());
  auto r = ImportLinkEvents(ev, Map({{"eth2", {0, 0, LinkSide::kHost}}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Scenario s = Imported(*r);
  ASSERT_EQ(s.faults.size(), 1u);
  // 250 ms from the kernel stamps; the syslog seconds alone would say 1 s.
  EXPECT_EQ(*s.faults[0].for_ns, 250'000'000);
}

TEST(LinkLog, DmesgHumanTimestamps) {
  const char* log = R"([Tue Mar  5 10:15:02 2024] mlx5_core 0000:08:00.0 eth2: Link down
[Tue Mar  5 10:15:05 2024] mlx5_core 0000:08:00.0 eth2: Link up
)";
  auto r = ImportLinkEvents(ParseLinkLog(log, "dmesg-T"), Map({{"eth2", {0, 0, LinkSide::kHost}}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*Imported(*r).faults[0].for_ns, 3'000'000'000);
}

TEST(LinkLog, IpMonitorWithTimestampLines) {
  // ip -t monitor link
  const char* log = R"(Timestamp: Tue Mar  5 10:15:02 2024 402113 usec
3: eth2: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 9000 qdisc mq state DOWN group default
    link/ether 0c:42:a1:2b:3c:4d brd ff:ff:ff:ff:ff:ff
Timestamp: Tue Mar  5 10:15:02 2024 402890 usec
3: eth2: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 9000 qdisc mq state DOWN group default
    link/ether 0c:42:a1:2b:3c:4d brd ff:ff:ff:ff:ff:ff
Timestamp: Tue Mar  5 10:15:03 2024 914002 usec
3: eth2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc mq state UP group default
    link/ether 0c:42:a1:2b:3c:4d brd ff:ff:ff:ff:ff:ff
)";
  std::vector<LinkEvent> ev = ParseLinkLog(log, "ipmon");
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_FALSE(ev[0].up);
  EXPECT_TRUE(ev[2].up);
  EXPECT_EQ(ev[0].line, 2);
  auto r = ImportLinkEvents(ev, Map({{"eth2", {1, 0, LinkSide::kHost}}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Scenario s = Imported(*r);
  ASSERT_EQ(s.faults.size(), 1u);  // the repeated DOWN is not a second outage
  EXPECT_EQ(*s.faults[0].for_ns, 1'512'000'000);
}

TEST(LinkLog, IpMonitorShortTimestampsVethAndDeleted) {
  // ip -ts monitor link (all objects: [LINK] prefix), a veth and a device that disappears.
  const char* log = R"([2024-03-05T10:15:02.100000] [LINK]5: veth1@if4: <NO-CARRIER,BROADCAST,MULTICAST,UP,M-DOWN> mtu 1500 qdisc noqueue state LOWERLAYERDOWN group default
    link/ether 2a:11:22:33:44:55 brd ff:ff:ff:ff:ff:ff link-netns sw
[2024-03-05T10:15:02.400000] [LINK]5: veth1@if4: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP group default
    link/ether 2a:11:22:33:44:55 brd ff:ff:ff:ff:ff:ff link-netns sw
[2024-03-05T10:15:04.000000] [LINK]Deleted 6: eth5: <BROADCAST,MULTICAST> mtu 1500 qdisc noop state DOWN group default
    link/ether 0c:42:a1:2b:3c:4e brd ff:ff:ff:ff:ff:ff
)";
  std::vector<LinkEvent> ev = ParseLinkLog(log, "ipmon-ts");
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].names.front(), "veth1");
  auto r = ImportLinkEvents(ev, Map({{"veth1", {0, 0, LinkSide::kSwitch}},
                                     {"eth5", {1, 1, LinkSide::kHost}}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Scenario s = Imported(*r);
  ASSERT_EQ(s.faults.size(), 2u);
  EXPECT_EQ(*s.faults[0].for_ns, 300'000'000);
  EXPECT_EQ(s.faults[0].target.side, LinkSide::kSwitch);
  EXPECT_TRUE(s.faults[1].Permanent());
  EXPECT_EQ(s.faults[1].at_ns, 3'900'000'000);
}

TEST(LinkLog, PlainIpMonitorHasNoClock) {
  const char* log = R"(3: eth2: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 9000 qdisc mq state DOWN group default
    link/ether 0c:42:a1:2b:3c:4d brd ff:ff:ff:ff:ff:ff
)";
  auto r = ImportLinkEvents(ParseLinkLog(log, "plain"), Map({{"eth2", {0, 0, LinkSide::kHost}}}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("plain:1: this event has no wall-clock time"),
            std::string::npos)
      << r.status().message();
}

TEST(LinkLog, NothingMappedAndBadMappings) {
  const char* log = "[ 1.000000] mlx5_core 0000:08:00.0 eth2: Link down\n";
  auto r = ImportLinkEvents(ParseLinkLog(log, "x"), Map({{"eth9", {0, 0, LinkSide::kHost}}}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("devices with events: eth2"), std::string::npos)
      << r.status().message();
  auto m = ParseRailMapping("gpu-node17:eth2=host1/rail0/switch");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->first, "gpu-node17:eth2");
  EXPECT_EQ(m->second.host, 1);
  EXPECT_EQ(m->second.side, LinkSide::kSwitch);
  EXPECT_FALSE(ParseRailMapping("eth2=host0").ok());
  EXPECT_FALSE(ParseRailMapping("eth2:host0/rail1").ok());
  // A rail beyond --rails: the scenario would not validate, and the error says why.
  ImportOptions o = Map({{"eth2", {0, 3, LinkSide::kHost}}});
  o.rails = 2;
  auto bad = ImportLinkEvents(ParseLinkLog(log, "x"), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rail 3 does not exist"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace faultline::runner

namespace faultline::runner {
namespace {

// Times out of range (a year past 2200, 23-digit microseconds, 44-digit uptime) are not
// timestamps: the lines parse without one instead of overflowing or throwing.
TEST(LinkLog, OutOfRangeTimesAreIgnored) {
  const std::vector<LinkEvent> events = ParseLinkLog(
      "[9999-03-05T10:15:02.100000] 3: eth2: <NO-CARRIER,BROADCAST> mtu 9000 state DOWN\n"
      "Timestamp: Tue Mar  5 10:15:02 2024 99999999999999999999999 usec\n"
      "[99999999999999999999999999999999999999999999.5] mlx5_core 0000:08:00.0 eth3: Link down\n",
      "x.log");
  ASSERT_FALSE(events.empty());
  for (const LinkEvent& e : events) {
    EXPECT_FALSE(e.wall_ns.has_value()) << e.text;
    EXPECT_FALSE(e.kernel_s.has_value()) << e.text;
  }
}

// The verbs skip reason states what the machine lacks, read from a fake sysfs and module tree.
class VerbsReason : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("faultline-verbs-" + std::to_string(::getpid()));
    std::filesystem::create_directories(root_ / "ib");
    std::filesystem::create_directories(root_ / "module");
    std::filesystem::create_directories(root_ / "lib");
    paths_.ib_class = (root_ / "ib").string();
    paths_.sys_module = (root_ / "module").string();
    paths_.kernel_modules = (root_ / "lib").string();
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) {
    std::ofstream(root_ / rel) << text;
  }
  std::filesystem::path root_;
  RdmaSysPaths paths_;
};

TEST_F(VerbsReason, NoDeviceAndNoRxeModule) {
  Write("lib/modules.dep", "kernel/net/sched/sch_tbf.ko: \n");
  const std::string r = VerbsMissingReason(paths_);
  EXPECT_EQ(r, "no RDMA device on this machine (" + paths_.ib_class +
                   " lists none; the kernel has no rdma_rxe module for soft-RoCE): qp_error "
                   "needs a verbs QP to fail");
  // An absent sysfs class directory is the same answer.
  paths_.ib_class = (root_ / "absent").string();
  EXPECT_NE(VerbsMissingReason(paths_).find("no RDMA device on this machine"), std::string::npos);
}

TEST_F(VerbsReason, RxeAvailableOrLoadedButNoDevice) {
  Write("lib/modules.dep",
        "kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko.xz: kernel/drivers/infiniband/core/"
        "ib_uverbs.ko.xz\n");
  std::string r = VerbsMissingReason(paths_);
  EXPECT_NE(r.find("no RDMA device on this machine"), std::string::npos) << r;
  EXPECT_NE(r.find("the kernel has rdma_rxe, but it is not loaded"), std::string::npos) << r;
  std::filesystem::create_directories(root_ / "module" / "rdma_rxe");
  r = VerbsMissingReason(paths_);
  EXPECT_NE(r.find("rdma_rxe is loaded, but no rxe device was added"), std::string::npos) << r;
}

TEST_F(VerbsReason, DevicesExistButTheRunnerPutsNoneOnItsRails) {
  std::filesystem::create_directories(root_ / "ib" / "rxe1");
  std::filesystem::create_directories(root_ / "ib" / "rxe0");
  const std::string r = VerbsMissingReason(paths_);
  EXPECT_EQ(r.find("no RDMA device"), std::string::npos) << r;
  EXPECT_NE(r.find("RDMA devices exist (rxe0, rxe1), but faultline run puts none on its rails"),
            std::string::npos)
      << r;
}

// An inventory whose every rail is an RDMA port has verbs QPs for ftccl; on an inventory of
// this machine the named devices must exist here.
TEST_F(VerbsReason, AnAllRdmaInventoryHasVerbs) {
  std::filesystem::create_directories(root_ / "ib" / "rxe_a");
  Topology t;
  t.kind = TopologyKind::kInventory;
  t.inventory = {{"lab0", "127.0.0.1", {{"a0", "rxe_a", 1, ""}}},
                 {"lab1", "127.0.0.1", {{"b0", "rxe_b", 1, ""}}}};
  auto r = InventoryVerbsMissing(t, "ftccl", paths_);
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->find("inventory host lab1 rail b0: RDMA device rxe_b is not on this machine"),
            std::string::npos)
      << *r;
  std::filesystem::create_directories(root_ / "ib" / "rxe_b");
  EXPECT_EQ(InventoryVerbsMissing(t, "ftccl", paths_), std::nullopt);
  // Gloo runs TCP over the netdevs whatever the rail is.
  r = InventoryVerbsMissing(t, "gloo", paths_);
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->find("ccl gloo has no verbs QP"), std::string::npos) << *r;
  // A rail without rdma: ftccl runs TCP.
  t.inventory[1].rails[0].rdma.clear();
  r = InventoryVerbsMissing(t, "ftccl", paths_);
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->find("inventory host lab1 rail b0 names no RDMA port"), std::string::npos) << *r;
  // Real hosts: their devices are theirs to have; nothing of this machine is looked at.
  t.inventory[1].rails[0].rdma = "mlx5_9";
  t.inventory[0].addr = "10.0.0.1";
  t.inventory[1].addr = "10.0.0.2";
  EXPECT_EQ(InventoryVerbsMissing(t, "ftccl", paths_), std::nullopt);
  // A netns topology gets the machine's reason from the checker, as before.
  RequirementChecker checker("/bin/true");
  Topology netns;
  auto why = checker.Missing({"verbs"}, "ftccl", &netns);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, VerbsMissingReason());
  EXPECT_EQ(checker.Missing({"verbs"}, "ftccl", &t), std::nullopt);
}

}  // namespace
}  // namespace faultline::runner
