// Scenario: the typed form of a scenario YAML file (schema: scenarios/README.md) and its
// parser/validator.
//
// Parsing never stops at the first problem: every error in the file is collected as a
// Diagnostic (file:line:column, message, hint) so that a user fixes them all in one pass. A
// Scenario is only returned when the whole file validates; nothing may be started otherwise.
// Times in a scenario are offsets from the start of the workload (the first collective,
// warm-up included). Pure functions (ParseScenarioFile only reads the file); thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "workload/adapters/ccl_traits.h"

namespace YAML {
class Node;
}

namespace faultline::runner {

// 1-based line and column in the scenario file (0 when unknown).
struct SourceLoc {
  int line = 0;
  int column = 0;
};

struct Diagnostic {
  std::string file;
  SourceLoc loc;
  std::string message;
  std::string hint;  // may be empty
  // "file:line:column: message (hint)".
  std::string ToString() const;
};

// How the ranks of a host reach the rails. kShared: every rank uses every rail port of its
// host. kPerRank: every rank owns a NIC with one port on each rail (the GPU-server layout), so a
// link fault names the rank whose port it hits.
enum class NicLayout { kShared, kPerRank };
const char* NicLayoutString(NicLayout n);  // "shared", "per_rank"

// Bounds of topology.arp_retrans_ms.
inline constexpr int kMinArpRetransMs = 10;
inline constexpr int kMaxArpRetransMs = 60000;

// Where the hosts of a scenario are. kNetns: network namespaces built on this machine, rails
// shaped to rail_gbps (the default). kInventory: real hosts named in an inventory, whose rails
// are their own network interfaces (and RDMA ports); nothing is built or shaped, and a rail's
// capacity is the link speed the kernel reports (runner/exec/rail_capacity.h).
enum class TopologyKind { kNetns, kInventory };
const char* TopologyKindString(TopologyKind k);  // "netns", "inventory"

// One rail port of an inventory host: its netdev (RoCE and IPoIB netdevs included) and, where
// its traffic is RDMA, the RDMA device and port behind it.
struct InventoryRail {
  std::string netdev;
  std::string rdma;  // empty: the rail carries kernel (TCP/IP) traffic
  int port = 0;      // the RDMA port (1-based); 0 without rdma (1 when rdma omits it)
  std::string addr;  // the rail's IP address; may be empty
  bool is_rdma() const { return !rdma.empty(); }
};

struct InventoryHost {
  std::string name;  // its hostname (the Slurm node name)
  std::string addr;  // management address; may be empty
  std::vector<InventoryRail> rails;
};

struct Topology {
  int hosts = 0;
  int ranks_per_host = 0;
  int rails = 0;
  // kNetns: the shaped capacity of every rail (every port in per_rank mode). kInventory: not
  // set by the scenario; a real rail's capacity is read from the kernel, never this value.
  double rail_gbps = 1.0;
  NicLayout nics = NicLayout::kShared;
  // How long the hosts' kernels wait before repeating an unanswered ARP request on a rail
  // port (net.ipv4.neigh.<port>.retrans_time_ms); unset: the kernel's default (1000 ms).
  std::optional<int> arp_retrans_ms = std::nullopt;
  int world_size() const { return hosts * ranks_per_host; }
  bool per_rank_nics() const { return nics == NicLayout::kPerRank; }
  // Last, so that the netns fields above keep their aggregate order.
  TopologyKind kind = TopologyKind::kNetns;
  // kInventory: the hosts in order (host index i is inventory[i]); `hosts` and `rails` are
  // their counts. `inventory_file` is the host file's resolved path (empty when inline).
  std::vector<InventoryHost> inventory = {};
  std::string inventory_file = {};
  bool is_inventory() const { return kind == TopologyKind::kInventory; }
  // The inventory rail of `host`, `rail`; null for a netns topology or an index out of range.
  const InventoryRail* InventoryRailAt(int host, int rail) const;
};

// The library of a run: a row of the CCL traits table (workload/adapters/ccl_traits.h), which
// says what each one can do.
using CclName = workload::adapters::CclId;
const char* CclNameString(CclName c);  // the row's name: "ftccl", "gloo", "nccl"
// The library named `name` as in a scenario or on the command line; nullopt for a name no row
// of the table has.
std::optional<CclName> CclNameFromString(std::string_view name);

// `policy:`, what the ranks do at a fault. failover: the library's own recovery (ftccl's
// reroute, rebalance and relay); a call that fails ends the run. shrink: after a collective
// failed because a rank was lost, the survivors shrink the group without it and go on (ftccl).
// The training workload (kind train) also has: fail_stop (at the first fault every rank
// stops and the runner restarts them all in place from the last checkpoint), wait (hold every
// rank until the path returns, at most workload.wait_bound) and adaptive (the selector of
// runner/policy/cost_model.h chooses among the four at every fault event). wait and adaptive
// need ftccl (its events and its peer-loss timeout); fail_stop and failover run on any CCL.
enum class RecoveryPolicyName { kFailover, kShrink, kFailStop, kWait, kAdaptive };
// "failover", "shrink", "fail_stop", "wait", "adaptive"
const char* RecoveryPolicyString(RecoveryPolicyName p);

enum class CollOp {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,
  kBarrier
};
const char* CollOpName(CollOp op);  // "allreduce", ... (the ftccl spelling)
// busbw / algbw for `op` over `world` ranks: workload::BusBwFactorOf, the one copy of the rule.
double BusBwFactor(CollOp op, int world);

// What the ranks run: faultline-worker's loop of one collective ("collectives"), a PyTorch
// DistributedDataParallel training script over the scenario's CCL ("torch_ddp",
// integrations/torch), or faultline-worker's data-parallel training loop ("train": compute,
// a checked gradient allreduce, checkpoints, restarts; runner/worker/worker.h). The training
// steps of the last two are the ops the metrics see.
enum class WorkloadKind { kCollectives, kTorchDdp, kTrain };
const char* WorkloadKindName(WorkloadKind k);  // "collectives", "torch_ddp", "train"

struct Workload {
  WorkloadKind kind = WorkloadKind::kCollectives;
  CollOp op = CollOp::kAllReduce;
  std::string dtype = "f32";           // f32 f64 f16 bf16 i32 i64 u8
  std::string reduce = "sum";          // sum prod min max avg (reducing ops only)
  int root = 0;                        // broadcast / reduce
  uint64_t bytes = 0;                  // per-rank message size
  std::optional<int64_t> duration_ns;  // exactly one of duration_ns / iters
  std::optional<int64_t> iters;
  int64_t warmup_ns = 0;     // warm-up given as a duration ...
  int64_t warmup_iters = 0;  // ... or as a number of collectives
  bool check = true;         // verify every result against the known answer
  // workload.op_timeout (collective workloads): the deadline of one collective in the
  // workers, over `faultline run --op-timeout-ms`'s default (10 s) unless that is given. The
  // run's watchdog allows for it, so a library that never surfaces a fault ends sooner.
  std::optional<int64_t> op_timeout_ns;
  // torch_ddp: `steps` is iters and `warmup` warmup_iters; op is allreduce (the gradients'),
  // check is off (the parameters' hash is the check). The script: a path (relative ones
  // resolved against the scenario file's folder), or empty for the reference script
  // (python3 -m faultline_torch.ddp_train). Its own options (workload.args), in file order,
  // are passed as --key value.
  std::string script;
  std::vector<std::pair<std::string, std::string>> script_args;
  // train: `steps` is iters and `grad_bytes` bytes (op allreduce, f32 sum, always checked).
  int64_t batch = 8;                        // samples per rank per step
  int64_t compute_ns = 20'000'000;          // compute time per step
  int64_t checkpoint_every = 0;             // steps between checkpoints; 0: none
  int64_t wait_bound_ns = 5'000'000'000;    // policy wait (and adaptive's wait): longest hold
  // When ranks a shrink left out rejoin once their host is repaired (policies shrink and
  // adaptive; a library that can grow): "never", "on_repair", "at_checkpoint".
  std::string rejoin = "never";
};

