// Backend: what the chunk engine needs of a transport besides its byte streams (link.h): the
// backend's name, and its connection setup after the initial mesh (NCCL's net plugin splits
// the same way: listen/connect/accept belong to the network, isend/irecv/test ride on it).
//
// The engine decides *when* a connection is set up again (a broken TCP connection, a silent
// path redialled, a relay through a neighbour); the backend does *how*. Setup work in flight
// (dials, accepted sockets waiting for their hello, relays arriving from this host's ranks)
// lives behind one pollable descriptor, setup_fd(), which the engine watches with its own
// epoll; Poll() then hands over what completed.
//
// The initial mesh is set up by the factory (factory.h) before the engine exists.
//
// Thread-safety: called from the progress thread only, except ServeRelays' callbacks, which
// the backend may call from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "ftccl/communicator.h"
#include "ftccl/status.h"
#include "transport/link.h"
#include "wire.h"

namespace ftccl::transport {

// Something the backend's setup finished.
struct SetupEvent {
  enum class Kind {
    kDialed,     // a dial of `slot` connected and sent its hello: `link` carries the connection
    kDialFailed, // a dial of `slot` failed or timed out (try again later)
    kRefused,    // a dial of `slot` was refused: the peer's process is gone
    kHello,      // an incoming connection presented `hello`: `link` is it, `rail` its listener's
                 // rail (-1: a Unix socket from a rank of this host)
  };
  Kind kind = Kind::kDialFailed;
  int slot = -1;
  int rail = -1;
  wire::FrameHeader hello{};
  std::unique_ptr<Link> link;
  uint16_t conn_port = 0;  // the connecting end's TCP port (names the connection); 0: none
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "tcp" or "verbs": the transport's name (fault hook, errors).
  virtual const char* name() const = 0;
  // The subsystem prefix of its log lines: "NET/TCP", "NET/IB".
  virtual const char* log_tag() const = 0;
  // Whether a broken connection is set up again (tcp: the higher rank of the pair dials; a
  // silent one is redialled) or its path stays down (verbs: a failed QP is not recreated).
  virtual bool redials() const = 0;
  // Whether the peer's end of a failed link may stay up until it sends into it, so the engine
  // must tell the peer over another path (verbs).
  virtual bool announces_failures() const = 0;
  // Whether this backend relays through a rank of the same host (a byte stream over sockets).
  virtual bool relays() const = 0;
  // Whether its links are RDMA queue pairs (the qp_error fault applies, QP states are read).
  virtual bool queue_pairs() const = 0;

  // The descriptor to watch for setup work (-1: none). When it is readable, call Poll.
  virtual int setup_fd() const = 0;
  // Progress on setup work: what completed since the last call, including dials and hellos
  // that timed out by `now`. Never blocks.
  virtual std::vector<SetupEvent> Poll(Clock::time_point now) = 0;

  // Redials (REQUIRES: redials()). Starts connecting `slot` (an engine connection id) from this
  // rank's `rail` to `peer`'s listener on it, sending `hello` once connected; gives up at
  // `deadline`. Fails at once when no attempt could be started.
  virtual Status StartDial(int slot, int peer, int rail, const wire::FrameHeader& hello,
                           Clock::time_point deadline) = 0;
  // Abandons a dial of `slot` in flight (no event follows). No-op without one.
  virtual void CancelDial(int slot) = 0;
  virtual bool dialing(int slot) const = 0;

  // Intra-host relay (REQUIRES: relays()).
  struct RelayHooks {
    std::function<bool(int rail)> rail_up;  // any thread: whether this rank's rail is up
  };
  // Serves relays for this host's other ranks; relays meant for this rank arrive as kHello
  // setup events with rail -1.
  virtual Status ServeRelays(RelayHooks hooks) = 0;
  // Opens a relay to `dst` through rank `via` of this host (via == dst: straight to it over a
  // socket of this host), sending `hello` first. Returns the connection's link.
  virtual Result<std::unique_ptr<Link>> DialRelay(int via, int dst,
                                                  const wire::FrameHeader& hello) = 0;
  // Stops serving relays; sessions of other ranks get `grace` to finish. Idempotent.
  virtual void StopRelays(std::chrono::milliseconds grace) = 0;
  virtual uint64_t relay_bytes_forwarded() const = 0;
};

}  // namespace ftccl::transport
