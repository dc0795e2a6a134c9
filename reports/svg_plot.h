// Inline SVG plots of a run, generated here (no plotting library, no script): the bus
// bandwidth over time with the faults and their measured instants, and the state of every
// rail's path over time from the CCL's events. Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "reports/run_data.h"

namespace faultline::reports {

// busbw of every completed collective as a step line over [start_s, end_s], the baseline as
// a dashed line, and per applied fault a shaded <rect class="fault-band"> from applied_s to
// reverted_s (to the right edge, marked "not reverted", when it never was). Per fault, the
// detection, failover and recovery instants (applied_s + the per_fault metric, when not null)
// are vertical <line class="marker marker-detection|marker-failover|marker-recovery">.
// The root is <svg id="busbw-plot">. Without any collective the plot still shows the faults
// and says "no completed collective" in the plot area.
std::string BusbwPlotSvg(const RunData& run);

// Number of rails of the run: the topology's rails in the environment when recorded, else
// one more than the highest rail named by a fault target or an event; 0 when none is known.
int RailCount(const RunData& run);

// One lane per rail (<svg id="rail-plot">): a <rect class="path-down"> wherever some rank
// reported the rail's path down (path_down until that rank's path_up or failback on the same
// rail, or the end of the plot), a tick per event on the rail, and the faults that target the
// rail as shaded bands. REQUIRES: RailCount(run) > 0.
std::string RailPlotSvg(const RunData& run);

// Hosts that have columns in run.rails (sorted); empty without rails.csv.
std::vector<int> RailHosts(const RunData& run);

// The rail ports of `host` over time from rails.csv (<svg id="rail-throughput-h<host>"
// class="rail-throughput">): per column a <polyline class="rail-rate" data-column="NAME">
// (tx solid, rx dashed, one colour per rail or rank/rail port; drawn as 100 ms averages of
// the samples, broken where a 100 ms bin has no valid cell),
// and every applied fault as a shaded <rect class="fault-band">, darker when it targets this
// host. REQUIRES: run.rails.
std::string RailThroughputSvg(const RunData& run, int host);

}  // namespace faultline::reports
