// FaultSpace: the typed form of a fault space file (scenarios/explore/*.yaml, schema in
// scenarios/README.md "Fault spaces"): the scenario a campaign varies (name, topology, ccl,
// workload, checked by the scenario parser itself) and what it may vary: the fault kinds with
// their weights and parameter ranges, the targets, when faults start, how long they last and
// the gap between them, how many at once, the horizon, and which invariants are checked.
//
// Parsing collects every error as a Diagnostic (file:line:column, message, hint) like the
// scenario parser; a FaultSpace is returned only when the whole file validates. Pure;
// thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runner/core/scenario.h"

namespace faultline::runner::explore {

// A closed range [lo, hi] a value is drawn from uniformly (lo == hi: fixed).
struct IntRange {
  int64_t lo = 0;
  int64_t hi = 0;
};
struct RealRange {
  double lo = 0;
  double hi = 0;
};

// The fault kinds a space may name (the registry's names, and nic_down). Each kind's
// parameters are drawn from the ranges beside it; `duration` is the hold of a kind with `for`.
// nic_down: every port of one NIC down at once for `duration` (with `nics: per_rank` one rank's
// NIC, whose rank relays through a neighbour; on shared NICs the host's, which loses every
// path at one instant), written into the run's file as one link_down per rail with the same
// start and length (the NIC dies and comes back).
inline constexpr const char* kSpaceKinds[] = {"link_down", "link_flap",  "blackhole",
                                              "port_drop", "conn_reset", "conn_corrupt",
                                              "loss",      "bandwidth",  "nic_down"};

struct KindSpec {
  std::string type;  // one of kSpaceKinds
  int64_t weight = 1;
  IntRange duration_ns;     // link_down, blackhole, loss, bandwidth, nic_down: `for`
  IntRange down_ns;         // link_flap
  IntRange up_ns;           // link_flap
  IntRange count;           // link_flap
  RealRange percent;        // loss
  IntRange rate_mbps;       // bandwidth
  // conn_corrupt: which checksum of the frame is corrupted, one drawn per fault ("payload":
  // the receiver drops the chunk and asks for it again; "header": it drops the connection).
  std::vector<std::string> parts = {"payload"};
  SourceLoc loc;
  // Whether the kind's target is a link with a side (every kind but conn_reset, conn_corrupt).
  bool HasSide() const;
  // The fault holds to the end of the run (port_drop).
  bool Permanent() const;
  // Acts once, nothing to revert (conn_reset, conn_corrupt).
  bool OneShot() const;
  // Hits every rail of its target at once (nic_down): the targets' rails are not drawn.
  bool WholeNic() const { return type == "nic_down"; }
};

// Where faults may land: host and rail indices, link sides, and with `nics: per_rank` the
// ranks of a host whose ports are hit (a rank's index on its host; shared NICs: only 0, the
// host's one port per rail; one-shot kinds always hit rank 0's connection).
struct TargetSpec {
  std::vector<int> hosts;
  std::vector<int> rails;
  std::vector<int> ranks = {0};
  std::vector<LinkSide> sides = {LinkSide::kHost};
};

// The invariants a space checks (runner/explore/invariants.h), each switchable.
struct InvariantSettings {
  bool exact_results = true;
  bool no_silent_hang = true;
  int64_t abort_within_ns = 10'000'000'000;  // the bound of a clean abort
  bool liveness_after_heal = true;
  double liveness_pct = 50;                  // share of the baseline busbw ...
  int64_t liveness_within_ns = 2'000'000'000;  // ... reached within this after the last heal
  // The stall bound of liveness_after_heal: while faults are in effect and every pair of ranks
  // keeps a path (a rail without a link fault at both ends, or with nics: per_rank a
  // neighbour's port that relays for a rank without its own), collectives complete at least every
  // stall_plus + stall_x x the baseline median collective time. stall_x 0: not checked.
  double stall_x = 0;
  int64_t stall_plus_ns = 0;
  bool lossless = true;      // every chunk numbered is accepted exactly once (ftccl counters)
  bool ccl_sequence = true;  // the CCL's own sequence invariants (ftccl counters)
  bool nothing_left_behind = true;
};

struct FaultSpace {
  // The scenario every generated run starts from (no faults, no expectations); validated by
  // the scenario parser.
  Scenario base;
  std::vector<KindSpec> kinds;
  TargetSpec targets;
  IntRange faults_per_run = {1, 3};
  int max_concurrent = 2;     // most faults in effect at once
  IntRange start_ns;          // the first fault's start
  IntRange gap_ns;            // from one fault's start to the next one's
  int64_t horizon_ns = 0;     // every fault ends by then (from the workload's start)
  InvariantSettings invariants;
  std::string file;           // where it was read from
  std::string sha256;         // of the file's text
};

struct SpaceOutcome {
  std::optional<FaultSpace> space;
  std::vector<Diagnostic> diagnostics;
  bool ok() const { return space.has_value() && diagnostics.empty(); }
};

// Parses and validates a fault space; `file` names it in diagnostics.
SpaceOutcome ParseFaultSpace(std::string_view yaml_text, const std::string& file);
// Reads and parses a file; an unreadable file is one diagnostic at 0:0.
SpaceOutcome ParseFaultSpaceFile(const std::string& path);

}  // namespace faultline::runner::explore
