#include "runner/core/scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "base/units.h"
#include "runner/core/inventory.h"
#include "runner/faults/common.h"
#include "runner/faults/registry.h"
#include "runner/core/yaml_reader.h"
#include "workload/collective.h"

namespace faultline::runner {
namespace {

constexpr int64_t kForever = std::numeric_limits<int64_t>::max();
// hosts x ranks_per_host of a per_rank topology: the host octets 1..250 of a rail's /24.
constexpr int kMaxPerRankPorts = 250;

struct OpEntry {
  CollOp op;
  const char* name;
};
constexpr OpEntry kOps[] = {
    {CollOp::kAllReduce, "allreduce"},
    {CollOp::kAllGather, "allgather"},
    {CollOp::kReduceScatter, "reducescatter"},
    {CollOp::kBroadcast, "broadcast"},
    {CollOp::kReduce, "reduce"},
    {CollOp::kAllToAll, "alltoall"},
    {CollOp::kBarrier, "barrier"},
};

const std::vector<std::string> kDtypes = {"f32", "f64", "f16", "bf16", "i32", "i64", "u8"};
const std::vector<std::string> kReduceOps = {"sum", "prod", "min", "max", "avg"};

std::string Seconds(int64_t ns) { return FormatDuration(ns); }

// Closed/half-open interval overlap where a zero-length interval is a single instant.
bool Overlaps(int64_t s1, int64_t e1, int64_t s2, int64_t e2) {
  if (e1 == s1 && e2 == s2) return s1 == s2;
  if (e1 == s1) return s2 <= s1 && s1 < e2;
  if (e2 == s2) return s1 <= s2 && s2 < e1;
  return s1 < e2 && s2 < e1;
}

class Parser final : public YamlReader {
 public:
  explicit Parser(std::string file, const InventoryPlacement* placement = nullptr)
      : YamlReader(std::move(file)), placement_(placement) {}

  ParseOutcome Run(std::string_view text);
  // Validates an already loaded document (a `matrix:` key in it is skipped).
  ParseOutcome RunRoot(const YAML::Node& root);

  // One key of a `matrix:`: its name and the nodes of its values.
  struct MatrixAxis {
    std::string key;
    std::vector<YAML::Node> values;
  };
  // Checks root["matrix"] (which must exist): known keys, non-empty lists of distinct
  // scalars, no key also set in the scenario itself, a bounded number of combinations.
  // Returns true when it is valid; `axes` gets every usable axis either way (the keys that
  // are known and have at least one plain value).
  bool ParseMatrix(const YAML::Node& root, std::vector<MatrixAxis>* axes);
  const std::vector<Diagnostic>& diagnostics() const { return diags_; }

 private:
  void ParseTopology(const YAML::Node& n, Scenario* s);
  void ParseInventoryTopology(const YAML::Node& n, Scenario* s);
  void PlaceOnInventory(const YAML::Node& n, Scenario* s);
  void CheckRdmaRail(const YAML::Node& n, const FaultSpec& f, const Scenario& s);
  void ParseWorkload(const YAML::Node& n, Scenario* s);
  void ParseTorchWorkload(const YAML::Node& n, Scenario* s);
  void ParseTrainWorkload(const YAML::Node& n, Scenario* s);
  void CheckPolicy(const YAML::Node& p, const Scenario& s);
  void ParseFaults(const YAML::Node& n, Scenario* s);
  std::optional<FaultSpec> ParseFault(const YAML::Node& n, const Scenario& s);
  void ParseExpect(const YAML::Node& n, Scenario* s);
  void ParseReproduce(const YAML::Node& n, Scenario* s);
  void CheckFaultSchedule(const Scenario& s);
  void CheckExpectations(const YAML::Node& n, const Scenario& s);
  std::optional<double> MaxOf(const YAML::Node& n, const std::string& what, const char* key,
                              double lo, double hi);

