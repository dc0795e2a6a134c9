// The capacity of a real rail port, as its kernel reports it (inventory topologies,
// scenario.h TopologyKind::kInventory): the netdev's link speed
// (`<net_root>/<dev>/speed`, Mb/s) and, where an RDMA port backs the rail, the port's rate
// (`<ib_root>/<dev>/ports/<port>/rate`, e.g. "100 Gb/sec (4X EDR)").
//
// Parsing is pure and separate from reading the files. A value the kernel does not know (a
// speed of -1, a link that is down, a missing file) is nullopt, which a report writes as
// null: a capacity is never assumed. Thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "runner/core/scenario.h"

namespace faultline::runner {

// Bits per second from the text of a netdev's `speed` file ("25000\n" -> 25e9); nullopt for
// an unknown speed (-1, 0, the unsigned form of -1) or text that is not a number.
std::optional<double> ParseNetdevSpeed(std::string_view text);
// Bits per second from the text of an RDMA port's `rate` file ("100 Gb/sec (4X EDR)" ->
// 1e11, "2.5 Gb/sec (1X SDR)" -> 2.5e9); nullopt for text not of that form or a rate of 0.
std::optional<double> ParseRdmaRate(std::string_view text);

struct SysfsRoots {
  std::string net = "/sys/class/net";
  std::string infiniband = "/sys/class/infiniband";
};

// Read and parsed; nullopt when the file is missing or unreadable (a down link's `speed`
// fails to read) or its value is unknown.
std::optional<double> ReadNetdevSpeed(const std::string& netdev, const SysfsRoots& roots = {});
std::optional<double> ReadRdmaPortRate(const std::string& device, int port,
                                       const SysfsRoots& roots = {});

struct RailCapacity {
  std::optional<double> bps;
  // Where it came from: "rdma_rate" (the RDMA port's rate, taken first on an RDMA rail: the
  // rate its traffic sees), "netdev_speed", or "" when unknown.
  std::string source;
};

// The capacity of `rail`: its RDMA port's rate where it has one and the kernel knows it, else
// its netdev's speed, else unknown.
RailCapacity ReadRailCapacity(const InventoryRail& rail, const SysfsRoots& roots = {});

// {"netdev", "rdma" (where set), "port" (where set), "capacity_bps" (null when unknown),
// "capacity_source" (null when unknown)}: a rail's entry in a report.
nlohmann::json RailCapacityJson(const InventoryRail& rail, const RailCapacity& c);

}  // namespace faultline::runner
