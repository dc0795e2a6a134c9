// The chunk engine's send side: posting a send as chunks, dealing chunks over the paths by
// their windows, writing frames, acknowledgements and resends.
#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "log.h"
#include "transport/engine/engine.h"

namespace ftccl::transport::engine {
void Engine::PostSend(const OpPtr& op) {
  if (Dead(op->key.coll_seq)) {
    Complete(op, error());
    return;
  }
  Peer& p = peers_[op->peer];
  if (p.gone) {
    FailLocked(PeerLost("rank " + std::to_string(op->peer) + " is no longer connected"),
               op->key.coll_seq, op->peer);
    return;
  }
  const size_t chunk = op->chunk_bytes;
  size_t nchunks = op->len == 0 ? 1 : (op->len + chunk - 1) / chunk;
  op->chunks_left = nchunks;
  for (size_t i = 0; i < nchunks; ++i) {
    uint64_t seq = p.next_seq++;
    st_numbered_[op->peer] = p.next_seq;
    TxChunk c;
    c.op = op;
    c.offset = i * chunk;
    c.len = static_cast<uint32_t>(std::min(chunk, op->len - c.offset));
    c.hdr = wire::MakeHeader(wire::FrameType::kData, comm_id_);
    c.hdr.coll_kind = static_cast<uint8_t>(op->sig.kind);
    c.hdr.dtype = static_cast<uint8_t>(op->sig.dtype);
    c.hdr.redop = static_cast<uint8_t>(op->sig.op);
    c.hdr.root = op->sig.root;
    c.hdr.count = op->sig.count;
    c.hdr.coll_seq = op->key.coll_seq;
    c.hdr.tag = op->key.tag;
    c.hdr.chunk_seq = seq;
    c.hdr.offset = c.offset;
    c.hdr.msg_len = op->len;
    c.hdr.length = c.len;
    c.crc_pending = c.len && op->chunk_crc_pending[i];
    c.hdr.payload_crc = c.len && !c.crc_pending ? op->chunk_crcs[i] : 0;
    c.hdr.header_crc = wire::HeaderCrc(c.hdr);  // again when the payload's CRC is known
    c.in_ready = true;
    p.unacked.emplace(seq, std::move(c));
    p.ready.push_back(seq);
  }
  if (HedgesTo(op->peer)) hedge_watch_ = true;
  Kick(op->peer);
}

void Engine::Kick(int peer) {
  // Deal chunks round-robin over the writable connections, so that even small messages are
  // striped across rails; a connection that blocks drops out and the others take its share.
  bool progress = true;
  while (progress) {
    progress = false;
    for (int ci : peers_[peer].conns) {
      if (conns_[ci].alive && !conns_[ci].blocked && Flush(ci, 1) > 0) progress = true;
    }
  }
}

bool Engine::PullData(int ci) {
  Conn& c = conns_[ci];
  Peer& p = peers_[c.peer];
  if (c.rate.outstanding() >= c.rate.Window(options_.path_queue, options_.chunk_bytes)) {
    if (!p.ready.empty()) c.rate.MarkSaturated();
    return false;
  }
  if (c.health.suspect) {
    // A suspect path carries data only when the peer has no other path left.
    for (int cj : p.conns) {
      if (cj != ci && conns_[cj].alive && !conns_[cj].health.suspect) return false;
    }
  }
  if (c.doubtful) {
    // A path in doubt (DoubtSiblings) takes no new data while another one works.
    for (int cj : p.conns) {
      if (cj != ci && conns_[cj].alive && !conns_[cj].health.suspect && !conns_[cj].doubtful)
        return false;
    }
  }
  if (c.relay) {
    // A relay borrows a neighbour's rail: only while no direct path to the peer works.
    for (int cj : p.conns) {
      if (!conns_[cj].relay && conns_[cj].alive && !conns_[cj].health.suspect) return false;
    }
  }
  if (!p.ready.empty() && LeaveChunk(ci)) {
    // Leaving the chunk because its own backlog (two chunks or more) would deliver it late:
    // the path carries all it can, which is what lets its measured rate come down (a
    // throttled path's would not). One chunk may just wait for an acknowledgement held back.
    if (c.rate.outstanding() >= 2 * options_.chunk_bytes) c.rate.MarkSaturated();
    return false;
  }
  while (!p.ready.empty()) {
    uint64_t seq = p.ready.front();
    p.ready.pop_front();
    auto it = p.unacked.find(seq);
    if (it == p.unacked.end() || !it->second.in_ready) continue;
    const WireFaults& wf = options_.wire_faults;
    std::uniform_real_distribution<double> u(0, 1);
    if (wf.reorder > 0 && it->second.tx_count == 0 && u(rng_) < wf.reorder && !p.ready.empty()) {
      // Send the next chunk first; this one goes right after it.
      uint64_t next = p.ready.front();
      auto nit = p.unacked.find(next);
      if (nit != p.unacked.end() && nit->second.in_ready) {
        p.ready.pop_front();
        p.ready.push_front(seq);
        it = nit;
        seq = next;
      }
    }
    TxChunk& ch = it->second;
    if (ch.crc_pending) {
      // First hand-off: the CRC pass brings the bytes into the cache the kernel copies from.
      ch.hdr.payload_crc = Crc32c(ch.op->buf + ch.offset, ch.len);
      ch.hdr.header_crc = wire::HeaderCrc(ch.hdr);
      ch.crc_pending = false;
      st_tx_crc_bytes_.fetch_add(ch.len, std::memory_order_relaxed);
    }
    ch.in_ready = false;
    ch.conn = ci;
    if (std::find(ch.copies.begin(), ch.copies.end(), ci) == ch.copies.end()) {
      ch.copies.push_back(ci);
    }
    Count(ch, ci);
    if (c.health.failback_pending) {
      c.health.failback_pending = false;
      Emit(EventKind::kFailback, c.peer, c.rail, c.channel, "data flows on the path again");
    }
#ifdef FTCCL_PLANTED_RELAY_DROPS_LAST  // a planted bug (FTCCL_PLANTED_BUGS, tests only)
    // The last chunk of a message taken for a relay is counted as sent but never written.
    if (c.relay && ch.offset + ch.len >= ch.op->len) continue;
#endif
    LOG_DEBUG(tag_,
              "chunk %lu (collective #%lu, %u bytes) out on %s, copy %zu, %lu bytes "
              "outstanding there",
              static_cast<unsigned long>(seq), static_cast<unsigned long>(ch.hdr.coll_seq), ch.len,
              Label(c).c_str(), ch.copies.size(), static_cast<unsigned long>(c.rate.outstanding()));
    TxItem item;
    item.hdr = ch.hdr;
    item.payload = ch.op->buf + ch.offset;
    item.len = ch.len;
    item.is_data = true;
    item.seq = seq;
    ApplyWireFaults(ci, &item, ch);
    if (c.corrupt_next) DamageForHook(c, &item);
    c.cur = std::move(item);
    return true;
  }
  return false;
}

bool Engine::LeaveChunk(int ci) {
  Conn& c = conns_[ci];
  if (c.relay || c.health.suspect) return false;  // they carry only when nothing else can
  const Clock::time_point now = Clock::now();
  if (now < c.probe_until) {
    // A probe takes one chunk at a time (until SampleRates ends it): a path still slow then
    // costs its collective about a chunk's time, where a window's worth held every step of a
    // ring (measured: while a rail capped to 100 Mbps probed with its window, three 1 MiB
    // allreduces of 6 ms in a row took 55 to 65 ms, every second).
    return c.rate.outstanding() > 0;
  }
  std::vector<PathLoad>& others = leave_scratch_;  // reused: this runs at every chunk pulled
  others.clear();
  for (int cj : peers_[c.peer].conns) {
    const Conn& o = conns_[cj];
    // A path in doubt takes no new data (PullData): a chunk left to it would wait there.
    if (cj == ci || !o.alive || o.relay || o.health.suspect || o.doubtful) continue;
    others.push_back({o.rate.rate(), o.rate.outstanding()});
  }
  // left_since is cleared when the path's rate is measured again (SampleRates), not when it
  // takes a chunk: a path that leaves most chunks and takes one now and then carries too
  // little to be measured, and would otherwise never be probed (measured: a rail kept at 19 %
  // for 3 s after its fresh connection read low once).
  if (!LeaveToFaster({c.rate.rate(), c.rate.outstanding()}, others, options_.chunk_bytes)) {
    return false;
  }
  if (c.left_since == Clock::time_point{}) c.left_since = now;
  if (now - c.left_since < kProbeEvery) return true;
  c.left_since = {};
  c.probe_until = now + kProbeFor;
  c.rate.RestartPeriod(now);  // the probe's busy time is measured on its own
  return false;
}

void Engine::ApplyWireFaults(int ci, TxItem* item, TxChunk& ch) {
  // Simulated faults of the wire (CommOptions::wire_faults), on a chunk's first transmission.
  const WireFaults& wf = options_.wire_faults;
  if (ch.tx_count != 0) return;
  std::uniform_real_distribution<double> u(0, 1);
  Peer& p = peers_[conns_[ci].peer];
  if (wf.duplicate > 0 && u(rng_) < wf.duplicate) {
    // A second copy, owned, on another connection when there is one. It is a data frame like
    // the first: once written, the peer may acknowledge the chunk (sent_end must cover it).
    TxItem dup;
    dup.hdr = ch.hdr;
    dup.len = ch.len;
    dup.is_data = true;
    dup.seq = item->seq;
    dup.owned.reset(new uint8_t[ch.len + 1]);
    std::memcpy(dup.owned.get(), item->payload, ch.len);
    dup.payload = dup.owned.get();
    int other = ci;
    for (int cj : p.conns) {
      if (cj != ci && conns_[cj].alive) other = cj;
    }
    if (std::find(ch.copies.begin(), ch.copies.end(), other) == ch.copies.end()) {
      ch.copies.push_back(other);
    }
    conns_[other].ctrl.push_back(std::move(dup));
    if (other != ci && !conns_[other].blocked) Flush(other);
  }
  if (wf.corrupt > 0 && ch.len > 0 && u(rng_) < wf.corrupt) {
    item->owned.reset(new uint8_t[ch.len]);
    std::memcpy(item->owned.get(), item->payload, ch.len);
    item->owned[rng_() % ch.len] ^= 0x5A;
    item->payload = item->owned.get();
  }
}

size_t Engine::Flush(int ci, size_t max_new_chunks) {
  Conn& c = conns_[ci];
  size_t pulled = 0;
  while (c.alive && !c.blocked) {
    if (!c.cur) {
      if (!c.ctrl.empty()) {
        c.cur = std::move(c.ctrl.front());
        c.ctrl.pop_front();
        c.cur->sent = 0;
      } else if (pulled >= max_new_chunks || !PullData(ci)) {
        return pulled;
      } else {
        ++pulled;
      }
    }
    TxItem& it = *c.cur;
    iovec iov[2];
    int niov = 0;
    if (it.sent < kHdr) {
      iov[niov++] = {reinterpret_cast<uint8_t*>(&it.hdr) + it.sent, kHdr - it.sent};
      if (it.len > 0) iov[niov++] = {const_cast<uint8_t*>(it.payload), it.len};
    } else {
      size_t off = it.sent - kHdr;
      iov[niov++] = {const_cast<uint8_t*>(it.payload) + off, it.len - off};
    }
    ssize_t n = c.link->Writev(iov, niov);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        c.blocked = true;
        c.rate.MarkSaturated();
        WatchLink(ci, true);
        return pulled;
      }
      if ((errno == EPIPE || errno == ECONNRESET) && !c.relay) {
        // The peer's end is gone: closed after its last words, or reset. What it wrote before
        // (its last acknowledgement, its BYE) may wait unread in this socket, and failing the
        // connection now would throw it away: the chunks it acknowledged would wait for a
        // rank that has ended, until the job gives it up as lost. Nothing more is written
        // here; the read side, which epoll reports once the peer's end is gone, reads what is
        // left and ends the connection with what it finds (CheckTimers ends it otherwise).
        if (c.write_failed_at == Clock::time_point{}) {
          c.write_failed_at = Clock::now();
          c.write_error = c.link->error_text();
        }
        c.blocked = true;
        WatchLink(ci, false);
        return pulled;
      }
      ConnFailed(ci, c.link->error_text());
      return pulled;
    }
    it.sent += static_cast<size_t>(n);
    if (it.is_data && it.sent >= kHdr) {
      // The peer knows of the chunk once its header is out: it may ask for it again (a NACK
      // for a copy it lost, LoseRxCopy) before any copy is written in full.
      Peer& p = peers_[c.peer];
      p.sent_end = std::max(p.sent_end, it.seq + 1);
    }
    if (it.sent >= kHdr + it.len) {
      if (it.is_data) {
        Peer& p = peers_[c.peer];
        auto ch = p.unacked.find(it.seq);
        if (ch != p.unacked.end()) {
          ch->second.sent_at = Clock::now();
          ch->second.tx_count++;
        }
        st_frames_sent_++;
        st_rail_bytes_[c.rail] += it.len;
      }
      c.cur.reset();
    }
  }
  return pulled;
}