  const InventoryPlacement* placement_ = nullptr;  // --inventory; null: the file's topology
  bool topology_ok_ = false;
  bool faults_ok_ = true;                 // every fault entry parsed
  std::vector<SourceLoc> fault_at_locs_;  // parallel to Scenario::faults
};

ParseOutcome Parser::Run(std::string_view text) {
  YAML::Node loaded;
  try {
    loaded = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    Error(SourceLoc{e.mark.line + 1, e.mark.column + 1}, "YAML syntax error: " + e.msg,
          "check indentation, colons and brackets near this position");
    return {std::nullopt, diags_};
  }
  return RunRoot(loaded);
}

// True when `n` is a mapping. A const lookup of a missing key gives an invalid node, on which
// IsMap() throws YAML::InvalidNode; this is false for it.
bool IsDefinedMap(const YAML::Node& n) { return n.IsDefined() && n.IsMap(); }

// Where each matrix key lands in the scenario: {section or "" for the top level, key}.
std::pair<std::string, std::string> MatrixTarget(const std::string& key) {
  for (const char* k : {"op", "dtype", "reduce", "root", "bytes", "duration"}) {
    if (key == k) return {"workload", key};
  }
  for (const char* k : {"hosts", "ranks_per_host", "rails", "rail_gbps", "nics", "arp_retrans_ms"}) {
    if (key == k) return {"topology", key};
  }
  return {"", key};
}

bool Parser::ParseMatrix(const YAML::Node& root, std::vector<MatrixAxis>* out) {
  const YAML::Node m = root["matrix"];
  const size_t before = diags_.size();
  if (!m.IsMap() || m.size() == 0) {
    Error(m, "matrix must be a non-empty mapping of keys to lists, got " + Describe(m),
          "write e.g. 'matrix: {op: [allreduce, allgather], bytes: [1MiB, 64MiB]}'");
    return false;
  }
  std::vector<std::string> known(std::begin(kMatrixKeys), std::end(kMatrixKeys));
  CheckKeys(m, known, "matrix");
  std::vector<MatrixAxis>& axes = *out;
  int64_t combinations = 1;
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (!it->first.IsScalar()) continue;
    const std::string key = it->first.Scalar();
    if (std::find(known.begin(), known.end(), key) == known.end()) continue;
    const YAML::Node list = it->second;
    const std::string what = "matrix." + key;
    if (!list.IsSequence() || list.size() == 0) {
      Error(list, what + " must be a non-empty list of values, got " + Describe(list),
            "write e.g. '" + key + ": [a, b]'");
      continue;
    }
    MatrixAxis axis{key, {}};
    std::set<std::string> seen;
    for (const auto& v : list) {
      if (!v.IsScalar()) {
        Error(v, what + ": every value must be a plain value, got " + Describe(v));
        continue;
      }
      if (!seen.insert(v.Scalar()).second) {
        Error(v, what + ": value '" + v.Scalar() + "' is listed twice", "list each value once");
        continue;
      }
      axis.values.push_back(v);
    }
    // The same key set both by the matrix and in its section would leave it unclear which wins.
    auto [section, field] = MatrixTarget(key);
    const YAML::Node parent = section.empty() ? root : root[section];
    if (IsDefinedMap(parent) && parent[field]) {
      Error(parent[field],
            (section.empty() ? field : section + "." + field) + " is also set by matrix." + key,
            "remove it here, or drop '" + key + "' from the matrix");
    }
    combinations *= std::max<int64_t>(1, static_cast<int64_t>(axis.values.size()));
    if (combinations > kMaxMatrixRuns) combinations = kMaxMatrixRuns + 1;
    if (!axis.values.empty()) axes.push_back(std::move(axis));
  }
  if (combinations > kMaxMatrixRuns) {
    Error(m, "matrix expands to more than " + std::to_string(kMaxMatrixRuns) + " runs",
          "split the file or shorten the lists");
  }
  return diags_.size() == before;
}

ParseOutcome Parser::RunRoot(const YAML::Node& root) {
  Scenario s;
  try {
    if (!root.IsMap()) {
      Error(root.IsNull() ? SourceLoc{1, 1} : Loc(root),
            "a scenario must be a mapping, got " + Describe(root),
            "start with 'name:', 'topology:', 'workload:'");
      return {std::nullopt, diags_};
    }
    CheckKeys(root,
              {"name", "description", "seed", "topology", "ccl", "policy", "workload", "faults",
               "expect", "reproduce", "requires", "matrix"},
              "the scenario");
    if (root["requires"]) {
      const YAML::Node r = root["requires"];
      std::vector<std::string> known(std::begin(kKnownRequirements), std::end(kKnownRequirements));
      if (!r.IsSequence()) {
        Error(r, "requires must be a list, got " + Describe(r), "write 'requires: [sch_netem]'");
      } else {
        for (const auto& item : r) {
          auto v = Choice(item, "requirement", known);
          if (v && std::find(s.requirements.begin(), s.requirements.end(), *v) ==
                       s.requirements.end()) {
            s.requirements.push_back(*v);
          }
        }
      }
    }
    if (Required(root, "name", "the scenario", "add 'name: my-scenario'")) {
      if (auto v = String(root["name"], "name")) {
        if (v->empty()) Error(root["name"], "name must not be empty");
        s.name = *v;
      }
    }
    if (root["description"]) {
      if (auto v = String(root["description"], "description")) s.description = *v;
    }
    if (root["seed"]) {
      if (auto v = Int(root["seed"], "seed", 0, std::numeric_limits<int64_t>::max())) {
        s.seed = static_cast<uint64_t>(*v);
      }
    }
    if (root["ccl"]) {
      if (auto v = Choice(root["ccl"], "ccl", workload::adapters::CclNames())) {
        s.ccl = *CclNameFromString(*v);
      }
    }
    if (root["policy"]) {
      const YAML::Node p = root["policy"];
      if (auto v = Choice(p, "policy", {"failover", "shrink", "fail_stop", "wait", "adaptive"})) {
        s.policy = *v == "failover"    ? RecoveryPolicyName::kFailover
                   : *v == "shrink"    ? RecoveryPolicyName::kShrink
                   : *v == "fail_stop" ? RecoveryPolicyName::kFailStop
                   : *v == "wait"      ? RecoveryPolicyName::kWait
                                       : RecoveryPolicyName::kAdaptive;
      }
    }
    if (Required(root, "topology", "the scenario",
                 "add 'topology: {hosts: 2, ranks_per_host: 2, rails: 2}'")) {
      ParseTopology(root["topology"], &s);
    }
    if (Required(root, "workload", "the scenario",
                 "add 'workload: {op: allreduce, bytes: 16MiB, duration: 8s}'")) {
      ParseWorkload(root["workload"], &s);
    }
    if (root["faults"]) ParseFaults(root["faults"], &s);
    if (root["reproduce"]) ParseReproduce(root["reproduce"], &s);
    if (root["expect"]) {
      ParseExpect(root["expect"], &s);
      CheckExpectations(root["expect"], s);
    }
    CheckFaultSchedule(s);
    if (root["policy"]) CheckPolicy(root["policy"], s);
  } catch (const YAML::Exception& e) {
    Error(SourceLoc{e.mark.line + 1, e.mark.column + 1}, "malformed scenario: " + e.msg);
  }
  // The scenario's own errors first, then those of a host file it names, each by position.
  std::stable_sort(diags_.begin(), diags_.end(), [&](const Diagnostic& a, const Diagnostic& b) {
    if ((a.file == file_) != (b.file == file_)) return a.file == file_;
    return a.loc.line != b.loc.line ? a.loc.line < b.loc.line : a.loc.column < b.loc.column;
  });
  if (!diags_.empty()) return {std::nullopt, diags_};
  return {std::move(s), {}};
}

// The key node of `key` in mapping `n` (for errors about the key itself); `n` when absent.
YAML::Node KeyNode(const YAML::Node& n, const std::string& key) {
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) return it->first;
  }
  return n;
}

void Parser::ParseTopology(const YAML::Node& n, Scenario* s) {
  if (!ExpectMap(n, "topology")) return;
  if (n["kind"]) {
    auto v = Choice(n["kind"], "topology.kind", {"netns", "inventory"});
    if (!v) return;
    if (*v == "inventory") {
      if (placement_ != nullptr) {
        Error(n["kind"],
              "the scenario names its hosts already (kind: inventory); --inventory " +
                  placement_->file + " places only scenarios of kind: netns",
              "run it without --inventory, or point its topology.file at the host file");
        return;
      }
      ParseInventoryTopology(n, s);
      return;
    }
  }
  CheckKeys(n,
            {"kind", "hosts", "ranks_per_host", "rails", "rail_gbps", "nics", "arp_retrans_ms"},
            "topology");
  bool ok = true;
  auto need_int = [&](const char* key, int64_t lo, int64_t hi, int* out) {
    if (!Required(n, key, "topology", std::string("add '") + key + ": N'")) {
      ok = false;
      return;
    }
    auto v = Int(n[key], std::string("topology.") + key, lo, hi);
    if (v) {
      *out = static_cast<int>(*v);
    } else {
      ok = false;
    }
  };
  // Addresses are 198.18.<rail>.<host+1>: at most 253 hosts and 256 rails.
  need_int("hosts", 1, 253, &s->topology.hosts);
  need_int("ranks_per_host", 1, 256, &s->topology.ranks_per_host);
  need_int("rails", 1, 256, &s->topology.rails);
  if (n["rail_gbps"]) {
    if (auto v = Number(n["rail_gbps"], "topology.rail_gbps", 0.001, 400)) {
      s->topology.rail_gbps = *v;
    } else {
      ok = false;
    }
  }
  if (n["arp_retrans_ms"]) {
    if (auto v = Int(n["arp_retrans_ms"], "topology.arp_retrans_ms", kMinArpRetransMs,
                     kMaxArpRetransMs)) {
      s->topology.arp_retrans_ms = static_cast<int>(*v);
    } else {
      ok = false;
    }
  }
  if (n["nics"]) {
    if (auto v = Choice(n["nics"], "topology.nics", {"shared", "per_rank"})) {
      s->topology.nics = *v == "per_rank" ? NicLayout::kPerRank : NicLayout::kShared;
    } else {
      ok = false;
    }
  }
  // Per-rank ports are 198.18.<rail>.<host * ranks_per_host + rank + 1>.
  if (ok && s->topology.per_rank_nics() && s->topology.world_size() > kMaxPerRankPorts) {
    Error(n["nics"],
          "nics: per_rank gives every rank its own address on each rail, and " +
              std::to_string(s->topology.hosts) + " hosts x " +
              std::to_string(s->topology.ranks_per_host) + " ranks per host are " +
              std::to_string(s->topology.world_size()) + " ranks, more than the " +
              std::to_string(kMaxPerRankPorts) + " a rail's /24 holds",
          "lower hosts or ranks_per_host, or use 'nics: shared'");
    ok = false;
  }
  topology_ok_ = ok;
  if (ok && placement_ != nullptr) PlaceOnInventory(n, s);
}

