// Link-event logs turned into a scenario (`faultline import`): the NIC link transitions of a
// production incident, read from kernel logs or `ip monitor link`, replayed as link_down
// faults on the rails of a test topology.
//
// Recognised lines (a line may carry both a wall-clock and a kernel timestamp):
//   kernel messages, as printed by dmesg, dmesg -T, journalctl (-o short, short-iso,
//   short-iso-precise) and syslog files:
//     mlx5/mlx4       "mlx5_core 0000:08:00.0 eth2: Link down" / "... Link up"
//     ice/i40e/ixgbe/bnxt/e1000e "ice 0000:3b:00.0 ens1f0: NIC Link is Down" / "NIC Link is Up ..."
//     mlx5 module     "mlx5_core 0000:08:00.0: Port module event: module 0, Cable unplugged"
//                     (plugged: up; unplugged, error: down; named by PCI address)
//     port state      "... Port state changed to DOWN" / "... to ACTIVE" (or UP)
//     bonding         "bond0: (slave eth2): link status definitely down, disabling slave"
//     ipv6 addrconf   "IPv6: ADDRCONF(NETDEV_CHANGE): eth2: link becomes ready" (up)
//   `ip monitor link`, plain, with -t ("Timestamp: ... usec" lines) or -ts ("[ISO] " prefix):
//     "3: eth2: <NO-CARRIER,BROADCAST,MULTICAST,UP> ... state DOWN ..." (down),
//     "... <...,LOWER_UP> ... state UP ..." (up), "Deleted 3: eth2: ..." (down).
// Timestamps: dmesg "[12345.678901]", "[Tue Mar  5 10:15:02 2024]" (dmesg -T), ISO 8601 with
// or without fraction and zone (journalctl short-iso, rsyslog), "Mar  5 10:15:02" (syslog,
// read as UTC of one year), ip -t and ip -ts. All events of one import are put on one clock:
// the kernel's when every event has one and all come from one file and one host, else the
// wall clock (every event must then have one).
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runner/core/scenario.h"

namespace faultline::runner {

// One link transition found in a log.
struct LinkEvent {
  std::string file;                // the log it came from
  int line = 0;                    // 1-based
  std::string text;                // the line, trimmed
  std::string node;                // syslog/journal host name; empty if none
  std::vector<std::string> names;  // interface name and/or PCI address, most specific first
  bool up = false;
  std::optional<double> kernel_s;  // dmesg seconds since boot
  std::optional<int64_t> wall_ns;  // wall clock, ns since the epoch
};

// Every link transition in `text`, in file order.
std::vector<LinkEvent> ParseLinkLog(std::string_view text, const std::string& file);

// Where a logged device lands in the topology.
struct RailRef {
  int host = 0;
  int rail = 0;
  LinkSide side = LinkSide::kHost;
};

// "eth2=host0/rail1", "node17:eth2=host1/rail0/switch", "0000:08:00.0=host0/rail0": the
// device (optionally "NODE:" first, the host name of syslog/journal lines) and its rail.
Result<std::pair<std::string, RailRef>> ParseRailMapping(std::string_view flag);

struct ImportOptions {
  std::map<std::string, RailRef> map;  // device key -> rail (ParseRailMapping)
  int64_t at_ns = 2'000'000'000;       // the first event's time in the scenario
  int64_t tail_ns = 3'000'000'000;     // run time after the last event (rounded up to 1 s)
  std::string name = "imported-link-events";
  std::optional<int> hosts;  // default: the highest mapped host + 1, at least 2
  std::optional<int> rails;  // default: the highest mapped rail + 1, at least 2
  int ranks_per_host = 1;
  std::string op = "allreduce";
  std::string bytes = "16MiB";
};

struct ImportResult {
  std::string yaml;                   // a scenario that validates
  std::vector<LinkEvent> used;        // the events that became faults, in time order
  std::vector<std::string> unmapped;  // devices with events but no mapping
  int faults = 0;
  int permanent = 0;  // downs without a matching up
};

// Turns the events of every log into a scenario: per mapped device, each down followed by an
// up becomes a link_down with `for` (the time between them, at least 1 ms); a down without an
// up holds until the end of the run; repeated downs or ups without a change are ignored.
// Errors (kInvalidArgument): no mapped event, events without a common clock, or a result
// that does not validate (e.g. two devices mapped to one rail overlap), with the reason.
Result<ImportResult> ImportLinkEvents(const std::vector<LinkEvent>& events,
                                      const ImportOptions& options);

}  // namespace faultline::runner
