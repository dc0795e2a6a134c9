// The chunk engine's core: construction, the progress loop, commands from other threads,
// completion and the sticky failure. See engine.h for the map of the other files.
#include "transport/engine/engine.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>

#include "log.h"

namespace ftccl::transport::engine {
namespace {

// Ids in the progress thread's epoll besides the connections (whose id is their index).
constexpr uint64_t kWakeId = UINT64_MAX;
constexpr uint64_t kLinkWatchId = UINT64_MAX - 1;
constexpr uint64_t kSetupId = UINT64_MAX - 2;
// How long the relay service lets sessions of other ranks finish when this rank shuts down.
constexpr auto kRelayGrace = std::chrono::milliseconds(1000);

}  // namespace

Engine::Engine(const CommOptions& options, const BootstrapTable& table,
               std::unique_ptr<Backend> backend, std::vector<InitialConn> conns,
               std::vector<uint32_t> rail_ips)
    : options_(options),
      rank_(options.rank),
      size_(options.size),
      num_rails_(table.num_rails),
      comm_id_(table.comm_id),
      health_params_(PathHealth::Params::From(options)),
      backend_(std::move(backend)),
      tag_(backend_->log_tag()),
      peers_(options.size),
      discard_(new uint8_t[kDiscardBytes]),
      rng_(options.wire_faults.seed * 1000003u + static_cast<uint64_t>(options.rank)),
      st_rail_bytes_(new std::atomic<uint64_t>[table.num_rails + 1]),
      st_peer_rate_(new std::atomic<double>[options.size]),
      st_downs_(new std::atomic<uint32_t>[options.size * table.num_rails]),
      st_first_down_ns_(new std::atomic<int64_t>[options.size * table.num_rails]),
      st_hold_until_ns_(new std::atomic<int64_t>[options.size * table.num_rails]),
      st_numbered_(new std::atomic<uint64_t>[options.size]),
      st_accepted_(new std::atomic<uint64_t>[options.size]),
      st_rx_cum_(new std::atomic<uint64_t>[options.size]),
      st_tx_acked_(new std::atomic<uint64_t>[options.size]),
      rail_ips_(std::move(rail_ips)) {
  for (int r = 0; r < size_; ++r) {
    st_peer_rate_[r] = 0;
    st_numbered_[r] = st_accepted_[r] = st_rx_cum_[r] = st_tx_acked_[r] = 0;
  }
  for (int i = 0; i < size_ * num_rails_; ++i) {
    st_downs_[i] = 0;
    st_first_down_ns_[i] = 0;
    st_hold_until_ns_[i] = 0;
  }
  // One more than the rails: the bytes sent over relays.
  for (int r = 0; r <= num_rails_; ++r) st_rail_bytes_[r] = 0;
  for (auto& ic : conns) {
    Conn c;
    c.link = std::move(ic.link);
    c.peer = ic.peer;
    c.rail = ic.rail;
    c.channel = ic.channel;
    c.conn_port = ic.conn_port;
    c.alive = c.link != nullptr;
    peers_[c.peer].conns.push_back(static_cast<int>(conns_.size()));
    conns_.push_back(std::move(c));
  }
  // Intra-host relay: a slot per peer for a path through this host's other ranks (or, for a
  // peer on this host, straight over a Unix socket). Empty until a rank loses its rails.
  hosts_ = table.hosts;
  hosts_.resize(size_, 0);
  relay_slot_.assign(size_, -1);
  if (options.relay && backend_->relays() && size_ > 1) {
    for (int r = 0; r < size_; ++r) {
      if (r != rank_ && hosts_[r] == hosts_[rank_]) neighbours_.push_back(r);
    }
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      Conn c;
      c.peer = peer;
      c.rail = num_rails_;
      c.channel = 0;
      c.alive = false;
      c.relay = true;
      relay_slot_[peer] = static_cast<int>(conns_.size());
      peers_[peer].conns.push_back(static_cast<int>(conns_.size()));
      conns_.push_back(std::move(c));
    }
  }
}

Engine::~Engine() { Shutdown(); }