void Parser::PlaceOnInventory(const YAML::Node& n, Scenario* s) {
  const Topology& t = s->topology;
  const int hosts = static_cast<int>(placement_->hosts.size());
  const int rails = hosts > 0 ? static_cast<int>(placement_->hosts.front().rails.size()) : 0;
  std::string misfit;
  if (t.hosts != hosts) {
    misfit = std::to_string(t.hosts) + " hosts, the inventory lists " + std::to_string(hosts);
  } else if (t.rails != rails) {
    misfit =
        std::to_string(t.rails) + " rails, the inventory's hosts have " + std::to_string(rails);
  } else if (t.per_rank_nics()) {
    misfit = "a NIC per rank (nics: per_rank), and an inventory host's ranks share its rails";
  }
  if (!misfit.empty()) {
    Error(n, "the scenario does not fit the inventory " + placement_->file + ": it wants " + misfit,
          "run it on a host file of its shape, or choose a scenario that fits");
    topology_ok_ = false;
    return;
  }
  Topology placed;
  placed.kind = TopologyKind::kInventory;
  placed.hosts = hosts;
  placed.rails = rails;
  placed.ranks_per_host = t.ranks_per_host;
  placed.inventory = placement_->hosts;
  placed.inventory_file = placement_->file;
  s->topology = std::move(placed);
}

// `kind: inventory`: real hosts from `hosts:` or a host file, nothing built or shaped.
void Parser::ParseInventoryTopology(const YAML::Node& n, Scenario* s) {
  Topology& t = s->topology;
  t.kind = TopologyKind::kInventory;
  bool ok = true;
  // The netns topology's own knobs: refused with why, rather than as unknown keys.
  for (const char* key : {"rail_gbps", "nics", "arp_retrans_ms"}) {
    if (!n[key]) continue;
    Error(KeyNode(n, key),
          std::string("topology.") + key +
              " shapes the emulated network of kind: netns and does not apply to kind: inventory",
          std::string(key) == "rail_gbps"
              ? "remove it: a real rail's capacity is the link speed its kernel reports"
              : "remove it: an inventory names real interfaces, which the runner leaves as they are");
    ok = false;
  }
  if (n["rails"]) {
    Error(KeyNode(n, "rails"), "topology.rails is not set under kind: inventory",
          "remove it: list each host's rails under the host, every host with the same number");
    ok = false;
  }
  CheckKeys(n, {"kind", "ranks_per_host", "hosts", "file", "rails", "rail_gbps", "nics",
                "arp_retrans_ms"},
            "topology");
  if (Required(n, "ranks_per_host", "topology", "add 'ranks_per_host: N' (ranks on every host)")) {
    if (auto v = Int(n["ranks_per_host"], "topology.ranks_per_host", 1, 256)) {
      t.ranks_per_host = static_cast<int>(*v);
    } else {
      ok = false;
    }
  } else {
    ok = false;
  }
  const bool inline_hosts = static_cast<bool>(n["hosts"]);
  const bool from_file = static_cast<bool>(n["file"]);
  if (inline_hosts && from_file) {
    Error(KeyNode(n, "file"), "topology has both 'hosts' and 'file'",
          "keep one: the hosts inline, or the host file that lists them");
    ok = false;
  } else if (!inline_hosts && !from_file) {
    Error(n, "an inventory topology needs 'hosts' or 'file'",
          "add 'file: hosts.yaml' or 'hosts: [{name: node01, rails: [{netdev: ens1f0np0}]}]'");
    ok = false;
  } else if (inline_hosts) {
    ok = ParseInventoryHosts(*this, n["hosts"], &t.inventory) && ok;
  } else {
    const YAML::Node f = n["file"];
    if (!f.IsScalar() || f.Scalar().empty()) {
      Error(f, "topology.file must be a path, got " + Describe(f), "write 'file: hosts.yaml'");
      ok = false;
    } else {
      // Relative to the scenario's folder, as workload.script.
      std::filesystem::path p(f.Scalar());
      if (p.is_relative() && file_ != "-" && !file_.empty()) {
        p = std::filesystem::path(file_).parent_path() / p;
      }
      std::error_code ec;
      if (!std::filesystem::is_regular_file(p, ec)) {
        Error(f, "topology.file " + p.string() + " is not a file",
              "give the host file's path relative to this scenario's folder");
        ok = false;
      } else {
        InventoryOutcome inv = ParseInventoryFile(p.lexically_normal().string());
        for (Diagnostic& d : inv.diagnostics) diags_.push_back(std::move(d));
        if (inv.ok()) {
          t.inventory = std::move(inv.hosts);
          t.inventory_file = std::filesystem::absolute(p, ec).lexically_normal().string();
        } else {
          Error(f, "the host file " + p.string() + " is not valid",
                "fix the errors reported in it");
          ok = false;
        }
      }
    }
  }
  if (!t.inventory.empty()) {
    t.hosts = static_cast<int>(t.inventory.size());
    t.rails = static_cast<int>(t.inventory.front().rails.size());
  }
  topology_ok_ = ok && t.hosts > 0 && t.rails > 0;
}

void Parser::CheckPolicy(const YAML::Node& p, const Scenario& s) {
  const RecoveryPolicyName pol = s.policy;
  const WorkloadKind kind = s.workload.kind;
  const bool training_only = pol == RecoveryPolicyName::kFailStop ||
                             pol == RecoveryPolicyName::kWait ||
                             pol == RecoveryPolicyName::kAdaptive;
  if (training_only && kind != WorkloadKind::kTrain) {
    Error(p,
          std::string("policy ") + RecoveryPolicyString(pol) +
              " needs the training workload (a restart from a checkpoint, a hold between "
              "steps), and this one is " + WorkloadKindName(kind),
          "use 'workload: {kind: train, ...}', or 'policy: failover' / 'policy: shrink'");
    return;
  }
  if (pol != RecoveryPolicyName::kFailover && kind == WorkloadKind::kTorchDdp) {
    Error(p, "the torch_ddp workload runs the library's own recovery only (policy failover)",
          "drop 'policy', or use 'workload: {kind: train, ...}'");
    return;
  }
  // shrink needs CclAdapter::Shrink; wait needs the peer-loss timeout and the path events;
  // adaptive needs all of them. The CCL traits table says which library has what.
  using workload::adapters::CclTraits;
  bool (*needs)(const CclTraits&) = nullptr;
  if (pol == RecoveryPolicyName::kShrink) {
    needs = [](const CclTraits& t) { return t.can_shrink; };
  } else if (pol == RecoveryPolicyName::kWait) {
    needs = [](const CclTraits& t) { return t.emits_path_events && t.honours_peer_loss_timeout; };
  } else if (pol == RecoveryPolicyName::kAdaptive) {
    needs = [](const CclTraits& t) {
      return t.can_shrink && t.emits_path_events && t.honours_peer_loss_timeout;
    };
  }
  if (needs != nullptr && !needs(workload::adapters::CclTraitsOf(s.ccl))) {
    const std::string able = workload::adapters::CclNamesWhere(needs);
    Error(p,
          std::string("policy ") + RecoveryPolicyString(pol) + " needs a library that " +
              (pol == RecoveryPolicyName::kShrink
                   ? "can shrink its group"
                   : "reports its path events and takes a peer-loss timeout") +
              "; " + CclNameString(s.ccl) + "'s adapter cannot (" + able + " can)",
          "use 'ccl: " + able.substr(0, able.find(',')) + "', or 'policy: failover'" +
              std::string(kind == WorkloadKind::kTrain ? " / 'policy: fail_stop'" : ""));
  }
}

