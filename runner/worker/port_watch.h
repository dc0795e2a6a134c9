// PortWatch: whether this rank's own rail ports went down during the fault now going on, from
// the kernel's view of them (base/link_watch.h, in the rank's namespace). The policies that
// shrink use it to tell which end of a single down pair is at fault.
//
// With no fault on, each look notes every port's carrier transitions so far; during a fault,
// a port that is not running, is gone, or whose carrier changed since (it went down, even if
// it is back by this look) sets own_port_down() until the fault is over. Where the ports
// cannot be read at all, nothing is ever set.
//
// Not thread-safe: one per rank's main thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/link_watch.h"
#include "base/status.h"

namespace faultline::runner {

// Where a PortWatch reads ports: the kernel (LinkWatch) or a test's fake.
class PortSource {
 public:
  virtual ~PortSource() = default;
  // The named port's state now; an error when it is gone or cannot be read.
  virtual Result<PortState> Get(const std::string& name) = 0;
};

class PortWatch final {
 public:
  // Opens the source on first use (nullptr or an error: the watch is off for good, said once
  // to stderr); `interfaces` lists the rank's rail ports on first use.
  using SourceFactory = std::function<Result<std::unique_ptr<PortSource>>()>;
  using InterfaceLister = std::function<std::vector<std::string>()>;
  PortWatch(int rank, SourceFactory factory, InterfaceLister interfaces)
      : rank_(rank), factory_(std::move(factory)), interfaces_(std::move(interfaces)) {}
  PortWatch(const PortWatch&) = delete;
  PortWatch& operator=(const PortWatch&) = delete;

  // The kernel's ports of `rails` (IPv4 addresses or interface names; a rail found nowhere is
  // left out), read over rtnetlink.
  static PortWatch ForRails(int rank, std::vector<std::string> rails);

  // One look, at a step boundary; `fault_on`: some path is down or a fault is news.
  void Look(bool fault_on);
  bool own_port_down() const { return own_port_down_; }
  // Every rail port of this rank is there and running now (a repaired host's ports are back).
  // false where the ports cannot be read (the watch is off).
  bool AllUp();
  bool off() const { return off_; }

 private:
  // Opens the source on first use; false when the watch is off.
  bool Open();

  int rank_;
  SourceFactory factory_;
  InterfaceLister interfaces_;
  std::unique_ptr<PortSource> source_;
  bool off_ = false;
  std::vector<std::string> names_;
  std::vector<uint32_t> changes_;  // carrier transitions at the last look without a fault
  bool own_port_down_ = false;
};

}  // namespace faultline::runner