// A fault kind is named by its registry name ("link_down", ...); everything the runner knows
// about it is its descriptor (runner/core/fault_kind.h; the kinds: runner/faults/).
namespace faults {
struct FaultDescriptor;
}

enum class LinkSide { kHost, kSwitch };
const char* LinkSideString(LinkSide s);  // "host", "switch"

struct FaultTarget {
  int host = 0;
  std::optional<int> rail;  // link faults; path faults (qp_error, conn_corrupt): the path
  // Rank faults: the local rank on `host`. Link faults with `nics: per_rank`: the local rank
  // whose NIC port on `rail` is hit (then `port` is true).
  std::optional<int> rank;
  LinkSide side = LinkSide::kHost;
  bool port = false;  // a link fault on a rank's own NIC port (nics: per_rank)
  // Global rank index of a rank target (host * ranks_per_host + rank).
  std::optional<int> GlobalRank(const Topology& t) const;
  nlohmann::json ToJson() const;
};

// Typed per-kind parameters; a field is meaningful only for the kinds named beside it. Each
// kind's descriptor (runner/faults/<kind>/) reads its fields and maps them to the injector's.
struct FaultParams {
  int64_t down_ns = 0;       // link_flap
  int64_t up_ns = 0;         // link_flap
  int64_t count = 1;         // link_flap
  int64_t jitter_ns = 0;     // link_flap (seeded period jitter), jitter, delay
  int64_t delay_ns = 0;      // delay, jitter, reorder
  uint64_t rate_bps = 0;     // bandwidth
  uint64_t burst_bytes = 0;  // bandwidth (0: the injector's default)
  double percent = 0;        // loss, corrupt, reorder
  bool remove = false;       // port_drop
  int peer = -1;             // qp_error, conn_corrupt: global rank of the peer
  std::string part;          // conn_corrupt: "payload" or "header"; empty: the rank's default
};

