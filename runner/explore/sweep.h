// Sweeps: the qualification cousin of a campaign. `--sweep KIND.PARAM=A..B:N` runs the space
// with only fault kind KIND, its parameter PARAM fixed in turn to each of N values evenly
// spaced from A to B (N = 1: A alone), `--runs R` runs per value (default 1). Run r of every
// value is generated from (space, seed, r), so the values share their timelines and only the
// parameter moves. Each run is judged by the space's invariants like any campaign run; a
// violation is recorded and the sweep goes on (no confirmation, no shrinking: the plot is the
// product). The page plots each run's stall (report.json metrics.stall_ms) against the value,
// marked by its outcome.
//
// Parameters and their units (the kind's ranges in the space, fault_space.h):
//   duration (ms; link_down, blackhole, loss, bandwidth), down, up (ms; link_flap),
//   count (link_flap), percent (loss), rate (Mbps; bandwidth).
// Pure; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runner/explore/fault_space.h"

namespace faultline::runner::explore {

struct SweepSpec {
  std::string kind;   // a kind of the space
  std::string param;  // one of the parameters above, valid for the kind
  double lo = 0;
  double hi = 0;
  int points = 1;
  std::string Unit() const;   // "ms", "Mbps", "%" or ""
  std::string Label() const;  // "link_flap.down (ms)"
};

// Parses "KIND.PARAM=A..B:N" against `space`; an error message (naming what is wrong and
// what would be right) or nullopt. REQUIRES: `space` validated.
std::optional<std::string> ParseSweep(const std::string& text, const FaultSpace& space,
                                      SweepSpec* out);

// The N values, A first, rounded to whole units (durations to whole ms, counts to integers,
// percent to 0.1, rate to whole Mbps).
std::vector<double> SweepValues(const SweepSpec& spec);

// The space a sweep runs at `value`: only the swept kind (weight kept), its parameter fixed.
FaultSpace SpaceAt(const FaultSpace& space, const SweepSpec& spec, double value);

// One run of a sweep, for the plot.
struct SweepPoint {
  double value = 0;
  std::string outcome;             // survived, aborted_clean, hung, crashed; "" when it did not run
  std::optional<double> stall_ms;  // null when the report has none
  bool violation = false;          // an invariant failed
};

// An inline SVG (no script, no external reference): stall against the value, one marker per
// run (survived: filled circle; aborted_clean: square; hung or crashed: cross on the top
// edge, their stall being unbounded), a ring around a run that violated an invariant.
std::string SweepSvg(const SweepSpec& spec, const std::vector<SweepPoint>& points);

}  // namespace faultline::runner::explore
