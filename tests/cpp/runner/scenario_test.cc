// Scenario schema: a valid file parses into the right values; every error class is reported
// at its file:line:column with a hint, and all errors of a file come out at once.
#include "runner/core/scenario.h"

#include <gtest/gtest.h>
#include <cstdio>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

namespace faultline::runner {
namespace {

// 1-based column of `token` in line `line` (1-based) of `text`: where the parser must point.
int Col(const std::string& text, int line, const std::string& token) {
  std::istringstream in(text);
  std::string l;
  for (int i = 0; i < line; ++i) std::getline(in, l);
  size_t pos = l.find(token);
  EXPECT_NE(pos, std::string::npos) << "'" << token << "' not on line " << line;
  return static_cast<int>(pos) + 1;
}

std::vector<Diagnostic> Errors(const std::string& yaml) {
  ParseOutcome r = ParseScenario(yaml, "t.yaml");
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.scenario.has_value());
  return r.diagnostics;
}

// The diagnostic at exactly (line, column) whose message contains `text`.
const Diagnostic* Find(const std::vector<Diagnostic>& ds, int line, int col,
                       const std::string& text) {
  for (const Diagnostic& d : ds) {
    if (d.loc.line == line && d.loc.column == col && d.message.find(text) != std::string::npos) {
      return &d;
    }
  }
  return nullptr;
}

std::string Dump(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) out += d.ToString() + "\n";
  return out;
}

#define EXPECT_DIAG(ds, line, col, text)                                    \
  EXPECT_NE(Find(ds, line, col, text), nullptr)                             \
      << "want " << (line) << ":" << (col) << " '" << (text) << "', got:\n" \
      << Dump(ds)

const char* kHead =
    "name: t\n"
    "topology: {hosts: 2, ranks_per_host: 2, rails: 2}\n"
    "workload: {op: allreduce, bytes: 16MiB, duration: 8s}\n";

