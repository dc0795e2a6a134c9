// Parsing and printing of quantities with units, as written in scenarios and on the command
// line: durations ("200ms", "1.5s", "250us", "2m") and bit rates ("100mbit", "1Gbps").
// A number without a unit is refused: units are mandatory. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace faultline {

// Duration -> nanoseconds. Units: ns, us, ms, s, m, h. Must be >= 0.
Result<int64_t> ParseDuration(std::string_view text);
// Rate -> bits per second. Units (case-insensitive): bit, kbit, mbit, gbit, tbit, bps, kbps,
// mbps, gbps, tbps (all bits per second, SI multipliers). Must be > 0.
Result<uint64_t> ParseRate(std::string_view text);
// Byte size -> bytes. Units: b, k/kb/kib, m/mb/mib, g/gb/gib (powers of 1024).
Result<uint64_t> ParseSize(std::string_view text);
// Percentage "12.5" or "12.5%" in [0, 100].
Result<double> ParsePercent(std::string_view text);

std::string FormatDuration(int64_t ns);
std::string FormatRate(uint64_t bits_per_second);

}  // namespace faultline