Status Engine::Start() {
  epoll_ = net::Fd(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) return ErrnoStatus("epoll_create1", errno);
  wake_ = net::Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_.valid()) return ErrnoStatus("eventfd", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeId;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) != 0) {
    return ErrnoStatus("epoll_ctl(eventfd)", errno);
  }
  const auto start = Clock::now();
  for (size_t i = 0; i < conns_.size(); ++i) {
    Conn& c = conns_[i];
    c.health.Restart(start);
    if (!c.alive && !c.relay) {
      // Not connected at init (a rail down at start): down from the start, and set up by the
      // higher rank of the pair as a broken connection is (CheckTimers, OnHello).
      RecordDown(static_cast<int>(i), start);
      c.health.up_since_down = false;
      c.reconnect = rank_ > c.peer;
      c.next_connect = start;
      Emit(EventKind::kPathDown, c.peer, c.rail, c.channel, "not connected at init");
      continue;
    }
    if (!c.alive) continue;  // a relay slot, unused so far
    epoll_event e{};
    e.events = EPOLLIN | EPOLLRDHUP;
    e.data.u64 = i;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c.link->fd(), &e) != 0) {
      return ErrnoStatus("epoll_ctl(conn)", errno);
    }
  }
  if (backend_->setup_fd() >= 0) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u64 = kSetupId;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, backend_->setup_fd(), &e) != 0) {
      return ErrnoStatus("epoll_ctl(setup)", errno);
    }
  }
  if (options_.watch_links) {
    auto w = LinkWatch::Open(rail_ips_);
    if (w.ok()) {
      epoll_event e{};
      e.events = EPOLLIN;
      e.data.u64 = kLinkWatchId;
      if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, w.value()->fd(), &e) == 0) {
        link_watch_ = std::move(w.value());
        rail_up_ = link_watch_->initial();
        rail_down_at_.assign(num_rails_, Clock::time_point{});
        rail_settle_at_.assign(num_rails_, Clock::time_point{});
        rail_settle_long_.assign(num_rails_, false);
        uint64_t mask = ~0ull;
        for (int r = 0; r < num_rails_ && r < 64; ++r) {
          if (!rail_up_[r]) mask &= ~(1ull << r);
        }
        rails_up_mask_ = mask;
      }
    } else {
      LOG_WARN(tag_, "not watching link state (%s): detection relies on timeouts",
               w.status().ToString().c_str());
    }
  }
  if (!neighbours_.empty()) {
    Backend::RelayHooks hooks;
    hooks.rail_up = [this](int r) { return r >= 64 || ((rails_up_mask_.load() >> r) & 1) != 0; };
    Status st = backend_->ServeRelays(std::move(hooks));
    if (st.ok()) {
      serving_relays_ = true;
    } else {
      LOG_WARN(tag_, "not serving relays for this host's ranks: %s", st.ToString().c_str());
    }
  }
  started_ = true;
  thread_ = std::thread([this] { Loop(); });
  progress_id_ = thread_.get_id();
  return Status::Ok();
}

void Engine::Post(std::function<void()> fn) {
  bool first;
  {
    std::lock_guard<std::mutex> lock(cmd_mu_);
    first = cmds_.empty();
    cmds_.push_back(std::move(fn));
  }
  // Only the first command of a batch wakes the progress thread: it takes the whole queue at
  // once (RunCommands), so a receive and a send posted together cost one wake-up, not two.
  uint64_t one = 1;
  if (first && wake_.valid()) (void)!write(wake_.get(), &one, sizeof(one));
}

Status Engine::RunOnProgress(std::function<Status()> fn) {
  if (!started_ || !thread_.joinable()) return InvalidArgument("the transport is not running");
  auto done = std::make_shared<std::promise<Status>>();
  auto result = done->get_future();
  Post([fn = std::move(fn), done] { done->set_value(fn()); });
  if (result.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    return Timeout("the progress thread did not run the request within 5 s");
  }
  return result.get();
}

void Engine::Begin(uint64_t coll_seq, const Signature& sig) {
  Post([this, coll_seq, sig] { OnBegin(coll_seq, sig); });
}

size_t Engine::StripeChunk(size_t len) const {
  size_t chunk = std::max<size_t>(1, std::min<size_t>(options_.chunk_bytes, kMaxFrame));
  // A message of a chunk or two would ride the first path alone (Kick deals whole chunks):
  // at 1 MiB over 4 ranks a ring step is one 256 KiB chunk, and measured so, every step of
  // every collective went out on rail 0 while rail 1 carried only probes. Such a message is
  // cut into one piece per path instead, down to kMinStripeChunk, so every rail carries its
  // share, its rate is measured, and a chunk lost on one path is overtaken on another.
  const size_t paths = static_cast<size_t>(num_rails_) *
                       static_cast<size_t>(std::max(1, options_.channels_per_rail));
  if (paths > 1 && len > kMinStripeChunk) {
    size_t even = (len + paths - 1) / paths;
    even = (even + kStripeAlign - 1) / kStripeAlign * kStripeAlign;  // whole elements
    chunk = std::min(chunk, std::max(kMinStripeChunk, even));
  }
  return chunk;
}