void Parser::ParseWorkload(const YAML::Node& n, Scenario* s) {
  if (!ExpectMap(n, "workload")) return;
  if (n["kind"]) {
    auto v = Choice(n["kind"], "workload.kind",
                    std::vector<std::string>{"collectives", "torch_ddp", "train"});
    if (!v) return;
    if (*v == "torch_ddp") {
      ParseTorchWorkload(n, s);
      return;
    }
    if (*v == "train") {
      ParseTrainWorkload(n, s);
      return;
    }
  }
  CheckKeys(n,
            {"kind", "op", "dtype", "reduce", "root", "bytes", "duration", "iters", "warmup",
             "check"},
            "workload");
  Workload& w = s->workload;
  std::vector<std::string> op_names;
  for (const auto& e : kOps) op_names.push_back(e.name);
  if (Required(n, "op", "workload", "add 'op: allreduce'")) {
    if (auto v = Choice(n["op"], "workload.op", op_names)) {
      for (const auto& e : kOps) {
        if (*v == e.name) w.op = e.op;
      }
    }
  }
  if (n["dtype"]) {
    if (auto v = Choice(n["dtype"], "workload.dtype", kDtypes)) w.dtype = *v;
  }
  if (n["reduce"]) {
    if (auto v = Choice(n["reduce"], "workload.reduce", kReduceOps)) w.reduce = *v;
  }
  if (n["root"]) {
    int64_t hi = topology_ok_ ? s->topology.world_size() - 1 : std::numeric_limits<int>::max();
    if (auto v = Int(n["root"], "workload.root", 0, hi)) w.root = static_cast<int>(*v);
  }
  if (Required(n, "bytes", "workload", "add 'bytes: 16MiB'")) {
    if (auto v = Size(n["bytes"], "workload.bytes")) {
      if (*v == 0 && w.op != CollOp::kBarrier) {
        Error(n["bytes"], "workload.bytes must be > 0");
      }
      w.bytes = *v;
    }
  }
  const bool has_duration = static_cast<bool>(n["duration"]);
  const bool has_iters = static_cast<bool>(n["iters"]);
  if (has_duration && has_iters) {
    Error(n["iters"], "workload has both 'duration' and 'iters'", "keep one of the two");
  } else if (!has_duration && !has_iters) {
    Error(n, "workload needs 'duration' or 'iters'", "add e.g. 'duration: 8s'");
  }
  if (has_duration) {
    if (auto v = Duration(n["duration"], "workload.duration")) {
      if (*v <= 0) {
        Error(n["duration"], "workload.duration must be > 0");
      } else {
        w.duration_ns = *v;
      }
    }
  }
  if (has_iters) {
    if (auto v = Int(n["iters"], "workload.iters", 1, std::numeric_limits<int64_t>::max())) {
      w.iters = *v;
    }
  }
  if (n["warmup"]) {
    const YAML::Node wu = n["warmup"];
    // An integer is a count of collectives; anything else must be a duration with a unit.
    bool is_count = false;
    if (wu.IsScalar()) {
      const std::string& t = wu.Scalar();
      is_count = !t.empty() &&
                 std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
    }
    if (is_count) {
      if (auto v = Int(wu, "workload.warmup", 0, std::numeric_limits<int64_t>::max())) {
        w.warmup_iters = *v;
        if (w.iters && *v >= *w.iters) {
          Error(wu,
                "workload.warmup (" + std::to_string(*v) + " collectives) leaves no " +
                    "measured collective of " + std::to_string(*w.iters),
                "lower warmup or raise iters");
        }
      }
    } else if (auto v = Duration(wu, "workload.warmup")) {
      w.warmup_ns = *v;
      if (w.duration_ns && *v >= *w.duration_ns) {
        Error(wu,
              "workload.warmup (" + Seconds(*v) + ") is not shorter than the run (" +
                  Seconds(*w.duration_ns) + ")",
              "lower warmup or raise duration");
      }
    }
  }
  if (n["check"]) {
    if (auto v = Bool(n["check"], "workload.check")) w.check = *v;
  }
}

void Parser::ParseTrainWorkload(const YAML::Node& n, Scenario* s) {
  CheckKeys(n, {"kind", "steps", "batch", "compute", "grad_bytes", "checkpoint_every", "wait_bound"},
            "workload");
  Workload& w = s->workload;
  w.kind = WorkloadKind::kTrain;
  w.op = CollOp::kAllReduce;
  w.dtype = "f32";
  w.reduce = "sum";
  w.check = true;
  if (Required(n, "steps", "workload", "add 'steps: 200'")) {
    if (auto v = Int(n["steps"], "workload.steps", 1, 100'000'000)) w.iters = *v;
  }
  if (Required(n, "grad_bytes", "workload", "add 'grad_bytes: 4MiB'")) {
    if (auto v = Size(n["grad_bytes"], "workload.grad_bytes")) {
      if (*v < 4 || *v % 4 != 0) {
        Error(n["grad_bytes"], "workload.grad_bytes must be a positive multiple of 4 (f32 gradients)");
      } else {
        w.bytes = *v;
      }
    }
  }
  if (n["batch"]) {
    if (auto v = Int(n["batch"], "workload.batch", 1, 1'000'000)) w.batch = *v;
  }
  if (n["compute"]) {
    if (auto v = Duration(n["compute"], "workload.compute")) {
      if (*v < 0 || *v > 3'600'000'000'000LL) {
        Error(n["compute"], "workload.compute must be between 0 and 1h per step");
      } else {
        w.compute_ns = *v;
      }
    }
  }
  if (n["checkpoint_every"]) {
    if (auto v = Int(n["checkpoint_every"], "workload.checkpoint_every", 0, 100'000'000)) {
      w.checkpoint_every = *v;
    }
  }
  if (n["wait_bound"]) {
    if (auto v = Duration(n["wait_bound"], "workload.wait_bound")) {
      if (*v <= 0 || *v > 600'000'000'000LL) {
        Error(n["wait_bound"], "workload.wait_bound must be > 0 and at most 10m");
      } else {
        w.wait_bound_ns = *v;
      }
    }
  }
}

