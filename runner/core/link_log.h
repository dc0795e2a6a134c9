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

// Where a link event was seen.
enum class LinkSource {
  kKernel,     // a NIC driver, bonding or addrconf message of a host's kernel
  kIpMonitor,  // `ip monitor link`
  kRdmaPort,   // an RDMA port state change (ib_core, mlx5_ib) or an ibstat-style snapshot
  kSwitch,     // a switch's own log (SONiC, Arista EOS, Cumulus/FRR, Cisco NX-OS)
};
const char* LinkSourceName(LinkSource s);  // "kernel", "ip_monitor", "rdma_port", "switch"

// One link transition found in a log.
struct LinkEvent {
  std::string file;  // the log it came from
  int line = 0;      // 1-based
  std::string text;  // the line, trimmed
  // The host (or, for kSwitch, the switch) that logged it: the syslog/journal host name of
  // the line, else the log's default node (ParseIncidentLog); empty if neither.
  std::string node;
  // The device, most specific first: a host's interface name and/or PCI address; for
  // kRdmaPort "DEVICE/PORT" (e.g. "mlx5_0/1") then the netdev where the line names one;
  // for kSwitch the switch port as the switch names it (e.g. "Ethernet1/1", "swp3").
  std::vector<std::string> names;
  bool up = false;
  LinkSource source = LinkSource::kKernel;
  std::optional<double> kernel_s;  // the host's kernel clock (dmesg seconds since boot)
  std::optional<int64_t> wall_ns;  // wall clock, ns since the epoch
  // The resolution of wall_ns: 1 s for "Mar  5 10:15:02", 1 us for ".123456"; 0 if no wall.
  int64_t wall_res_ns = 0;
  bool year_assumed = false;  // wall_ns from a stamp without a year ("Mar  5 10:15:02")
};

// What a rank of the job saw: an error line of the collective library (NCCL WARN lines,
// NCCL_DEBUG lines with timestamps, NCCL RAS JSON). A symptom of the incident, not a fault.
struct Symptom {
  std::string file;
  int line = 0;
  std::string text;
  std::string node;  // the host of the process, as NCCL prints it ("node17:1234:1290 [3] ...")
  // What happened, one of: "ib_completion_error" (a work completion with an error status),
  // "ib_async_event" (port/device error from the HCA), "socket_error" (NET/Socket),
  // "timeout" (a collective or watchdog timeout), "remote_error" (a peer reported an error),
  // "abort" (the communicator or the job was aborted), "ras" (an issue reported by NCCL RAS),
  // "ib_verbs_error" (a verbs call failed: "Call to ibv_modify_qp failed"), "system_error"
  // (ncclSystemError).
  std::string kind;
  std::optional<int> pid;
  std::optional<int> local_rank;   // the CUDA device index in "[3]", the node-local rank
  std::optional<int> global_rank;  // where the line names the rank itself
  std::string peer;                // the remote side as printed (host name or address)
  std::string hca;                 // the local HCA and port as printed ("mlx5_0:1")
  std::optional<int> wc_status;    // ibv_wc_status (12: IBV_WC_RETRY_EXC_ERR)
  std::optional<double> kernel_s;  // rarely: a kernel-clock stamp on the line
  std::optional<int64_t> wall_ns;
  int64_t wall_res_ns = 0;
  bool year_assumed = false;
  // wall_ns from a stamp printed in the host's local time without a zone (NCCL's
  // "[2026-11-28 03:14:07]", ncclras, glog "E1128 ..."): read as UTC.
  bool zone_assumed = false;
};

// A line that carries both the host's kernel clock and its wall clock (e.g. a syslog line of
// a kernel message): a sample of that host's wall - kernel offset, whatever the message.
struct ClockSample {
  std::string file;
  int line = 0;
  std::string node;
  double kernel_s = 0;
  int64_t wall_ns = 0;
  int64_t wall_res_ns = 0;
  bool year_assumed = false;
};

// A line that looks like a known source but cannot be read (truncated, bad number, bad
// JSON): skipped, and said so with its place.
struct LogWarning {
  std::string file;
  int line = 0;
  std::string reason;
};

struct ParsedLog {
  std::vector<LinkEvent> links;     // in file order
  std::vector<Symptom> symptoms;    // in file order
  std::vector<ClockSample> clocks;  // in file order
  std::vector<LogWarning> warnings;
};

// Everything the importer reads in one log. `node`: the host name of lines that carry none
// (the log's host when a directory of per-host logs is imported); empty: unknown. `year`:
// the year of stamps that print none (classic syslog), marked year_assumed.
// Never throws; any byte sequence is accepted.
ParsedLog ParseIncidentLog(std::string_view text, const std::string& file,
                           const std::string& node = "", int year = 2000);

// ParseIncidentLog(text, file).links.
std::vector<LinkEvent> ParseLinkLog(std::string_view text, const std::string& file);

}  // namespace faultline::runner
