#include "runner/core/inventory.h"

#include <arpa/inet.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <utility>

namespace faultline::runner {
namespace {

bool HasSpace(std::string_view s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
}

std::string Plural(size_t n, const char* one) {
  return std::to_string(n) + " " + one + (n == 1 ? "" : "s");
}

// Reads one rail of host `host` into `out`; false after any error.
bool ParseRail(YamlReader& r, const YAML::Node& n, const std::string& what, InventoryRail* out) {
  if (!r.ExpectMap(n, what)) return false;
  r.CheckKeys(n, {"netdev", "rdma", "port", "addr"}, what);
  bool ok = true;
  if (r.Required(n, "netdev", what, "add 'netdev: ens1f0np0' (the rail's interface)")) {
    if (auto v = r.String(n["netdev"], what + ".netdev")) {
      if (!ValidNetdevName(*v)) {
        r.Error(n["netdev"], what + ".netdev '" + *v + "' is not a valid interface name",
                "an interface name is 1 to 15 characters without '/', ':' or whitespace");
        ok = false;
      }
      out->netdev = *v;
    } else {
      ok = false;
    }
  } else {
    ok = false;
  }
  if (n["rdma"]) {
    if (auto v = r.String(n["rdma"], what + ".rdma")) {
      if (!ValidRdmaDeviceName(*v)) {
        r.Error(n["rdma"], what + ".rdma '" + *v + "' is not a valid RDMA device name",
                "name it as /sys/class/infiniband lists it, e.g. mlx5_0");
        ok = false;
      }
      out->rdma = *v;
      out->port = 1;
    } else {
      ok = false;
    }
  }
  if (n["port"]) {
    if (!n["rdma"]) {
      r.Error(n["port"], what + ".port needs 'rdma': a port is an RDMA device's port",
              "add 'rdma: mlx5_0' beside it, or remove 'port'");
      ok = false;
    } else if (auto v = r.Int(n["port"], what + ".port", 1, 255)) {
      out->port = static_cast<int>(*v);
    } else {
      ok = false;
    }
  }
  if (n["addr"]) {
    if (auto v = r.String(n["addr"], what + ".addr")) {
      if (!ValidIpAddress(*v)) {
        r.Error(n["addr"], what + ".addr '" + *v + "' is not an IP address",
                "write the rail's IPv4 or IPv6 address, e.g. 10.10.0.1");
        ok = false;
      }
      out->addr = *v;
    } else {
      ok = false;
    }
  }
  return ok;
}

}  // namespace

bool ValidNetdevName(std::string_view name) {
  if (name.empty() || name.size() > 15 || name == "." || name == "..") return false;
  if (HasSpace(name)) return false;
  return name.find_first_of("/:") == std::string_view::npos;
}

bool ValidRdmaDeviceName(std::string_view name) {
  if (name.empty() || name.size() > 63 || name == "." || name == "..") return false;
  return !HasSpace(name) && name.find('/') == std::string_view::npos;
}

bool ValidHostName(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  if (!std::isalnum(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

bool ValidIpAddress(std::string_view addr) {
  const std::string s(addr);
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

namespace {

bool LoopbackAddress(const std::string& addr) {
  unsigned char buf[4];
  return inet_pton(AF_INET, addr.c_str(), buf) == 1 && buf[0] == 127;
}

}  // namespace

bool IsLocalInventory(const Topology& topology) {
  if (!topology.is_inventory() || topology.inventory.empty()) return false;
  return std::all_of(topology.inventory.begin(), topology.inventory.end(),
                     [](const InventoryHost& h) { return LoopbackAddress(h.addr); });
}

bool InventoryAllRdma(const Topology& topology) {
  if (!topology.is_inventory() || topology.inventory.empty()) return false;
  for (const InventoryHost& h : topology.inventory) {
    for (const InventoryRail& r : h.rails) {
      if (!r.is_rdma()) return false;
    }
  }
  return true;
}

bool ParseInventoryHosts(YamlReader& r, const YAML::Node& list, std::vector<InventoryHost>* out) {
  if (!list.IsSequence() || list.size() == 0) {
    r.Error(list, "hosts must be a non-empty list of hosts, got " + YamlReader::Describe(list),
            "write '- {name: node01, rails: [{netdev: ens1f0np0}]}' items");
    return false;
  }
  bool ok = true;
  std::map<std::string, int> names;     // host name -> index
  std::vector<YAML::Node> rails_nodes;  // parallel to *out, for the rail count check
  for (const auto& h : list) {
    const std::string what = "host " + std::to_string(out->size());
    if (!r.ExpectMap(h, what)) {
      ok = false;
      continue;
    }
    if (h["ranks"]) {
      r.Error(h["ranks"], what + ": ranks are set once for every host",
              "remove 'ranks' here and set topology.ranks_per_host in the scenario");
      ok = false;
    }
    r.CheckKeys(h, {"name", "addr", "rails", "ranks"}, what);
    InventoryHost host;
    if (r.Required(h, "name", what, "add 'name: node01' (the host's name)")) {
      if (auto v = r.String(h["name"], what + ".name")) {
        host.name = *v;
        if (!ValidHostName(*v)) {
          r.Error(h["name"], what + ".name '" + *v + "' is not a valid host name",
                  "use letters, digits, '-', '_' and '.', starting with a letter or digit");
          ok = false;
        } else if (auto [it, fresh] = names.emplace(*v, static_cast<int>(out->size())); !fresh) {
          r.Error(h["name"],
                  "host name '" + *v + "' is listed twice (also host " +
                      std::to_string(it->second) + ")",
                  "list every host once");
          ok = false;
        }
      } else {
        ok = false;
      }
    } else {
      ok = false;
    }
    const std::string hwhat = host.name.empty() ? what : "host '" + host.name + "'";
    if (h["addr"]) {
      if (auto v = r.String(h["addr"], hwhat + ".addr")) {
        if (!ValidIpAddress(*v)) {
          r.Error(h["addr"], hwhat + ".addr '" + *v + "' is not an IP address",
                  "write the host's management IPv4 or IPv6 address, e.g. 10.0.0.1");
          ok = false;
        }
        host.addr = *v;
      } else {
        ok = false;
      }
    }
    YAML::Node rails;
    if (r.Required(h, "rails", hwhat, "add 'rails: [{netdev: ens1f0np0}]'")) {
      rails = h["rails"];
      if (!rails.IsSequence() || rails.size() == 0) {
        r.Error(
            rails,
            hwhat + ".rails must be a non-empty list of rails, got " + YamlReader::Describe(rails),
            "write e.g. 'rails: [{netdev: ens1f0np0, rdma: mlx5_0, port: 1}]'");
        ok = false;
        rails = YAML::Node();
      } else {
        std::map<std::string, size_t> netdevs;
        std::map<std::pair<std::string, int>, size_t> rdma_ports;
        for (const auto& rn : rails) {
          const size_t index = host.rails.size();
          const std::string rwhat = hwhat + " rail " + std::to_string(index);
          InventoryRail rail;
          if (!ParseRail(r, rn, rwhat, &rail)) ok = false;
          if (!rail.netdev.empty()) {
            auto [it, fresh] = netdevs.emplace(rail.netdev, index);
            if (!fresh) {
              r.Error(rn["netdev"],
                      rwhat + ": netdev '" + rail.netdev + "' is already rail " +
                          std::to_string(it->second),
                      "every rail of a host is its own interface");
              ok = false;
            }
          }
          if (rail.is_rdma()) {
            auto [it, fresh] = rdma_ports.emplace(std::make_pair(rail.rdma, rail.port), index);
            if (!fresh) {
              r.Error(rn["rdma"],
                      rwhat + ": RDMA port " + rail.rdma + "/" + std::to_string(rail.port) +
                          " is already rail " + std::to_string(it->second),
                      "every rail of a host is its own RDMA port");
              ok = false;
            }
          }
          host.rails.push_back(std::move(rail));
        }
      }
    } else {
      ok = false;
    }
    out->push_back(std::move(host));
    rails_nodes.push_back(rails);
  }
  // Rail r of every host is one plane of the fabric: a path between two ranks runs from rail
  // r of one host to rail r of the other, and a fault names rail r on any host, so every host
  // has the same number of rails.
  const InventoryHost* first = nullptr;
  for (size_t i = 0; i < out->size(); ++i) {
    if (!rails_nodes[i].IsDefined() || rails_nodes[i].IsNull()) continue;
    const InventoryHost& h = (*out)[i];
    if (first == nullptr) {
      first = &h;
      continue;
    }
    if (h.rails.size() != first->rails.size()) {
      r.Error(rails_nodes[i],
              "host '" + h.name + "' has " + Plural(h.rails.size(), "rail") + ", host '" +
                  first->name + "' has " + std::to_string(first->rails.size()),
              "every host needs the same number of rails: rail r of every host is one plane "
              "of the fabric, and paths and faults name rail r on any host");
      ok = false;
    }
  }
  return ok;
}

std::string DescribeInventory(const Topology& t, const std::string& indent) {
  std::string out =
      indent + "topology: inventory" +
      (t.inventory_file.empty() ? std::string(" (inline)") : " from " + t.inventory_file) + ", " +
      Plural(t.inventory.size(), "host") + ", " + std::to_string(t.ranks_per_host) +
      " ranks per host, " + Plural(static_cast<size_t>(t.rails), "rail") + "\n";
  for (size_t h = 0; h < t.inventory.size(); ++h) {
    const InventoryHost& host = t.inventory[h];
    out += indent + "  host " + std::to_string(h) + " " + host.name;
    if (!host.addr.empty()) out += " addr " + host.addr;
    out += "\n";
    for (size_t i = 0; i < host.rails.size(); ++i) {
      const InventoryRail& rail = host.rails[i];
      out += indent + "    rail " + std::to_string(i) + " " + rail.netdev;
      if (rail.is_rdma()) out += " RDMA " + rail.rdma + " port " + std::to_string(rail.port);
      if (!rail.addr.empty()) out += " addr " + rail.addr;
      out += "\n";
    }
  }
  return out;
}

InventoryOutcome ParseInventory(std::string_view yaml_text, const std::string& file) {
  InventoryOutcome out;
  YamlReader r(file);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::ParserException& e) {
    r.Error(SourceLoc{e.mark.line + 1, e.mark.column + 1}, "YAML syntax error: " + e.msg,
            "check indentation, colons and brackets near this position");
    out.diagnostics = r.diagnostics();
    return out;
  }
  try {
    const YAML::Node& croot = root;
    if (!croot.IsMap()) {
      r.Error(croot.IsNull() ? SourceLoc{1, 1} : YamlReader::Loc(croot),
              "a host file must be a mapping with 'hosts:', got " + YamlReader::Describe(croot),
              "start with 'hosts:' and list the hosts below it");
    } else {
      r.CheckKeys(croot, {"hosts"}, "the host file");
      if (r.Required(croot, "hosts", "the host file", "add 'hosts:' and list the hosts")) {
        ParseInventoryHosts(r, croot["hosts"], &out.hosts);
      }
    }
  } catch (const YAML::Exception& e) {
    r.Error(SourceLoc{e.mark.line + 1, e.mark.column + 1}, "malformed host file: " + e.msg);
  }
  out.diagnostics = r.diagnostics();
  if (!out.diagnostics.empty()) out.hosts.clear();
  return out;
}

InventoryOutcome ParseInventoryFile(const std::string& path) {
  InventoryOutcome out;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    out.diagnostics.push_back(
        {path, {0, 0}, "cannot read the host file", "check the path and its permissions"});
    return out;
  }
  // Read at most kMaxHostFileBytes + 1: a path to something endless (a /proc file reports a
  // size of 0) must not hang validation.
  std::string text(kMaxHostFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxHostFileBytes) {
    out.diagnostics.push_back(
        {path,
         {0, 0},
         "the host file is larger than " + std::to_string(kMaxHostFileBytes >> 20) + " MiB",
         "name a host file, which lists hosts and their rails"});
    return out;
  }
  return ParseInventory(text, path);
}

}  // namespace faultline::runner