OpPtr Engine::MakeSend(int peer, const MsgKey& key, const Signature& sig, const void* buf,
                       size_t len, const Op* received) {
  auto op = std::make_shared<Op>();
  op->kind = Op::Kind::kSend;
  op->peer = peer;
  op->key = key;
  op->sig = sig;
  op->buf = static_cast<uint8_t*>(const_cast<void*>(buf));
  op->len = len;
  op->chunk_bytes = StripeChunk(len);
  // The frames `received` was accepted from, by offset: a chunk of this send that one of them
  // covers exactly has that frame's (checked) CRC.
  std::vector<const Op::RxChunk*> from;
  if (received != nullptr) {
    for (const Op::RxChunk& c : received->rx_crcs) from.push_back(&c);
    std::sort(from.begin(), from.end(),
              [](const Op::RxChunk* a, const Op::RxChunk* b) { return a->offset < b->offset; });
  }
  size_t next = 0;  // into `from`
  uint64_t reused = 0;
  for (size_t off = 0; off < len; off += op->chunk_bytes) {
    const size_t n = std::min(op->chunk_bytes, len - off);
    while (next < from.size() && from[next]->offset < off) ++next;
    const bool reuse = next < from.size() && from[next]->offset == off && from[next]->len == n;
    op->chunk_crcs.push_back(reuse ? from[next]->crc : 0);
    // Benchmark-only without the payload CRC: the receiver checks nothing either.
    op->chunk_crc_pending.push_back(!reuse && options_.bench_payload_crc);
    if (reuse) reused += n;
  }
  st_tx_crc_reused_bytes_.fetch_add(reused, std::memory_order_relaxed);
  Post([this, op] { PostSend(op); });
  return op;
}

OpPtr Engine::Send(int peer, const MsgKey& key, const Signature& sig, const void* buf,
                   size_t len) {
  return MakeSend(peer, key, sig, buf, len, nullptr);
}

OpPtr Engine::Forward(int peer, const MsgKey& key, const Signature& sig, const OpPtr& received) {
  return MakeSend(peer, key, sig, received->buf, received->len, received.get());
}

OpPtr Engine::Recv(int peer, const MsgKey& key, const Signature& sig, void* buf, size_t len) {
  auto op = std::make_shared<Op>();
  op->kind = Op::Kind::kRecv;
  op->peer = peer;
  op->key = key;
  op->sig = sig;
  op->buf = static_cast<uint8_t*>(buf);
  op->len = len;
  Post([this, op] { PostRecv(op); });
  return op;
}

Status Engine::Wait(const OpPtr& op, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto dead = [&] { return !error_.ok() && op->key.coll_seq >= fail_from_; };
  ++op->waiters;
  cv_.wait_until(lock, deadline,
                 [&] { return op->done.load(std::memory_order_acquire) || dead(); });
  --op->waiters;
  if (op->done.load(std::memory_order_acquire)) return op->status;
  if (dead()) {
    // The caller may free the operation's buffers once this returns: wait until the progress
    // thread has let go of every buffer of the failed collectives.
    AwaitReleased(lock, op->key.coll_seq);
    return error_;
  }
  return Timeout("no progress on " +
                 std::string(op->kind == Op::Kind::kSend ? "send to" : "receive from") + " rank " +
                 std::to_string(op->peer) + " (collective #" + std::to_string(op->key.coll_seq) +
                 ") before the deadline");
}

void Engine::Fail(const Status& why, uint64_t coll_seq) {
  std::unique_lock<std::mutex> lock(mu_);
  if (error_.ok()) error_ = why;
  if (coll_seq < fail_from_) fail_from_ = coll_seq;
  failed_ = true;
  cv_.notify_all();
  if (!ElsewhereThanProgress()) return;
  // Every call has the progress thread release the failed collectives' buffers, also when an
  // earlier failure (of a later collective: a peer that is ahead) already did so for others.
  if (released_from_ <= coll_seq) return;
  lock.unlock();
  Post([this, why, coll_seq] { FailLocked(why, coll_seq); });
  lock.lock();
  AwaitReleased(lock, coll_seq);
}

