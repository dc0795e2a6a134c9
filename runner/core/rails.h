// Per-rail-port throughput from kernel counters (DESIGN.md, "Metrics"): the counter series a
// sampler records during a run (runner/exec/rail_sampler.h), the rates of `rails.csv` and the
// per-fault windows of report.json (`per_fault[].rails`). Library-neutral: the numbers come
// from the kernel's byte counters of each rail port, not from the CCL. Pure; thread-compatible.
//
// Direction is the port's own (the host's or the rank's NIC's): tx = bytes sent out of it.
// A rate is taken over the interval between two consecutive samples (of that port's own times,
// RailSeries::T). A counter that went
// backwards was reset (the device was re-created, or a driver cleared it): that interval has
// no rate (an empty cell / excluded from windows), never a made-up one. Counters narrower than
// 64 bits (RailSeries::counter_bits) wrap instead: a decrease is read modulo 2^bits.
//
// Windows (`RailWindows`), per fault, clipped to [baseline_from_ns, window_end_ns]:
//   before: baseline_from_ns (the run start + the warm-up) -> the first applied fault;
//   during: the fault applied -> reverted (or the window end);
//   after:  reverted + after_delay_ns (1 s) -> the next fault applied after this one, or the
//           window end.
// A window's rate is the bytes of the sample intervals lying entirely inside it over their
// summed duration; an interval straddling an edge is left out. A window with no such interval
// (fewer than two samples inside) is null. `gbps` = max(tx, rx): the busier direction, which
// is comparable with the rail's capacity (a full-duplex port carries rail_gbps each way);
// tx_gbps and rx_gbps are reported beside it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "reports/run_data.h"
#include "runner/core/history.h"

namespace faultline::runner {

// One rail port: host h's port on rail r, or with per-rank NICs local rank l's.
struct RailPort {
  int host = 0;
  int rail = 0;
  std::optional<int> rank;  // set with per-rank NICs
  bool rdma = false;        // an RDMA device backs the port: RDMA counters are recorded too
  // Column prefix: "h<h>_r<r>" or "h<h>_n<l>_r<r>".
  std::string Prefix() const;
};

// Byte counters of one port at one sample; `valid` false when the read failed.
struct RailCounters {
  uint64_t tx_bytes = 0;
  uint64_t rx_bytes = 0;
  bool valid = false;
};

// Samples in time order; counters of sample i and port p at [i * ports.size() + p].
struct RailSeries {
  std::vector<RailPort> ports;
  std::vector<int64_t> t_ns;       // CLOCK_MONOTONIC sample times
  // The grid tick each sample was taken for (the sampler's start + tick * period), increasing;
  // empty where not known. A sample the scheduler woke late is still its tick's: its time in
  // t_ns says how late.
  std::vector<int64_t> tick;
  std::vector<RailCounters> net;   // interface counters (rtnetlink stats64)
  std::vector<RailCounters> rdma;  // RDMA port counters in bytes; empty when no port has one
  int counter_bits = 64;           // width of the counters (wrap modulo 2^bits below 64)
  // Where the ports were sampled at different times (hosts merged by MergeRailSeries): each
  // port's own time of sample i at [i * ports.size() + p]; empty: every port at t_ns[i].
  std::vector<int64_t> port_t_ns;