TEST(ScenarioParse, DesignExampleParsesIntoTypedValues) {
  const std::string yaml = R"(name: rail0-flap-allreduce
seed: 42
topology: {hosts: 2, ranks_per_host: 2, rails: 2, rail_gbps: 1}
ccl: ftccl
workload: {op: allreduce, dtype: f32, bytes: 16MiB, duration: 8s, check: true}
faults:
  - {id: f1, at: 2s, type: link_flap, target: {host: 1, rail: 0}, down: 200ms, up: 300ms, count: 3}
  - {id: f2, at: 5s, type: link_down, target: {host: 0, rail: 1, side: switch}, for: 1s}
expect:
  outcome: survive
  wrong_results: 0
  stall_ms: {max: 500}
  failover_latency_ms: {max: 100}
  recovery: {pct: 90, within_ms: 1000}
)";
  ParseOutcome r = ParseScenario(yaml, "design.yaml");
  ASSERT_TRUE(r.ok()) << Dump(r.diagnostics);
  const Scenario& s = *r.scenario;
  EXPECT_EQ(s.name, "rail0-flap-allreduce");
  EXPECT_EQ(s.seed, 42u);
  EXPECT_EQ(s.topology.world_size(), 4);
  EXPECT_EQ(s.topology.rails, 2);
  EXPECT_DOUBLE_EQ(s.topology.rail_gbps, 1.0);
  EXPECT_EQ(s.workload.op, CollOp::kAllReduce);
  EXPECT_EQ(s.workload.bytes, 16u << 20);
  EXPECT_EQ(s.workload.duration_ns, 8'000'000'000);
  ASSERT_EQ(s.faults.size(), 2u);
  EXPECT_EQ(s.faults[0].kind, "link_flap");
  EXPECT_EQ(s.faults[0].params.down_ns, 200'000'000);
  EXPECT_EQ(s.faults[0].params.up_ns, 300'000'000);
  EXPECT_EQ(s.faults[0].params.count, 3);
  EXPECT_EQ(s.faults[0].target.rail, 0);
  EXPECT_EQ(s.faults[0].LatestEndNs(), int64_t{3'200'000'000});
  EXPECT_EQ(s.faults[1].target.side, LinkSide::kSwitch);
  EXPECT_EQ(s.faults[1].for_ns, 1'000'000'000);
  EXPECT_FALSE(s.faults[1].Permanent());
  EXPECT_EQ(s.expect.outcome, ExpectedOutcome::kSurvive);
  EXPECT_EQ(s.expect.wrong_results, 0);
  EXPECT_EQ(s.expect.stall_ms_max, 500);
  ASSERT_TRUE(s.expect.recovery.has_value());
  EXPECT_EQ(s.expect.recovery->pct, 90);
  EXPECT_EQ(s.expect.recovery->within_ms, 1000);
}

TEST(ScenarioParse, EveryFaultKindWithItsParameters) {
  const std::string yaml = std::string(kHead) + R"(faults:
  - {id: a, at: 0s, type: bandwidth, target: {host: 0, rail: 0}, rate: 250Mbps, burst: 64KiB, for: 1s}
  - {id: b, at: 1s, type: loss, target: {host: 0, rail: 0}, percent: 5%, for: 1s}
  - {id: c, at: 2s, type: blackhole, target: {host: 0, rail: 0}, for: 100ms}
  - {id: d, at: 3s, type: delay, target: {host: 0, rail: 0}, delay: 5ms, jitter: 1ms, for: 1s}
  - {id: e, at: 4s, type: jitter, target: {host: 0, rail: 0}, jitter: 2ms, for: 1s}
  - {id: f, at: 5s, type: corrupt, target: {host: 0, rail: 0}, percent: 1, for: 1s}
  - {id: g, at: 6s, type: reorder, target: {host: 0, rail: 0}, percent: 10, for: 1s}
  - {id: h, at: 7s, type: conn_reset, target: {host: 0, rail: 0}}
  - {id: i, at: 1s, type: qp_error, target: {host: 1, rank: 1, rail: 1}, peer: 0}
  - {id: j, at: 2s, type: conn_corrupt, target: {host: 1, rank: 1, rail: 0}, peer: 2}
  - {id: k, at: 3s, type: rank_pause, target: {host: 1, rank: 1}, for: 500ms}
  - {id: l, at: 6s, type: rank_kill, target: {host: 1, rank: 1}}
  - {id: m, at: 1s, type: port_drop, target: {host: 1, rail: 1, side: switch}, remove: true}
)";
  ParseOutcome r = ParseScenario(yaml, "kinds.yaml");
  ASSERT_TRUE(r.ok()) << Dump(r.diagnostics);
  const auto& f = r.scenario->faults;
  ASSERT_EQ(f.size(), 13u);
  EXPECT_EQ(f[0].params.rate_bps, 250'000'000u);
  EXPECT_EQ(f[0].params.burst_bytes, 65536u);
  EXPECT_DOUBLE_EQ(f[1].params.percent, 5);
  EXPECT_EQ(f[3].params.delay_ns, 5'000'000);
  EXPECT_EQ(f[3].params.jitter_ns, 1'000'000);
  EXPECT_EQ(f[4].params.delay_ns, 2'000'000);  // base delay defaults to the jitter
  EXPECT_EQ(f[6].params.delay_ns, 10'000'000);
  EXPECT_EQ(f[8].params.peer, 0);
  EXPECT_EQ(f[8].target.GlobalRank(r.scenario->topology), 3);
  EXPECT_TRUE(f[11].Permanent());
  EXPECT_TRUE(f[12].Permanent());
  EXPECT_TRUE(f[12].params.remove);
}

TEST(ScenarioErrors, YamlSyntaxError) {
  const std::string yaml = "name: t\ntopology: {hosts: 2, rails: 2\nworkload: x\n";
  auto ds = Errors(yaml);
  ASSERT_EQ(ds.size(), 1u) << Dump(ds);
  EXPECT_NE(ds[0].message.find("YAML syntax error"), std::string::npos);
  EXPECT_GE(ds[0].loc.line, 2);
  EXPECT_FALSE(ds[0].hint.empty());
}

TEST(ScenarioErrors, RootNotAMapping) {
  auto ds = Errors("- a\n- b\n");
  EXPECT_DIAG(ds, 1, 1, "a scenario must be a mapping");
}

TEST(ScenarioErrors, UnknownKeyWithSuggestion) {
  const std::string yaml = std::string(kHead) + "expect:\n  outcom: survive\n";
  auto ds = Errors(yaml);
  ASSERT_EQ(ds.size(), 1u) << Dump(ds);
  EXPECT_DIAG(ds, 5, 3, "unknown key 'outcom' in expect");
  EXPECT_EQ(ds[0].hint, "did you mean 'outcome'?");
  EXPECT_EQ(ds[0].ToString(),
            "t.yaml:5:3: unknown key 'outcom' in expect (did you mean 'outcome'?)");
}

// `policy:`: failover is the default, shrink needs ftccl, the training-loop policies are
// refused outside the training workload with the reason at their line and column.
TEST(ScenarioPolicy, ParsedCheckedAndRefusedWithReasons) {
  ParseOutcome ok = ParseScenario(std::string(kHead), "t.yaml");
  ASSERT_TRUE(ok.ok()) << Dump(ok.diagnostics);
  EXPECT_EQ(ok.scenario->policy, RecoveryPolicyName::kFailover);
  ok = ParseScenario(std::string(kHead) + "policy: shrink\n", "t.yaml");
  ASSERT_TRUE(ok.ok()) << Dump(ok.diagnostics);
  EXPECT_EQ(ok.scenario->policy, RecoveryPolicyName::kShrink);
  EXPECT_STREQ(RecoveryPolicyString(ok.scenario->policy), "shrink");

  auto ds = Errors(std::string(kHead) + "ccl: gloo\npolicy: shrink\n");
  EXPECT_DIAG(ds, 5, 9, "policy shrink needs a library that can shrink its group; gloo");
  ds = Errors(std::string(kHead) + "policy: fail_stop\n");
  EXPECT_DIAG(ds, 4, 9, "policy fail_stop needs the training workload");
  ds = Errors(std::string(kHead) + "policy: adaptive\n");
  EXPECT_DIAG(ds, 4, 9, "policy adaptive needs the training workload");
  ds = Errors(std::string(kHead) + "policy: shrnk\n");
  EXPECT_DIAG(ds, 4, 9, "shrnk");
}

constexpr char kTrainHead[] =
    "name: t\n"
    "topology: {hosts: 2, ranks_per_host: 2, rails: 2}\n"
    "workload: {kind: train, steps: 40, grad_bytes: 1MiB, batch: 4, compute: 15ms,\n"
    "           checkpoint_every: 10, wait_bound: 3s}\n";

// The training workload: its keys, its defaults, and the policies only it has.
TEST(ScenarioTrain, ParsedWithEveryPolicyAndCheckedKeys) {
  for (const char* p : {"failover", "shrink", "fail_stop", "wait", "adaptive"}) {
    ParseOutcome ok = ParseScenario(std::string(kTrainHead) + "policy: " + p + "\n", "t.yaml");
    ASSERT_TRUE(ok.ok()) << p << ": " << Dump(ok.diagnostics);
    EXPECT_STREQ(RecoveryPolicyString(ok.scenario->policy), p);
    const Workload& w = ok.scenario->workload;
    EXPECT_EQ(w.kind, WorkloadKind::kTrain);
    EXPECT_STREQ(WorkloadKindName(w.kind), "train");
    EXPECT_EQ(w.iters, 40);
    EXPECT_EQ(w.bytes, 1u << 20);
    EXPECT_EQ(w.batch, 4);
    EXPECT_EQ(w.compute_ns, 15'000'000);
    EXPECT_EQ(w.checkpoint_every, 10);
    EXPECT_EQ(w.wait_bound_ns, 3'000'000'000);
    EXPECT_TRUE(w.check);
  }
  // fail_stop and failover run on any library; the others need ftccl's mechanisms.
  EXPECT_TRUE(ParseScenario(std::string(kTrainHead) + "ccl: gloo\npolicy: fail_stop\n", "t.yaml").ok());
  auto ds = Errors(std::string(kTrainHead) + "ccl: gloo\npolicy: wait\n");
  EXPECT_DIAG(ds, 6, 9, "policy wait needs a library that reports its path events");
  ds = Errors(std::string(kTrainHead) + "ccl: gloo\npolicy: adaptive\n");
  EXPECT_DIAG(ds, 6, 9, "policy adaptive needs a library");
  const std::string bad = "workload: {kind: train, steps: 0, grad_bytes: 6B, batch: 0, itres: 3}";
  ds = Errors("name: t\ntopology: {hosts: 1, ranks_per_host: 2, rails: 1}\n" + bad + "\n");
  EXPECT_DIAG(ds, 3, Col(bad, 1, "itres"), "unknown key 'itres' in workload");
  EXPECT_DIAG(ds, 3, Col(bad, 1, "steps") + 7, "workload.steps");
  EXPECT_DIAG(ds, 3, Col(bad, 1, "grad_bytes") + 12,
              "workload.grad_bytes must be a positive multiple of 4");
  EXPECT_DIAG(ds, 3, Col(bad, 1, "batch") + 7, "workload.batch");
  ds = Errors("name: t\ntopology: {hosts: 1, ranks_per_host: 2, rails: 1}\n"
              "workload: {kind: train, batch: 2}\n");
  EXPECT_DIAG(ds, 3, 11, "missing required key 'steps' in workload");
  EXPECT_DIAG(ds, 3, 11, "missing required key 'grad_bytes' in workload");
}

// workload.rejoin: when ranks a shrink left out come back (default never); at_checkpoint
// needs checkpoints; a value outside the three is an error at its place.
TEST(ScenarioTrain, RejoinParsedAndChecked) {
  ParseOutcome ok = ParseScenario(std::string(kTrainHead) + "policy: shrink\n", "t.yaml");
  ASSERT_TRUE(ok.ok()) << Dump(ok.diagnostics);
  EXPECT_EQ(ok.scenario->workload.rejoin, "never");
  for (const char* v : {"never", "on_repair", "at_checkpoint"}) {
    const std::string yaml =
        "name: t\n"
        "topology: {hosts: 2, ranks_per_host: 2, rails: 2}\n"
        "workload: {kind: train, steps: 40, grad_bytes: 1MiB, checkpoint_every: 10,\n"
        "           rejoin: " + std::string(v) + "}\n"
        "policy: shrink\n";
    ok = ParseScenario(yaml, "t.yaml");
    ASSERT_TRUE(ok.ok()) << v << ": " << Dump(ok.diagnostics);
    EXPECT_EQ(ok.scenario->workload.rejoin, v);
  }
  const std::string no_ckpt =
      "workload: {kind: train, steps: 40, grad_bytes: 1MiB, rejoin: at_checkpoint}";
  auto ds = Errors("name: t\ntopology: {hosts: 2, ranks_per_host: 1, rails: 1}\n" + no_ckpt +
                   "\npolicy: shrink\n");
  EXPECT_DIAG(ds, 3, Col(no_ckpt, 1, "at_checkpoint"),
              "workload.rejoin at_checkpoint needs checkpoints");
  const std::string typo = "workload: {kind: train, steps: 40, grad_bytes: 1MiB, rejoin: always}";
  ds = Errors("name: t\ntopology: {hosts: 2, ranks_per_host: 1, rails: 1}\n" + typo + "\n");
  EXPECT_DIAG(ds, 3, Col(typo, 1, "always"), "always");
}

TEST(ScenarioErrors, UnknownKeyInsideAFaultAndATarget) {
  const std::string yaml = std::string(kHead) +
                           "faults:\n"
                           "  - {id: f1, at: 1s, type: link_down, target: {host: 0, rial: 0}, "
                           "fo: 1s}\n";
  auto ds = Errors(yaml);
  EXPECT_DIAG(ds, 5, Col(yaml, 5, "rial"), "unknown key 'rial' in target of fault 'f1'");
  EXPECT_DIAG(ds, 5, Col(yaml, 5, "fo:"), "unknown key 'fo' in fault 'f1'");
}

TEST(ScenarioErrors, MissingRequiredKeys) {
  auto ds = Errors("name: t\ntopology: {hosts: 2, rails: 2}\n");
  EXPECT_DIAG(ds, 1, 1, "missing required key 'workload' in the scenario");
  EXPECT_DIAG(ds, 2, 11, "missing required key 'ranks_per_host' in topology");
}

TEST(ScenarioErrors, WrongTypes) {
  const std::string yaml =
      "name: t\n"
      "topology: {hosts: two, ranks_per_host: 2, rails: 2}\n"
      "workload: [allreduce]\n"
      "faults: {id: f1}\n";
  auto ds = Errors(yaml);
  EXPECT_DIAG(ds, 2, Col(yaml, 2, "two"), "topology.hosts must be an integer, got 'two'");
  EXPECT_DIAG(ds, 3, 11, "workload must be a mapping, got a list");
  EXPECT_DIAG(ds, 4, 9, "faults must be a list");
}

TEST(ScenarioErrors, UnitsAreRequiredAndChecked) {
  const std::string yaml =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 2, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1024, duration: 8parsecs}\n"
      "faults:\n"
      "  - {id: f1, at: 2, type: bandwidth, target: {host: 0, rail: 0}, rate: 100, for: 1s}\n";
  auto ds = Errors(yaml);
  EXPECT_DIAG(ds, 3, Col(yaml, 3, "1024"), "workload.bytes");
  EXPECT_DIAG(ds, 3, Col(yaml, 3, "8parsecs"), "unit must be one of");
  EXPECT_DIAG(ds, 5, Col(yaml, 5, "2,"), "fault 'f1'.at");
  EXPECT_DIAG(ds, 5, Col(yaml, 5, "100"), "fault 'f1'.rate");
  const Diagnostic* at = Find(ds, 5, Col(yaml, 5, "2,"), "fault 'f1'.at");
  ASSERT_NE(at, nullptr);
  EXPECT_NE(at->hint.find("need a unit"), std::string::npos);
}

TEST(ScenarioErrors, UnknownChoicesSuggestTheNearest) {
  const std::string yaml =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 2, rails: 2}\n"
      "ccl: glooo\n"
      "workload: {op: allreduse, bytes: 1MiB, duration: 8s}\n"
      "faults:\n"
      "  - {id: f1, at: 1s, type: link_dwn, target: {host: 0, rail: 0}}\n";
  auto ds = Errors(yaml);
  const Diagnostic* ccl = Find(ds, 3, 6, "unknown ccl 'glooo'");
  ASSERT_NE(ccl, nullptr) << Dump(ds);
  EXPECT_EQ(ccl->hint, "did you mean 'gloo'?");
  const Diagnostic* op = Find(ds, 4, Col(yaml, 4, "allreduse"), "unknown workload.op");
  ASSERT_NE(op, nullptr) << Dump(ds);
  EXPECT_EQ(op->hint, "did you mean 'allreduce'?");
  const Diagnostic* type = Find(ds, 6, Col(yaml, 6, "link_dwn"), "unknown fault type 'link_dwn'");
  ASSERT_NE(type, nullptr) << Dump(ds);
  EXPECT_EQ(type->hint, "did you mean 'link_down'?");
}

TEST(ScenarioErrors, ImpossibleTargets) {
  const std::string yaml = std::string(kHead) +
                           "faults:\n"
                           "  - {id: f1, at: 1s, type: link_down, target: {host: 5, rail: 0}}\n"
                           "  - {id: f2, at: 1s, type: link_down, target: {host: 1, rail: 2}}\n"
                           "  - {id: f3, at: 1s, type: rank_kill, target: {host: 0, rank: 2}}\n"
                           "  - {id: f4, at: 1s, type: qp_error, target: {host: 0, rank: 1, "
                           "rail: 0}, peer: 1}\n"
                           "  - {id: f5, at: 1s, type: qp_error, target: {host: 1, rank: 0, "
                           "rail: 0}, peer: 4}\n";
  auto ds = Errors(yaml);
  const Diagnostic* h = Find(ds, 5, Col(yaml, 5, "5,"), "host 5 does not exist");
  ASSERT_NE(h, nullptr) << Dump(ds);
  EXPECT_NE(h->message.find("the topology has 2 hosts"), std::string::npos);
  EXPECT_EQ(h->hint, "host must be in 0..1");
  EXPECT_DIAG(ds, 6, Col(yaml, 6, "2}"), "rail 2 does not exist");
  EXPECT_DIAG(ds, 7, Col(yaml, 7, "2}"), "rank 2 does not exist");
  EXPECT_DIAG(ds, 8, Col(yaml, 8, "peer: 1") + 6, "peer is the target rank itself");
  EXPECT_DIAG(ds, 9, Col(yaml, 9, "peer: 4") + 6, "peer rank 4 does not exist");
}

TEST(ScenarioErrors, OverlappingFaultsOnOneTarget) {
  const std::string yaml =
      std::string(kHead) +
      "faults:\n"
      "  - {id: f1, at: 1s, type: link_down, target: {host: 0, rail: 0}, for: 2s}\n"
      "  - {id: f2, at: 2500ms, type: loss, target: {host: 0, rail: 0, side: host}, percent: 5, "
      "for: 1s}\n"
      "  - {id: f3, at: 3s, type: blackhole, target: {host: 0, rail: 0}, for: 1s}\n"
      "  - {id: f4, at: 1s, type: link_down, target: {host: 1, rail: 0}, for: 2s}\n"
      "  - {id: f5, at: 1s, type: rank_kill, target: {host: 1, rank: 0}}\n"
      "  - {id: f6, at: 7s, type: rank_pause, target: {host: 1, rank: 0}, for: 100ms}\n";
  auto ds = Errors(yaml);
  const Diagnostic* d = Find(ds, 6, Col(yaml, 6, "2500ms"),
                             "fault 'f2' (2500ms..3500ms) overlaps "
                             "fault 'f1' (1s..3s) on host 0 rail 0");
  ASSERT_NE(d, nullptr) << Dump(ds);
  EXPECT_EQ(d->hint,
            "faults on one link or rank must not overlap; let 'f2' end by 1s or start at 3s or "
            "later");
  // f3 starts where f1 ends (back to back is fine) but inside f2.
  EXPECT_DIAG(ds, 7, Col(yaml, 7, "3s"), "fault 'f3' (3s..4s) overlaps fault 'f2'");
  EXPECT_EQ(Find(ds, 7, Col(yaml, 7, "3s"), "overlaps fault 'f1'"), nullptr);
  // A killed rank cannot be paused later.
  const Diagnostic* k = Find(ds, 10, Col(yaml, 10, "7s"), "overlaps fault 'f5' (1s..end of run)");
  ASSERT_NE(k, nullptr) << Dump(ds);
  EXPECT_NE(k->hint.find("until the end of the run"), std::string::npos);
  EXPECT_EQ(ds.size(), 3u) << Dump(ds);
}

TEST(ScenarioErrors, FaultsOutsideTheRun) {
  const std::string yaml =
      std::string(kHead) +
      "faults:\n"
      "  - {id: f1, at: 9s, type: link_down, target: {host: 0, rail: 0}, for: 1s}\n"
      "  - {id: f2, at: 7s, type: link_down, target: {host: 1, rail: 0}, for: 2s}\n"
      "  - {id: f3, at: 7s, type: link_flap, target: {host: 1, rail: 1}, down: 400ms, up: 400ms, "
      "count: 2}\n";
  auto ds = Errors(yaml);
  const Diagnostic* d = Find(ds, 5, Col(yaml, 5, "9s"),
                             "fault 'f1' starts at 9s, not before the "
                             "run ends at 8s");
  ASSERT_NE(d, nullptr) << Dump(ds);
  EXPECT_FALSE(d->hint.empty());
  EXPECT_DIAG(ds, 6, Col(yaml, 6, "7s"), "fault 'f2' lasts until 9s, beyond the end of the run");
  EXPECT_DIAG(ds, 7, Col(yaml, 7, "7s"), "fault 'f3' lasts until 8200ms");
}

TEST(ScenarioErrors, DuplicateIdsAndKeys) {
  const std::string yaml = std::string(kHead) +
                           "faults:\n"
                           "  - {id: f1, at: 1s, type: link_down, target: {host: 0, rail: 0}, "
                           "for: 1s}\n"
                           "  - {id: f1, at: 3s, type: link_down, target: {host: 0, rail: 1}, "
                           "at: 4s}\n";
  auto ds = Errors(yaml);
  EXPECT_DIAG(ds, 6, Col(yaml, 6, "f1"), "duplicate fault id 'f1'");
  EXPECT_DIAG(ds, 6, Col(yaml, 6, "at: 4s"), "duplicate key 'at' in fault 'f1'");
}

TEST(ScenarioErrors, KindSpecificParameterRules) {
  const std::string yaml =
      std::string(kHead) +
      "faults:\n"
      "  - {id: f1, at: 1s, type: link_flap, target: {host: 0, rail: 0}, down: 100ms, up: 300ms, "
      "for: 1s}\n"
      "  - {id: f2, at: 1s, type: link_flap, target: {host: 1, rail: 0}, down: 100ms, up: 300ms, "
      "jitter: 100ms}\n"
      "  - {id: f3, at: 1s, type: bandwidth, target: {host: 0, rail: 1}, for: 1s}\n"
      "  - {id: f4, at: 1s, type: rank_kill, target: {host: 0, rank: 0, rail: 0}}\n"
      "  - {id: f5, at: 1s, type: loss, target: {host: 1, rail: 1}, percent: 150, for: 1s}\n";
  auto ds = Errors(yaml);
  EXPECT_DIAG(ds, 5, Col(yaml, 5, "for"), "'for' does not apply to link_flap");
  EXPECT_DIAG(ds, 6, Col(yaml, 6, "100ms}"), "jitter 100ms is not below down/up");
  EXPECT_DIAG(ds, 7, 5, "missing required key 'rate' in fault 'f3'");
  EXPECT_DIAG(ds, 8, Col(yaml, 8, "rail"), "unknown key 'rail' in target of fault 'f4'");
  EXPECT_DIAG(ds, 9, Col(yaml, 9, "150"), "fault 'f5'.percent must be a percentage");
}

TEST(ScenarioErrors, WorkloadRules) {
  const std::string yaml =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 2, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 2s, iters: 10, warmup: 3s, root: 4}\n";
  auto ds = Errors(yaml);
  EXPECT_DIAG(ds, 3, Col(yaml, 3, "10"), "workload has both 'duration' and 'iters'");
  EXPECT_DIAG(ds, 3, Col(yaml, 3, "3s"), "workload.warmup (3s) is not shorter than the run (2s)");
  EXPECT_DIAG(ds, 3, Col(yaml, 3, "4}"), "workload.root must be in [0, 3]");
}

