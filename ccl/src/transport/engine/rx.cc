// The chunk engine's receive side: reading frames off a connection, one handler per frame
// type (kHandlers below), posting receives and matching collectives.
#include <sys/epoll.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "log.h"
#include "transport/engine/engine.h"

namespace ftccl::transport::engine {
namespace {
constexpr size_t kReadBudget = 4u << 20;
}  // namespace

void Engine::PostRecv(const OpPtr& op) {
  if (Dead(op->key.coll_seq)) {
    Complete(op, error());
    return;
  }
  Peer& p = peers_[op->peer];
  auto it = p.rx.find(op->key);
  if (it == p.rx.end()) {
    if (p.gone) {
      FailLocked(PeerLost("rank " + std::to_string(op->peer) + " is no longer connected"),
                 op->key.coll_seq, op->peer);
      return;
    }
    auto msg = std::make_shared<RxMsg>();
    msg->key = op->key;
    msg->sig = op->sig;
    msg->len = op->len;
    msg->recv = op;
    p.rx.emplace(op->key, std::move(msg));
    return;
  }
  RxMsg& msg = *it->second;
  if (!(msg.sig == op->sig) || msg.len != op->len) {
    FailLocked(MismatchStatus(op->key.coll_seq, op->peer, op->sig, msg.sig), op->key.coll_seq);
    return;
  }
  // A zero-length message stages one empty chunk and has no staging buffer.
  for (const Op::RxChunk& c : msg.staged) {
    if (c.len > 0) std::memcpy(op->buf + c.offset, msg.staging.get() + c.offset, c.len);
    op->rx_crcs.push_back(c);
  }
  msg.staged.clear();
  msg.recv = op;
  if (msg.any_chunk && msg.bytes_done == msg.len) {
    p.rx.erase(it);
    Complete(op, Status::Ok());
  }
}

void Engine::OnBegin(uint64_t coll_seq, const Signature& sig) {
  begun_ = true;
  cur_seq_ = coll_seq;
  cur_sig_ = sig;
  if (Dead(coll_seq)) return;
  for (int peer = 0; peer < size_; ++peer) {
    Peer& p = peers_[peer];
    for (const auto& [key, msg] : p.rx) {
      if (key.coll_seq == coll_seq && !(msg->sig == sig)) {
        FailLocked(MismatchStatus(coll_seq, peer, sig, msg->sig), coll_seq);
        return;
      }
    }
    bool released = false;
    while (!p.held.empty()) {
      auto it = std::find_if(p.held.begin(), p.held.end(),
                             [&](const auto& e) { return e.second <= coll_seq; });
      if (it == p.held.end()) break;
      p.held.erase(it);
      released = true;
    }
    if (released) p.ack_dirty = true;
  }
}

void Engine::OnReadable(int ci) {
  size_t budget = kReadBudget;
  conns_[ci].last_inbound = Clock::now();  // woken for bytes (or the end of the stream)
  while (budget > 0 && conns_[ci].alive) {
    Conn& c = conns_[ci];
    RxState& rx = c.rx;
    ssize_t n;
    if (!rx.in_payload) {
      n = c.link->Read(reinterpret_cast<uint8_t*>(&rx.hdr) + rx.hdr_got, kHdr - rx.hdr_got);
    } else {
      size_t want = rx.hdr.length - rx.payload_got;
      uint8_t* to = rx.dst ? rx.dst + rx.payload_got : discard_.get();
      if (!rx.dst && want > kDiscardBytes) want = kDiscardBytes;
      if (rx.dst == nullptr && !rx.text.empty()) {
        to = reinterpret_cast<uint8_t*>(rx.text.data()) + rx.payload_got;
      }
      n = c.link->Read(to, want);
    }
    if (n == 0) {
      Peer& p = peers_[c.peer];
      if (p.closing && !rx.in_payload && rx.hdr_got == 0) {
        c.alive = false;
        UnwatchLink(c);
        bool any = false;
        for (int cj : p.conns) any |= conns_[cj].alive;
        if (!any) PeerGone(c.peer, "rank " + std::to_string(c.peer) + " closed its communicator");
      } else if (c.write_failed_at != Clock::time_point{}) {
        // A write had found this end gone (Flush): the end of the stream is that failure's,
        // read after what the peer sent before it, and judged as it would have been then.
        ConnFailed(ci, c.write_error);
      } else {
        ConnFailed(ci, "connection closed by " + Label(c), true);
      }
      return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      ConnFailed(ci, c.link->error_text());
      return;
    }
    budget -= std::min(budget, static_cast<size_t>(n));
    if (!rx.in_payload) {
      rx.hdr_got += static_cast<size_t>(n);
      if (rx.hdr_got == kHdr) OnHeader(ci);
    } else {
      // The payload's CRC as it lands, while those bytes are still in the cache.
      if (rx.dst != nullptr && options_.bench_payload_crc) {
        rx.crc = Crc32c(rx.dst + rx.payload_got, static_cast<size_t>(n), rx.crc);
      }
      rx.payload_got += static_cast<size_t>(n);
      if (rx.payload_got == rx.hdr.length) OnPayloadDone(ci);
    }
  }
}

void Engine::OnHeader(int ci) {
  // One handler per frame type, indexed by wire::FrameType.
  static constexpr std::array<HeaderHandler, 11> kHandlers = {
      &Engine::OnUnknownFrame,    // 0
      &Engine::OnUnknownFrame,    // kHello: only the first frame of a connection (setup)
      &Engine::OnData,            // kData
      &Engine::OnAck,             // kAck
      &Engine::OnNack,            // kNack
      &Engine::OnAbort,           // kAbort
      &Engine::OnBye,             // kBye
      &Engine::OnPing,            // kPing
      &Engine::OnPong,            // kPong
      &Engine::OnPathDownNotice,  // kPathDown
      &Engine::OnRedialRequest,   // kRedial
  };
  Conn& c = conns_[ci];
  c.rx.hdr_got = 0;
  const wire::FrameHeader& h = c.rx.hdr;
  const FrameContext ctx = FrameCtx(c.peer);
  if (Status st = CheckHeader(h, ctx); !st.ok()) {
    st_crc_++;
    RefuseFrame(ci, st);
    return;
  }
  // A header with a valid CRC may still lie about its fields: refused before any handler
  // acts on them.
  if (Status st = CheckFrame(h, ctx); !st.ok()) {
    RefuseFrame(ci, st);
    return;
  }
  peers_[c.peer].heard = Clock::now();
  c.rx.dst = nullptr;
  c.rx.msg.reset();
  c.rx.text.clear();
  c.rx.payload_got = 0;
  c.rx.crc = 0;
  const HeaderHandler handler =
      h.type < kHandlers.size() ? kHandlers[h.type] : &Engine::OnUnknownFrame;
  (this->*handler)(ci);
}

FrameContext Engine::FrameCtx(int peer) const {
  FrameContext ctx;
  ctx.comm_id = comm_id_;
  ctx.max_frame = kMaxFrame;
  ctx.size = size_;
  ctx.begun = begun_;
  ctx.cur_seq = cur_seq_;
  ctx.sent_end = peers_[peer].sent_end;
  return ctx;
}

void Engine::RefuseFrame(int ci, const Status& why) {
  LOG_WARN(tag_, "refusing a frame from %s: %s; dropping the connection",
           Label(conns_[ci]).c_str(), why.message().c_str());
  ConnFailed(ci, why.message());
}

void Engine::OnPayloadDone(int ci) {
  Conn& c = conns_[ci];
  c.rx.in_payload = false;
  switch (static_cast<wire::FrameType>(c.rx.hdr.type)) {
    case wire::FrameType::kAck:
      OnAckRanges(ci);
      return;
    case wire::FrameType::kAbort:
      OnAbortReason(ci);
      return;
    default:
      OnDataDone(ci);
      return;
  }
}

void Engine::OnUnknownFrame(int ci) {
  // CheckFrame refuses these first; kept so that a new type without a handler fails cleanly.
  RefuseFrame(ci, Status(Code::kCorrupt, "unexpected " + FrameTypeName(conns_[ci].rx.hdr.type) +
                                             " frame"));
}

void Engine::OnAck(int ci) {
  Conn& c = conns_[ci];
  const wire::FrameHeader& h = c.rx.hdr;
  // CheckFrame bounded the values by what was sent and the ranges' length.
  HandleAck(c.peer, h.chunk_seq, h.offset, ci);
  if (h.length > 0 && c.alive) {
    c.rx.text.assign(h.length, '\0');  // the selective ranges, read as a payload
    c.rx.in_payload = true;
  }
}

void Engine::OnAckRanges(int ci) {
  Conn& c = conns_[ci];
  const wire::FrameHeader& h = c.rx.hdr;
  Peer& p = peers_[c.peer];
  if (Crc32c(c.rx.text.data(), h.length) == h.payload_crc) {
    if (Status st = CheckSackRanges(c.rx.text.data(), h.length, p.sent_end); !st.ok()) {
      c.rx.text.clear();
      RefuseFrame(ci, st);
      return;
    }
    std::vector<uint64_t> r(h.length / 8);
    std::memcpy(r.data(), c.rx.text.data(), r.size() * 8);
    for (size_t i = 0; i + 1 < r.size(); i += 2) {
      const auto now = Clock::now();
      for (auto it = p.unacked.lower_bound(r[i]); it != p.unacked.end() && it->first < r[i + 1];
           ++it) {
        Credit(it->second, now);
      }
    }
  }
  c.rx.text.clear();
}

void Engine::OnPing(int ci) {
  // Answer on the same connection: the answer proves this path works.
  Conn& c = conns_[ci];
  // A probe that got through on a path this end holds suspect: the path works, but an answer
  // written into a socket that backs off would wait for its next retransmission timeout.
  if (c.health.suspect) {
    RedialIfBackingOff(ci, Clock::now(), "a probe from rank " + std::to_string(c.peer) +
                                             " got through");
    if (!c.alive || failed_) return;  // the fresh connection is probed (Install)
  }
  TxItem pong;
  pong.hdr = wire::MakeHeader(wire::FrameType::kPong, comm_id_);
  pong.hdr.chunk_seq = c.rx.hdr.chunk_seq;
  wire::Seal(&pong.hdr, nullptr);
  c.ctrl.push_back(std::move(pong));
  Flush(ci);
  // The peer may be asking because an acknowledgement of ours is overdue (HedgeCheck): ours
  // may sit in a path that went silent. Acknowledge again, on the path the probe came by
  // (acknowledgements are cumulative: a repeat is harmless).
  Peer& p = peers_[c.peer];
  if (p.cum > 0 || !p.above.empty()) {
    p.ack_dirty = true;
    p.ack_conn = ci;
  }
}

void Engine::OnPong(int ci) {
  Conn& c = conns_[ci];
  const auto now = Clock::now();
  Progress(c, now);
  const bool answers_latest = c.health.ProbeAnswered(c.rx.hdr.chunk_seq, now);
  if (c.health.suspect) c.health.up_since_down = true;
  // An answer returns a suspect path to use once its hold-down is over; until then it is
  // probed on (CheckTimers) and the first answer after the hold-down brings it back. Damping
  // never leaves a peer without a path: when no other path to it works, a path that answers is
  // taken back at once (PathHealth::Readmit), and said so.
  if (!c.health.suspect || !answers_latest) return;
  if (!c.health.Readmit(now, OnlyPath(ci))) return;
  if (c.rail < static_cast<int>(rail_up_.size()) && !rail_up_[c.rail]) return;
  const bool released = c.health.Held(now);
  c.health.suspect = false;
  c.health.carrier_back = false;
  // While no path to the peer worked, an acknowledgement went to a suspect one (PickConn's
  // last resort) and may sit in its socket: the peer would wait for it with nothing to resend.
  // Repeat it over the path that works now (acknowledgements are cumulative).
  peers_[c.peer].ack_dirty = true;
  // So may this end's notice of another path's down, queued then on a suspect connection
  // (even the one it is about), where it waits until that path's link returns. Meanwhile the
  // peer keeps its chunks on its end of the dead path: its socket had them acknowledged before
  // the down, so it never suspects the path itself (found by a campaign: a blackhole of one
  // rail, then the other rail's host-side link down; the peer moved its chunks only when the
  // link returned, 700 ms after the blackholed rail was back in use). Repeat each such notice
  // once, over the path that works now. Only those: a notice about a path the peer has taken
  // back meanwhile would move its chunks off a working path and count as another down.
  c.down_notice_stuck = false;
  for (int cj : peers_[c.peer].conns) {
    Conn& o = conns_[cj];
    if (!o.down_notice_stuck) continue;
    o.down_notice_stuck = false;
    // One that answered since its down is left out: the peer may be taking it back.
    if (o.alive && o.health.suspect && !o.health.up_since_down) {
      EnqueueCtrl(c.peer, PathNotice(wire::FrameType::kPathDown, o));
    }
  }
  if (c.relay) {
    RelayWorks(ci);
    Kick(c.peer);
    return;
  }
  c.health.failback_pending = true;
  const std::string downs = std::to_string(c.health.downs_in_window()) + " down in the last " +
                            std::to_string(options_.flap_window.count()) + " ms";
  if (released) {
    const auto left = std::chrono::duration_cast<Millis>(c.health.hold_until() - now).count();
    LOG_WARN(tag_, "%s answers during its hold-down, and no other path to rank %d works: back "
             "in use %lld ms early", Label(c).c_str(), c.peer, static_cast<long long>(left));
    Emit(EventKind::kPathUp, c.peer, c.rail, c.channel,
         "released from its hold-down " + std::to_string(left) +
             " ms early: answers probes and no other path to rank " + std::to_string(c.peer) +
             " works (" + downs + ")");
  } else {
    LOG_WARN(tag_, "%s answers again: back in use", Label(c).c_str());
    Emit(EventKind::kPathUp, c.peer, c.rail, c.channel, "answers probes again (" + downs + ")");
  }
  Kick(c.peer);
}

void Engine::OnPathDownNotice(int ci) {
  Conn& c = conns_[ci];
  const wire::FrameHeader& h = c.rx.hdr;
  const int rail = static_cast<int>(h.tag >> 16), ch = static_cast<int>(h.tag & 0xFFFF);
  for (int cj : peers_[c.peer].conns) {
    Conn& o = conns_[cj];
    if (o.relay || o.rail != rail || o.channel != ch) continue;
    // A notice that waited out an outage in some queue may be about a connection that has
    // since been replaced: it names the connection by its connecting end's port.
    if (h.offset != 0 && o.conn_port != 0 && h.offset != o.conn_port) continue;
    MarkDown(cj, Clock::now(), "rank " + std::to_string(c.peer) + " reports its end down");
  }
}

void Engine::OnRedialRequest(int ci) {
  Conn& c = conns_[ci];
  const wire::FrameHeader& h = c.rx.hdr;
  const int rail = static_cast<int>(h.tag >> 16), ch = static_cast<int>(h.tag & 0xFFFF);
  for (int cj : peers_[c.peer].conns) {
    Conn& o = conns_[cj];
    if (o.relay || o.rail != rail || o.channel != ch) continue;
    if (o.alive && o.health.suspect) {
      Redial(cj, "rank " + std::to_string(c.peer) + "'s end is up again");
    } else if (!o.alive && o.reconnect) {
      // A connect still waiting on a SYN sent into the outage backs off too: start over.
      backend_->CancelDial(cj);
      StartReconnect(cj, Clock::now());
    }
  }
}

void Engine::OnNack(int ci) { HandleNack(conns_[ci].peer, conns_[ci].rx.hdr.chunk_seq); }

void Engine::OnBye(int ci) {
  Conn& c = conns_[ci];
  HandleAck(c.peer, c.rx.hdr.chunk_seq, c.rx.hdr.offset, ci);
  peers_[c.peer].closing = true;
}

void Engine::OnAbort(int ci) {
  Conn& c = conns_[ci];
  if (c.rx.hdr.length == 0) {
    OnPayloadDone(ci);
    return;
  }
  c.rx.text.assign(c.rx.hdr.length, '\0');
  c.rx.in_payload = true;
}

void Engine::OnAbortReason(int ci) {
  Conn& c = conns_[ci];
  const wire::FrameHeader& h = c.rx.hdr;
  uint32_t crc = h.length ? Crc32c(c.rx.text.data(), h.length) : 0;
  std::string reason = crc == h.payload_crc ? c.rx.text : std::string("(corrupt reason)");
  c.rx.text.clear();
  auto code = static_cast<Code>(h.tag);
  if (code == Code::kOk || static_cast<int>(code) > static_cast<int>(Code::kInternal)) {
    code = Code::kAborted;
  }
  if (code == Code::kTimeout || code == Code::kInternal) code = Code::kAborted;
  // offset: the lost rank + 1 that caused the abort (0: none; CheckFrame bounded it).
  const int lost = h.offset > 0 ? static_cast<int>(h.offset) - 1 : -1;
  FailLocked(Status(code, "rank " + std::to_string(c.peer) + " aborted collective #" +
                              std::to_string(h.coll_seq) + ": " + reason),
             h.coll_seq, lost);
}

void Engine::OnData(int ci) {
  Conn& c = conns_[ci];
  Peer& p = peers_[c.peer];
  const wire::FrameHeader& h = c.rx.hdr;
  // CheckFrame (CheckData) has bounded the signature, the collective and the geometry: the
  // payload lies within [0, msg_len) of its message.
  const uint64_t seq = h.chunk_seq;
#ifndef FTCCL_PLANTED_DUP_ABOVE  // a planted bug (FTCCL_PLANTED_BUGS, tests only)
  bool dup = seq < p.cum || p.above.count(seq) > 0;
#else
  bool dup = seq < p.cum;
#endif
  if (!dup && !Dead(h.coll_seq) && h.msg_len > 0 &&
      p.rx.find(MsgKey{h.coll_seq, h.tag}) == p.rx.end()) {
    // A message that arrives before its receive is staged: within the staging budget only.
    if (Status st = CheckStaging(h.msg_len, staging_pool_.live_bytes()); !st.ok()) {
      RefuseFrame(ci, st);
      return;
    }
  }
  c.rx.took_over = false;
  if (!dup && p.inflight.count(seq) > 0) {
    // An earlier copy is still being read on another connection, typically one stalled on a
    // broken path: this copy takes over and the rest of the old one goes to the discard buffer
    // (whatever it wrote is overwritten by this complete copy).
    for (int cj : p.conns) {
      Conn& o = conns_[cj];
      if (cj != ci && o.rx.in_payload && o.rx.msg && o.rx.hdr.chunk_seq == seq) {
        o.rx.msg.reset();
        o.rx.dst = nullptr;
        c.rx.took_over = true;
      }
    }
    p.inflight.erase(seq);
  }
  if (!dup && !Dead(h.coll_seq)) {
    MsgKey key{h.coll_seq, h.tag};
    Signature sig;
    sig.kind = static_cast<CollKind>(h.coll_kind);
    sig.dtype = static_cast<DataType>(h.dtype);
    sig.op = static_cast<ReduceOp>(h.redop);
    sig.root = h.root;
    sig.count = h.count;
    if (begun_ && h.coll_seq == cur_seq_ && !(sig == cur_sig_)) {
      FailLocked(MismatchStatus(h.coll_seq, c.peer, cur_sig_, sig), h.coll_seq);
    }
    auto it = p.rx.find(key);
    if (Dead(h.coll_seq)) {
      // Discarded below.
    } else if (it == p.rx.end()) {
      auto msg = std::make_shared<RxMsg>();
      msg->key = key;
      msg->sig = sig;
      msg->len = h.msg_len;
      if (h.msg_len > 0) msg->staging = staging_pool_.Get(h.msg_len);
      LOG_DEBUG(tag_, "unexpected message from rank %d: collective #%lu tag %08x, %lu bytes",
                c.peer, static_cast<unsigned long>(h.coll_seq), h.tag,
                static_cast<unsigned long>(h.msg_len));
      it = p.rx.emplace(key, std::move(msg)).first;
    } else if (!(it->second->sig == sig) || it->second->len != h.msg_len) {
      FailLocked(MismatchStatus(h.coll_seq, c.peer, it->second->sig, sig), h.coll_seq);
    }
    if (!Dead(h.coll_seq)) {
      c.rx.msg = it->second;
      c.rx.into_staging = !c.rx.msg->recv;
      c.rx.dst = (c.rx.into_staging ? c.rx.msg->staging.get() : c.rx.msg->recv->buf) + h.offset;
      p.inflight.insert(seq);
    }
  } else if (dup) {
    // Acknowledge again: the sender resends only what it believes lost, so its earlier
    // acknowledgement may have been lost with a path.
    st_dups_++;
    p.ack_dirty = true;
    p.ack_conn = ci;
    LOG_DEBUG(tag_, "chunk %lu again on %s (a duplicate): acknowledging up to %lu there",
              static_cast<unsigned long>(seq), Label(c).c_str(),
              static_cast<unsigned long>(AckValue(p)));
  }
  if (h.length == 0) {
    OnPayloadDone(ci);
    return;
  }
  c.rx.in_payload = true;
}

void Engine::OnDataDone(int ci) {
  Conn& c = conns_[ci];
  const wire::FrameHeader h = c.rx.hdr;
  Peer& p = peers_[c.peer];
  auto msg = std::move(c.rx.msg);
  uint8_t* dst = c.rx.dst;
  c.rx.dst = nullptr;
  if (!msg) return;  // discarded (duplicate or after failure)
  const uint64_t seq = h.chunk_seq;
  p.inflight.erase(seq);
  st_frames_recv_++;
  // Accepted: advance the cumulative acknowledgement.
  auto advance = [&] {
    if (seq == p.cum) {
      ++p.cum;
      while (!p.above.empty() && *p.above.begin() == p.cum) {
        p.above.erase(p.above.begin());
        ++p.cum;
      }
    } else {
      p.above.insert(seq);
      st_ooo_++;
    }
  };
#ifdef FTCCL_PLANTED_ACK_BEFORE_CRC  // a planted bug (FTCCL_PLANTED_BUGS, tests only)
  // The chunk is counted in before its payload is checked: a corrupt one is acknowledged (its
  // sender frees it) and dropped, and its resend is a duplicate.
  advance();
  p.ack_dirty = true;
  p.ack_conn = ci;
#endif
  // Computed as the payload arrived (OnReadable); 0 for an empty one.
  if (options_.bench_payload_crc && c.rx.crc != h.payload_crc) {
    st_crc_++;
    LOG_WARN(tag_, "CRC mismatch on chunk %lu from %s: dropped, asking for a resend",
             static_cast<unsigned long>(seq), Label(c).c_str());
    SendNack(c.peer, seq);
    return;
  }
#ifndef FTCCL_PLANTED_ACK_BEFORE_CRC
  advance();
#endif
  st_accepted_[c.peer]++;
  st_rx_cum_[c.peer] = p.cum;
  LOG_DEBUG(tag_, "chunk %lu (collective #%lu) in on %s; acknowledging up to %lu",
            static_cast<unsigned long>(seq), static_cast<unsigned long>(h.coll_seq),
            Label(c).c_str(), static_cast<unsigned long>(p.cum));
  // A chunk of a collective this rank has not begun yet is kept but not acknowledged.
  if (!begun_ || h.coll_seq > cur_seq_) p.held.emplace(seq, h.coll_seq);
  p.ack_dirty = true;
  p.ack_conn = ci;
  msg->any_chunk = true;
  msg->bytes_done += h.length;
  const Op::RxChunk checked{h.offset, h.length, h.payload_crc};
  if (c.rx.into_staging) {
    st_staged_ += h.length;
    if (msg->recv) {
      std::memcpy(msg->recv->buf + h.offset, dst, h.length);
      msg->recv->rx_crcs.push_back(checked);
    } else {
      msg->staged.push_back(checked);
    }
  } else if (msg->recv) {
    msg->recv->rx_crcs.push_back(checked);
  }
  if (msg->bytes_done == msg->len && msg->recv) {
    p.rx.erase(msg->key);
    Complete(msg->recv, Status::Ok());
  }
}

void Engine::HandleAck(int peer, uint64_t cum, uint64_t delivered, int from_ci) {
  Peer& p = peers_[peer];
  const uint64_t upto = std::max({p.delivered, delivered, cum});
  if (upto > p.delivered) {
    const auto now = Clock::now();
    for (auto it = p.unacked.lower_bound(p.delivered); it != p.unacked.end() && it->first < upto;
         ++it) {
      Credit(it->second, now);
    }
  }
  const bool more = upto > p.delivered;
  if (more || (!p.unacked.empty() && p.unacked.begin()->first < cum)) {
    LOG_DEBUG(tag_, "acknowledged by rank %d on %s: up to %lu (delivered %lu)", peer,
              from_ci >= 0 ? Label(conns_[from_ci]).c_str() : "?", static_cast<unsigned long>(cum),
              static_cast<unsigned long>(upto));
  }
  p.delivered = upto;
  st_tx_acked_[peer] = upto;
  // Room in the windows of the paths that delivered: they may take more.
  if (more && !p.ready.empty()) Kick(peer);
  if (p.resume_pending && !p.unacked.empty() && p.unacked.begin()->first < cum) {
    p.resume_pending = false;
    const Conn& c = conns_[from_ci];
    Emit(EventKind::kResumed, peer, c.rail, c.channel, "chunks acknowledged again");
  }
  while (!p.unacked.empty() && p.unacked.begin()->first < cum) {
    auto it = p.unacked.begin();
    DetachInflight(peer, it->first);
    Count(it->second, -1);
    OpPtr op = it->second.op;
    p.unacked.erase(it);
    if (--op->chunks_left == 0) Complete(op, Status::Ok());
  }
}

void Engine::Credit(TxChunk& ch, Clock::time_point now) {
  if (ch.delivered) return;
  ch.delivered = true;
  if (ch.conn >= 0 && ch.tx_count > 0) Progress(conns_[ch.conn], now);
  Count(ch, -1);
  if (ch.conn < 0 || ch.tx_count == 0) return;
  Conn& c = conns_[ch.conn];
  c.rate.Delivered(ch.len);
  c.newest_delivered_sent = std::max(c.newest_delivered_sent, ch.sent_at);
  // Karn: a chunk sent more than once gives no unambiguous sample.
  if (ch.tx_count == 1)
    c.health.RttSample(std::chrono::duration<double, std::milli>(now - ch.sent_at).count());
}

}  // namespace ftccl::transport::engine