  size_t samples() const { return t_ns.size(); }
  int64_t T(size_t i, size_t p) const {
    return port_t_ns.empty() ? t_ns[i] : port_t_ns[i * ports.size() + p];
  }
  const RailCounters& Net(size_t i, size_t p) const { return net[i * ports.size() + p]; }
  const RailCounters* Rdma(size_t i, size_t p) const {
    return rdma.empty() ? nullptr : &rdma[i * ports.size() + p];
  }
};

// The increase of a counter from `prev` to `cur` of width `bits` (1..64): nullopt when it went
// backwards on a 64-bit counter (a reset).
std::optional<uint64_t> CounterDelta(uint64_t prev, uint64_t cur, int bits);

// tx and rx Gbit/s of port p over the interval ending at sample i (i >= 1); nullopt when
// either sample is invalid, the time did not advance, or a counter was reset.
struct RailRate {
  double tx_gbps = 0;
  double rx_gbps = 0;
};
std::optional<RailRate> RateAt(const RailSeries& s, const std::vector<RailCounters>& counters,
                               size_t i, size_t p);

// The rates as rails.csv holds them (reports::RailsCsv writes the file): one row per sample
// after the first, t_s = (t_ns - t0_ns) / 1e9 at the interval's end; per port a tx and an rx
// column (and rdma tx and rx for ports with `rdma` when RDMA counters were sampled); nullopt
// where the interval has no rate.
reports::RailsTable RailsTableOf(const RailSeries& s, int64_t t0_ns);

struct RailWindowOptions {
  int64_t baseline_from_ns = 0;  // run start + warm-up
  int64_t window_end_ns = 0;     // WindowEndNs(history)
  int64_t after_delay_ns = 1'000'000'000;
};

struct RailWindowRate {
  std::optional<double> tx_gbps;
  std::optional<double> rx_gbps;
  std::optional<double> gbps() const;  // max(tx, rx); nullopt when either is
};

struct RailWindow {
  RailPort port;
  RailWindowRate before, during, after;
  // {host, rail, (rank), before_gbps, during_gbps, after_gbps, before_tx_gbps, ...}; null
  // where a window has no rate.
  nlohmann::json ToJson() const;
};

struct FaultRails {
  std::string fault_id;
  std::vector<RailWindow> rails;  // in the order of s.ports
};

// One entry per fault of `faults`, in order. A fault never applied has null during and after
// windows. Uses the interface counters (RDMA counters are in rails.csv only).
std::vector<FaultRails> RailWindows(const RailSeries& s, const std::vector<FaultRecord>& faults,
                                    const RailWindowOptions& options);

// Fleet runs: each host's agent samples its own ports (runner/exec/agent.h, `rails_start` /
// `rails_stop`) on its own clock and sends the series in this form:
//   {"ports": [{"host", "rail", "rank"?, "rdma"}], "counter_bits": 64, "t_ns": [...],
//    "tick": [...]?, "net": [[tx, rx] or null, ...], "rdma": [...]? }
// with `net` (and `rdma`, present when a port has an RDMA device) row by row: sample i, port p
// at [i * ports + p]; null where the read failed.
nlohmann::json RailSeriesToJson(const RailSeries& s);
// The inverse; nullopt with `*error` saying what is wrong for anything that is not such an
// object (wrong types, lengths that do not match, times that go backwards): a lying or broken
// agent costs its host's columns, never a made-up rate.
std::optional<RailSeries> RailSeriesFromJson(const nlohmann::json& j, std::string* error);

struct MergedRails {
  RailSeries series;
  int64_t max_spread_ns = 0;  // largest spread between the hosts' own times at one tick
  size_t unmatched = 0;       // samples on no tick (over half a period off, or a second one)
};

// One series from the hosts' series (disjoint ports, times already mapped to one clock), all
// sampled on the grid start_ns + k * period_ns. Each sample goes to the tick its sampler took it
// for (RailSeries::tick) unless it lies more than half a period before that tick (a sampler
// wakes late, never early; the slack is for clock-offset error), otherwise to its nearest tick
// when it is within half a period of it. A tick where some host has a sample becomes a row
// (`tick` names it) whose time is the mean of the matched samples' times, and no earlier than
// the row before it, with invalid counters for the hosts that have none there. The ports are
// the parts' in order, and each keeps its own host's sample times (port_t_ns): a rate is always
// over one host's own interval. REQUIRES: period_ns > 0.
MergedRails MergeRailSeries(const std::vector<RailSeries>& parts, int64_t start_ns,
                            int64_t period_ns);

}  // namespace faultline::runner