TEST(ScenarioParse, WorkloadOpTimeoutParsedAndBounded) {
  ParseOutcome r = ParseScenario(
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 2s, op_timeout: 4s}\n",
      "t.yaml");
  ASSERT_TRUE(r.diagnostics.empty()) << Dump(r.diagnostics);
  EXPECT_EQ(r.scenario->workload.op_timeout_ns, 4'000'000'000);
  r = ParseScenario(
      "name: t\ntopology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 2s}\n",
      "t.yaml");
  EXPECT_FALSE(r.scenario->workload.op_timeout_ns.has_value());
  const std::string yaml =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 2s, op_timeout: 50ms}\n";
  auto ds = Errors(yaml);
  EXPECT_DIAG(ds, 3, Col(yaml, 3, "50ms"), "workload.op_timeout must be at least 100ms");
}

TEST(ScenarioErrors, ExpectationsTheRunCannotMeasure) {
  const std::string yaml =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 2, rails: 2}\n"
      "ccl: gloo\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 8s, check: false}\n"
      "faults:\n"
      "  - {id: f1, at: 1s, type: link_down, target: {host: 0, rail: 0}, for: 1s}\n"
      "expect:\n"
      "  detection_ms: {max: 100}\n"
      "  degraded_ratio: {min: 0.4}\n"
      "  stall_ms: {maximum: 3}\n"
      "  failover_first_ms: {max: 10}\n"
      "  failover_latency_ms: {max: 1000}\n"
      "  wrong_results: 0\n"
      "  abort_within: -1s\n";
  auto ds = Errors(yaml);
  const Diagnostic* d = Find(ds, 8, 17, "expect.detection_ms needs CCL path events, which gloo");
  ASSERT_NE(d, nullptr) << Dump(ds);
  EXPECT_NE(d->hint.find("failover_latency_ms is measured for every ccl"), std::string::npos);
  EXPECT_DIAG(ds, 9, 19, "expect.degraded_ratio needs a permanent fault");
  EXPECT_DIAG(ds, 10, 14, "unknown key 'maximum' in expect.stall_ms");
  EXPECT_DIAG(ds, 10, 13, "missing required key 'max' in expect.stall_ms");
  EXPECT_DIAG(ds, 11, 22, "expect.failover_first_ms needs CCL path events, which gloo");
  // Full convergence is measured for every CCL (from collective progress without events).
  EXPECT_EQ(Find(ds, 12, 24, "failover_latency_ms"), nullptr) << Dump(ds);
  const Diagnostic* w = Find(ds, 13, 18, "expect.wrong_results needs the results checked");
  ASSERT_NE(w, nullptr) << Dump(ds);
  EXPECT_EQ(w->hint, "remove wrong_results, or set 'check: true' under workload");
  EXPECT_DIAG(ds, 14, 17, "expect.abort_within");
}

