// The generator of a campaign: from (fault space, seed, index) one ordinary scenario, a pure
// function of the three (SplitMix64 streams, no standard distributions), so that the same
// triple gives the same file everywhere and `faultline run` replays it exactly. A run is kept
// as a RunFaults (the faults the shrinker simplifies) and written as scenario YAML with a
// comment header naming its origin. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "runner/explore/fault_space.h"

namespace faultline::runner::explore {

inline constexpr int64_t kForever = std::numeric_limits<int64_t>::max();

// One fault of a generated run, with the parameters of its kind (kSpaceKinds).
struct GenFault {
  std::string id;
  std::string type;
  int64_t at_ns = 0;
  int64_t for_ns = 0;   // link_down, blackhole, loss, bandwidth
  int64_t down_ns = 0;  // link_flap
  int64_t up_ns = 0;    // link_flap
  int64_t count = 1;    // link_flap
  double percent = 0;   // loss
  int64_t rate_mbps = 0;  // bandwidth
  int host = 0;
  int rail = 0;  // nic_down: every rail (0 here)
  // The rank on `host` whose own NIC is hit (nics: per_rank); 0 on shared NICs and for the
  // one-shot kinds.
  int rank = 0;
  LinkSide side = LinkSide::kHost;  // not written for conn_reset, conn_corrupt
  // conn_corrupt: rank 0 of `host` corrupts one frame to rank 0 of `peer_host` on `rail`.
  int peer_host = 0;
  std::string part{};  // conn_corrupt: "payload" or "header"

  // Acts once on a connection, no side, nothing to revert (conn_reset, conn_corrupt), as
  // KindSpec::OneShot.
  bool OneShot() const { return type == "conn_reset" || type == "conn_corrupt"; }
  // Every port of the target NIC (nic_down: a rank's own with nics: per_rank, else the
  // host's shared one), as KindSpec::WholeNic.
  bool WholeNic() const { return type == "nic_down"; }
  // How long it holds: `for`, a flap's schedule; 0 for a one-shot; kForever for port_drop.
  int64_t LengthNs() const;
  // at + length (kForever for port_drop).
  int64_t EndNs() const;
  bool operator==(const GenFault&) const = default;
};

// The faults of one run and the seed of its scenario.
struct RunFaults {
  uint64_t scenario_seed = 0;
  std::vector<GenFault> faults;  // by start time
  bool operator==(const RunFaults&) const = default;
};

// Where a run came from, for the file's header.
struct RunOrigin {
  uint64_t seed = 0;
  int64_t index = 0;
  // What the file is when it is not the generated run itself, e.g. "minimal form of run 3";
  // empty: the header says that the triple generates this file again.
  std::string note;
};

// The run `index` of the campaign with `seed` over `space`. Every fault ends by the horizon,
// no two faults on one link (either side) overlap, at most max_concurrent are in effect at
// once; a fault that cannot be placed so is left out (a run has at least one fault).
RunFaults Generate(const FaultSpace& space, uint64_t seed, int64_t index);

// Whether `faults` keep the space's rules above (the shrinker's candidates must).
bool FitsSpace(const FaultSpace& space, const std::vector<GenFault>& faults);

// The scenario file of a run: a comment header (space file and sha256, seed, index, note),
// then the space's scenario with `faults:` and the abort bound of the space's invariants.
std::string RenderScenario(const FaultSpace& space, const RunFaults& run, const RunOrigin& origin);

// "f0 link_down h1 r0 switch at 1200ms for 300ms": one line per fault in reports; a rank's
// own port is "h1 k1 r0" (nics: per_rank, rank 1 of host 1), a whole NIC "nic_down h1 k1".
std::string Describe(const GenFault& f);

}  // namespace faultline::runner::explore