int Engine::PickConn(int peer) {
  Peer& p = peers_[peer];
  const size_t n = p.conns.size();
  for (size_t i = 0; i < n; ++i) {
    int ci = p.conns[(p.ack_rr + i) % n];
    if (conns_[ci].alive && !conns_[ci].blocked && !conns_[ci].health.suspect &&
        !conns_[ci].doubtful) {
      p.ack_rr = (p.ack_rr + i + 1) % n;
      return ci;
    }
  }
  for (int ci : p.conns) {
    if (conns_[ci].alive && !conns_[ci].health.suspect && !conns_[ci].doubtful) return ci;
  }
  for (int ci : p.conns) {
    if (conns_[ci].alive && !conns_[ci].health.suspect) return ci;
  }
  for (int ci : p.conns) {
    if (conns_[ci].alive) return ci;
  }
  return -1;
}

void Engine::EnqueueCtrl(int peer, TxItem item) {
  int ci = PickConn(peer);
  if (ci < 0) return;
  conns_[ci].ctrl.push_back(std::move(item));
  Flush(ci);
}

Engine::TxItem Engine::PathNotice(wire::FrameType type, const Conn& c) const {
  TxItem notice;
  notice.hdr = wire::MakeHeader(type, comm_id_);
  notice.hdr.tag = static_cast<uint32_t>(c.rail << 16 | c.channel);
  if (type == wire::FrameType::kPathDown) notice.hdr.offset = c.conn_port;
  wire::Seal(&notice.hdr, nullptr);
  return notice;
}