// expect.param_sha256 compares a train job with its fault-free twin: only `twin`, and only on a
// train workload with faults.
TEST(ScenarioErrors, ParamHashExpectationNeedsATrainJobWithFaults) {
  const std::string train =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
      "workload: {kind: train, steps: 20, batch: 4, compute: 10ms, grad_bytes: 1MiB}\n"
      "faults:\n"
      "  - {id: f1, at: 1s, type: link_down, target: {host: 0, rail: 0}, for: 1s}\n"
      "expect: {param_sha256: twin}\n";
  auto ok = ParseScenario(train, "t.yaml");
  ASSERT_TRUE(ok.ok()) << Dump(ok.diagnostics);
  EXPECT_TRUE(ok.scenario->expect.param_sha256_twin);
  std::string other = train;
  other.replace(other.find("param_sha256: twin"), 18, "param_sha256: abc");
  EXPECT_FALSE(Errors(other).empty());
  const std::string coll =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 8s}\n"
      "faults:\n"
      "  - {id: f1, at: 1s, type: link_down, target: {host: 0, rail: 0}, for: 1s}\n"
      "expect: {param_sha256: twin}\n";
  auto ds = Errors(coll);
  EXPECT_NE(Find(ds, 6, 24, "expect.param_sha256 compares a train job"), nullptr) << Dump(ds);
}

