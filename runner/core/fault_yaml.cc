#include "runner/core/fault_yaml.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <limits>
#include <optional>

namespace faultline::runner::faults {

std::vector<std::string> FaultKeys(const FaultDescriptor& d) {
  std::vector<std::string> keys = {"id", "type", "at", "target"};
  if (d.takes_for()) keys.push_back("for");
  keys.insert(keys.end(), d.param_keys.begin(), d.param_keys.end());
  return keys;
}

std::string TargetHint(TargetShape shape) {
  return shape == TargetShape::kRank || shape == TargetShape::kRankPath
             ? "add 'target: {host: 0, rank: 0}'"
             : "add 'target: {host: 0, rail: 0}'";
}

bool ParseTarget(FaultYaml& y, const YAML::Node& n, TargetShape shape, FaultSpec* f) {
  YamlReader& r = y.reader;
  const std::string what = "target of fault '" + f->id + "'";
  if (!r.ExpectMap(n, what)) return false;
  const Scenario& s = y.scenario;
  const bool rank_fault = shape == TargetShape::kRank || shape == TargetShape::kRankPath;
  const bool path_fault = shape == TargetShape::kRankPath;
  // With per-rank NICs a link fault hits one rank's port: {host, rank, rail, side}.
  const bool port_fault = !rank_fault && s.topology.per_rank_nics();
  std::vector<std::string> keys = {"host"};
  if (rank_fault || port_fault) keys.push_back("rank");
  if (!rank_fault || path_fault) keys.push_back("rail");
  if (shape == TargetShape::kLink) keys.push_back("side");
  r.CheckKeys(n, keys, what);
  bool ok = true;
  const Topology& t = s.topology;
  auto index = [&](const char* key, int count, const char* plural) -> std::optional<int> {
    if (!r.Required(n, key, what, std::string("add '") + key + ": 0'")) return std::nullopt;
    auto v = r.Int(n[key], what + "." + key, 0, std::numeric_limits<int>::max());
    if (!v) return std::nullopt;
    if (y.topology_ok && *v >= count) {
      r.Error(n[key],
              std::string(key) + " " + std::to_string(*v) + " does not exist: the topology has " +
                  std::to_string(count) + " " + plural,
              std::string(key) + " must be in 0.." + std::to_string(count - 1));
      return std::nullopt;
    }
    return static_cast<int>(*v);
  };
  // An inventory host may also be named: {host: node02}.
  const YAML::Node host_node = n["host"];
  const bool host_by_name = t.is_inventory() && host_node && host_node.IsScalar() &&
                            !host_node.Scalar().empty() &&
                            !std::all_of(host_node.Scalar().begin(), host_node.Scalar().end(),
                                         [](char c) { return c >= '0' && c <= '9'; });
  if (host_by_name) {
    const std::string& name = host_node.Scalar();
    auto it = std::find_if(t.inventory.begin(), t.inventory.end(),
                           [&](const InventoryHost& h) { return h.name == name; });
    if (it != t.inventory.end()) {
      f->target.host = static_cast<int>(it - t.inventory.begin());
    } else if (!y.topology_ok) {
      ok = false;  // the inventory's own errors are reported; a name cannot be checked
    } else {
      std::vector<std::string> names;
      for (const InventoryHost& h : t.inventory) names.push_back(h.name);
      r.Error(host_node, "host '" + name + "' is not in the inventory", SuggestHint(name, names));
      ok = false;
    }
  } else if (auto h = index("host", t.hosts, "hosts")) {
    f->target.host = *h;
  } else {
    ok = false;
  }
  if (rank_fault) {
    if (auto rk = index("rank", t.ranks_per_host, "ranks per host")) {
      f->target.rank = *rk;
    } else {
      ok = false;
    }
  }
  if (port_fault) {
    f->target.port = true;
    if (!n["rank"]) {
      r.Error(n, "missing required key 'rank' in " + what,
              "with 'nics: per_rank' every rank has its own NIC: add 'rank: 0' to name whose "
              "port on the rail is hit");
      ok = false;
    } else if (auto rk = index("rank", t.ranks_per_host, "ranks per host")) {
      f->target.rank = *rk;
    } else {
      ok = false;
    }
  }
  if (!rank_fault || path_fault) {
    if (auto rl = index("rail", t.rails, "rails")) {
      f->target.rail = *rl;
    } else {
      ok = false;
    }
  }
  if (n["side"] && t.is_inventory() && n["side"].IsScalar() && n["side"].Scalar() == "switch") {
    r.Error(n["side"], "side: switch does not apply to an inventory host",
            "remove it: a link fault on a real host acts on the host's own netdev; the switch "
            "port is not the runner's to reach");
    ok = false;
  } else if (n["side"] && std::find(keys.begin(), keys.end(), "side") != keys.end()) {
    if (auto v = r.Choice(n["side"], "side", {"host", "switch"})) {
      f->target.side = *v == "switch" ? LinkSide::kSwitch : LinkSide::kHost;
    } else {
      ok = false;
    }
  }
  return ok;
}

}  // namespace faultline::runner::faults