uint64_t Engine::AckValue(const Peer& p) const {
  return p.held.empty() ? p.cum : std::min(p.cum, p.held.begin()->first);
}

void Engine::SendAcks() {
  for (int peer = 0; peer < size_; ++peer) {
    Peer& p = peers_[peer];
    if (!p.ack_dirty) continue;
    p.ack_dirty = false;
    TxItem ack;
    ack.hdr = wire::MakeHeader(wire::FrameType::kAck, comm_id_);
    ack.hdr.chunk_seq = AckValue(p);
    ack.hdr.offset = p.cum;
    // Selective ranges of what arrived beyond the gap, so the sender resends only what is
    // missing and does not blame the paths that delivered.
    std::vector<uint64_t> ranges;
    for (auto it = p.above.begin();
         it != p.above.end() && ranges.size() < 2 * wire::kMaxSackRanges;) {
      uint64_t first = *it, end = first + 1;
      for (++it; it != p.above.end() && *it == end; ++it) ++end;
      ranges.push_back(first);
      ranges.push_back(end);
    }
    if (!ranges.empty()) {
      ack.len = static_cast<uint32_t>(ranges.size() * 8);
      ack.owned.reset(new uint8_t[ack.len]);
      std::memcpy(ack.owned.get(), ranges.data(), ack.len);
      ack.payload = ack.owned.get();
      ack.hdr.length = ack.len;
    }
    wire::Seal(&ack.hdr, ack.payload);
    st_acks_++;
    // The path that just delivered data works; a round-robin pick could hand the
    // acknowledgement to a path that is silently dropping everything.
    int ci = p.ack_conn >= 0 && conns_[p.ack_conn].alive && !conns_[p.ack_conn].health.suspect &&
                     !conns_[p.ack_conn].doubtful
                 ? p.ack_conn
                 : PickConn(peer);
    if (ci < 0) {
      p.ack_dirty = true;  // no connection right now: sent once one is back
      continue;
    }
    p.last_ack_conn = ci;
    conns_[ci].ctrl.push_back(std::move(ack));
    Flush(ci);
  }
}

