// The logs of a production incident read for `faultline import`: link transitions (LinkEvent:
// NIC, switch port, RDMA port), what the job saw (Symptom), per-host clock samples
// (ClockSample), and lines that look like a source but cannot be read (LogWarning).
//
// Link events, by source (a line may carry a wall-clock and a kernel timestamp):
//   kKernel, kernel messages as printed by dmesg, dmesg -T, journalctl (-o short, short-iso,
//   short-iso-precise) and syslog files:
//     mlx5/mlx4       "mlx5_core 0000:08:00.0 eth2: Link down" / "... Link up"
//     ice/i40e/ixgbe/bnxt/e1000e "ice 0000:3b:00.0 ens1f0: NIC Link is Down" / "NIC Link is Up ..."
//     mlx5 module     "mlx5_core 0000:08:00.0: Port module event: module 0, Cable unplugged"
//                     (plugged: up; unplugged, error: down; named by PCI address)
//     port state      "mlx5_core 0000:01:00.1: Port state changed to DOWN" / "... to ACTIVE"
//     bonding         "bond0: (slave eth2): link status definitely down, disabling slave"
//     ipv6 addrconf   "IPv6: ADDRCONF(NETDEV_CHANGE): eth2: link becomes ready" (up)
//   kIpMonitor, `ip monitor link`, plain, -t ("Timestamp: ... usec" lines) or -ts ("[ISO] "):
//     "3: eth2: <NO-CARRIER,BROADCAST,MULTICAST,UP> ... state DOWN ..." (down),
//     "... <...,LOWER_UP> ... state UP ..." (up), "Deleted 3: eth2: ..." (down).
//   kSwitch, a switch's syslog; node: the switch's host name; names: {the port}:
//     SONiC           "Nov 28 03:14:07.654321 leaf1 NOTICE swss#orchagent: :- updatePortOperStatus:
//                     Port Ethernet8 oper state set from up to down" (also PortChannelN)
//     Arista EOS      "Nov 28 03:14:07 leaf2 Ebra: %LINEPROTO-5-UPDOWN: Line protocol on
//                     Interface Ethernet1/1, changed state to down"; "%LINK-3-UPDOWN:
//                     Interface Ethernet1/1, changed state to up"
//     Cumulus Linux   "... switchd[5692]: nic.c:213 nic_set_carrier: swp17: setting kernel
//                     carrier: down"; "... switchd[5692]: netlink.c:291 libnl: swp17, family 0,
//                     ifi 20, oper up" (its kernel and `ip monitor` lines: as above)
//     Cisco NX-OS     "2026 Nov 28 03:14:07 N9K-1 %ETHPORT-5-IF_DOWN_LINK_FAILURE: Interface
//                     Ethernet1/1 is down (Link failure)" (any IF_DOWN_*), "%ETHPORT-5-IF_UP:
//                     Interface Ethernet1/1 is up in mode access"; also relayed, "Nov 28
//                     03:14:01 10.1.1.2 2026 Nov 28 03:14:07.221 UTC: %ETHPORT-..." (the
//                     switch's own stamp is used); %ETH_PORT_CHANNEL-... lines are ignored.
//   kRdmaPort, names: {"mlx5_0/1"} then the netdev where the line names one ("netdev ens1f1"):
//     kernel lines naming an RDMA device (mlx4_N, mlx5_N, bnxt_reN, irdmaN, efa_N, ...), a
//     "port N" and a state: "infiniband mlx5_0: port 1 state changed from ACTIVE to DOWN",
//     "mlx5_ib: mlx5_1: IB_EVENT_PORT_ERR on port 1 (netdev ens1f1)", "ib_core: mlx5_1 port 1
//     state ACTIVE" (ACTIVE, PORT_ACTIVE: up; DOWN, INIT, ARMED, PORT_ERR: down);
//     `ibstat` dumps: "CA 'mlx5_0'", "\tPort 1:", "\t\tState: Active|Down|Initializing|Armed",
//     each dump after an optional time line ("# 2026-11-28T03:14:07Z", an ISO time alone, or
//     date(1)'s "Sat Nov 28 03:14:07 UTC 2026"): a port whose State differs from the previous
//     dump's is an event at the State line, with the dump's time (the first dump: no event).
// Symptoms (not link events):
//   NCCL_DEBUG lines "[STAMP] HOST:PID:TID [DEV] [FILE:LINE [(FUNC)] ]NCCL WARN|INFO MSG",
//   STAMP: NCCL_DEBUG_TIMESTAMP_FORMAT (2.26+: default "[%F %T] " on WARN, local time, read as
//   UTC: zone_assumed), optionally after a syslog/journal header and/or `srun --label`'s
//   "RANK: " (global_rank). pid, local_rank (DEV) and node (HOST) from the prefix. MSG:
//     "NET/IB : Got completion from peer 10.0.0.5<46213> with error 12, opcode 0, len 0,
//     vendor err 129" (2.10-2.19), "... with status=12 opcode=0 len=0 vendor err 129 (Recv)
//     ... hca mlx5_0" (2.20-2.27), "... with status=IBV_WC_RETRY_EXC_ERR(12) opcode=... hca
//     mlx5_0" (2.28+): ib_completion_error (peer, wc_status, hca);
//     "NET/IB : mlx5_0:1 Got async event : port error", "... Got non-fatal async event: port
//     error(10)", "... async fatal event ...": ib_async_event (hca "mlx5_0:1");
//     "Call to ibv_modify_qp failed ...": ib_verbs_error; "NET/Socket : ...", "socketProgress:
//     Connection closed by remote peer node18<39421>", "Call to connect failed": socket_error;
//     ncclRemoteError / "remote process exited": remote_error; ncclSystemError: system_error;
//     "aborted": abort; "timeout", "timed out": timeout. Other WARN/INFO lines: nothing.
//   PyTorch ProcessGroupNCCL: "[rank3]:[E1128 03:14:07.123456 ProcessGroupNCCL.cpp:616] [Rank 3]
//     Watchdog caught collective operation timeout: WorkNCCL(SeqNum=..., OpType=ALLREDUCE, ...)
//     ran for 600012 milliseconds before timing out." (timeout; the glog stamp has no year:
//     `year`, year_assumed), "NCCL communicator was aborted on rank 3." (abort),
//     "DistBackendError: ... remote process exited or there was a network error" and lines
//     with ncclRemoteError / ncclSystemError.
//   ncclras (NCCL 2.28.7+) `-f json` documents ("{" alone on a line to the closing "}" at
//     column 0): per communicator, each missing rank that is unresponsive or considered_dead
//     and each rank whose status has abort_flag or a non-zero async_error is a "ras" symptom
//     (global_rank, node: its host, pid, local_rank: cuda_dev; line: the document's first);
//     monitor-mode (`-m`, 2.29+) JSON events and text lines "[2026-11-28 03:14:10] PEER_DEAD:
//     Process 5001 on node 10.0.0.18 managing GPU 0" for PEER_DEAD, PEER_TIMEOUT_DEAD,
//     PEER_UNRESPONSIVE, PEER_DISCONNECTED, PEER_SEND_STUCK, PEER_KEEPALIVE_TIMEOUT,
//     PEER_INIT_TIMEOUT (node: the process's host; peer: its address when no host is known).
// Timestamps: dmesg "[12345.678901]", "[Tue Mar  5 10:15:02 2024]" (dmesg -T), ISO 8601 with
// or without fraction and zone (journalctl short-iso, rsyslog, Cumulus), "Mar  5 10:15:02[.f]"
// (syslog, SONiC, EOS: no year, `year` is used and year_assumed set), NX-OS "2026 Nov 28
// 03:14:07[.f]", ip -t and ip -ts, NCCL's and ncclras's "[2026-11-28 03:14:07[.f]]". wall_res_ns
// is 1 s without a fraction, else 10^-digits s. A ClockSample is written for every line with
// both a kernel stamp and a wall stamp (syslog/journal), whatever its message.
// Warnings (the line is skipped): a line that starts like a source but cannot be read (a
// truncated NCCL line or WARN without a message, a completion error without its status, a
// switch message without its port or state, an RDMA port state without a port, a number out
// of range), bad or unterminated JSON, ibstat ports without a State line, lines over 8 KiB.
// ImportLinkEvents (incident_import.h) puts the events of one import on one clock.
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
  // The host of the process, as NCCL prints it ("node17:1234:1290 [3] ..."); for "ras", the
  // host of the process RAS reports; else the line's syslog host or the log's default node.
  std::string node;
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
// the year of stamps that print none (classic syslog), marked year_assumed; within one host
// of the log, such a stamp more than half a year before the previous one is in the next year
// (a log that runs over New Year).
// Never throws; any byte sequence is accepted.
ParsedLog ParseIncidentLog(std::string_view text, const std::string& file,
                           const std::string& node = "", int year = 2000);

// ParseIncidentLog(text, file).links.
std::vector<LinkEvent> ParseLinkLog(std::string_view text, const std::string& file);

}  // namespace faultline::runner
