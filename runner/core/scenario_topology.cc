// A scenario's `topology:`: namespaces built on this machine, or the hosts of an inventory.
#include "runner/core/scenario_parser.h"

#include <filesystem>
#include <string>

#include "runner/core/inventory.h"

namespace faultline::runner::scenario_internal {
namespace {

// hosts x ranks_per_host of a per_rank topology: the host octets 1..250 of a rail's /24.
constexpr int kMaxPerRankPorts = 250;

// The key node of `key` in mapping `n` (for errors about the key itself); `n` when absent.
YAML::Node KeyNode(const YAML::Node& n, const std::string& key) {
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) return it->first;
  }
  return n;
}

}  // namespace

void ScenarioParser::ParseTopology(const YAML::Node& n, Scenario* s) {
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

void ScenarioParser::PlaceOnInventory(const YAML::Node& n, Scenario* s) {
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
void ScenarioParser::ParseInventoryTopology(const YAML::Node& n, Scenario* s) {
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

}  // namespace faultline::runner::scenario_internal