void Parser::ParseTorchWorkload(const YAML::Node& n, Scenario* s) {
  CheckKeys(n, {"kind", "script", "steps", "warmup", "args"}, "workload");
  Workload& w = s->workload;
  w.kind = WorkloadKind::kTorchDdp;
  w.op = CollOp::kAllReduce;
  w.check = false;
  if (Required(n, "steps", "workload", "add 'steps: 300'")) {
    if (auto v = Int(n["steps"], "workload.steps", 1, 100'000'000)) w.iters = *v;
  }
  if (n["warmup"]) {
    if (auto v = Int(n["warmup"], "workload.warmup", 0, 100'000'000)) w.warmup_iters = *v;
  }
  if (n["script"]) {
    const YAML::Node sc = n["script"];
    if (!sc.IsScalar() || sc.Scalar().empty()) {
      Error(sc, "workload.script must be a path, got " + Describe(sc));
    } else {
      std::filesystem::path p(sc.Scalar());
      if (p.is_relative() && file_ != "-" && !file_.empty()) {
        p = std::filesystem::path(file_).parent_path() / p;
      }
      std::error_code ec;
      if (!std::filesystem::is_regular_file(p, ec)) {
        Error(sc, "workload.script " + p.string() + " is not a file",
              "give a path relative to this scenario's folder, or drop 'script' for the "
              "reference script");
      } else {
        w.script = std::filesystem::absolute(p, ec).lexically_normal().string();
      }
    }
  }
  if (n["args"]) {
    const YAML::Node a = n["args"];
    if (!a.IsMap()) {
      Error(a, "workload.args must be a mapping of the script's options, got " + Describe(a),
            "write 'args: {hidden: 512}'");
    } else {
      for (const auto& kv : a) {
        const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
        const bool name_ok =
            !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
              return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
            });
        if (!name_ok) {
          Error(kv.first, "workload.args keys must be option names (letters, digits, - and _)");
        } else if (!kv.second.IsScalar()) {
          Error(kv.second, "workload.args." + key + " must be a scalar, got " +
                               Describe(kv.second));
        } else {
          std::string opt = key;
          std::replace(opt.begin(), opt.end(), '_', '-');
          // The runner's own options of a training rank (faultline_torch.RESERVED).
          static const std::set<std::string> kReserved = {
              "ccl",   "rank",    "size", "bootstrap", "rails",    "store-dir", "steps",
              "warmup", "timeout", "log",  "seed",      "start-at", "fault-hook"};
          if (kReserved.count(opt)) {
            Error(kv.first, "workload.args." + key + " is an option the runner passes itself",
                  "set it through the scenario (steps, warmup, seed, ...) or rename the "
                  "script's option");
          } else {
            w.script_args.emplace_back(opt, kv.second.Scalar());
          }
        }
      }
    }
  }
}

void Parser::ParseFaults(const YAML::Node& n, Scenario* s) {
  if (!n.IsSequence()) {
    Error(n, "faults must be a list, got " + Describe(n), "write '- {id: f1, at: 2s, ...}' items");
    return;
  }
  std::set<std::string> ids;
  for (const auto& item : n) {
    auto f = ParseFault(item, *s);
    if (!f) {
      faults_ok_ = false;
      continue;
    }
    if (!ids.insert(f->id).second) {
      Error(item["id"], "duplicate fault id '" + f->id + "'", "give every fault its own id");
      continue;
    }
    s->faults.push_back(std::move(*f));
    fault_at_locs_.push_back(Loc(item["at"]));
  }
}

std::optional<FaultSpec> Parser::ParseFault(const YAML::Node& n, const Scenario& s) {
  if (!ExpectMap(n, "a fault")) return std::nullopt;
  FaultSpec f;
  f.loc = Loc(n);
  bool ok = true;
  const faults::FaultDescriptor* kind = nullptr;
  if (Required(n, "type", "a fault", "add 'type: link_down' (or another fault kind)")) {
    if (auto v = Choice(n["type"], "fault type", faults::FaultKindNames())) {
      kind = faults::FindFaultDescriptor(*v);
    }
  }
  std::string what = "fault";
  if (Required(n, "id", "a fault", "add 'id: f1'")) {
    if (auto v = String(n["id"], "fault id")) {
      f.id = *v;
      what = "fault '" + f.id + "'";
    } else {
      ok = false;
    }
  } else {
    ok = false;
  }
  if (kind) {
    if (!kind->takes_for()) {
      for (auto it = n.begin(); it != n.end(); ++it) {
        const YAML::Node key = it->first;
        if (key.IsScalar() && key.Scalar() == "for") {
          ok = false;
          Error(key, "'for' does not apply to " + std::string(kind->name),
                std::string(kind->for_refused_hint));
        }
      }
    }
    // 'for' on a kind that refuses it was reported above; keep it out of the unknown-key pass.
    std::vector<std::string> allowed = faults::FaultKeys(*kind);
    allowed.push_back("for");
    CheckKeys(n, allowed, what);
  } else {
    ok = false;
  }
  if (Required(n, "at", what, "add 'at: 2s' (time from the start of the workload)")) {
    if (auto v = Duration(n["at"], what + ".at")) {
      f.at_ns = *v;
    } else {
      ok = false;
    }
  } else {
    ok = false;
  }
  if (!kind) return std::nullopt;
  f.kind = std::string(kind->name);
  if (n["for"] && kind->takes_for()) {
    if (auto v = Duration(n["for"], what + ".for")) {
      if (*v <= 0) {
        Error(n["for"], what + ".for must be > 0", "leave 'for' out to last until the end");
        ok = false;
      } else {
        f.for_ns = *v;
      }
    } else {
      ok = false;
    }
  }
  faults::FaultYaml y{*this, n, what, s, topology_ok_};
  if (Required(n, "target", what, faults::TargetHint(kind->target))) {
    ok = faults::ParseTarget(y, n["target"], kind->target, &f) && ok;
  } else {
    ok = false;
  }
  if (kind->parse != nullptr) kind->parse(y, &f, &ok);
  if (!ok) return std::nullopt;
  if (topology_ok_ && s.topology.is_inventory()) {
    const size_t before = diags_.size();
    CheckRdmaRail(n, f, s);
    if (diags_.size() != before) return std::nullopt;
  }
  return f;
}

// A kind that acts in the kernel's datapath (nftables, qdiscs, kernel sockets) has no effect
// on a rail whose traffic is RDMA: the NIC moves it past the kernel.
void Parser::CheckRdmaRail(const YAML::Node& n, const FaultSpec& f, const Scenario& s) {
  const faults::FaultDescriptor& d = f.descriptor();
  if (d.rdma_refused.empty() || !f.target.rail) return;
  const InventoryRail* rail = s.topology.InventoryRailAt(f.target.host, *f.target.rail);
  if (rail == nullptr || !rail->is_rdma()) return;
  const std::string& host = s.topology.inventory[f.target.host].name;
  Error(n,
        "fault '" + f.id + "': " + std::string(d.name) + " cannot act on host '" + host +
            "' rail " + std::to_string(*f.target.rail) + " (" + rail->netdev + ", RDMA " +
            rail->rdma + " port " + std::to_string(rail->port) + "): " +
            std::string(d.rdma_refused),
        "on an RDMA rail use link_down, link_flap or port_drop (the netdev) or qp_error (the "
        "rank's fault hook); or target a rail without 'rdma'");
}