void Engine::AwaitReleased(std::unique_lock<std::mutex>& lock, uint64_t coll_seq) {
  if (!ElsewhereThanProgress()) return;
  // The progress thread never blocks: it runs the posted FailLocked within a tick, or has
  // ended (then released_from_ is 0). No deadline: returning earlier would break the promise
  // that a failed operation's buffers are no longer touched.
  auto released = [&] { return released_from_ <= coll_seq; };
  while (!cv_.wait_for(lock, std::chrono::seconds(5), released)) {
    LOG_WARN(tag_, "still waiting for the progress thread to release collective #%lu's buffers",
             static_cast<unsigned long>(coll_seq));
  }
}

Status Engine::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

int Engine::LostPeer() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_peer_;
}

Status Engine::ErrorFor(uint64_t coll_seq) const {
  std::lock_guard<std::mutex> lock(mu_);
  return coll_seq >= fail_from_ ? error_ : Status::Ok();
}

CommStats Engine::Stats() const {
  CommStats s;
  s.data_frames_sent = st_frames_sent_;
  s.data_frames_received = st_frames_recv_;
  s.chunks_retransmitted = st_retx_;
  s.crc_errors = st_crc_;
  s.duplicates_dropped = st_dups_;
  s.out_of_order = st_ooo_;
  s.acks_sent = st_acks_;
  s.nacks_sent = st_nacks_;
  s.bytes_staged = st_staged_;
  s.tx_crc_bytes = st_tx_crc_bytes_;
  s.tx_crc_reused_bytes = st_tx_crc_reused_bytes_;
  for (int r = 0; r < num_rails_; ++r) s.payload_bytes_sent_per_rail.push_back(st_rail_bytes_[r]);
  s.relay_payload_bytes_sent = st_rail_bytes_[num_rails_];
  for (int r = 0; r < size_; ++r) {
    s.peer_rate_bytes_per_s.push_back(st_peer_rate_[r]);
    s.chunks_numbered_per_peer.push_back(st_numbered_[r]);
    s.chunks_accepted_per_peer.push_back(st_accepted_[r]);
    s.rx_cumulative_per_peer.push_back(st_rx_cum_[r]);
    s.tx_acknowledged_per_peer.push_back(st_tx_acked_[r]);
  }
  for (int i = 0; i < size_ * num_rails_; ++i) {
    s.path_downs_in_window.push_back(st_downs_[i]);
    s.path_first_down_ns.push_back(st_first_down_ns_[i]);
    s.path_hold_until_ns.push_back(st_hold_until_ns_[i]);
  }
  if (serving_relays_) s.relay_bytes_forwarded = backend_->relay_bytes_forwarded();
  return s;
}

void Engine::Shutdown() {
  if (!started_) return;
  if (thread_.joinable()) {
    Post([this] {
      // Orderly close: a final acknowledgement and BYE on every live connection.
      for (size_t p = 0; p < peers_.size(); ++p) {
        for (int ci : peers_[p].conns) {
          if (!conns_[ci].alive) continue;
          TxItem bye;
          bye.hdr = wire::MakeHeader(wire::FrameType::kBye, comm_id_);
          bye.hdr.chunk_seq = AckValue(peers_[p]);
          bye.hdr.offset = peers_[p].cum;
          wire::Seal(&bye.hdr, nullptr);
          conns_[ci].ctrl.push_back(std::move(bye));
          Flush(ci);
        }
      }
      stopping_ = true;
    });
    thread_.join();
  }
  for (auto& c : conns_) {
    if (c.link && c.alive && !c.half_closed) c.link->ShutdownWrite();
    c.link.reset();
    c.alive = false;
  }
  started_ = false;
  // Other ranks of this host may still be relaying through this one: their sessions get a
  // moment to finish (they end as soon as both ends close).
  if (serving_relays_) backend_->StopRelays(kRelayGrace);
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.ok()) error_ = Aborted("communicator destroyed");
  // Every collective still waiting ends now, not at its deadline: the destructor joins it.
  fail_from_ = 0;
  failed_ = true;
  released_from_ = 0;  // the progress thread is gone: no buffer is touched any more
  cv_.notify_all();
}

