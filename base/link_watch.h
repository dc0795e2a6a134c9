// LinkWatch: the state of this network namespace's links as the kernel reports it now, read
// over one rtnetlink (NETLINK_ROUTE) socket with RTM_GETLINK. It is what a rank needs to know
// of its own ports (running, carrier transitions) without the injector's libnl wrappers.
//
// The socket is bound to the network namespace of the thread that opened it. Not
// thread-safe: one LinkWatch per thread. Move-only.
#pragma once

#include <cstdint>
#include <string>

#include "base/fd.h"
#include "base/status.h"

namespace faultline {

// One link's operational state.
struct PortState {
  bool running = false;  // IFF_RUNNING (operationally up)
  // IFLA_CARRIER_CHANGES: the carrier's transitions (up and down) since the device was made;
  // a port that went down and came back between two looks shows here. 0 when not reported.
  uint32_t carrier_changes = 0;
};

class LinkWatch final {
 public:
  // A NETLINK_ROUTE socket in the calling thread's namespace; the errno Status when the
  // kernel refuses one.
  static Result<LinkWatch> Open();
  LinkWatch(LinkWatch&&) noexcept = default;
  LinkWatch& operator=(LinkWatch&&) noexcept = default;
  LinkWatch(const LinkWatch&) = delete;
  LinkWatch& operator=(const LinkWatch&) = delete;

  // The state of the link named `name` now. NotFound when there is no such link; another
  // error when the kernel's answer could not be had or read.
  Result<PortState> Get(const std::string& name);

 private:
  explicit LinkWatch(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
  uint32_t seq_ = 0;
};

}  // namespace faultline
