// RailSampler: samples the kernel byte counters of every rail port during a run, for any CCL
// (DESIGN.md, "Metrics"), into a RailSeries (runner/core/rails.h) that becomes rails.csv and
// per_fault[].rails.
//
// One background thread at normal priority (SCHED_OTHER whatever its creator's policy: the
// timeline thread and the fault agent, at realtime priority, are never delayed by it). At start the
// thread enters each port's namespace in turn (setns on itself) and opens one NETLINK_ROUTE socket
// there, which stays bound to that namespace; then, every `period_ns` on CLOCK_MONOTONIC from
// `start_at_ns`, it sends one RTM_GETLINK dump per namespace and reads IFLA_STATS64 (the 64-bit
// rtnl_link_stats64: tx_bytes, rx_bytes) of the ports by name. This is rtnetlink parsed in place,
// not libnl's object cache: a sample costs no allocation (a receive buffer and the series are
// allocated up front; the series grows only past its reserved length). Counters are the port's own
// view: tx = bytes the host (or the rank's NIC) sent out of that port.
//
// Where an RDMA device backs a port (RailSamplerPort::rdma), its port counters
// `<sysfs_root>/<dev>/ports/<p>/counters/port_xmit_data` and `port_rcv_data` (4-byte units)
// are read too, through files opened once and re-read with pread. The namespace topology of
// `faultline run` backs no rail with an RDMA device (it builds veth pairs; soft-RoCE devices
// exist only inside the RDMA lab's guest, tests/rdma-lab, which runs gtests and `faultline
// inject`, not `faultline run`), so there the RDMA columns are absent and the report says so.
//
// Failures are values: a namespace whose socket cannot be opened, a dump that fails or a port
// missing from a dump (deleted) leave that sample's counters invalid and are counted in
// errors(), never fatal and never a made-up number.
//
// Thread-safety: Start, Stop, series and errors from one thread; series and errors only after
// Stop. Stop is idempotent and the destructor stops.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "runner/core/rails.h"

namespace faultline::runner {

struct RdmaPortRef {
  std::string device;  // e.g. "rxe0"
  int port = 1;
};

struct RailSamplerPort {
  RailPort port;
  std::string netns;  // the namespace holding `dev`; empty: the runner's own
  std::string dev;    // the port's netdev in that namespace
  std::optional<RdmaPortRef> rdma;
};

struct RailSamplerOptions {
  int64_t period_ns = 20'000'000;
  int64_t start_at_ns = 0;     // first sample (CLOCK_MONOTONIC); 0: at once
  size_t reserve_samples = 0;  // samples to allocate up front (e.g. the run's length / period)
  std::string sysfs_root = "/sys/class/infiniband";
};

class RailSampler final {
 public:
  // Starts the thread; returns once it has opened its sockets (their errors are in errors()).
  // InvalidArgument for no port or a period under 1 ms.
  static Result<std::unique_ptr<RailSampler>> Start(std::vector<RailSamplerPort> ports,
                                                    RailSamplerOptions options);
  RailSampler(const RailSampler&) = delete;
  RailSampler& operator=(const RailSampler&) = delete;
  ~RailSampler();

  // Takes one last sample, stops the thread and joins it. Idempotent.
  void Stop();

  // REQUIRES: Stop() was called.
  const RailSeries& series() const { return series_; }
  // What failed, each kind once with its count ("dump in fl-x-h0: ...: 3 samples").
  std::vector<std::string> errors() const;
  // Samples left out (all counters invalid) because reading them took longer than 2 ms after
  // their time was taken: the thread was not scheduled, so the time would not stand for the
  // counters. Not an error; a loaded machine has a few.
  size_t late_samples() const { return late_samples_; }

 private:
  struct Namespace;
  RailSampler(std::vector<RailSamplerPort> ports, RailSamplerOptions options);
  void Open();
  void Loop();
  // One sample for grid tick `tick` (start_at_ns + tick * period_ns), taken now.
  void SampleOnce(int64_t tick);
  void Note(const std::string& what);

  std::vector<RailSamplerPort> ports_;
  RailSamplerOptions options_;
  std::vector<std::unique_ptr<Namespace>> namespaces_;
  std::vector<int> rdma_fds_[2];  // per port: xmit, rcv; -1 where none
  std::vector<char> buf_;
  RailSeries series_;
  std::vector<std::pair<std::string, int>> error_counts_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  bool stopped_ = false;
  bool has_rdma_ = false;
  size_t late_samples_ = 0;
};

}  // namespace faultline::runner