void Engine::HandleNack(int peer, uint64_t seq) {
  Peer& p = peers_[peer];
  auto it = p.unacked.find(seq);
  if (it == p.unacked.end() || it->second.in_ready) return;
  st_retx_++;
  Requeue(p, {seq});
  Kick(peer);
}

void Engine::SendNack(int peer, uint64_t seq) {
  TxItem nack;
  nack.hdr = wire::MakeHeader(wire::FrameType::kNack, comm_id_);
  nack.hdr.chunk_seq = seq;
  wire::Seal(&nack.hdr, nullptr);
  st_nacks_++;
  EnqueueCtrl(peer, std::move(nack));
}

void Engine::DetachInflight(int peer, uint64_t seq) {
  // A chunk being written when it is acknowledged (a resent copy) must not keep pointing
  // into a buffer the user gets back: copy what is left of it.
  for (int ci : peers_[peer].conns) {
    Conn& c = conns_[ci];
    if (!c.cur || !c.cur->is_data || c.cur->seq != seq || c.cur->owned) continue;
    c.cur->owned.reset(new uint8_t[c.cur->len + 1]);
    std::memcpy(c.cur->owned.get(), c.cur->payload, c.cur->len);
    c.cur->payload = c.cur->owned.get();
  }
}

void Engine::Requeue(Peer& p, std::vector<uint64_t> seqs) {
  std::sort(seqs.begin(), seqs.end());
  for (auto it = seqs.rbegin(); it != seqs.rend(); ++it) {
    auto ch = p.unacked.find(*it);
    if (ch == p.unacked.end() || ch->second.in_ready) continue;
    ch->second.in_ready = true;
    Count(ch->second, -1);
    ch->second.conn = -1;
    p.ready.push_front(*it);
  }
}