std::optional<double> Parser::MaxOf(const YAML::Node& n, const std::string& what, const char* key,
                                    double lo, double hi) {
  if (!ExpectMap(n, what)) return std::nullopt;
  CheckKeys(n, {key}, what);
  if (!Required(n, key, what, "write " + what + ": {" + key + ": N}")) return std::nullopt;
  return Number(n[key], what + "." + key, lo, hi);
}

void Parser::ParseExpect(const YAML::Node& n, Scenario* s) {
  if (!ExpectMap(n, "expect")) return;
  CheckKeys(n,
            {"outcome", "wrong_results", "stall_ms", "failover_latency_ms", "failover_first_ms",
             "detection_ms", "recovery", "degraded_ratio", "goodput_loss_pct", "abort_within"},
            "expect");
  Expectations& e = s->expect;
  const double kBig = 1e12;
  for (const auto& kv : n) {
    if (kv.first.IsScalar()) e.locations.emplace_back(kv.first.Scalar(), Loc(kv.second));
  }
  if (n["abort_within"]) {
    if (auto v = Duration(n["abort_within"], "expect.abort_within")) {
      if (*v <= 0) {
        Error(n["abort_within"], "expect.abort_within must be longer than 0",
              "write e.g. 'abort_within: 10s'");
      } else {
        e.abort_within_ns = *v;
      }
    }
  }
  if (n["outcome"]) {
    if (auto v = Choice(n["outcome"], "expected outcome", {"survive", "abort_clean"})) {
      e.outcome = *v == "survive" ? ExpectedOutcome::kSurvive : ExpectedOutcome::kAbortClean;
    }
  }
  if (n["wrong_results"]) {
    e.wrong_results =
        Int(n["wrong_results"], "expect.wrong_results", 0, std::numeric_limits<int64_t>::max());
  }
  if (n["stall_ms"]) e.stall_ms_max = MaxOf(n["stall_ms"], "expect.stall_ms", "max", 0, kBig);
  if (n["failover_latency_ms"]) {
    e.failover_latency_ms_max =
        MaxOf(n["failover_latency_ms"], "expect.failover_latency_ms", "max", 0, kBig);
  }
  if (n["detection_ms"]) {
    e.detection_ms_max = MaxOf(n["detection_ms"], "expect.detection_ms", "max", 0, kBig);
  }
  if (n["failover_first_ms"]) {
    e.failover_first_ms_max =
        MaxOf(n["failover_first_ms"], "expect.failover_first_ms", "max", 0, kBig);
  }
  if (n["degraded_ratio"]) {
    e.degraded_ratio_min = MaxOf(n["degraded_ratio"], "expect.degraded_ratio", "min", 0, 1);
  }
  if (n["goodput_loss_pct"]) {
    e.goodput_loss_pct_max = MaxOf(n["goodput_loss_pct"], "expect.goodput_loss_pct", "max", 0, 100);
  }
  if (n["recovery"]) {
    const YAML::Node r = n["recovery"];
    if (ExpectMap(r, "expect.recovery")) {
      CheckKeys(r, {"pct", "within_ms", "sustain_ms"}, "expect.recovery");
      Expectations::Recovery rec;
      bool ok = true;
      if (Required(r, "pct", "expect.recovery", "add 'pct: 90'")) {
        auto v = Number(r["pct"], "expect.recovery.pct", 1, 100);
        ok = ok && v.has_value();
        if (v) rec.pct = *v;
      } else {
        ok = false;
      }
      if (Required(r, "within_ms", "expect.recovery", "add 'within_ms: 1000'")) {
        auto v = Number(r["within_ms"], "expect.recovery.within_ms", 0, kBig);
        ok = ok && v.has_value();
        if (v) rec.within_ms = *v;
      } else {
        ok = false;
      }
      if (r["sustain_ms"]) {
        auto v = Number(r["sustain_ms"], "expect.recovery.sustain_ms", 1, kBig);
        ok = ok && v.has_value();
        if (v) rec.sustain_ms = *v;
      }
      if (ok) e.recovery = rec;
    }
  }
}

void Parser::ParseReproduce(const YAML::Node& n, Scenario* s) {
  if (!ExpectMap(n, "reproduce")) return;
  CheckKeys(n, {"ccl", "outcome", "ranks", "within"}, "reproduce");
  Reproduce r;
  r.loc = Loc(n);
  bool ok = true;
  if (Required(n, "ccl", "reproduce", "add 'ccl: gloo' (the fail-stop library of the replay)")) {
    if (auto v = Choice(n["ccl"], "reproduce.ccl", workload::adapters::CclNames())) {
      r.ccl = *CclNameFromString(*v);
    } else {
      ok = false;
    }
  } else {
    ok = false;
  }
  if (Required(n, "outcome", "reproduce", "add 'outcome: aborted_clean'")) {
    if (auto v = Choice(n["outcome"], "reproduce.outcome", {"aborted_clean", "hung", "crashed"})) {
      r.outcome = *v;
    } else {
      ok = false;
    }
  } else {
    ok = false;
  }
  if (n["within"]) {
    if (auto v = Duration(n["within"], "reproduce.within")) {
      if (*v <= 0) {
        Error(n["within"], "reproduce.within must be longer than 0", "write e.g. 'within: 30s'");
        ok = false;
      } else {
        r.within_ns = *v;
      }
    } else {
      ok = false;
    }
  }
  if (n["ranks"]) {
    const YAML::Node list = n["ranks"];
    const int world = s->topology.world_size();
    if (!list.IsSequence()) {
      Error(list, "reproduce.ranks must be a list of ranks, got " + Describe(list),
            "write e.g. 'ranks: [3, 7]'");
      ok = false;
    } else {
      for (const auto& item : list) {
        auto v = Int(item, "reproduce.ranks[]", 0, std::numeric_limits<int>::max());
        if (!v) {
          ok = false;
          continue;
        }
        if (world > 0 && *v >= world) {
          Error(item, "reproduce.ranks: rank " + std::to_string(*v) + " is not in the topology (" +
                          std::to_string(world) + " ranks)",
                "map the production ranks to ranks below " + std::to_string(world));
          ok = false;
          continue;
        }
        if (std::find(r.ranks.begin(), r.ranks.end(), static_cast<int>(*v)) == r.ranks.end()) {
          r.ranks.push_back(static_cast<int>(*v));
        }
      }
    }
  }
  if (ok) s->reproduce = r;
}

// Expectations that can never be measured in this scenario.
void Parser::CheckExpectations(const YAML::Node& n, const Scenario& s) {
  const Expectations& e = s.expect;
  if (!n.IsMap()) return;
  for (Diagnostic& d : ExpectationsUnmeasurable(s, s.ccl, "")) Error(d.loc, d.message, d.hint);
  if (n["wrong_results"] && !s.workload.check) {
    Error(n["wrong_results"], "expect.wrong_results needs the results checked, and "
          "workload.check is false",
          "remove wrong_results, or set 'check: true' under workload");
  }
  if (!faults_ok_) return;  // judged once the faults themselves are valid
  if (e.degraded_ratio_min && std::none_of(s.faults.begin(), s.faults.end(),
                                           [](const FaultSpec& f) { return f.Permanent(); })) {
    Error(n["degraded_ratio"], "expect.degraded_ratio needs a permanent fault, and none is",
          "add a fault without 'for' (or a port_drop), or remove degraded_ratio");
  }
  if (s.faults.empty()) {
    for (const char* key :
         {"detection_ms", "failover_first_ms", "failover_latency_ms", "recovery"}) {
      if (n[key]) {
        Error(n[key], std::string("expect.") + key + " needs a fault, and the scenario has none",
              "add a fault under 'faults:' or remove this expectation");
      }
    }
  }
}

