// The importer's formatting of times and ids, and its clock domains (import_parts.h).
#include "runner/incident/import_parts.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>

namespace faultline::runner::incident_internal {

int64_t RoundMs(int64_t ns) { return (ns + 500'000) / 1'000'000 * 1'000'000; }

std::string FormatMs(int64_t ns) {
  int64_t ms = (ns + 500'000) / 1'000'000;
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

std::string FaultId(const std::string& dev, int n) {
  std::string id;
  for (char c : dev) id += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
  return id + "-down" + std::to_string(n);
}

// "+-0.5 ms", "+-1.2 s".
std::string FormatPrecision(int64_t ns) {
  char buf[48];
  if (ns >= 1'000'000'000) {
    std::snprintf(buf, sizeof buf, "+-%.2f s", static_cast<double>(ns) / 1e9);
  } else if (ns >= 1'000'000) {
    std::snprintf(buf, sizeof buf, "+-%.1f ms", static_cast<double>(ns) / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "+-%.0f us", std::max(1.0, static_cast<double>(ns) / 1e3));
  }
  return buf;
}

std::string FormatSeconds(int64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%+.3f s", static_cast<double>(ns) / 1e9);
  return buf;
}

// ns since the epoch -> "2026-11-28T03:14:07.123Z".
std::string FormatWall(int64_t ns) {
  if (ns < 0) return FormatSeconds(ns) + " from the epoch";
  const std::time_t t = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm tm{};
  if (!gmtime_r(&t, &tm)) return "?";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>((ns % 1'000'000'000) / 1'000'000));
  return buf;
}

int64_t KernelNs(double s) { return static_cast<int64_t>(std::llround(s * 1e9)); }

std::string DomainOf(const std::string& node, const std::string& file) {
  return node.empty() ? "file:" + file : node;
}

// The wall - kernel offset of one domain from its clock samples (see the header).
void EstimateOffset(const std::vector<const ClockSample*>& samples, ClockDomain* d) {
  d->samples = static_cast<int>(samples.size());
  if (samples.empty()) return;
  int64_t lo = INT64_MIN, hi = INT64_MAX, max_res = 0;
  std::vector<int64_t> mids;
  for (const ClockSample* c : samples) {
    // The kernel stamp's own microsecond adds to the wall stamp's resolution.
    const int64_t res = std::max<int64_t>(c->wall_res_ns, 1000) + 1000;
    const int64_t base = c->wall_ns - KernelNs(c->kernel_s);
    lo = std::max(lo, base);
    hi = std::min(hi, base + res);
    max_res = std::max(max_res, res);
    mids.push_back(base + res / 2);
  }
  if (lo <= hi) {
    d->offset_ns = lo + (hi - lo) / 2;
    d->precision_ns = std::max<int64_t>((hi - lo) / 2, 500);
    return;
  }
  d->consistent = false;
  std::sort(mids.begin(), mids.end());
  d->offset_ns = mids[mids.size() / 2];
  d->precision_ns = (mids.back() - mids.front()) / 2 + max_res / 2;
}

}  // namespace faultline::runner::incident_internal
