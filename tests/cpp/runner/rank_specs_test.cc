// The ranks' launch specs (runner/exec/rank_specs.h): argv and environment by workload kind,
// placement, incarnation.
#include "runner/exec/rank_specs.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "exec_test_util.h"

namespace faultline::runner {
namespace {

using testing::ScenarioFrom;

// The value after `flag` in argv, or "<absent>".
std::string Arg(const std::vector<std::string>& argv, const std::string& flag) {
  auto it = std::find(argv.begin(), argv.end(), flag);
  if (it == argv.end()) return "<absent>";
  return it + 1 == argv.end() ? "<last>" : *(it + 1);
}
bool Has(const std::vector<std::string>& argv, const std::string& flag) {
  return std::find(argv.begin(), argv.end(), flag) != argv.end();
}

RankSpecInputs Inputs(const Scenario* sc) {
  RankSpecInputs in;
  in.scenario = sc;
  const Topology& t = sc->topology;
  in.placement.rails.assign(t.hosts, {});
  for (int h = 0; h < t.hosts; ++h) {
    for (int l = 0; l < t.ranks_per_host; ++l) {
      in.placement.rails[h].push_back(
          {"10.0." + std::to_string(h) + "." + std::to_string(l), "10.1." + std::to_string(h)});
    }
    in.placement.env.push_back({"HOST_ENV=" + std::to_string(h)});
    in.placement.clock_offset_ns.push_back(h * 1000);
  }
  in.placement.bootstrap_host = "198.19.0.1";
  in.out_dir = "/tmp/run";
  in.worker = "/bin/faultline-worker";
  in.op_timeout_ms = 5000;
  in.t0_ns = 7'000'000'000;
  in.hook_paths.assign(t.world_size(), "");
  return in;
}

TEST(RankSpecs, CollectiveWorkloadTellsEachRankItsPlaceAndOp) {
  Scenario sc = ScenarioFrom(
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 2, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1MiB, duration: 20s, check: true}\n");
  RankSpecInputs in = Inputs(&sc);
  in.hook_paths[3] = "/tmp/run/ranks/rank3.hook";
  std::vector<LaunchSpec> specs = BuildRankSpecs(in);
  ASSERT_EQ(specs.size(), 4u);
  const LaunchSpec& s = specs[3];
  EXPECT_EQ(s.argv[0], "/bin/faultline-worker");
  EXPECT_EQ(Arg(s.argv, "--rank"), "3");
  EXPECT_EQ(Arg(s.argv, "--size"), "4");
  EXPECT_EQ(Arg(s.argv, "--bootstrap"), "198.19.0.1:29500");
  EXPECT_EQ(Arg(s.argv, "--rails"), "10.0.1.1,10.1.1");
  EXPECT_EQ(Arg(s.argv, "--store-dir"), "/tmp/run/store");
  EXPECT_EQ(Arg(s.argv, "--log"), "/tmp/run/ranks/rank3.jsonl");
  // On its host's clock: t0 plus host 1's offset.
  EXPECT_EQ(Arg(s.argv, "--start-at"), "7000001000");
  EXPECT_EQ(Arg(s.argv, "--op"), "allreduce");
  EXPECT_EQ(Arg(s.argv, "--redop"), "sum");
  EXPECT_EQ(Arg(s.argv, "--bytes"), "1048576B");
  EXPECT_EQ(Arg(s.argv, "--duration"), "20000ms");
  EXPECT_EQ(Arg(s.argv, "--timeout"), "5000ms");
  EXPECT_EQ(Arg(s.argv, "--fault-hook"), "/tmp/run/ranks/rank3.hook");
  EXPECT_FALSE(Has(specs[2].argv, "--fault-hook"));
  EXPECT_TRUE(Has(s.argv, "--check"));
  EXPECT_FALSE(Has(s.argv, "--iters"));
  EXPECT_EQ(s.env, std::vector<std::string>{"HOST_ENV=1"});
  EXPECT_EQ(s.placement.host, 1);
  EXPECT_EQ(s.placement.local_rank, 1);
  EXPECT_EQ(s.placement.global_rank, 3);
  EXPECT_EQ(s.name, "rank3");
}

TEST(RankSpecs, RestartedTrainJobResumesInItsOwnRendezvous) {
  Scenario sc = ScenarioFrom(
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
      "policy: fail_stop\n"
      "workload: {kind: train, steps: 50, batch: 8, compute: 30ms, grad_bytes: 4MiB,\n"
      "           checkpoint_every: 10, wait_bound: 3s}\n");
  RankSpecInputs in = Inputs(&sc);
  in.incarnation = 2;
  in.last_restart_cost_ms = 1234;
  std::vector<LaunchSpec> specs = BuildRankSpecs(in);
  ASSERT_EQ(specs.size(), 2u);
  const auto& a = specs[1].argv;
  EXPECT_EQ(Arg(a, "--workload"), "train");
  EXPECT_EQ(Arg(a, "--steps"), "50");
  EXPECT_EQ(Arg(a, "--policy"), "fail_stop");
  EXPECT_EQ(Arg(a, "--incarnation"), "2");
  EXPECT_EQ(Arg(a, "--restart-cost-ms"), "1234");
  EXPECT_EQ(Arg(a, "--bootstrap"), "198.19.0.1:29502");
  EXPECT_EQ(Arg(a, "--store-dir"), "/tmp/run/store/i2");
  EXPECT_EQ(Arg(a, "--log"), "/tmp/run/ranks/rank1.i2.jsonl");
  EXPECT_EQ(Arg(a, "--checkpoint-dir"), "/tmp/run/checkpoints");
  EXPECT_TRUE(Has(a, "--resume"));
  // A restarted job starts as soon as its group has met; no warm-up flag for train.
  EXPECT_FALSE(Has(a, "--start-at"));
  EXPECT_FALSE(Has(a, "--warmup"));
  EXPECT_EQ(specs[1].name, "rank1.i2");
}

TEST(RankSpecs, LogAndStorePaths) {
  EXPECT_EQ(RankLogPath("out/x", 5, 0), "out/x/ranks/rank5.jsonl");
  EXPECT_EQ(RankLogPath("out/x", 5, 1), "out/x/ranks/rank5.i1.jsonl");
  EXPECT_EQ(RankStoreDir("/a", 0), "/a/store");
  EXPECT_EQ(RankStoreDir("/a", 3), "/a/store/i3");
}

TEST(RankSpecs, NamespaceTopologyAddsNoInventoryEnvironment) {
  Scenario sc = ScenarioFrom(
      "name: t\n"
      "topology: {hosts: 2, ranks_per_host: 1, rails: 2}\n"
      "workload: {op: allreduce, bytes: 1MiB, iters: 10}\n");
  EXPECT_TRUE(InventoryRankEnv(sc, 0, true).empty());
  RankSpecInputs in = Inputs(&sc);
  std::vector<LaunchSpec> specs = BuildRankSpecs(in);
  EXPECT_EQ(Arg(specs[0].argv, "--iters"), "10");
  EXPECT_FALSE(Has(specs[0].argv, "--duration"));
}

}  // namespace
}  // namespace faultline::runner