TEST(Scenario, AbortWithinAndOverriddenCcl) {
  const std::string yaml =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 8s}\n"
      "faults:\n"
      "  - {id: f1, at: 1s, type: link_down, target: {host: 0, rail: 0}, for: 1s}\n"
      "expect:\n"
      "  abort_within: 2500ms\n"
      "  detection_ms: {max: 100}\n";
  ParseOutcome r = ParseScenario(yaml, "t.yaml");
  ASSERT_TRUE(r.ok()) << Dump(r.diagnostics);
  EXPECT_EQ(r.scenario->expect.abort_within_ns, 2'500'000'000);
  EXPECT_TRUE(ExpectationsUnmeasurable(*r.scenario, CclName::kFtccl, "t.yaml").empty());
  // Run with --ccl gloo: the same file names an expectation gloo cannot give, at its place.
  auto bad = ExpectationsUnmeasurable(*r.scenario, CclName::kGloo, "t.yaml");
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].ToString().rfind("t.yaml:8:17: expect.detection_ms needs CCL path events", 0),
            0u)
      << bad[0].ToString();
  // The default bound.
  ParseOutcome plain = ParseScenario(
      "name: t\ntopology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 8s}\n",
      "t.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain.scenario->expect.abort_within_ns, 10'000'000'000);
}

