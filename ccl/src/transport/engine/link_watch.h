// LinkWatch: the link state of this rank's rails, from rtnetlink (RTNLGRP_LINK). A rail is up
// while its interface (the one holding the rail address) is IFF_UP and IFF_RUNNING. The same
// for every backend: a RoCE port is a netdev too.
//
// Thread-safety: none (the progress thread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "ftccl/status.h"
#include "net.h"

namespace ftccl::transport::engine {

class LinkWatch final {
 public:
  // Called per report about a rail's interface (a report may repeat the state it had);
  // returning false stops the reading.
  using OnChange = std::function<bool(int rail, bool up)>;
  enum class ReadResult { kDone, kOverrun, kStopped };

  // Subscribes first, then reads the state of every rail: a transition in between is then both
  // in the state read and in a notification, never in neither. A rail whose address is on no
  // interface is reported up and never changes.
  static Result<std::unique_ptr<LinkWatch>> Open(const std::vector<uint32_t>& rail_ips);
  LinkWatch(const LinkWatch&) = delete;
  LinkWatch& operator=(const LinkWatch&) = delete;

  int fd() const { return fd_.get(); }
  // The state read at Open, by rail.
  const std::vector<bool>& initial() const { return initial_; }
  // Reads the pending notifications until none is left. kOverrun: the kernel dropped
  // notifications (the socket's buffer overran), so transitions were lost: call Resync.
  ReadResult Read(const OnChange& on_change);
  // Reads every rail's state afresh (SIOCGIFFLAGS; a vanished interface is down) and reports
  // each. Returns false when on_change stopped it.
  bool Resync(const OnChange& on_change);

 private:
  LinkWatch() = default;
  net::Fd fd_;
  std::vector<int> ifindex_;  // by rail; 0 when unknown
  std::vector<bool> initial_;
};

}  // namespace ftccl::transport::engine
