// What ImportIncident (incident_import.cc) is built from, besides the mapping flags
// (mappings.cc): how it prints times, precisions and fault ids in the scenario it writes,
// and how it places a clock domain on the common timeline. Not an API: use
// incident_import.h. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runner/incident/incident_import.h"

namespace faultline::runner::incident_internal {

// `ns` rounded to the nearest millisecond.
int64_t RoundMs(int64_t ns);
// A scenario duration of whole milliseconds: "2s", "1500ms".
std::string FormatMs(int64_t ns);
// The id of the `n`th outage of device `dev`: "eth2-down1" (other characters than letters
// and digits become '-').
std::string FaultId(const std::string& dev, int n);
// "+-0.5 ms", "+-1.2 s", "+-3 us".
std::string FormatPrecision(int64_t ns);
// "+1.234 s".
std::string FormatSeconds(int64_t ns);
// ns since the epoch -> "2026-11-28T03:14:07.123Z".
std::string FormatWall(int64_t ns);

// A kernel stamp in seconds -> ns.
int64_t KernelNs(double s);
// The clock domain of a line of `file` from host `node`: the node, else "file:<file>".
std::string DomainOf(const std::string& node, const std::string& file);
// Sets `d`'s offset, precision, sample count and consistency from its clock samples (see
// incident_import.h: the middle of the intersection of the samples' intervals, else the
// median of their midpoints).
void EstimateOffset(const std::vector<const ClockSample*>& samples, ClockDomain* d);

}  // namespace faultline::runner::incident_internal