void Engine::Count(TxChunk& ch, int ci) {
  if (ch.counted == ci) return;
  const auto now = Clock::now();
  if (ch.counted >= 0) conns_[ch.counted].rate.Remove(ch.len, now);
  ch.counted = ci;
  if (ci >= 0) conns_[ci].rate.Add(ch.len, now);
}

bool Engine::CutSlowPaths(int peer, Clock::time_point now) {
  // A path that delivers at a fraction of its rate while a sibling keeps its own (its rail
  // throttled under it) is measured at once, not at the end of its sampling period: until
  // then its window, set at the old rate, takes a full share of every collective, and each
  // waits on it (measured: a 1 Gbps rail capped to 100 Mbps held 1 MiB allreduces of 6 ms at
  // 43 ms for 330 ms). The sibling tells a slow path from a slow peer: a peer late to its
  // collective holds back every path's acknowledgements alike. What the path holds then
  // would take it longer than a sibling needs for it and its own: copied, as a hedge is.
  Peer& p = peers_[peer];
  const uint64_t chunk = options_.chunk_bytes;
  auto in_use = [&](const Conn& c) {
    return c.alive && !c.relay && !c.health.suspect && c.rate.rate() > 0;
  };
  bool updated = false;
  for (int ci : p.conns) {
    Conn& c = conns_[ci];
    if (!in_use(c)) continue;
    const PathRate::Running mine = c.rate.Current(now);
    if (mine.busy_s < kCutBusy || mine.rate * kCutRatio >= c.rate.rate()) continue;
    int witness = -1;
    for (int cj : p.conns) {
      const Conn& o = conns_[cj];
      if (cj == ci || !in_use(o) || o.doubtful) continue;
      const PathRate::Running theirs = o.rate.Current(now);
      if (theirs.busy_s > 0 &&
          (theirs.busy_s * 2 <= mine.busy_s || theirs.rate * 2 >= o.rate.rate())) {
        if (witness < 0 || o.rate.rate() > conns_[witness].rate.rate()) witness = cj;
      }
    }
    if (witness < 0) continue;
    // The transport tells a slow path from a slow reader: a peer that stopped reading this
    // socket (its progress thread late, or holding the acknowledgements of a collective it
    // has not begun) leaves the transport's last delivery sample where the path put it
    // (fault-free, 64 MiB allreduces on 1 Gbps rails: 7 windows of 20 ms in 12 s that the
    // chunks read at 0 to 300 Mbps; 2 left with this test). Its samples are not the measure:
    // fault-free, on this 2-core machine, they read a quarter of the line for tens of
    // milliseconds at times, when the chunks did too.
    const double before = c.rate.rate();
    const auto t = c.link ? c.link->ReadTransportAcks() : std::nullopt;
    if (t && static_cast<double>(t->delivery_rate) * 2 >= before) continue;
    c.rate.CloseEarly(now, chunk);
    c.left_since = {};
    updated = true;
    const Conn& w = conns_[witness];
    const double drain_s = static_cast<double>(c.rate.outstanding()) / std::max(mine.rate, 1.0);
    const double elsewhere_s =
        static_cast<double>(c.rate.outstanding() + w.rate.outstanding()) / w.rate.rate();
    LOG_INFO(tag_,
             "%s: delivered %.0f Mbps over %.1f ms of busy time (transport: %.0f Mbps) against "
             "a rate of %.0f Mbps (rail %d: %.0f Mbps): rate now %.0f Mbps",
             Label(c).c_str(), mine.rate * 8 / 1e6, mine.busy_s * 1e3,
             t ? static_cast<double>(t->delivery_rate) * 8 / 1e6 : -1.0, before * 8 / 1e6, w.rail,
             w.rate.rate() * 8 / 1e6, c.rate.rate() * 8 / 1e6);
    if (!c.doubtful && drain_s > 2 * elsewhere_s) {
      char why[160];
      std::snprintf(why, sizeof why,
                    "its %lu bytes outstanding would take %.1f ms at %.0f Mbps, rail %d's %.1f ms",
                    static_cast<unsigned long>(c.rate.outstanding()), drain_s * 1e3,
                    mine.rate * 8 / 1e6, w.rail, elsewhere_s * 1e3);
      Hedge(ci, now, why, /*siblings=*/false);
      if (failed_) return updated;
    }
  }
  return updated;
}