TEST(ScenarioErrors, AllErrorsComeOutAtOnceInFileOrder) {
  const std::string yaml =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 2, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1, duration: 8s}\n"
      "faults:\n"
      "  - {id: f1, at: 1s, type: link_down, target: {host: 3, rail: 0}}\n"
      "expect: {outcome: survived}\n"
      "colour: blue\n";
  auto ds = Errors(yaml);
  ASSERT_EQ(ds.size(), 4u) << Dump(ds);
  EXPECT_EQ(ds[0].loc.line, 3);
  EXPECT_EQ(ds[1].loc.line, 5);
  EXPECT_EQ(ds[2].loc.line, 6);
  EXPECT_EQ(ds[2].hint, "did you mean 'survive'?");
  EXPECT_EQ(ds[3].loc.line, 7);
  EXPECT_EQ(ds[3].loc.column, 1);
}

TEST(ScenarioFiles, UnreadableFileIsOneDiagnostic) {
  ParseOutcome r = ParseScenarioFile("/nonexistent/x.yaml");
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].file, "/nonexistent/x.yaml");
  EXPECT_NE(r.diagnostics[0].message.find("cannot read"), std::string::npos);
}

TEST(ScenarioFiles, DemoValidates) {
  ParseOutcome r = ParseScenarioFile(std::string(FAULTLINE_SOURCE_DIR) + "/scenarios/demo.yaml");
  ASSERT_TRUE(r.ok()) << Dump(r.diagnostics);
  const Scenario& s = *r.scenario;
  EXPECT_EQ(s.topology.hosts, 2);
  EXPECT_EQ(s.topology.ranks_per_host, 2);
  EXPECT_EQ(s.topology.rails, 2);
  EXPECT_EQ(s.workload.op, CollOp::kAllReduce);
  ASSERT_EQ(s.faults.size(), 2u);
  EXPECT_EQ(s.faults[0].kind, "link_flap");
  EXPECT_EQ(s.faults[1].kind, "link_down");
  EXPECT_EQ(s.faults[0].target.rail, s.faults[1].target.rail);
}

// nics: per_rank: link faults name the rank whose port they hit; shared mode is unchanged.
TEST(ScenarioNics, PerRankParsesRankAddressedLinkTargets) {
  const std::string yaml =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 2, rails: 2, rail_gbps: 1, nics: per_rank}\n"
      "workload: {op: allreduce, bytes: 16MiB, duration: 8s}\n"
      "faults:\n"
      "  - {id: a, at: 1s, type: link_down, target: {host: 0, rank: 1, rail: 0}, for: 1s}\n"
      "  - {id: b, at: 1s, type: link_down, target: {host: 0, rank: 0, rail: 0, side: switch}, "
      "for: 1s}\n"
      "  - {id: c, at: 1s, type: link_down, target: {host: 0, rank: 0, rail: 1}, for: 1s}\n"
      "  - {id: d, at: 3s, type: conn_reset, target: {host: 1, rank: 1, rail: 1}}\n"
      "  - {id: e, at: 4s, type: rank_pause, target: {host: 0, rank: 1}, for: 1s}\n"
      "  - {id: f, at: 5s, type: qp_error, target: {host: 1, rank: 0, rail: 1}, peer: 0}\n";
  ParseOutcome r = ParseScenario(yaml, "t.yaml");
  ASSERT_TRUE(r.ok()) << Dump(r.diagnostics);
  const Scenario& s = *r.scenario;
  EXPECT_EQ(s.topology.nics, NicLayout::kPerRank);
  EXPECT_TRUE(s.topology.per_rank_nics());
  ASSERT_EQ(s.faults.size(), 6u);
  // Same host, rail and time, other rank or other rail: distinct ports, no overlap.
  EXPECT_EQ(s.faults[0].target.rank, 1);
  EXPECT_EQ(s.faults[0].target.rail, 0);
  EXPECT_TRUE(s.faults[0].target.port);
  EXPECT_EQ(s.faults[1].target.side, LinkSide::kSwitch);
  EXPECT_EQ(s.faults[1].target.ToJson(),
            (nlohmann::json{{"host", 0}, {"rank", 0}, {"rail", 0}, {"side", "switch"}}));
  EXPECT_EQ(s.faults[2].target.GlobalRank(s.topology), 0);
  EXPECT_TRUE(s.faults[3].target.port);
  EXPECT_EQ(s.faults[3].target.rank, 1);
  // Rank faults are unchanged.
  EXPECT_FALSE(s.faults[4].target.port);
  EXPECT_EQ(s.faults[4].target.ToJson(), (nlohmann::json{{"host", 0}, {"rank", 1}}));
  EXPECT_FALSE(s.faults[5].target.port);
  EXPECT_EQ(s.faults[5].target.rail, 1);
}

