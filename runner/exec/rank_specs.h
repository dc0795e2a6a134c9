// What each rank of a run is started with: its argv and environment by workload kind
// (collectives, the training loop, a torch_ddp script) and its placement. Pure: no process,
// file or kernel is touched, so every rule is unit-tested (tests/cpp/runner/rank_specs_test.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runner/core/scenario.h"
#include "runner/exec/launcher.h"

namespace faultline::runner {

// The TCP port rank 0 serves the bootstrap on; a restarted incarnation adds its number.
inline constexpr int kBootstrapPort = 29500;

// Where the ranks of a run are, as the site tells it (runner/exec/site.h).
struct RankPlacement {
  // Rails of rank l of host h, in rail order: rails[h][l].
  std::vector<std::vector<std::vector<std::string>>> rails;
  std::string bootstrap_host;                 // rank 0's host's management address
  std::vector<std::vector<std::string>> env;  // by host: added to its ranks' environment
  std::vector<int64_t> clock_offset_ns;       // by host: rank clock = runner clock + offset
};

struct RankSpecInputs {
  const Scenario* scenario = nullptr;
  RankPlacement placement;
  std::string out_dir;  // the run's directory, absolute or relative to the cwd
  std::string worker;   // faultline-worker
  int64_t op_timeout_ms = 10000;
  int64_t t0_ns = 0;    // when the first incarnation starts its workload (runner clock)
  int incarnation = 0;  // 0 the first; a restarted job's count
  std::optional<int64_t> last_restart_cost_ms;  // measured at the last restart
  // The runner's detect, kill, reap and relaunch, measured once at the run's setup.
  std::optional<int64_t> relaunch_ms;
  std::vector<std::string> hook_paths;          // by global rank; "" where none is served
};

// One launch spec per rank, in global rank order (host-major).
std::vector<LaunchSpec> BuildRankSpecs(const RankSpecInputs& in);

// Rank g's log of `incarnation` under `out_dir`.
std::string RankLogPath(const std::string& out_dir, int g, int incarnation);
// The rendezvous directory of `incarnation` (absolute): store/, store/iN for a restart.
std::string RankStoreDir(const std::string& out_dir, int incarnation);

// What a rank of inventory host h is told through its environment (nothing on a namespace
// topology). `same_machine`: every host of the inventory is this machine.
std::vector<std::string> InventoryRankEnv(const Scenario& sc, int h, bool same_machine);

}  // namespace faultline::runner