void Engine::SampleRates(int peer, Clock::time_point now) {
  Peer& p = peers_[peer];
  // Not to ranks of the same host: their paths all go through the kernel's loopback, whatever
  // rail they name (HedgesTo), so no rail of theirs is slower than another.
  bool updated = options_.hedge_floor.count() > 0 && HedgesTo(peer) && CutSlowPaths(peer, now);
  for (int ci : p.conns) {
    Conn& c = conns_[ci];
    // A probe (LeaveChunk) ends once it has kProbeBusy of busy time. A path that delivered at
    // twice its rate or more then, and at half the fastest other path's rate or more, is
    // measured at once (a healed rail) and takes its share. Twice its own rate alone is not
    // enough: a token bucket lets the first chunk after an idle second through at the port's
    // speed, and a rail still capped to 100 Mbps read 212 Mbps, took 16 % of the striping
    // again and held a collective for 67 ms.
    if (now < c.probe_until && c.alive) {
      const PathRate::Running probe = c.rate.Current(now);
      if (probe.busy_s >= kProbeBusy) {
        c.probe_until = {};
        double fastest = 0;
        for (int cj : p.conns) {
          const Conn& o = conns_[cj];
          if (cj != ci && o.alive && !o.relay && !o.health.suspect) {
            fastest = std::max(fastest, o.rate.rate());
          }
        }
        if (probe.rate >= 2 * c.rate.rate() && probe.rate * 2 >= fastest) {
          c.rate.CloseEarly(now, options_.chunk_bytes);
          c.left_since = {};
          updated = true;
        }
      }
    }
    const auto r = c.rate.Sample(now, c.alive, c.health.suspect, options_.chunk_bytes);
    if (r.period_over) c.health.DecayGap();  // halves in about a third of a second
    if (r.updated) c.left_since = {};        // measured: the probe clock starts again (LeaveChunk)
    updated |= r.updated;
  }
  double total = 0;
  for (int ci : p.conns) {
    const Conn& c = conns_[ci];
    if (c.alive && !c.relay && !c.health.suspect) total += c.rate.rate();
  }
  st_peer_rate_[peer] = total;
  if (!updated) return;
  // The striping that results: shares of the measured throughput over the paths in use.
  std::vector<std::pair<int, double>> rates;
  for (int ci : p.conns) {
    const Conn& c = conns_[ci];
    if (c.alive && !c.health.suspect) rates.emplace_back(ci, c.rate.rate());
  }
  std::map<int, double> shares = Shares(rates);
  if (shares.empty()) return;
  if (p.shares.empty()) {
    p.shares = std::move(shares);
    return;
  }
  const auto [moved, most] = LargestShift(p.shares, shares);
  // Only a real shift is news.
  if (most < kRebalanceNews) return;
  std::string reason = "striping by measured throughput:";
  for (const auto& [ci, share] : shares) {
    const Conn& c = conns_[ci];
    reason += " rail " + std::to_string(c.rail) + " " +
              std::to_string(static_cast<int>(share * 100 + 0.5)) + "% (" +
              std::to_string(static_cast<int>(c.rate.rate() * 8 / 1e6)) + " Mbps)";
  }
  LOG_INFO(tag_, "rank %d: %s", peer, reason.c_str());
  Emit(EventKind::kRebalanced, peer, conns_[moved].rail, conns_[moved].channel, reason);
  p.shares = std::move(shares);
}

}  // namespace ftccl::transport::engine