TEST(ScenarioNics, SharedIsTheDefaultAndExplicitSharedIsTheSame) {
  ParseOutcome d = ParseScenario(std::string(kHead), "t.yaml");
  ASSERT_TRUE(d.ok()) << Dump(d.diagnostics);
  EXPECT_EQ(d.scenario->topology.nics, NicLayout::kShared);
  const std::string yaml =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 2, rails: 2, nics: shared}\n"
      "workload: {op: allreduce, bytes: 16MiB, duration: 8s}\n"
      "faults:\n"
      "  - {id: a, at: 1s, type: link_down, target: {host: 0, rail: 0}, for: 1s}\n";
  ParseOutcome r = ParseScenario(yaml, "t.yaml");
  ASSERT_TRUE(r.ok()) << Dump(r.diagnostics);
  EXPECT_EQ(r.scenario->topology.nics, NicLayout::kShared);
  EXPECT_FALSE(r.scenario->faults[0].target.port);
  EXPECT_EQ(r.scenario->faults[0].target.ToJson(),
            (nlohmann::json{{"host", 0}, {"rail", 0}, {"side", "host"}}));
}

TEST(ScenarioNics, Errors) {
  // An unknown layout, with the nearest one as the hint.
  auto ds = Errors(
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 2, rails: 2, nics: per-rank}\n"
      "workload: {op: allreduce, bytes: 16MiB, duration: 8s}\n");
  EXPECT_DIAG(ds, 2, 57, "unknown topology.nics 'per-rank'");
  EXPECT_NE(ds[0].hint.find("did you mean 'per_rank'?"), std::string::npos) << Dump(ds);

  // More ranks than a rail's /24 holds.
  ds = Errors(
      "name: t\n"
      "topology: {hosts: 100, ranks_per_host: 3, rails: 2, nics: per_rank}\n"
      "workload: {op: allreduce, bytes: 16MiB, duration: 8s}\n");
  EXPECT_DIAG(ds, 2, 59, "300 ranks, more than the 250");
  EXPECT_NE(ds[0].hint.find("nics: shared"), std::string::npos) << Dump(ds);

  // per_rank: a link fault without its rank; a rank out of range; overlapping faults on one
  // port.
  const std::string head =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 2, rails: 2, nics: per_rank}\n"
      "workload: {op: allreduce, bytes: 16MiB, duration: 8s}\n"
      "faults:\n";
  const std::string y1 =
      head +
      "  - {id: a, at: 1s, type: link_down, target: {host: 0, rail: 0}, for: 1s}\n"
      "  - {id: b, at: 1s, type: port_drop, target: {host: 0, rank: 2, rail: 0}}\n"
      "  - {id: c, at: 1s, type: bandwidth, target: {host: 1, rank: 1, rail: 1}, "
      "rate: 100Mbps, for: 2s}\n"
      "  - {id: d, at: 2s, type: loss, target: {host: 1, rank: 1, rail: 1}, "
      "percent: 5%, for: 1s}\n";
  ds = Errors(y1);
  EXPECT_DIAG(ds, 5, Col(y1, 5, "{host: 0, rail"),
              "missing required key 'rank' in target of fault 'a'");
  const Diagnostic* missing =
      Find(ds, 5, Col(y1, 5, "{host: 0, rail"), "missing required key 'rank'");
  ASSERT_NE(missing, nullptr);
  EXPECT_NE(missing->hint.find("nics: per_rank"), std::string::npos) << missing->hint;
  EXPECT_DIAG(ds, 6, Col(y1, 6, "2, rail"), "rank 2 does not exist");
  EXPECT_DIAG(ds, 8, Col(y1, 8, "2s, type: loss"),
              "overlaps fault 'c' (1s..3s) on host 1 rank 1 rail 1");
  EXPECT_EQ(ds.size(), 3u) << Dump(ds);

  // Shared NICs: rank on a link fault stays an error.
  const std::string y2 =
      std::string(kHead) +
      "faults:\n"
      "  - {id: a, at: 1s, type: link_down, target: {host: 0, rank: 0, rail: 0}, for: 1s}\n";
  ds = Errors(y2);
  EXPECT_DIAG(ds, 5, Col(y2, 5, "rank: 0"), "unknown key 'rank' in target of fault 'a'");
}

TEST(ScenarioNics, MatrixVariesTheLayout) {
  const std::string yaml =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 2, rails: 2}\n"
      "workload: {op: allreduce, bytes: 16MiB, duration: 8s}\n"
      "matrix: {nics: [shared, per_rank]}\n";
  ExpandOutcome e = ExpandScenario(yaml, "m.yaml");
  ASSERT_TRUE(e.ok()) << Dump(e.diagnostics);
  ASSERT_EQ(e.runs.size(), 2u);
  EXPECT_EQ(e.runs[0].topology.nics, NicLayout::kShared);
  EXPECT_EQ(e.runs[1].topology.nics, NicLayout::kPerRank);
  EXPECT_EQ(e.runs[1].name, "t[nics=per_rank]");
}