struct FaultSpec {
  std::string id;
  std::string kind = "link_down";  // a registered kind's name (the YAML `type`)
  int64_t at_ns = 0;
  std::optional<int64_t> for_ns;  // absent: until the end of the run (or one-shot)
  FaultTarget target;
  FaultParams params;
  SourceLoc loc;  // of the fault's entry in the file

  // REQUIRES: `kind` is registered (true of every parsed scenario).
  const faults::FaultDescriptor& descriptor() const;
  // The fault holds until the end of the run: its kind holds for the rest of the run
  // (port_drop, rank_kill), or it is a held fault without `for`.
  bool Permanent() const;
  // Offset at which the fault's effect is certainly over (for a kind with its own schedule,
  // link_flap: the latest possible final "up" with jitter); nullopt when permanent. One-shot
  // faults end where they start.
  std::optional<int64_t> LatestEndNs() const;
};

enum class ExpectedOutcome { kSurvive, kAbortClean };

struct Expectations {
  std::optional<ExpectedOutcome> outcome;
  std::optional<int64_t> wrong_results;  // at most this many
  std::optional<double> stall_ms_max;
  std::optional<double> failover_latency_ms_max;
  std::optional<double> failover_first_ms_max;
  std::optional<double> detection_ms_max;
  struct Recovery {
    double pct = 90;
    double within_ms = 0;
    double sustain_ms = 500;
  };
  std::optional<Recovery> recovery;
  std::optional<double> degraded_ratio_min;
  std::optional<double> goodput_loss_pct_max;
  // expect.param_sha256: twin (train workload with faults): the final parameters' hash is the
  // fault-free twin's, i.e. the faults changed nothing of what was trained.
  bool param_sha256_twin = false;
  // expect.abort_within: the bound within which every surviving rank must return its error
  // for the outcome to be aborted_clean (default 10 s).
  int64_t abort_within_ns = 10'000'000'000;
  // Where each expectation key was written ("detection_ms" -> line:col), for errors found
  // after parsing (a --ccl override).
  std::vector<std::pair<std::string, SourceLoc>> locations;
};



// `reproduce:` (incident replay): what the production incident looked like with a fail-stop
// library, so that a replay says whether it reproduced it. A run whose ccl is `ccl` is judged
// by this instead of `expect:` (which judges the fault-tolerant library's runs of the same
// file): its outcome must be `outcome`, and every rank of `ranks` must have failed (returned
// an error, hung or died) within `within` of the first fault.
struct Reproduce {
  CclName ccl = CclName::kGloo;
  std::string outcome = "aborted_clean";  // "aborted_clean", "hung" or "crashed"
  std::vector<int> ranks;                 // global ranks of the replay; may be empty
  int64_t within_ns = 30'000'000'000;
  SourceLoc loc;  // of the `reproduce:` key's value
};

struct Scenario {
  std::string name;
  std::string description;
  uint64_t seed = 0;
  Topology topology;
  CclName ccl = CclName::kFtccl;
  // `ccl_options:` as written (name -> value), each checked against the row of `ccl`
  // (CclTraits::options); a name not given takes the row's default.
  std::map<std::string, std::string> ccl_options;
  RecoveryPolicyName policy = RecoveryPolicyName::kFailover;
  Workload workload;
  std::vector<FaultSpec> faults;  // in file order
  Expectations expect;
  std::optional<Reproduce> reproduce;
  // Whether a run with `ccl` is judged by `reproduce:` rather than `expect:`.
  bool JudgedByReproduce(CclName run_ccl) const {
    return reproduce.has_value() && reproduce->ccl == run_ccl;
  }
  // `requires:`: features the run needs (kKnownRequirements); the runner checks them before
  // starting anything and skips the run, with the reason, where one is missing.
  std::vector<std::string> requirements;
  // A run expanded from a `matrix:`: the file's name (`name` then carries the label, e.g.
  // "nightly[op=allgather,bytes=64MiB]") and this combination's values in the order of the
  // matrix keys, spelled as in the file. Empty for a file without a matrix.
  std::string base_name;
  std::vector<std::pair<std::string, std::string>> matrix;
  // "op=allgather,bytes=64MiB"; empty without a matrix.
  std::string MatrixLabel() const;
};