// Overlapping faults on one target and faults outside the run.
void Parser::CheckFaultSchedule(const Scenario& s) {
  const auto& faults = s.faults;
  auto end_of = [](const FaultSpec& f) { return f.LatestEndNs().value_or(kForever); };
  auto key_of = [](const FaultSpec& f) {
    if (f.target.port) {
      return "host " + std::to_string(f.target.host) + " rank " +
             std::to_string(f.target.rank.value_or(0)) + " rail " +
             std::to_string(f.target.rail.value_or(0));
    }
    if (f.target.rank) {
      return "host " + std::to_string(f.target.host) + " rank " + std::to_string(*f.target.rank);
    }
    return "host " + std::to_string(f.target.host) + " rail " +
           std::to_string(f.target.rail.value_or(0));
  };
  auto span = [&](const FaultSpec& f) {
    int64_t e = end_of(f);
    return Seconds(f.at_ns) + ".." + (e == kForever ? std::string("end of run") : Seconds(e));
  };
  for (size_t i = 0; i < faults.size(); ++i) {
    const FaultSpec& f = faults[i];
    if (s.workload.duration_ns) {
      const int64_t run = *s.workload.duration_ns;
      if (f.at_ns >= run) {
        Error(fault_at_locs_[i],
              "fault '" + f.id + "' starts at " + Seconds(f.at_ns) +
                  ", not before the run ends at " + Seconds(run),
              "move 'at' below " + Seconds(run) + " or lengthen workload.duration");
        continue;
      }
      const int64_t e = end_of(f);
      if (e != kForever && e > run) {
        Error(fault_at_locs_[i],
              "fault '" + f.id + "' lasts until " + Seconds(e) + ", beyond the end of the run at " +
                  Seconds(run),
              "shorten it, start it earlier, or lengthen workload.duration");
      }
    }
    for (size_t j = 0; j < i; ++j) {
      const FaultSpec& g = faults[j];
      if (key_of(f) != key_of(g)) continue;
      if (Overlaps(g.at_ns, end_of(g), f.at_ns, end_of(f))) {
        Error(fault_at_locs_[i],
              "fault '" + f.id + "' (" + span(f) + ") overlaps fault '" + g.id + "' (" + span(g) +
                  ") on " + key_of(f),
              end_of(g) == kForever
                  ? "'" + g.id + "' holds its target until the end of the run; pick another target"
                  : "faults on one link or rank must not overlap; let '" + f.id + "' end by " +
                        Seconds(g.at_ns) + " or start at " + Seconds(end_of(g)) + " or later");
      }
    }
  }
}

}  // namespace

std::string Diagnostic::ToString() const {
  std::string out =
      file + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.column) + ": " + message;
  if (!hint.empty()) out += " (" + hint + ")";
  return out;
}

const char* WorkloadKindName(WorkloadKind k) {
  switch (k) {
    case WorkloadKind::kTorchDdp:
      return "torch_ddp";
    case WorkloadKind::kTrain:
      return "train";
    case WorkloadKind::kCollectives:
      break;
  }
  return "collectives";
}

const char* CclNameString(CclName c) {
  // Every row's name is a string literal: data() ends in a NUL.
  return workload::adapters::CclTraitsOf(c).name.data();
}

std::optional<CclName> CclNameFromString(std::string_view name) {
  const workload::adapters::CclTraits* t = workload::adapters::FindCclTraits(name);
  if (t == nullptr) return std::nullopt;
  return t->id;
}

const char* RecoveryPolicyString(RecoveryPolicyName p) {
  switch (p) {
    case RecoveryPolicyName::kShrink:
      return "shrink";
    case RecoveryPolicyName::kFailStop:
      return "fail_stop";
    case RecoveryPolicyName::kWait:
      return "wait";
    case RecoveryPolicyName::kAdaptive:
      return "adaptive";
    case RecoveryPolicyName::kFailover:
      break;
  }
  return "failover";
}

const char* CollOpName(CollOp op) {
  for (const auto& e : kOps) {
    if (e.op == op) return e.name;
  }
  return "?";
}

double BusBwFactor(CollOp op, int world) {
  return workload::BusBwFactorOf(CollOpName(op), world).value_or(0.0);
}

const char* TopologyKindString(TopologyKind k) {
  return k == TopologyKind::kInventory ? "inventory" : "netns";
}

const InventoryRail* Topology::InventoryRailAt(int host, int rail) const {
  if (!is_inventory() || host < 0 || host >= static_cast<int>(inventory.size())) return nullptr;
  const auto& rails = inventory[host].rails;
  if (rail < 0 || rail >= static_cast<int>(rails.size())) return nullptr;
  return &rails[rail];
}

const char* NicLayoutString(NicLayout n) {
  return n == NicLayout::kPerRank ? "per_rank" : "shared";
}

const char* LinkSideString(LinkSide s) { return s == LinkSide::kSwitch ? "switch" : "host"; }

std::optional<int> FaultTarget::GlobalRank(const Topology& t) const {
  if (!rank) return std::nullopt;
  return host * t.ranks_per_host + *rank;
}

nlohmann::json FaultTarget::ToJson() const {
  nlohmann::json j = {{"host", host}};
  if (rank) j["rank"] = *rank;
  if (rail) j["rail"] = *rail;
  if (!rank || port) j["side"] = LinkSideString(side);
  return j;
}

const faults::FaultDescriptor& FaultSpec::descriptor() const {
  return faults::DescriptorOf(kind);
}

bool FaultSpec::Permanent() const {
  switch (descriptor().hold) {
    case faults::Hold::kRestOfRun:
    case faults::Hold::kOnceForGood:
      return true;
    case faults::Hold::kOnce:
    case faults::Hold::kSchedule:
      return false;
    case faults::Hold::kFor:
      return !for_ns.has_value();
  }
  return false;
}

std::optional<int64_t> FaultSpec::LatestEndNs() const {
  if (Permanent()) return std::nullopt;
  const faults::FaultDescriptor& d = descriptor();
  if (d.one_shot()) return at_ns;
  if (d.schedule_end != nullptr) return d.schedule_end(*this);
  return at_ns + *for_ns;
}

bool CclEmitsPathEvents(CclName ccl) {
  return workload::adapters::CclTraitsOf(ccl).emits_path_events;
}

