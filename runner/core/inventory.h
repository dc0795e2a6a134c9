// The inventory of a `topology: {kind: inventory}` scenario: real hosts and their rail ports,
// given inline (`hosts: [...]`) or in a host file (`file: hosts.yaml`, a mapping with one key
// `hosts:`). Schema: scenarios/README.md, "Inventory topology".
//
// Every host has a name, an optional management address and the same number of rails; a
// rail names its netdev and, where its traffic is RDMA, the RDMA device and port. Problems are
// reported through a YamlReader (file:line:column, message, hint), every one of them in one
// pass. Pure functions (ParseInventoryFile only reads the file); thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "runner/core/scenario.h"
#include "runner/core/yaml_reader.h"

namespace YAML {
class Node;
}

namespace faultline::runner {

// The kernel's rule for an interface name (net/core/dev.c dev_valid_name): 1..15 bytes, not
// "." or "..", no '/', ':' or whitespace.
bool ValidNetdevName(std::string_view name);
// An RDMA device name as it appears under /sys/class/infiniband: 1..63 bytes, not "." or
// "..", no '/' or whitespace.
bool ValidRdmaDeviceName(std::string_view name);
// A host name: 1..253 bytes of letters, digits, '-', '_' and '.', starting with a letter or
// digit.
bool ValidHostName(std::string_view name);
// An IPv4 or IPv6 address literal.
bool ValidIpAddress(std::string_view addr);

// Reads `list` (an inventory's `hosts:`) into `out`, reporting every problem through `r`:
// not a non-empty list, unknown keys, bad or duplicate host names, bad addresses, no rails,
// bad or duplicate netdevs in a host, `port` without `rdma`, one RDMA port on two rails of a
// host, and hosts with different numbers of rails. `out` holds what parsed either way.
// Returns true when nothing was wrong.
bool ParseInventoryHosts(YamlReader& r, const YAML::Node& list, std::vector<InventoryHost>* out);

// An inventory whose every host has a loopback management address (127.0.0.0/8): hosts that
// are all this machine (e.g. the RDMA ports of one box, grouped into "hosts"), whose ranks the
// local launcher runs here. False for a netns topology and for an empty inventory.
bool IsLocalInventory(const Topology& topology);
// An inventory every rail of which names an RDMA port: ftccl's ranks then run its verbs
// transport (its traffic cannot be half TCP, half verbs). False for a netns topology.
bool InventoryAllRdma(const Topology& topology);

// The topology as `faultline validate` prints it: a line with the kind, where the hosts came
// from and the counts, then per host its name and address and per rail its netdev, "RDMA
// <dev> port <p>" where set, and its address. Every line ends in '\n' and starts with
// `indent`. REQUIRES: t.is_inventory().
std::string DescribeInventory(const Topology& t, const std::string& indent);

struct InventoryOutcome {
  std::vector<InventoryHost> hosts;
  std::vector<Diagnostic> diagnostics;
  bool ok() const { return diagnostics.empty() && !hosts.empty(); }
};

// Parses a host file's text (`hosts: [...]`); `file` names it in diagnostics.
InventoryOutcome ParseInventory(std::string_view yaml_text, const std::string& file);
// A host file longer than this is refused unread.
inline constexpr size_t kMaxHostFileBytes = 4 << 20;

// Reads and parses a host file; an unreadable or oversized file is one diagnostic at 0:0.
InventoryOutcome ParseInventoryFile(const std::string& path);

}  // namespace faultline::runner