// The names `requires:` accepts: "sch_netem" (the kernel's netem qdisc, for delay, jitter,
// corrupt and reorder faults), "fault_hook" (ranks serving the fault-hook protocol,
// injector/FAULT_HOOK.md, for conn_corrupt and qp_error) and "verbs" (ftccl's verbs
// transport, for qp_error). A fault implies what its kind's descriptor names
// (FaultDescriptor::requires_features; requirements.h).
inline constexpr const char* kKnownRequirements[] = {"sch_netem", "fault_hook", "verbs", "torch"};

// The keys a `matrix:` may vary and the scenario key each one sets.
//   op dtype reduce root bytes duration -> workload.<key>; seed ccl policy -> top level;
//   hosts ranks_per_host rails rail_gbps nics arp_retrans_ms -> topology.<key>.
inline constexpr const char* kMatrixKeys[] = {"op",        "dtype", "reduce", "root",
                                              "bytes",     "duration", "seed", "ccl",
                                              "policy",    "hosts", "ranks_per_host", "rails",
                                              "rail_gbps", "nics", "arp_retrans_ms"};
// At most this many combinations in one file.
inline constexpr int kMaxMatrixRuns = 1000;

// Whether `ccl` reports path events (path_down, resumed, ...): its traits' emits_path_events.
bool CclEmitsPathEvents(CclName ccl);

// The expectations `scenario` sets that can never be measured with `ccl` (detection_ms and
// failover_first_ms need path events), one diagnostic each at the key; empty when none, and
// when a run with `ccl` is judged by `reproduce:` instead.
// The parser applies it to the scenario's own ccl; a run whose ccl is overridden applies it
// again.
std::vector<Diagnostic> ExpectationsUnmeasurable(const Scenario& scenario, CclName ccl,
                                                 const std::string& file);

// The outcome of parsing: a scenario when `diagnostics` is empty.
struct ParseOutcome {
  std::optional<Scenario> scenario;
  std::vector<Diagnostic> diagnostics;
  bool ok() const { return scenario.has_value() && diagnostics.empty(); }
};

// Parses and validates YAML text; `file` names it in diagnostics. A file with a `matrix:` is
// accepted only when it expands to exactly one run (use ExpandScenario otherwise).
ParseOutcome ParseScenario(std::string_view yaml_text, const std::string& file);
// Reads and parses a file; an unreadable file is one diagnostic at 0:0.
ParseOutcome ParseScenarioFile(const std::string& path);
// Validates a mapping already loaded from `file` as a scenario (without `matrix:`), e.g. the
// scenario keys of a fault space (runner/explore/fault_space.h): diagnostics point into `file`.
ParseOutcome ParseScenarioNode(const YAML::Node& root, const std::string& file);

// The outcome of expanding a file: every run it stands for when `diagnostics` is empty.
struct ExpandOutcome {
  std::vector<Scenario> runs;
  std::vector<Diagnostic> diagnostics;
  bool ok() const { return !runs.empty() && diagnostics.empty(); }
};

// `faultline run --inventory FILE`: the hosts a scenario of kind netns runs on instead of
// namespaces built for it, so that a library written for the one-box topology runs unchanged
// on real interfaces. The scenario must fit: as many hosts and rails as the inventory has,
// rail ports shared by a host's ranks (not nics: per_rank). Its rail_gbps and arp_retrans_ms
// shape the emulated network only and are dropped (a real rail's capacity is read from its
// kernel). Its faults are then checked against the inventory's rails as an inventory
// scenario's are (no packet faults on an RDMA rail), at their own line:col.
struct InventoryPlacement {
  std::vector<InventoryHost> hosts;
  std::string file;  // the host file, resolved
};

// Parses a file that may carry a `matrix:` and returns one Scenario per combination (the
// first key varies slowest), each validated in full; a file without a matrix is one run. An
// error found in only some combinations names the first such combination. Nothing is returned
// unless every combination validates. With `placement`, every run is placed on its hosts.
ExpandOutcome ExpandScenario(std::string_view yaml_text, const std::string& file,
                             const InventoryPlacement* placement = nullptr);
ExpandOutcome ExpandScenarioFile(const std::string& path,
                                 const InventoryPlacement* placement = nullptr);

}  // namespace faultline::runner
