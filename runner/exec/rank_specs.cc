#include "runner/exec/rank_specs.h"

#include <filesystem>
#include <utility>

#include "runner/core/inventory.h"
#include "runner/exec/torch_workload.h"

namespace faultline::runner {

namespace fs = std::filesystem;

constexpr const char* kVerbsTransport = "FTCCL_TRANSPORT=verbs";

std::string RankLogPath(const std::string& out_dir, int g, int incarnation) {
  return out_dir + "/ranks/rank" + std::to_string(g) +
         (incarnation > 0 ? ".i" + std::to_string(incarnation) : "") + ".jsonl";
}

std::string RankStoreDir(const std::string& out_dir, int incarnation) {
  // A restarted job (policy fail_stop) meets in a fresh rendezvous of its own, on a port of
  // its own: nothing of the killed incarnation (a socket in TIME_WAIT, a stale store key) is
  // in its way.
  std::string store = fs::absolute(out_dir + "/store").string();
  if (incarnation > 0) store += "/i" + std::to_string(incarnation);
  return store;
}

std::vector<LaunchSpec> BuildRankSpecs(const RankSpecInputs& in) {
  const Scenario& sc = *in.scenario;
  const Workload& w = sc.workload;
  const Topology& t = sc.topology;
  const int world = t.world_size();
  const bool torch = w.kind == WorkloadKind::kTorchDdp;
  const bool train = w.kind == WorkloadKind::kTrain;
  const int incarnation = in.incarnation;
  const std::string store = RankStoreDir(in.out_dir, incarnation);
  std::vector<LaunchSpec> specs;
  for (int h = 0; h < t.hosts; ++h) {
    for (int l = 0; l < t.ranks_per_host; ++l) {
      const int g = h * t.ranks_per_host + l;
      std::string rails;
      // The rank's rail addresses in rail order: its own NIC's ports with per-rank NICs.
      for (const auto& a : in.placement.rails[h][l]) rails += (rails.empty() ? "" : ",") + a;
      const std::string log = fs::absolute(RankLogPath(in.out_dir, g, incarnation)).string();
      // Rank 0 serves the bootstrap on its host's management address.
      const std::string bootstrap =
          in.placement.bootstrap_host + ":" + std::to_string(kBootstrapPort + incarnation);
      // What every rank is told, whichever program it runs.
      // clang-format off
      const std::vector<std::string> group = {
          "--ccl", CclNameString(sc.ccl),
          "--rank", std::to_string(g),
          "--size", std::to_string(world),
          "--bootstrap", bootstrap,
          "--rails", rails,
          "--store-dir", store,
          "--log", log,
          "--seed", std::to_string(sc.seed),
      };
      // clang-format on
      // A training script (torch_workload.h), whose steps are the ops, or faultline-worker.
      std::vector<std::string> argv =
          torch ? TorchScriptArgv(w) : std::vector<std::string>{in.worker};
      argv.insert(argv.end(), group.begin(), group.end());
      // Every rank of the first incarnation starts its workload at t0; a restarted one as
      // soon as its group has met (the restart's cost is what it takes).
      // On the rank's own clock: its host's in a fleet run.
      if (incarnation == 0) {
        argv.insert(argv.end(),
                    {"--start-at", std::to_string(in.t0_ns + in.placement.clock_offset_ns[h])});
      }
      if (!train) argv.insert(argv.end(), {"--warmup", std::to_string(w.warmup_iters)});
      // clang-format off
      if (train) {
        const std::string dir = fs::absolute(in.out_dir + "/checkpoints").string();
        argv.insert(argv.end(), {
          "--workload", "train",
          "--steps", std::to_string(w.iters.value_or(1)),
          "--batch", std::to_string(w.batch),
          "--compute-ms", std::to_string(w.compute_ns / 1000000),
          "--grad-bytes", std::to_string(w.bytes) + "B",
          "--checkpoint-every", std::to_string(w.checkpoint_every),
          "--checkpoint-dir", dir,
          "--policy", RecoveryPolicyString(sc.policy),
          "--wait-bound-ms", std::to_string(w.wait_bound_ns / 1000000),
          "--timeout", std::to_string(in.op_timeout_ms) + "ms",
          "--incarnation", std::to_string(incarnation),
        });
        if (incarnation > 0) argv.push_back("--resume");
        if (w.rejoin != "never" && (sc.policy == RecoveryPolicyName::kShrink ||
                                    sc.policy == RecoveryPolicyName::kAdaptive)) {
          argv.insert(argv.end(), {"--rejoin", w.rejoin});
        }
        if (in.last_restart_cost_ms) {
          argv.insert(argv.end(), {"--restart-cost-ms", std::to_string(*in.last_restart_cost_ms)});
        }
        if (in.relaunch_ms) {
          argv.insert(argv.end(), {"--relaunch-ms", std::to_string(*in.relaunch_ms)});
        }
      } else if (torch) {
        argv.insert(argv.end(), {"--steps", std::to_string(w.iters.value_or(1)),
                                 "--timeout", std::to_string(in.op_timeout_ms)});
      } else {
        argv.insert(argv.end(), {
          "--op", CollOpName(w.op),
          "--dtype", w.dtype,
          "--root", std::to_string(w.root),
          "--bytes", std::to_string(w.bytes) + "B",
          "--timeout", std::to_string(in.op_timeout_ms) + "ms",
        });
        if (w.op == CollOp::kAllReduce || w.op == CollOp::kReduceScatter ||
            w.op == CollOp::kReduce) {
          argv.insert(argv.end(), {"--redop", w.reduce});
        }
        if (w.duration_ns) {
          argv.insert(argv.end(),
                      {"--duration", std::to_string(*w.duration_ns / 1000000) + "ms"});
        } else {
          argv.insert(argv.end(), {"--iters", std::to_string(w.iters.value_or(1))});
        }
        if (w.check) argv.push_back("--check");
        if (sc.policy == RecoveryPolicyName::kShrink) argv.insert(argv.end(), {"--policy", "shrink"});
      }
      // clang-format on
      if (g < static_cast<int>(in.hook_paths.size()) && !in.hook_paths[g].empty()) {
        argv.insert(argv.end(), {"--fault-hook", in.hook_paths[g]});
      }
      if (torch) {
        for (auto& a : TorchScriptOptions(w)) argv.push_back(std::move(a));
      }
      LaunchSpec spec;
      spec.argv = std::move(argv);
      if (torch) spec.env = {"PYTHONPATH=" + TorchPythonPath()};
      if (h < static_cast<int>(in.placement.env.size())) {
        for (const std::string& e : in.placement.env[h]) spec.env.push_back(e);
      }
      spec.placement = {h, l, g};
      spec.name =
          "rank" + std::to_string(g) + (incarnation > 0 ? ".i" + std::to_string(incarnation) : "");
      specs.push_back(std::move(spec));
    }
  }
  return specs;
}

std::vector<std::string> InventoryRankEnv(const Scenario& sc, int h, bool same_machine) {
  std::vector<std::string> env;
  const Topology& t = sc.topology;
  if (!t.is_inventory()) return env;
  // Ranks of several inventory hosts on this machine share its hostname: ftccl tells its
  // hosts apart (intra-host relay) by the inventory's names instead.
  if (same_machine) env.push_back("FTCCL_HOST_ID=" + t.inventory[h].name);
  // RDMA rails carry ftccl's traffic over verbs queue pairs (RoCE/IB), not TCP over the
  // netdev: the transport is the inventory's, all rails or none (ftccl has one per
  // communicator).
  if (sc.ccl == CclName::kFtccl && InventoryAllRdma(t)) env.emplace_back(kVerbsTransport);
  return env;
}

}  // namespace faultline::runner
