#include "runner/exec/twin_run.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/log.h"
#include "runner/core/report_json.h"
#include "runner/exec/site_common.h"

extern char** environ;

namespace faultline::runner {
namespace {

namespace fs = std::filesystem;

}  // namespace

std::string TwinKey(const Scenario& sc, const RunOptions& o) {
  const Topology& t = sc.topology;
  const Workload& w = sc.workload;
  std::string k =
      "hosts=" + std::to_string(t.hosts) + ";rph=" + std::to_string(t.ranks_per_host) +
      ";rails=" + std::to_string(t.rails) + ";gbps=" + std::to_string(t.rail_gbps) +
      ";nics=" + std::to_string(t.per_rank_nics()) + ";ccl=" + CclNameString(sc.ccl) +
      ";seed=" + std::to_string(sc.seed) + ";steps=" + std::to_string(w.iters.value_or(0)) +
      ";batch=" + std::to_string(w.batch) + ";compute=" + std::to_string(w.compute_ns) +
      ";grad=" + std::to_string(w.bytes) + ";ckpt=" + std::to_string(w.checkpoint_every) +
      ";wait=" + std::to_string(w.wait_bound_ns) + ";timeout=" + std::to_string(o.op_timeout_ms);
  // Where it runs: the same counts on namespaces and on an inventory's interfaces (one placed
  // with --inventory, say) run at different rates, as do two inventories.
  k += std::string(";kind=") + TopologyKindString(t.kind);
  for (const InventoryHost& h : t.inventory) {
    k += ";host=" + h.name + "@" + h.addr;
    for (const InventoryRail& r : h.rails) k += "," + r.netdev + "/" + r.rdma + ":" + r.addr;
  }
  // The library's environment overrides (FTCCL_ABORT_TIMEOUT_MS, ...) reach every rank and
  // change its behaviour and rate: a twin made under other ones is not this run's.
  std::vector<std::string> overrides;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "FTCCL_", 6) == 0) overrides.emplace_back(*e);
  }
  std::sort(overrides.begin(), overrides.end());
  for (const std::string& v : overrides) k += ";env=" + v;
  // A rebuilt worker may run at another rate: its size and time are part of the key.
  struct stat st {};
  const std::string worker = o.worker_path.empty() ? ExeDir() + "/faultline-worker" : o.worker_path;
  if (stat(worker.c_str(), &st) == 0) {
    k += ";worker=" + std::to_string(st.st_size) + "@" + std::to_string(st.st_mtime);
  }
  return Sha256Hex(k).substr(0, 16);
}

// Runs (or finds) the fault-free twin of `sc` and says where its report is.
void FindOrRunTwin(const Scenario& sc, RunOptions* o) {
  fs::path out = o->out_dir.empty() ? fs::path("out") : fs::path(o->out_dir).parent_path();
  if (out.empty()) out = ".";
  const fs::path dir = out / "twins" / TwinKey(sc, *o);
  const fs::path report = dir / "report.json";
  auto usable = [&]() -> bool {
    std::ifstream in(report);
    if (!in) return false;
    try {
      nlohmann::json j = nlohmann::json::parse(in);
      return j.value("outcome", "") == "survived" && j.contains("train") &&
             j["train"].value("samples_per_s", nlohmann::json()).is_number();
    } catch (const nlohmann::json::exception&) {
      return false;
    }
  };
  if (usable()) {
    o->twin_report = report.string();
    o->twin_reused = true;
    return;
  }
  Scenario twin = sc;
  twin.faults.clear();
  // One denominator for every policy: the job with no recovery machinery at all (fault-free,
  // failover never acts), so what a policy costs without a fault (adaptive's and wait's
  // per-step agreement) counts against it.
  twin.policy = RecoveryPolicyName::kFailover;
  twin.expect = Expectations{};
  twin.reproduce.reset();
  twin.name += " (fault-free twin)";
  RunOptions to = *o;
  to.out_dir = dir.string();
  to.report_only = true;
  FL_INFO("run", "%s: running its fault-free twin first -> %s", sc.name.c_str(), dir.c_str());
  std::fflush(stdout);
  const int code = RunParsedScenario(std::move(twin), to);
  if (RunInterrupted()) return;
  if (usable()) {
    o->twin_report = report.string();
  } else {
    o->twin_error = "the fault-free twin (" + dir.string() + ") did not finish its steps (exit " +
                    std::to_string(code) + ")";
  }
}

}  // namespace faultline::runner