// topology.arp_retrans_ms: unset means the kernel's default; a matrix compares values; out of
// range is an error at its line.
TEST(ScenarioTopology, ArpRetransIsOptionalBoundedAndAMatrixKey) {
  const std::string base =
      "name: t\n"
      "workload: {op: allreduce, bytes: 16MiB, duration: 8s}\n";
  ParseOutcome plain = ParseScenario(base + "topology: {hosts: 2, ranks_per_host: 1, rails: 2}\n",
                                     "t.yaml");
  ASSERT_TRUE(plain.ok()) << Dump(plain.diagnostics);
  EXPECT_FALSE(plain.scenario->topology.arp_retrans_ms.has_value());
  ParseOutcome set = ParseScenario(
      base + "topology: {hosts: 2, ranks_per_host: 1, rails: 2, arp_retrans_ms: 100}\n", "t.yaml");
  ASSERT_TRUE(set.ok()) << Dump(set.diagnostics);
  EXPECT_EQ(set.scenario->topology.arp_retrans_ms, 100);
  for (const char* bad : {"0", "5", "60001", "fast"}) {
    ParseOutcome r = ParseScenario(base + "topology: {hosts: 2, ranks_per_host: 1, rails: 2, " +
                                       "arp_retrans_ms: " + bad + "}\n",
                                   "t.yaml");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(Dump(r.diagnostics).find("topology.arp_retrans_ms"), std::string::npos)
        << Dump(r.diagnostics);
  }
  ExpandOutcome e = ExpandScenario(
      base + "topology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
             "matrix: {arp_retrans_ms: [1000, 100]}\n",
      "m.yaml");
  ASSERT_TRUE(e.ok()) << Dump(e.diagnostics);
  ASSERT_EQ(e.runs.size(), 2u);
  EXPECT_EQ(e.runs[0].topology.arp_retrans_ms, 1000);
  EXPECT_EQ(e.runs[1].topology.arp_retrans_ms, 100);
}

// Every complete scenario shown in the schema reference (```yaml blocks with a `name:`) must
// validate, so the documentation cannot drift from the parser.
TEST(ScenarioFiles, ReadmeExamplesValidate) {
  std::ifstream in(std::string(FAULTLINE_SOURCE_DIR) + "/scenarios/README.md");
  ASSERT_TRUE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::regex block("```yaml\n([\\s\\S]*?)```");
  int checked = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), block);
       it != std::sregex_iterator(); ++it) {
    const std::string body = (*it)[1].str();
    if (body.rfind("name:", 0) != 0) continue;
    // As `faultline validate` reads it: a matrix example expands into its runs.
    ExpandOutcome r = ExpandScenario(body, "README.md example " + std::to_string(checked));
    EXPECT_TRUE(r.ok()) << Dump(r.diagnostics) << body;
    ++checked;
  }
  EXPECT_GE(checked, 2);
}

// workload kind torch_ddp: steps/warmup/args/script, a relative script resolved against the
// scenario's folder, and line:col errors for what is wrong.
TEST(ScenarioTorch, ParsesTheTrainingWorkload) {
  const std::string yaml =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
      "workload: {kind: torch_ddp, steps: 50, warmup: 3, args: {hidden: 64, bucket_mb: 0.5}}\n";
  ParseOutcome r = ParseScenario(yaml, "t.yaml");
  ASSERT_TRUE(r.ok()) << Dump(r.diagnostics);
  const Workload& w = r.scenario->workload;
  EXPECT_EQ(w.kind, WorkloadKind::kTorchDdp);
  EXPECT_EQ(w.iters, 50);
  EXPECT_EQ(w.warmup_iters, 3);
  EXPECT_FALSE(w.check);
  EXPECT_EQ(w.op, CollOp::kAllReduce);
  EXPECT_TRUE(w.script.empty());  // the reference script
  const std::vector<std::pair<std::string, std::string>> args = {{"hidden", "64"},
                                                                 {"bucket-mb", "0.5"}};
  EXPECT_EQ(w.script_args, args);
}

TEST(ScenarioTorch, ScriptIsResolvedAgainstTheScenarioFolder) {
  char dir[] = "/tmp/faultline_scenario_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string d(dir);
  std::ofstream(d + "/train.py") << "print(1)\n";
  const std::string yaml =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 1}\n"
      "workload: {kind: torch_ddp, steps: 5, script: train.py}\n";
  ParseOutcome r = ParseScenario(yaml, d + "/s.yaml");
  EXPECT_TRUE(r.ok()) << Dump(r.diagnostics);
  if (r.ok()) {
    EXPECT_EQ(r.scenario->workload.script, d + "/train.py");
  }
  std::remove((d + "/train.py").c_str());
  ParseOutcome gone = ParseScenario(yaml, d + "/s.yaml");
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(Find(gone.diagnostics, 3, Col(yaml, 3, "train.py"), "is not a file"), nullptr)
      << Dump(gone.diagnostics);
  rmdir(dir);
}

TEST(ScenarioTorch, BadTrainingWorkloadsAreErrorsWithTheirPlace) {
  const std::string yaml =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 1}\n"
      "workload: {kind: torch_ddp, steps: 0, bytes: 4MiB, args: [1, 2]}\n";
  auto ds = Errors(yaml);
  EXPECT_NE(Find(ds, 3, Col(yaml, 3, "0,"), "workload.steps"), nullptr) << Dump(ds);
  EXPECT_NE(Find(ds, 3, Col(yaml, 3, "bytes"), "unknown key 'bytes'"), nullptr) << Dump(ds);
  EXPECT_NE(Find(ds, 3, Col(yaml, 3, "[1"), "workload.args must be a mapping"), nullptr)
      << Dump(ds);
  const std::string no_steps =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 1}\n"
      "workload: {kind: torch_ddp}\n";
  auto ds2 = Errors(no_steps);
  EXPECT_NE(Find(ds2, 3, Col(no_steps, 3, "{"), "steps"), nullptr) << Dump(ds2);
  const std::string reserved =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 1}\n"
      "workload: {kind: torch_ddp, steps: 3, args: {size: 1024, store_dir: x, hidden: 8}}\n";
  auto ds4 = Errors(reserved);
  EXPECT_NE(Find(ds4, 3, Col(reserved, 3, "size"), "option the runner passes itself"), nullptr)
      << Dump(ds4);
  EXPECT_NE(Find(ds4, 3, Col(reserved, 3, "store_dir"), "option the runner passes itself"),
            nullptr)
      << Dump(ds4);
  EXPECT_EQ(ds4.size(), 2u) << Dump(ds4);
  const std::string bad_kind =
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 1}\n"
      "workload: {kind: torch_dp, steps: 3}\n";
  auto ds3 = Errors(bad_kind);
  EXPECT_NE(Find(ds3, 3, Col(bad_kind, 3, "torch_dp"), "workload.kind"), nullptr) << Dump(ds3);
}

}  // namespace
}  // namespace faultline::runner
