// A production incident's logs turned into a scenario (`faultline import`): the parsed link
// events of hosts, RDMA ports and switches (runner/incident/link_log.h) placed on the rails of a
// test topology, on one timeline, and the collective library's error lines (symptoms) turned
// into a `reproduce:` verdict for the fail-stop library of the replay.
//
// Clocks. Each host's (or switch's) events form one clock domain: the syslog/journal host
// name of the line, else the log's default node, else the file; a kernel clock that restarts
// within a file (a stamp more than a second below the previous one: a reboot) starts a new
// domain from that line, with a warning. Events with a kernel stamp ("[1234567.123456]") are
// timed by it: outage lengths within one host are exact to the microsecond, whatever the wall
// stamps' resolution. Domains are aligned by their wall clocks: each domain's wall - kernel
// offset is estimated from every line of that domain that carries both stamps (ClockSample).
// A wall stamp of resolution r printed as w for kernel time k says k + offset is in
// [w, w + r) (r widened by the kernel stamp's own microsecond), so offset is in
// [w - k, w - k + r); the estimate is the middle of the intersection of those intervals over
// the samples and its precision half the intersection's width, at best: a logging daemon
// stamps a line when it receives it, a little after the kernel printed it. Where the
// intervals do not intersect (such a delay, a clock step, two machines of one name), the
// estimate is the median of the midpoints, its precision half their spread plus r / 2, and a
// warning says so. Each event is placed on its own: its kernel time plus its domain's offset
// where both exist, else its wall time (the middle of its stamp's resolution). A single
// domain with kernel times and no wall stamps (plain dmesg) is on its kernel clock. The
// hosts' wall clocks are assumed to agree (NTP/PTP); the logs cannot show how far they do not.
// The timeline starts at the first down.
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
#include "runner/incident/link_log.h"
#include "runner/core/scenario.h"

namespace faultline::runner {

// Where a logged device lands in the topology.
struct RailRef {
  int host = 0;
  int rail = 0;
  LinkSide side = LinkSide::kHost;
};

// "eth2=host0/rail1", "node17:eth2=host1/rail0/switch", "0000:08:00.0=host0/rail0",
// "mlx5_0/1=host0/rail0": the device (optionally "NODE:" first, the host name of the lines)
// and its rail.
Result<std::pair<std::string, RailRef>> ParseRailMapping(std::string_view flag);

// "leaf1:Ethernet1/1=host0/rail1": a switch port (SWITCH:PORT, the switch's host name as its
// log prints it) and the rail whose switch side it is. The key returned is "SWITCH:PORT".
Result<std::pair<std::string, RailRef>> ParseSwitchMapping(std::string_view flag);

// "gpu-node-17:3=host1/rank1": a production process (NODE:LOCAL, the host name and the local
// rank or CUDA device NCCL prints as "[3]") and the replay rank it stands for; or
// "rank12=host1/rank1": the production job's global rank (PyTorch's "[rank12]" lines, srun
// --label). The key returned is "NODE:LOCAL" or "rankG"; the value {host, rank within the host}.
struct RankRef {
  int host = 0;
  int rank = 0;
};
Result<std::pair<std::string, RankRef>> ParseRankMapping(std::string_view flag);

struct ImportOptions {
  std::map<std::string, RailRef> map;         // host device key -> rail (ParseRailMapping)
  std::map<std::string, RailRef> switch_map;  // "SWITCH:PORT" -> rail (ParseSwitchMapping)
  std::map<std::string, RankRef> rank_map;    // "NODE:LOCAL" -> replay rank (ParseRankMapping)
  int64_t at_ns = 2'000'000'000;              // the first event's time in the scenario
  int64_t tail_ns = 3'000'000'000;            // run time after the last event (rounded up to 1 s)
  std::string name = "imported-link-events";
  std::optional<int> hosts;  // default: the highest mapped host + 1, at least 2
  std::optional<int> rails;  // default: the highest mapped rail + 1, at least 2
  std::optional<int> ranks_per_host;  // default: the highest mapped local rank + 1
  std::string op = "allreduce";
  std::string bytes = "16MiB";
  // The replay verdict (symptoms mapped to ranks): the fail-stop library that should
  // reproduce the incident, its outcome (default: "hung" when every symptom is a timeout,
  // else "aborted_clean") and the bound (default: the larger of 30 s and 1.5 x the delay from
  // the first fault to the last mapped symptom, rounded up to a second).
  CclName reproduce_ccl = CclName::kGloo;
  std::optional<std::string> reproduce_outcome;
  std::optional<int64_t> within_ns;
};

// How one clock domain was placed on the timeline.
struct ClockDomain {
  std::string name;      // host or switch name, or "file:<path>"
  bool kernel = false;   // its events are timed by its kernel clock
  int samples = 0;       // lines that carried both clocks
  std::optional<int64_t> offset_ns;     // wall - kernel (kernel domains with samples)
  std::optional<int64_t> precision_ns;  // +- of this domain's times on the common timeline
  bool consistent = true;  // false: the samples' intervals did not intersect (see above)
};

struct ImportResult {
  std::string yaml;                   // a scenario that validates
  std::vector<LinkEvent> used;        // the events that became faults, in time order
  std::vector<Symptom> symptoms;      // the mapped symptoms, in time order where known
  std::vector<std::string> unmapped;  // devices (and processes) with events but no mapping
  std::vector<ClockDomain> clocks;    // the domains of the mapped events and symptoms
  std::vector<LogWarning> warnings;   // lines skipped by the parsers, and the importer's own
  int faults = 0;
  int permanent = 0;  // downs without a matching up
};

// Turns the parsed logs into a scenario: per rail side, an outage starts when one of the
// devices mapped to it (an interface, its PCI address, its RDMA port, a bond's view) goes down
// and ends when every device that went down is up again (`for`: whole milliseconds, at least
// 1); an outage never closed holds until the end of the run; an up with no outage open is
// ignored with a warning. A switch-side outage that overlaps a host-side outage of the same
// rail is the same cable seen from both ends: the host's (kernel-timed) fault is kept and the
// switch's lines are cited beside it. Mapped symptoms give the scenario a `reproduce:` key
// (ranks, outcome, within from the first fault) and a matrix over the scenario's ccl
// (ftccl, judged by expect:) and the reproduce ccl.
// Errors (kInvalidArgument): no mapped event, an unqualified --map name found on several
// hosts, an event that cannot be put on the common timeline, a rank mapping outside the
// topology, or a result that does not validate (e.g. two devices mapped to one rail
// overlap), with the reason. Lines the parsers skipped, and events the importer ignored, are
// `warnings`.
Result<ImportResult> ImportIncident(const std::vector<ParsedLog>& logs,
                                    const ImportOptions& options);

// ImportIncident of one log holding just `events`.
Result<ImportResult> ImportLinkEvents(const std::vector<LinkEvent>& events,
                                      const ImportOptions& options);

}  // namespace faultline::runner
