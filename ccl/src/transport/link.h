// Link: the byte stream under one connection of the chunk protocol (engine/engine.h). Every
// backend brings its own: a TCP socket (tcp/link.h) or an RC queue pair (verbs/link.h). The
// protocol above it (frames, CRC, acknowledgements, resends, migration) is the same for every
// link; a link only moves bytes in order and says when its path is gone.
//
// The calls mirror the socket calls: Writev like sendmsg, Read like recv, both non-blocking
// with errno set on -1 (EAGAIN: try again after the link reports ready; anything else: the
// link is down). fd() is what the progress thread registers with epoll; when epoll reports it,
// Ready() does the link's own housekeeping and says which of EPOLLIN/EPOLLOUT the connection
// should act on.
//
// Thread-safety: none; a link belongs to the progress thread once the engine has started.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "ftccl/status.h"

namespace ftccl::transport {

class Link {
 public:
  virtual ~Link() = default;

  // A pollable descriptor, valid until Close().
  virtual int fd() const = 0;
  // Called when epoll reports fd(): returns the events the connection should act on (a subset
  // of EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLRDHUP); 0 when there is nothing to do.
  virtual uint32_t Ready(uint32_t events) = 0;
  // Accepts up to the sum of the iovecs; returns the bytes taken, or -1 with errno.
  virtual ssize_t Writev(const iovec* iov, int iovcnt) = 0;
  // Returns bytes read, 0 once the peer has shut its side down and everything before that was
  // read, or -1 with errno.
  virtual ssize_t Read(void* buf, size_t len) = 0;
  // Tells the peer that nothing more follows (its Read returns 0 after the data before it).
  virtual void ShutdownWrite() = 0;
  // The connection is given up: releases what the peer can see (a socket is closed, so the
  // peer's end fails too). State() still answers afterwards. Idempotent.
  virtual void Close() = 0;
  // Gives the connection up at once, whatever is still queued in it: the peer's end fails now
  // (a TCP reset) instead of after the queued bytes. Then as Close(). Idempotent.
  virtual void Reset() = 0;
  // Whether the link's own retransmissions are backing off: what it sent into an outage is
  // being retried at growing intervals (TCP's RTO backoff), so it stays silent for up to that
  // interval after its path has come back. False where the backend has no such state.
  virtual bool BackingOff() const = 0;
  // Whether what the link sent waits for its first retransmission: data unacknowledged and no
  // acknowledgement for many round trips (a segment lost in an outage that ended; TCP retries
  // it only after its retransmission timeout, 200 ms at least). Only acknowledged data counts,
  // as for AcknowledgedWithin. False where not known.
  virtual bool AwaitingRetransmission() { return false; }
  // Whether the peer's end of the link acknowledged more of what this end sent within the
  // last `window` (or holds all of it: nothing unacknowledged): the path delivers, however
  // slowly. Only new data acknowledged counts, not any segment from the peer (a peer that
  // still sends on a path whose other direction is dead refreshes TCP's "last ACK received"
  // without acknowledging anything). Called on every timer tick while the link has data
  // outstanding, since the moment of progress is known only to within two calls; progress
  // seen after a longer gap is not counted. False where not known.
  virtual bool AcknowledgedWithin(std::chrono::milliseconds window) {
    (void)window;
    return false;
  }
  // What the link's own transport shows of delivery, read now: the segments it holds
  // unacknowledged, the last reading that saw some of them acknowledged or none outstanding
  // (progress is dated only by readings: the engine reads every millisecond while it has data
  // on the link), and its round-trip estimate. Unlike the peer's acknowledgements of chunks,
  // these come from the peer's kernel, whether or not its process runs. Nothing where not
  // known (a verbs QP's acknowledgements are the NIC's). delivery_rate: the transport's latest
  // delivery-rate sample in bytes per second (0: none); one taken while the sender had too
  // little to send reads low, never high.
  struct TransportAcks {
    uint32_t unacked_segments = 0;
    std::chrono::steady_clock::time_point quiet_since{};
    std::chrono::microseconds rtt{0};
    std::chrono::microseconds rttvar{0};
    uint64_t delivery_rate = 0;
  };
  virtual std::optional<TransportAcks> ReadTransportAcks() { return std::nullopt; }

  // After Writev/Read failed with something other than EAGAIN: why, and whether the failure is
  // fatal for the communicator (not a path failure that another path can absorb).
  virtual std::string error_text() const = 0;
  virtual bool fatal() const = 0;

  // Fault injection: puts the link into the error state a broken path would leave it in (for a
  // queue pair: IBV_QPS_ERR). The next Ready() reports it. Fails where the link cannot do so.
  virtual Status ForceError() = 0;
  // A short description of the link's state as the kernel reports it ("RTS", "ERR", "open",
  // "closed").
  virtual std::string State() const = 0;
};

}  // namespace ftccl::transport
