// Connections set up again after a failure, through the backend (transport/backend.h): the
// higher rank of a pair dials, the lower one takes the connection its listener accepted.
#include <sys/epoll.h>

#include <algorithm>

#include "log.h"
#include "transport/engine/engine.h"

namespace ftccl::transport::engine {
namespace {
// A reconnect attempt waits for its handshake at least this long, at most kConnectTimeout.
constexpr auto kConnectFloor = std::chrono::milliseconds(200);
constexpr auto kConnectTimeout = std::chrono::seconds(1);
}  // namespace

void Engine::StartReconnect(int ci, Clock::time_point now) {
  Conn& c = conns_[ci];
  c.next_connect = now + options_.reconnect_interval;
  if (RailQuiet(c.rail)) return;  // a SYN out of a dead port: see SendPing
  wire::FrameHeader hello = wire::MakeHeader(wire::FrameType::kHello, comm_id_);
  hello.root = rank_;
  hello.tag = static_cast<uint32_t>(c.rail << 16 | c.channel);
  wire::Seal(&hello, nullptr);
  Status st = backend_->StartDial(ci, c.peer, c.rail, hello, now + ConnectTimeout(c));
  if (!st.ok()) LOG_DEBUG(tag_, "reconnecting %s: %s", Label(c).c_str(), st.ToString().c_str());
}

Clock::duration Engine::ConnectTimeout(const Conn& c) const {
  // A lost SYN or SYN-ACK (queued behind an ARP resolution after an outage, sent before a
  // switch port forwards) costs the kernel's initial retransmission timeout, 1 s. On a path
  // whose round trip is known, an attempt that has not completed in twice its suspicion
  // timeout is given up, and the next one sends a fresh SYN at once.
  return std::clamp<Clock::duration>(2 * SuspectTimeout(c), kConnectFloor, kConnectTimeout);
}

void Engine::OnSetupEvents() {
  for (SetupEvent& ev : backend_->Poll(Clock::now())) {
    switch (ev.kind) {
      case SetupEvent::Kind::kDialed:
        OnDialed(std::move(ev));
        break;
      case SetupEvent::Kind::kRefused: {
        // The peer's listener is gone: its process is.
        Conn& c = conns_[ev.slot];
        Peer& p = peers_[c.peer];
        bool any = false;
        for (int cj : p.conns) any |= conns_[cj].alive;
        c.reconnect = false;
        if (!any) PeerGone(c.peer, "rank " + std::to_string(c.peer) + " refuses connections");
        break;
      }
      case SetupEvent::Kind::kDialFailed:
        break;  // tried again at next_connect
      case SetupEvent::Kind::kHello:
        OnHello(std::move(ev));
        break;
    }
    if (stopping_) return;
  }
}

void Engine::OnDialed(SetupEvent ev) {
  Conn& c = conns_[ev.slot];
  if (c.alive || stopping_) return;  // replaced meanwhile (a connection the peer made)
  Install(ev.slot, std::move(ev.link), ev.conn_port);
}

void Engine::OnHello(SetupEvent ev) {
  const wire::FrameHeader& h = ev.hello;
  const int peer = h.root;
  const int rail = static_cast<int>(h.tag >> 16), channel = static_cast<int>(h.tag & 0xFFFF);
  int slot = -1;
  const bool valid = wire::HeaderValid(h) &&
                     h.type == static_cast<uint8_t>(wire::FrameType::kHello) &&
                     h.comm_id == comm_id_ && peer >= 0 && peer < size_ && peer != rank_ &&
                     !peers_[peer].gone;
  const bool relayed = valid && static_cast<uint32_t>(rail) == kRelayHelloRail && channel == 0;
  if (relayed) {
    // A rank that lost its rails, through a rank of its host (or, from this host, directly).
    slot = relay_slot_[peer];
    if (slot >= 0 && conns_[slot].alive && conns_[slot].relay_state.initiator && peer > rank_ &&
        OwnRailsLost()) {
      // Both ends opened one at once, each without rails: the lower rank's stays. A relay this
      // rank opened before its rails came back gives way: it may run over the rail the peer
      // just lost.
      slot = -2;
    }
  } else if (valid && peer > rank_ && rail == ev.rail) {
    for (int ci : peers_[peer].conns) {
      if (conns_[ci].rail == rail && conns_[ci].channel == channel && !conns_[ci].relay) slot = ci;
    }
  }
  if (slot < 0) {
    if (slot == -1) {
      LOG_WARN(tag_, "rejected a connection %s: not a hello of this communicator",
               ev.rail < 0 ? "from this host" : ("on rail " + std::to_string(ev.rail)).c_str());
    }
    return;
  }
  if (relayed) {
    // A relay from this host's service after this communicator failed or began to close.
    if (ev.rail < 0 && (stopping_ || (fail_handled_))) return;
    if (conns_[slot].alive)
      RelayFailed(slot, "replaced by a new relay from rank " + std::to_string(peer));
    if (fail_handled_) return;
    AcceptRelay(peer, std::move(ev.link), ev.rail < 0);
    return;
  }
  // The peer has given up on the old connection, whatever state this end believes it is in.
  if (conns_[slot].alive && conns_[slot].health.suspect) DropQuietly(slot);
  if (conns_[slot].alive)
    ConnFailed(slot, "replaced by a new connection from rank " + std::to_string(peer));
  if (fail_handled_) return;
  // A connection the peer reset (or replaces now) just before connecting afresh broke because
  // the peer chose to replace it, e.g. its socket backed off through an outage the peer saw
  // end: that is not a flap of the path. Its down is taken back for damping; the outage that
  // led to it counted where it was seen (the link, the silence). Counted, it held a path that
  // had already come back out of use for another hold-down (seen in about half the runs of
  // a 1.5 s port outage: this end took the path back on the old connection, the peer
  // redialled 30 ms later, and one rail's traffic went on the other for 225 ms more).
  Conn& c = conns_[slot];
  const auto now = Clock::now();
  if (c.failed_down_at != Clock::time_point{} && now - c.failed_down_at <= kConnectTimeout &&
      WithdrawDown(slot, c.failed_down_at)) {
    LOG_INFO(tag_,
             "%s: rank %d connected afresh; its reset of the old connection is not "
             "counted as a down",
             Label(c).c_str(), peer);
  }
  c.failed_down_at = {};
  backend_->CancelDial(slot);
  Install(slot, std::move(ev.link), ev.conn_port);
}

void Engine::Redial(int ci, const std::string& why) {
  Conn& c = conns_[ci];
  if (!c.alive || !backend_->redials() || c.relay || rank_ < c.peer || stopping_) return;
  if (RailQuiet(c.rail)) return;  // redialled once its link is up and settled
  LOG_INFO(tag_, "%s: connecting afresh (%s)", Label(c).c_str(), why.c_str());
  const auto now = Clock::now();
  c.last_dial = now;
  // Reset, not closed: the peer must read a broken path and wait for the connection started
  // here, not an orderly close, which it takes for this process ending and, on its last path
  // to this rank, fails the communicator before the new connection's hello is read (seen when
  // both rails went down and rail 0 came back first: 3 of 5 runs aborted).
  DropQuietly(ci, /*reset=*/true);
  c.reconnect = true;
  c.next_connect = now;
  StartReconnect(ci, now);
}

void Engine::Install(int ci, std::unique_ptr<Link> link, uint16_t conn_port) {
  Conn& c = conns_[ci];
  const auto now = Clock::now();
  epoll_event e{};
  e.events = EPOLLIN | EPOLLRDHUP;
  e.data.u64 = static_cast<uint64_t>(ci);
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, link->fd(), &e) != 0) return;
  c.conn_port = c.relay ? 0 : conn_port;
  c.link = std::move(link);
  c.alive = true;
  c.blocked = false;
  c.write_failed_at = {};
  c.half_closed = false;
  c.reconnect = false;
  c.rx.Reset();
  c.cur.reset();
  c.ctrl.clear();
  c.health.Restart(now);
  c.rate.Restart();
  c.failed_down_at = {};
  c.doubtful = false;
  c.down_notice_stuck = false;  // about the connection this one replaces
  // In use again once it answers a probe after its hold-down, like any path that came back.
  // Up since its down only then: a fresh connection replaced again before it answered (two
  // redials crossing as a link returns) is the same outage for damping.
  c.health.suspect = true;
  c.health.up_since_down = false;
  c.health.failback_pending = false;
  // Not a working path yet, and no sign of the peer's life (the kernel completes a handshake
  // for a stopped process): the abort timer runs on until the peer answers (Engine::heard).
  if (!c.relay) LOG_WARN(tag_, "%s re-established", Label(c).c_str());
  SendPing(ci, now);
  Kick(c.peer);
}

}  // namespace ftccl::transport::engine