std::vector<Diagnostic> ExpectationsUnmeasurable(const Scenario& s, CclName ccl,
                                                 const std::string& file) {
  std::vector<Diagnostic> out;
  if (CclEmitsPathEvents(ccl) || s.JudgedByReproduce(ccl)) return out;
  for (const auto& [key, loc] : s.expect.locations) {
    if (key != "detection_ms" && key != "failover_first_ms") continue;
    out.push_back({file, loc,
                   "expect." + key + " needs CCL path events, which " + CclNameString(ccl) +
                       " does not emit",
                   "remove it (failover_latency_ms is measured for every ccl, from collective "
                   "progress where there are no path events), or run with ccl " +
                       workload::adapters::CclNamesWhere(
                           [](const workload::adapters::CclTraits& t) {
                             return t.emits_path_events;
                           })});
  }
  return out;
}

std::string Scenario::MatrixLabel() const {
  std::string out;
  for (const auto& [k, v] : matrix) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out;
}

ParseOutcome ParseScenario(std::string_view yaml_text, const std::string& file) {
  ExpandOutcome e = ExpandScenario(yaml_text, file);
  if (!e.diagnostics.empty()) return {std::nullopt, std::move(e.diagnostics)};
  if (e.runs.size() != 1) {
    ParseOutcome out;
    out.diagnostics.push_back({file,
                               {0, 0},
                               "the matrix expands to " + std::to_string(e.runs.size()) +
                                   " runs where one scenario is expected",
                               "run or validate the file with faultline, which expands it"});
    return out;
  }
  return {std::move(e.runs.front()), {}};
}

namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Diagnostic Unreadable(const std::string& path) {
  return {path, {0, 0}, "cannot read the file", "check the path and its permissions"};
}

}  // namespace

ParseOutcome ParseScenarioFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text) return {std::nullopt, {Unreadable(path)}};
  return ParseScenario(*text, path);
}

namespace {
ExpandOutcome Expand(std::string_view yaml_text, const std::string& file,
                     const InventoryPlacement* placement);
}  // namespace

ExpandOutcome ExpandScenario(std::string_view yaml_text, const std::string& file,
                             const InventoryPlacement* placement) {
  // Parser::RunRoot turns a YAML exception in a section into a diagnostic; this catches one
  // in the matrix handling around it, so that a bad file never ends the process.
  try {
    return Expand(yaml_text, file, placement);
  } catch (const YAML::Exception& e) {
    ExpandOutcome out;
    out.diagnostics.push_back(
        {file, {std::max(0, e.mark.line + 1), std::max(0, e.mark.column + 1)},
         "malformed scenario: " + e.msg, ""});
    return out;
  }
}

namespace {

ExpandOutcome Expand(std::string_view yaml_text, const std::string& file,
                     const InventoryPlacement* placement) {
  const std::string text(yaml_text);
  ExpandOutcome out;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException&) {
    Parser p(file);
    out.diagnostics = p.Run(text).diagnostics;  // the syntax error, reported once
    return out;
  }
  const YAML::Node& croot = root;  // const lookups never add keys
  if (!croot.IsMap() || !croot["matrix"]) {
    Parser p(file, placement);
    ParseOutcome r = p.RunRoot(root);
    if (r.ok()) out.runs.push_back(std::move(*r.scenario));
    out.diagnostics = std::move(r.diagnostics);
    return out;
  }
  Parser matrix_parser(file);
  std::vector<Parser::MatrixAxis> axes_storage;
  const bool matrix_ok = matrix_parser.ParseMatrix(root, &axes_storage);
  const std::vector<Parser::MatrixAxis>* axes = &axes_storage;
  auto put_values = [](YAML::Node& doc, const std::string& key, const YAML::Node& value) {
    auto [section, field] = MatrixTarget(key);
    const YAML::Node& cdoc = doc;
    if (section.empty()) {
      doc[field] = value;
    } else if (IsDefinedMap(cdoc[section])) {
      YAML::Node sec = doc[section];
      sec[field] = value;
    }
  };
  if (!matrix_ok) {
    // Report the rest of the file too, validated once with the first value of every usable
    // matrix key (a key also set in its section keeps the section's value).
    YAML::Node doc = YAML::Load(text);
    for (const auto& a : *axes) {
      auto [section, field] = MatrixTarget(a.key);
      const YAML::Node& cdoc = doc;
      const bool set_there = section.empty() ? static_cast<bool>(cdoc[field])
                                             : IsDefinedMap(cdoc[section]) && cdoc[section][field];
      if (!set_there) put_values(doc, a.key, doc["matrix"][a.key][0]);
    }
    Parser p(file, placement);
    out.diagnostics = matrix_parser.diagnostics();
    for (auto& d : p.RunRoot(doc).diagnostics) out.diagnostics.push_back(std::move(d));
    std::stable_sort(out.diagnostics.begin(), out.diagnostics.end(),
                     [](const Diagnostic& a, const Diagnostic& b) {
                       return a.loc.line != b.loc.line ? a.loc.line < b.loc.line
                                                       : a.loc.column < b.loc.column;
                     });
    return out;
  }
  size_t total = 1;
  for (const auto& a : *axes) total *= a.values.size();
  // Each diagnostic once, with the first combination it occurred in and how many it hit.
  struct Seen {
    Diagnostic diag;
    std::string label;
    size_t count = 0;
  };
  std::vector<Seen> seen;
  std::vector<size_t> index(axes->size(), 0);
  for (size_t n = 0; n < total; ++n) {
    // Fresh document per combination; the matrix's own value nodes are put in place, so an
    // error in a value points at the value in the matrix.
    YAML::Node doc = YAML::Load(text);
    std::vector<std::pair<std::string, std::string>> values;
    for (size_t a = 0; a < axes->size(); ++a) {
      const std::string& key = (*axes)[a].key;
      YAML::Node value = doc["matrix"][key][index[a]];
      values.emplace_back(key, value.Scalar());
      put_values(doc, key, value);
    }
    Scenario label_holder;
    label_holder.matrix = values;
    const std::string label = label_holder.MatrixLabel();
    Parser p(file, placement);
    ParseOutcome r = p.RunRoot(doc);
    for (auto& d : r.diagnostics) {
      const std::string key = d.ToString();
      auto it = std::find_if(seen.begin(), seen.end(),
                             [&](const Seen& s) { return s.diag.ToString() == key; });
      if (it == seen.end()) {
        seen.push_back({std::move(d), label, 1});
      } else {
        ++it->count;
      }
    }
    if (r.ok()) {
      Scenario sc = std::move(*r.scenario);
      sc.base_name = sc.name;
      sc.matrix = std::move(values);
      sc.name = sc.base_name + "[" + label + "]";
      out.runs.push_back(std::move(sc));
    }
    // Next combination: the last key varies fastest.
    for (size_t a = axes->size(); a-- > 0;) {
      if (++index[a] < (*axes)[a].values.size()) break;
      index[a] = 0;
    }
  }
  for (auto& s : seen) {
    if (s.count < total) s.diag.message += " (in matrix combination " + s.label + ")";
    out.diagnostics.push_back(std::move(s.diag));
  }
  if (!out.diagnostics.empty()) out.runs.clear();
  return out;
}

}  // namespace

ExpandOutcome ExpandScenarioFile(const std::string& path, const InventoryPlacement* placement) {
  auto text = ReadFile(path);
  if (!text) return {{}, {Unreadable(path)}};
  return ExpandScenario(*text, path, placement);
}

}  // namespace faultline::runner