void Engine::Loop() {
  epoll_event events[64];
  Clock::time_point stop_by{};
  auto next_tick = Clock::now() + kTick;
  for (;;) {
    const bool hedging = hedge_watch_ && options_.hedge_floor.count() > 0;
    int n = epoll_wait(epoll_.get(), events, 64,
                       static_cast<int>(hedging ? kHedgeEvery.count() : kTick.count()));
    if (n < 0 && errno != EINTR) {
      LOG_ERROR(tag_, "epoll_wait: %s", strerror(errno));
      FailLocked(ErrnoStatus("epoll_wait", errno), 0);
      break;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kWakeId) {
        uint64_t v;
        (void)!read(wake_.get(), &v, sizeof(v));
        continue;
      }
      if (id == kLinkWatchId) {
        auto on_change = [this](int rail, bool up) {
          SetRailLink(rail, up);
          return !failed_;
        };
        for (;;) {
          if (link_watch_->Read(on_change) != LinkWatch::ReadResult::kOverrun) break;
          // The kernel dropped notifications (the socket's buffer overran while this thread
          // was busy): the transitions in them are lost, so read every rail's state afresh.
          LOG_WARN(tag_, "link notifications overran: reading the rails' link state again");
          if (!link_watch_->Resync(on_change)) break;
        }
        continue;
      }
      if (id == kSetupId) {
        OnSetupEvents();
        continue;
      }
      const int ci = static_cast<int>(id);
      Conn& c = conns_[ci];
      if (!c.alive) continue;
      const uint32_t ready = c.link->Ready(events[i].events);
      if (ready & EPOLLOUT) {
        c.blocked = false;
        WatchLink(ci, false);
        Flush(ci);
      }
      if (c.alive && (ready & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))) OnReadable(ci);
    }
    RunCommands();
    SendAcks();
    auto now = Clock::now();
    if (now >= next_tick) {
      CheckTimers();
      next_tick = now + kTick;
    }
    if (hedging && now >= next_hedge_ && !failed_) {
      HedgeCheck(now);
      next_hedge_ = now + kHedgeEvery;
    }
    FlushWakeups();
    if (stopping_) {
      // Orderly close: once a connection's BYE is out, half-close it and drain until the peer
      // closes too, so that no side ever closes with unread data (which would send a reset).
      if (stop_by == Clock::time_point{}) stop_by = now + std::chrono::milliseconds(500);
      bool open = false;
      for (auto& c : conns_) {
        if (!c.alive) continue;
        if (!c.cur && c.ctrl.empty() && !c.half_closed) {
          c.link->ShutdownWrite();
          c.half_closed = true;
        }
        open = true;
      }
      if (!open || now >= stop_by) break;
    }
  }
  // Nothing runs the posted commands any more, and no buffer is touched again.
  wake_due_ = false;
  std::lock_guard<std::mutex> lock(mu_);
  released_from_ = 0;
  cv_.notify_all();
}

void Engine::RunCommands() {
  std::vector<std::function<void()>> cmds;
  {
    std::lock_guard<std::mutex> lock(cmd_mu_);
    cmds.swap(cmds_);
  }
  for (auto& c : cmds) c();
}

void Engine::WatchLink(int ci, bool write) {
  epoll_event e{};
  e.events = EPOLLIN | EPOLLRDHUP;
  if (write) e.events |= EPOLLOUT;
  e.data.u64 = static_cast<uint64_t>(ci);
  epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, conns_[ci].link->fd(), &e);
}

void Engine::UnwatchLink(Conn& c, bool reset) {
  if (!c.link) return;
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.link->fd(), nullptr);
  if (reset) {
    c.link->Reset();
  } else {
    c.link->Close();
  }
}

void Engine::Complete(const OpPtr& op, Status st) {
  if (op->finished) return;
  op->finished = true;
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    op->status = std::move(st);
    op->done.store(true, std::memory_order_release);
    wake = op->waiters > 0;
  }
  if (!wake) return;
  // Woken only if a thread waits on this very op, and after the lock is released, so that it
  // does not wake only to block on the mutex. On the progress thread the wake-up waits for the
  // end of the loop's pass (FlushWakeups), after the acknowledgements: a woken caller that
  // takes this core first would otherwise hold back the acknowledgement its peer waits for.
  if (progress_id_.load() == std::this_thread::get_id()) {
    wake_due_ = true;
  } else {
    cv_.notify_all();
  }
}

void Engine::FlushWakeups() {
  if (!wake_due_) return;
  wake_due_ = false;
  cv_.notify_all();
}

