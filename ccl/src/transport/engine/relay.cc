// The intra-host relay path (see ccl/README.md, "Intra-host relay"): when every rail of this
// rank is down, its traffic to a peer goes through a rank of the same host, over a stream the
// backend opens (tcp/relay.h). The chunk protocol runs end to end over it.

#include "log.h"
#include "transport/engine/engine.h"

namespace ftccl::transport::engine {
namespace {
// A relay that is no longer needed is closed once its data is acknowledged, or after this.
constexpr auto kRelayDrain = std::chrono::milliseconds(500);
}  // namespace

bool Engine::OwnRailsLost() const {
  // Only the link state says that a rail is gone for every peer (a NIC or its ports down); a
  // silent path could as well be the peer's or the fabric's.
  if (!link_watch_ || rail_up_.empty()) return false;
  for (bool up : rail_up_) {
    if (up) return false;
  }
  return true;
}

void Engine::CheckRelay(int peer, Clock::time_point now) {
  const int ci = relay_slot_.empty() ? -1 : relay_slot_[peer];
  if (ci < 0) return;
  Conn& c = conns_[ci];
  Peer& p = peers_[peer];
  bool direct = false;
  for (int cj : p.conns) {
    direct |= !conns_[cj].relay && conns_[cj].alive && !conns_[cj].health.suspect;
  }
  if (c.alive && !c.relay_state.initiator && hosts_[peer] != hosts_[rank_] && !direct &&
      OwnRailsLost()) {
    // A relay that a rank of another host opened reaches this rank over one of this rank's own
    // rails (the peer's neighbour dialled its listener): with every one of them down it carries
    // nothing more, and only this rank can open a path around them, through its own host.
    RelayFailed(ci, "every rail of this rank is down, the one it came in on too");
    c.next_connect = now;
  }
  if (!c.alive) {
    const bool reachable = hosts_[peer] == hosts_[rank_] || !neighbours_.empty();
    if (!direct && reachable && !p.gone && !p.closing && now >= c.next_connect && OwnRailsLost()) {
      StartRelay(ci, now);
    }
    return;
  }
  RelayState& rs = c.relay_state;
  if (!rs.initiator) return;  // the peer closes what it opened
  if (!direct || OwnRailsLost()) {
    rs.drain_since = {};
    return;
  }
  // A rail of this rank works again and the peer answers on it: the relay gets no new data
  // (PullData) and closes once what it carries is acknowledged.
  if (rs.drain_since == Clock::time_point{}) rs.drain_since = now;
  if (c.rate.outstanding() == 0 || now - rs.drain_since >= kRelayDrain) {
    CloseRelay(ci, "a direct path to rank " + std::to_string(peer) + " works again");
  }
}

void Engine::StartRelay(int ci, Clock::time_point now) {
  Conn& c = conns_[ci];
  RelayState& rs = c.relay_state;
  c.next_connect = now + options_.reconnect_interval;
  int via = c.peer;
  if (hosts_[c.peer] != hosts_[rank_]) {
    // Through the host's other ranks in turn: one whose rails are gone too refuses, and the
    // next attempt goes to the next one.
    via = neighbours_[rs.pick++ % neighbours_.size()];
    if (via == c.peer) via = neighbours_[rs.pick++ % neighbours_.size()];
  }
  wire::FrameHeader hello = wire::MakeHeader(wire::FrameType::kHello, comm_id_);
  hello.root = rank_;
  hello.tag = kRelayHelloRail << 16;
  wire::Seal(&hello, nullptr);
  auto link = backend_->DialRelay(via, c.peer, hello);
  if (!link.ok()) {
    LOG_DEBUG(tag_, "relay to rank %d through rank %d: %s", c.peer, via,
              link.status().ToString().c_str());
    return;
  }
  Install(ci, std::move(link.value()), 0);
  rs.initiator = true;
  rs.on = false;
  rs.via = via;
  rs.drain_since = {};
  rs.reason = "every rail of this rank is down";
  LOG_WARN(tag_, "every rail of this rank is down: relaying to rank %d %s", c.peer,
           via == c.peer ? "over a Unix socket on this host"
                         : ("through rank " + std::to_string(via)).c_str());
}

void Engine::AcceptRelay(int peer, std::unique_ptr<Link> link, bool same_host) {
  const int slot = relay_slot_[peer];
  Install(slot, std::move(link), 0);
  Conn& c = conns_[slot];
  c.relay_state.initiator = false;
  c.relay_state.on = false;
  c.relay_state.reason = "rank " + std::to_string(peer) + " lost its own rails";
  LOG_WARN(tag_, "rank %d relays to this rank (%s): its rails are down", peer,
           same_host ? "over a Unix socket on this host" : "through a rank of its host");
  // The relay says the peer's own rails are down: stop sending into them now rather than
  // after their timeout.
  const auto now = Clock::now();
  for (int cj : peers_[peer].conns) {
    if (!conns_[cj].relay && conns_[cj].alive && !conns_[cj].health.suspect) {
      MarkDown(cj, now, "rank " + std::to_string(peer) + " relays: its rails are down");
    }
  }
}

void Engine::RelayWorks(int ci) {
  Conn& c = conns_[ci];
  RelayState& rs = c.relay_state;
  if (rs.on) return;
  rs.on = true;
  const std::string via =
      rs.initiator ? (rs.via == c.peer ? std::string("over a Unix socket on this host")
                                       : "through rank " + std::to_string(rs.via))
                   : std::string("relayed by rank ") + std::to_string(c.peer) + "'s host";
  LOG_WARN(tag_, "%s works: traffic to rank %d goes %s", Label(c).c_str(), c.peer, via.c_str());
  Emit(EventKind::kRelayOn, c.peer, c.rail, c.channel,
       rs.reason.empty() ? via : rs.reason + ": " + via);
}

void Engine::CloseRelay(int ci, const std::string& why) {
  Conn& c = conns_[ci];
  // Orderly: the peer reads everything sent so far, then the end of the stream.
  if (!c.cur && c.ctrl.empty()) c.link->ShutdownWrite();
  RelayFailed(ci, why);
}

void Engine::RelayFailed(int ci, const std::string& reason) {
  Conn& c = conns_[ci];
  Peer& p = peers_[c.peer];
  c.relay_state.drain_since = {};
  const size_t moved = DropQuietly(ci);
  if (stopping_) return;
  const bool was_on = c.relay_state.on;
  c.relay_state.on = false;
  c.next_connect = Clock::now() + options_.reconnect_interval;
  if (was_on) {
    LOG_WARN(tag_, "relay to rank %d ends (%s): %zu chunks go back to the direct paths", c.peer,
             reason.c_str(), moved);
    Emit(EventKind::kRelayOff, c.peer, c.rail, c.channel, reason);
  } else {
    LOG_DEBUG(tag_, "relay to rank %d failed before it worked (%s)", c.peer, reason.c_str());
  }
  if (moved > 0) p.resume_pending = true;
  p.ack_dirty = true;
  // Whether the peer is still reachable is the abort timeout's call (no working path), not
  // the relay's: its end may simply have been closed because a direct path works again.
  Kick(c.peer);
}

}  // namespace ftccl::transport::engine