void Engine::FailLocked(const Status& why, uint64_t coll_seq, int lost) {
  fail_handled_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A peer's abort naming this rank: the others lost it (it was stopped or cut off) and go on
    // without it. That outranks whichever peer this rank itself found gone meanwhile.
    if (lost == rank_) {
      lost_peer_ = rank_;
    } else if (lost_peer_ < 0 && lost >= 0 && lost < size_) {
      lost_peer_ = lost;
    }
    if (error_.ok()) error_ = why;
    if (coll_seq < fail_from_) fail_from_ = coll_seq;
    failed_ = true;
  }
  Status err = error();
  const uint64_t from = fail_from_;
  // Fail every pending op of the failed collectives, and stop touching the buffers they lent
  // us: a chunk being received goes to the discard buffer, a chunk being sent is copied so its
  // frame can still end cleanly. Ops of earlier collectives carry on.
  for (auto& p : peers_) {
    for (auto it = p.unacked.begin(); it != p.unacked.end();) {
      if (it->second.op->key.coll_seq >= from) {
        Complete(it->second.op, err);
        it = p.unacked.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = p.rx.begin(); it != p.rx.end();) {
      if (it->first.coll_seq >= from) {
        if (it->second->recv) Complete(it->second->recv, err);
        it = p.rx.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : conns_) {
    if (c.rx.in_payload && c.rx.msg && c.rx.msg->key.coll_seq >= from) {
      peers_[c.peer].inflight.erase(c.rx.hdr.chunk_seq);
      c.rx.msg.reset();
      c.rx.dst = nullptr;
    }
    if (c.cur && c.cur->is_data && !c.cur->owned) {
      c.cur->owned.reset(new uint8_t[c.cur->len + 1]);
      std::memcpy(c.cur->owned.get(), c.cur->payload, c.cur->len);
      c.cur->payload = c.cur->owned.get();
    }
  }
  if (!abort_sent_) {
    // Tell every peer, best effort, so that nobody waits for its deadline.
    abort_sent_ = true;
    Emit(EventKind::kAbort, -1, -1, -1, err.ToString());
    LOG_WARN(tag_, "communicator failed: %s", err.ToString().c_str());
    std::string text = err.message();
    const uint64_t lost_field = static_cast<uint64_t>(LostPeer() + 1);
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_ || peers_[peer].gone) continue;
      TxItem item;
      item.hdr = wire::MakeHeader(wire::FrameType::kAbort, comm_id_);
      item.hdr.coll_seq = coll_seq;
      item.hdr.tag = static_cast<uint32_t>(err.code());
      item.hdr.offset = lost_field;
      item.len = static_cast<uint32_t>(text.size());
      item.owned.reset(new uint8_t[text.size() + 1]);
      std::memcpy(item.owned.get(), text.data(), text.size());
      item.payload = item.owned.get();
      item.hdr.length = item.len;
      wire::Seal(&item.hdr, item.payload);
      // Behind the last acknowledgement on the same connection, so the peer learns what was
      // delivered before it learns of the abort.
      int ci = peers_[peer].last_ack_conn;
      if (ci >= 0 && conns_[ci].alive) {
        conns_[ci].ctrl.push_back(std::move(item));
        Flush(ci);
      } else {
        EnqueueCtrl(peer, std::move(item));
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  released_from_ = std::min(released_from_, from);
  cv_.notify_all();
}

void Engine::Emit(EventKind kind, int peer, int rail, int channel, std::string reason) {
  Event e;
  e.time_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  e.kind = kind;
  e.peer = peer;
  e.rail = rail;
  e.channel = channel;
  e.reason = std::move(reason);
  std::lock_guard<std::mutex> lock(events_mu_);
  if (events_.size() < 100000) events_.push_back(std::move(e));
}

std::vector<Event> Engine::DrainEvents() {
  std::lock_guard<std::mutex> lock(events_mu_);
  std::vector<Event> out;
  out.swap(events_);
  return out;
}

Status Engine::MismatchStatus(uint64_t coll_seq, int peer, const Signature& mine,
                              const Signature& theirs) const {
  return Mismatch("collective #" + std::to_string(coll_seq) + ": rank " + std::to_string(rank_) +
                  " called " + mine.ToString() + " but rank " + std::to_string(peer) + " called " +
                  theirs.ToString());
}

std::string Engine::Label(const Conn& c) const {
  if (c.relay) return "rank " + std::to_string(c.peer) + " relay";
  return ConnLabel(c.peer, c.rail, c.channel);
}

}  // namespace ftccl::transport::engine
