#include "transport/tcp/transport.h"

#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "log.h"

namespace ftccl::transport {

std::string Signature::ToString() const {
  std::string s = std::string(CollKindName(kind)) + "(dtype=" + DataTypeName(dtype) +
                  ", count=" + std::to_string(count);
  if (kind == CollKind::kAllReduce || kind == CollKind::kReduceScatter ||
      kind == CollKind::kReduce) {
    s += std::string(", op=") + ReduceOpName(op);
  }
  if (kind == CollKind::kBroadcast || kind == CollKind::kReduce)
    s += ", root=" + std::to_string(root);
  return s + ")";
}

namespace tcp {
namespace {

constexpr size_t kHdr = sizeof(wire::FrameHeader);
constexpr uint32_t kMaxFrame = 64u << 20;
constexpr size_t kReadBudget = 4u << 20;
constexpr size_t kDiscardBytes = 1u << 20;
constexpr auto kTick = std::chrono::milliseconds(10);
// epoll ids: a connection's socket is its index; the rest live above 2^32.
constexpr uint64_t kConnectId = 1ull << 32;  // + connection index: a reconnect in progress
constexpr uint64_t kListenId = 2ull << 32;   // + rail: the rail's listener
constexpr uint64_t kPendingId = 3ull << 32;  // + n: an accepted socket waiting for its hello
constexpr auto kHelloTimeout = std::chrono::seconds(1);
constexpr auto kConnectTimeout = std::chrono::seconds(1);
// The shortest a reconnect attempt waits for its handshake (see ConnectTimeout).
constexpr auto kConnectFloor = std::chrono::milliseconds(200);
// The rail field of a relay connection's hello (its path is rail num_rails, channel 0).
constexpr uint32_t kRelayHelloRail = 0xFFFF;
// A relay that is no longer needed is closed once its data is acknowledged, or after this.
constexpr auto kRelayDrain = std::chrono::milliseconds(500);
// A suspect connection whose probes stay unanswered this long is connected afresh.
constexpr auto kRedialAfter = std::chrono::seconds(1);
// A rail that comes back after a link-down this long (longer than TCP's minimum retransmission
// timeout, so its sockets are backing off): its suspect connections are redialled. A shorter
// flap is left to the sockets' own retransmissions.
constexpr auto kRedialOnUp = std::chrono::milliseconds(250);
// How long the relay service lets sessions of other ranks finish when this rank shuts down.
constexpr auto kRelayGrace = std::chrono::milliseconds(1000);

std::string ConnLabel(int peer, int rail, int channel) {
  return "rank " + std::to_string(peer) + " rail " + std::to_string(rail) + " channel " +
         std::to_string(channel);
}

// The port of a connection's connecting end (its local port there, its peer's port at the
// accepting end): the same number at both ends, and different for every connection.
uint16_t ConnectorPort(int fd, bool i_connected) {
  sockaddr_in sa{};
  socklen_t len = sizeof(sa);
  const int rc = i_connected ? getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len)
                             : getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  if (rc != 0 || sa.sin_family != AF_INET) return 0;
  return ntohs(sa.sin_port);
}

Status ApplySocketOptions(int fd, const CommOptions& o) {
  FTCCL_RETURN_IF_ERROR(net::SetNoDelay(fd));
  const int buf_bytes = o.socket_buffer_bytes;
  if (buf_bytes > 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf_bytes, sizeof(buf_bytes));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf_bytes, sizeof(buf_bytes));
  }
  // The kernel's own verdict on a path that stays silent: the connection fails with ETIMEDOUT
  // instead of retransmitting for many minutes.
  if (o.tcp_user_timeout.count() > 0) {
    unsigned int ms = static_cast<unsigned int>(o.tcp_user_timeout.count());
    if (setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms)) != 0) {
      return ErrnoStatus("setsockopt(TCP_USER_TIMEOUT)", errno);
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::pair<net::Fd, net::Endpoint>>> TcpTransport::OpenListeners(
    const std::vector<uint32_t>& rail_ips) {
  std::vector<std::pair<net::Fd, net::Endpoint>> out;
  for (size_t r = 0; r < rail_ips.size(); ++r) {
    auto l = net::Listen(rail_ips[r], 0);
    if (!l.ok()) return l.status().WithContext("rail " + std::to_string(r));
    out.push_back(std::move(l.value()));
  }
  return out;
}

TcpTransport::TcpTransport(const CommOptions& options, const BootstrapTable& table)
    : options_(options),
      rank_(options.rank),
      size_(options.size),
      num_rails_(table.num_rails),
      comm_id_(table.comm_id),
      peers_(options.size),
      discard_(new uint8_t[kDiscardBytes]),
      rng_(options.wire_faults.seed * 1000003u + static_cast<uint64_t>(options.rank)),
      st_rail_bytes_(new std::atomic<uint64_t>[table.num_rails + 1]) {
  // One more than the rails: the bytes sent over relays.
  for (int r = 0; r <= num_rails_; ++r) st_rail_bytes_[r] = 0;
}

Result<std::unique_ptr<TcpTransport>> TcpTransport::Connect(
    const CommOptions& options, const BootstrapTable& table,
    std::vector<std::pair<net::Fd, net::Endpoint>> listeners, const std::vector<uint32_t>& rail_ips,
    Clock::time_point deadline) {
  std::unique_ptr<TcpTransport> t(new TcpTransport(options, table));
  t->rail_ips_ = rail_ips;
  t->peer_eps_ = table.rails;
  const int rank = options.rank;
  const int nch = options.channels_per_rail;
  auto add_conn = [&](net::Fd fd, int peer, int rail, int channel) -> Status {
    FTCCL_RETURN_IF_ERROR(ApplySocketOptions(fd.get(), options));
    FTCCL_RETURN_IF_ERROR(net::SetNonBlocking(fd.get()));
    Conn c;
    c.conn_port = ConnectorPort(fd.get(), rank > peer);
    c.fd = std::move(fd);
    c.peer = peer;
    c.rail = rail;
    c.channel = channel;
    t->peers_[peer].conns.push_back(static_cast<int>(t->conns_.size()));
    t->conns_.push_back(std::move(c));
    return Status::Ok();
  };
  // Outgoing: to every lower rank.
  for (int peer = 0; peer < rank; ++peer) {
    for (int rail = 0; rail < table.num_rails; ++rail) {
      for (int ch = 0; ch < nch; ++ch) {
        const net::Endpoint& to = table.rails[peer][rail];
        auto fd = net::Connect(to, rail_ips[rail], deadline);
        if (!fd.ok()) return fd.status().WithContext("connecting to " + ConnLabel(peer, rail, ch));
        wire::FrameHeader h = wire::MakeHeader(wire::FrameType::kHello, table.comm_id);
        h.root = rank;
        h.tag = static_cast<uint32_t>(rail << 16 | ch);
        wire::Seal(&h, nullptr);
        FTCCL_RETURN_IF_ERROR(net::WriteFull(fd->get(), &h, sizeof(h), deadline));
        FTCCL_RETURN_IF_ERROR(add_conn(std::move(fd.value()), peer, rail, ch));
      }
    }
  }
  // Incoming: from every higher rank, on each rail's listener.
  const int expected_per_rail = (options.size - 1 - rank) * nch;
  for (int rail = 0; rail < table.num_rails; ++rail) {
    for (int i = 0; i < expected_per_rail; ++i) {
      auto fd = net::Accept(listeners[rail].first.get(), deadline);
      if (!fd.ok()) {
        return fd.status().WithContext("waiting for connections from higher ranks on rail " +
                                       std::to_string(rail));
      }
      wire::FrameHeader h;
      Status st = net::ReadFull(fd->get(), &h, sizeof(h), deadline);
      if (!st.ok()) return st.WithContext("reading the hello of a data connection");
      if (!wire::HeaderValid(h) || h.type != static_cast<uint8_t>(wire::FrameType::kHello) ||
          h.comm_id != table.comm_id || h.root <= rank || h.root >= options.size ||
          static_cast<int>(h.tag >> 16) != rail) {
        return Corrupt("unexpected hello on rail " + std::to_string(rail) +
                       " (foreign communicator or corrupt frame)");
      }
      FTCCL_RETURN_IF_ERROR(
          add_conn(std::move(fd.value()), h.root, rail, static_cast<int>(h.tag & 0xFFFF)));
    }
  }
  if (options.transport == "verbs") FTCCL_RETURN_IF_ERROR(t->UpgradeToVerbs(deadline));
  // Kept open: a higher rank whose connection broke connects again.
  for (auto& l : listeners) t->listeners_.push_back(std::move(l.first));
  // Intra-host relay: a slot per peer for a path through this host's other ranks (or, for a
  // peer on this host, straight over a Unix socket). Empty until a rank loses its rails.
  t->hosts_ = table.hosts;
  t->hosts_.resize(options.size, 0);
  t->relay_slot_.assign(options.size, -1);
  if (options.relay && options.transport == "tcp" && options.size > 1) {
    for (int r = 0; r < options.size; ++r) {
      if (r != rank && t->hosts_[r] == t->hosts_[rank]) t->neighbours_.push_back(r);
    }
    for (int peer = 0; peer < options.size; ++peer) {
      if (peer == rank) continue;
      Conn c;
      c.peer = peer;
      c.rail = table.num_rails;
      c.channel = 0;
      c.alive = false;
      c.relay = true;
      t->relay_slot_[peer] = static_cast<int>(t->conns_.size());
      t->peers_[peer].conns.push_back(static_cast<int>(t->conns_.size()));
      t->conns_.push_back(std::move(c));
    }
  }
  return t;
}

TcpTransport::~TcpTransport() { Shutdown(); }

Status TcpTransport::Start() {
  epoll_ = net::Fd(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) return ErrnoStatus("epoll_create1", errno);
  wake_ = net::Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_.valid()) return ErrnoStatus("eventfd", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = UINT64_MAX;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) != 0) {
    return ErrnoStatus("epoll_ctl(eventfd)", errno);
  }
  const auto start = Clock::now();
  for (size_t i = 0; i < conns_.size(); ++i) {
    conns_[i].last_progress = start;
    if (!conns_[i].alive) continue;  // a relay slot, unused so far
    epoll_event e{};
    e.events = EPOLLIN | EPOLLRDHUP;
    e.data.u64 = i;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, conns_[i].fd.get(), &e) != 0) {
      return ErrnoStatus("epoll_ctl(conn)", errno);
    }
  }
  for (size_t r = 0; r < listeners_.size(); ++r) {
    if (!listeners_[r].valid()) continue;
    FTCCL_RETURN_IF_ERROR(net::SetNonBlocking(listeners_[r].get()));
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u64 = kListenId + r;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listeners_[r].get(), &e) != 0) {
      return ErrnoStatus("epoll_ctl(listener)", errno);
    }
  }
  if (options_.watch_links) {
    Status st = OpenLinkWatch();
    if (st.ok()) {
      epoll_event e{};
      e.events = EPOLLIN;
      e.data.u64 = UINT64_MAX - 1;
      if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, link_watch_.get(), &e) != 0) link_watch_.Reset();
    } else {
      LOG_WARN("NET/TCP", "not watching link state (%s): detection relies on timeouts",
               st.ToString().c_str());
    }
  }
  if (!neighbours_.empty()) {
    RelayService::Config rc;
    rc.comm_id = comm_id_;
    rc.rank = rank_;
    rc.hosts = hosts_;
    rc.rail_ips = rail_ips_;
    rc.peer_eps = peer_eps_;
    rc.rail_up = [this](int r) { return r >= 64 || ((rails_up_mask_.load() >> r) & 1) != 0; };
    const CommOptions opts = options_;
    rc.prepare_tcp = [opts](int fd) { ApplySocketOptions(fd, opts).ok(); };
    rc.deliver_local = [this](net::Fd fd, int /*src*/) {
      auto held = std::make_shared<net::Fd>(std::move(fd));
      Post([this, held] { AdoptLocal(std::move(*held)); });
    };
    auto svc = RelayService::Start(std::move(rc));
    if (svc.ok()) {
      relay_service_ = std::move(svc.value());
    } else {
      LOG_WARN("NET/TCP", "not serving relays for this host's ranks: %s",
               svc.status().ToString().c_str());
    }
  }
  started_ = true;
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void TcpTransport::Post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(cmd_mu_);
    cmds_.push_back(std::move(fn));
  }
  uint64_t one = 1;
  if (wake_.valid()) (void)!write(wake_.get(), &one, sizeof(one));
}

void TcpTransport::Begin(uint64_t coll_seq, const Signature& sig) {
  Post([this, coll_seq, sig] { OnBegin(coll_seq, sig); });
}

OpPtr TcpTransport::Send(int peer, const MsgKey& key, const Signature& sig, const void* buf,
                         size_t len) {
  auto op = std::make_shared<Op>();
  op->kind = Op::Kind::kSend;
  op->peer = peer;
  op->key = key;
  op->sig = sig;
  op->buf = static_cast<uint8_t*>(const_cast<void*>(buf));
  op->len = len;
  op->chunk_bytes = std::max<size_t>(1, std::min<size_t>(options_.chunk_bytes, kMaxFrame));
  for (size_t off = 0; off < len; off += op->chunk_bytes) {
    op->chunk_crcs.push_back(Crc32c(op->buf + off, std::min(op->chunk_bytes, len - off)));
  }
  Post([this, op] { PostSend(op); });
  return op;
}

OpPtr TcpTransport::Recv(int peer, const MsgKey& key, const Signature& sig, void* buf, size_t len) {
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

Status TcpTransport::Wait(const OpPtr& op, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto dead = [&] { return !error_.ok() && op->key.coll_seq >= fail_from_; };
  bool ready = cv_.wait_until(lock, deadline,
                              [&] { return op->done.load(std::memory_order_acquire) || dead(); });
  if (op->done.load(std::memory_order_acquire)) return op->status;
  if (dead()) {
    // The caller may free the operation's buffers once this returns: wait until the progress
    // thread has let go of every buffer of the failed operations (FailLocked ran). It never
    // blocks, so the wait is short; the bound guards against a thread that is gone.
    if (started_ && std::this_thread::get_id() != thread_.get_id()) {
      cv_.wait_for(lock, std::chrono::seconds(5), [&] { return fail_done_; });
    }
    return error_;
  }
  (void)ready;
  return Timeout("no progress on " +
                 std::string(op->kind == Op::Kind::kSend ? "send to" : "receive from") + " rank " +
                 std::to_string(op->peer) + " (collective #" + std::to_string(op->key.coll_seq) +
                 ") before the deadline");
}

void TcpTransport::Fail(const Status& why, uint64_t coll_seq) {
  std::unique_lock<std::mutex> lock(mu_);
  if (error_.ok()) error_ = why;
  if (coll_seq < fail_from_) fail_from_ = coll_seq;
  failed_ = true;
  cv_.notify_all();
  if (!started_ || std::this_thread::get_id() == thread_.get_id()) return;
  lock.unlock();
  Post([this, why, coll_seq] { FailLocked(why, coll_seq); });
  // Return only once the progress thread has let go of every buffer of the failed ops, so the
  // caller may free them. The progress thread never blocks, so this wait is short.
  lock.lock();
  cv_.wait_for(lock, std::chrono::seconds(5), [&] { return fail_done_; });
}

Status TcpTransport::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

CommStats TcpTransport::Stats() const {
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
  for (int r = 0; r < num_rails_; ++r) s.payload_bytes_sent_per_rail.push_back(st_rail_bytes_[r]);
  s.relay_payload_bytes_sent = st_rail_bytes_[num_rails_];
  if (relay_service_) s.relay_bytes_forwarded = relay_service_->bytes_forwarded();
  return s;
}

void TcpTransport::Shutdown() {
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
    if (c.fd.valid()) {
      if (!c.link) ::shutdown(c.fd.get(), SHUT_WR);
      c.fd.Reset();
    }
    c.link.reset();
    c.alive = false;
  }
  started_ = false;
  // Other ranks of this host may still be relaying through this one: their sessions get a
  // moment to finish (they end as soon as both ends close).
  if (relay_service_) relay_service_->Stop(kRelayGrace);
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.ok()) error_ = Aborted("communicator destroyed");
  fail_done_ = true;  // the progress thread is gone: no buffer is touched any more
  cv_.notify_all();
}

// ---------------------------------------------------------------------------------------------
// Progress thread.

void TcpTransport::Loop() {
  epoll_event events[64];
  Clock::time_point stop_by{};
  auto next_tick = Clock::now() + kTick;
  for (;;) {
    int n = epoll_wait(epoll_.get(), events, 64, static_cast<int>(kTick.count()));
    if (n < 0 && errno != EINTR) {
      LOG_ERROR("NET/TCP", "epoll_wait: %s", strerror(errno));
      FailLocked(ErrnoStatus("epoll_wait", errno), 0);
      break;
    }
    for (int i = 0; i < n; ++i) {
      uint64_t id = events[i].data.u64;
      if (id == UINT64_MAX) {
        uint64_t v;
        (void)!read(wake_.get(), &v, sizeof(v));
        continue;
      }
      if (id == UINT64_MAX - 1) {
        OnLinkMessages();
        continue;
      }
      if (id >= kPendingId) {
        OnPendingReadable(id);
        continue;
      }
      if (id >= kListenId) {
        OnAccept(static_cast<int>(id - kListenId));
        continue;
      }
      if (id >= kConnectId) {
        OnConnectDone(static_cast<int>(id - kConnectId));
        continue;
      }
      int ci = static_cast<int>(id);
      if (!conns_[ci].alive) continue;
      if (conns_[ci].link) events[i].events = conns_[ci].link->Ready(events[i].events);
      if (events[i].events & EPOLLOUT) {
        conns_[ci].blocked = false;
        WatchWrite(ci, false);
        Flush(ci);
      }
      if (conns_[ci].alive && (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))) {
        OnReadable(ci);
      }
    }
    RunCommands();
    SendAcks();
    auto now = Clock::now();
    if (now >= next_tick) {
      CheckTimers();
      next_tick = now + kTick;
    }
    if (stopping_) {
      // Orderly close: once a connection's BYE is out, half-close it and drain until the peer
      // closes too, so that no side ever closes with unread data (which would send a reset).
      if (stop_by == Clock::time_point{}) stop_by = now + std::chrono::milliseconds(500);
      bool open = false;
      for (auto& c : conns_) {
        if (!c.alive) continue;
        if (!c.cur && c.ctrl.empty() && !c.half_closed) {
          if (c.link) {
            c.link->ShutdownWrite();
          } else {
            ::shutdown(c.fd.get(), SHUT_WR);
          }
          c.half_closed = true;
        }
        open = true;
      }
      if (!open || now >= stop_by) break;
    }
  }
}

void TcpTransport::RunCommands() {
  std::vector<std::function<void()>> cmds;
  {
    std::lock_guard<std::mutex> lock(cmd_mu_);
    cmds.swap(cmds_);
  }
  for (auto& c : cmds) c();
}

void TcpTransport::Complete(const OpPtr& op, Status st) {
  if (op->finished) return;
  op->finished = true;
  std::lock_guard<std::mutex> lock(mu_);
  op->status = std::move(st);
  op->done.store(true, std::memory_order_release);
  cv_.notify_all();
}

void TcpTransport::FailLocked(const Status& why, uint64_t coll_seq) {
  {
    std::lock_guard<std::mutex> lock(mu_);
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
    if (c.in_payload && c.msg && c.msg->key.coll_seq >= from) {
      peers_[c.peer].inflight.erase(c.hdr.chunk_seq);
      c.msg.reset();
      c.dst = nullptr;
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
    LOG_WARN("NET/TCP", "communicator failed: %s", err.ToString().c_str());
    std::string text = err.message();
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_ || peers_[peer].gone) continue;
      TxItem item;
      item.hdr = wire::MakeHeader(wire::FrameType::kAbort, comm_id_);
      item.hdr.coll_seq = coll_seq;
      item.hdr.tag = static_cast<uint32_t>(err.code());
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
  fail_done_ = true;
  cv_.notify_all();
}

int TcpTransport::PickConn(int peer) {
  Peer& p = peers_[peer];
  const size_t n = p.conns.size();
  for (size_t i = 0; i < n; ++i) {
    int ci = p.conns[(p.ack_rr + i) % n];
    if (conns_[ci].alive && !conns_[ci].blocked && !conns_[ci].suspect) {
      p.ack_rr = (p.ack_rr + i + 1) % n;
      return ci;
    }
  }
  for (int ci : p.conns) {
    if (conns_[ci].alive && !conns_[ci].suspect) return ci;
  }
  for (int ci : p.conns) {
    if (conns_[ci].alive) return ci;
  }
  return -1;
}

void TcpTransport::EnqueueCtrl(int peer, TxItem item) {
  int ci = PickConn(peer);
  if (ci < 0) return;
  conns_[ci].ctrl.push_back(std::move(item));
  Flush(ci);
}

void TcpTransport::PostSend(const OpPtr& op) {
  if (Dead(op->key.coll_seq)) {
    Complete(op, error());
    return;
  }
  Peer& p = peers_[op->peer];
  if (p.gone) {
    FailLocked(PeerLost("rank " + std::to_string(op->peer) + " is no longer connected"),
               op->key.coll_seq);
    return;
  }
  const size_t chunk = op->chunk_bytes;
  size_t nchunks = op->len == 0 ? 1 : (op->len + chunk - 1) / chunk;
  op->chunks_left = nchunks;
  for (size_t i = 0; i < nchunks; ++i) {
    uint64_t seq = p.next_seq++;
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
    c.hdr.payload_crc = c.len ? op->chunk_crcs[i] : 0;
    c.hdr.header_crc = wire::HeaderCrc(c.hdr);
    c.in_ready = true;
    p.unacked.emplace(seq, std::move(c));
    p.ready.push_back(seq);
  }
  Kick(op->peer);
}

void TcpTransport::PostRecv(const OpPtr& op) {
  if (Dead(op->key.coll_seq)) {
    Complete(op, error());
    return;
  }
  Peer& p = peers_[op->peer];
  auto it = p.rx.find(op->key);
  if (it == p.rx.end()) {
    if (p.gone) {
      FailLocked(PeerLost("rank " + std::to_string(op->peer) + " is no longer connected"),
                 op->key.coll_seq);
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
  for (auto [off, len] : msg.staged) std::memcpy(op->buf + off, msg.staging.get() + off, len);
  msg.staged.clear();
  msg.recv = op;
  if (msg.any_chunk && msg.bytes_done == msg.len) {
    p.rx.erase(it);
    Complete(op, Status::Ok());
  }
}

void TcpTransport::Kick(int peer) {
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

void TcpTransport::WatchWrite(int ci, bool on) {
  epoll_event e{};
  e.events = EPOLLIN | EPOLLRDHUP;
  if (on) e.events |= EPOLLOUT;
  e.data.u64 = static_cast<uint64_t>(ci);
  epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, conns_[ci].fd.get(), &e);
}

bool TcpTransport::PullData(int ci) {
  Conn& c = conns_[ci];
  Peer& p = peers_[c.peer];
  if (c.outstanding >= Window(c)) {
    if (!p.ready.empty()) c.saturated = true;
    return false;
  }
  if (c.suspect) {
    // A suspect path carries data only when the peer has no other path left.
    for (int cj : p.conns) {
      if (cj != ci && conns_[cj].alive && !conns_[cj].suspect) return false;
    }
  }
  if (c.relay) {
    // A relay borrows a neighbour's rail: only while no direct path to the peer works.
    for (int cj : p.conns) {
      if (!conns_[cj].relay && conns_[cj].alive && !conns_[cj].suspect) return false;
    }
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
    ch.in_ready = false;
    ch.conn = ci;
    Count(ch, ci);
    if (c.failback_pending) {
      c.failback_pending = false;
      Emit(EventKind::kFailback, c.peer, c.rail, c.channel, "data flows on the path again");
    }
    TxItem item;
    item.hdr = ch.hdr;
    item.payload = ch.op->buf + ch.offset;
    item.len = ch.len;
    item.is_data = true;
    item.seq = seq;
    if (ch.tx_count == 0 && wf.duplicate > 0 && u(rng_) < wf.duplicate) {
      // A second copy, owned, on another connection when there is one.
      TxItem dup;
      dup.hdr = ch.hdr;
      dup.len = ch.len;
      dup.owned.reset(new uint8_t[ch.len + 1]);
      std::memcpy(dup.owned.get(), item.payload, ch.len);
      dup.payload = dup.owned.get();
      int other = ci;
      for (int cj : p.conns) {
        if (cj != ci && conns_[cj].alive) other = cj;
      }
      conns_[other].ctrl.push_back(std::move(dup));
      if (other != ci && !conns_[other].blocked) Flush(other);
    }
    if (ch.tx_count == 0 && wf.corrupt > 0 && ch.len > 0 && u(rng_) < wf.corrupt) {
      item.owned.reset(new uint8_t[ch.len]);
      std::memcpy(item.owned.get(), item.payload, ch.len);
      item.owned[rng_() % ch.len] ^= 0x5A;
      item.payload = item.owned.get();
    }
    if (c.corrupt_next) DamageForHook(c, &item);
    c.cur = std::move(item);
    return true;
  }
  return false;
}

size_t TcpTransport::Flush(int ci, size_t max_new_chunks) {
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
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = static_cast<size_t>(niov);
    ssize_t n =
        c.link ? c.link->Writev(iov, niov) : sendmsg(c.fd.get(), &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        c.blocked = true;
        c.saturated = true;
        WatchWrite(ci, true);
        return pulled;
      }
      ConnFailed(ci, c.link ? c.link->error_text() : std::string("send: ") + strerror(errno));
      return pulled;
    }
    it.sent += static_cast<size_t>(n);
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

void TcpTransport::OnReadable(int ci) {
  size_t budget = kReadBudget;
  while (budget > 0 && conns_[ci].alive) {
    Conn& c = conns_[ci];
    ssize_t n;
    if (!c.in_payload) {
      uint8_t* to = reinterpret_cast<uint8_t*>(&c.hdr) + c.hdr_got;
      n = c.link ? c.link->Read(to, kHdr - c.hdr_got)
                 : recv(c.fd.get(), to, kHdr - c.hdr_got, MSG_DONTWAIT);
    } else {
      size_t want = c.hdr.length - c.payload_got;
      uint8_t* to = c.dst ? c.dst + c.payload_got : discard_.get();
      if (!c.dst && want > kDiscardBytes) want = kDiscardBytes;
      if (c.dst == nullptr && !c.text.empty()) {
        to = reinterpret_cast<uint8_t*>(c.text.data()) + c.payload_got;
      }
      n = c.link ? c.link->Read(to, want) : recv(c.fd.get(), to, want, MSG_DONTWAIT);
    }
    if (n == 0) {
      Peer& p = peers_[c.peer];
      if (p.closing && !c.in_payload && c.hdr_got == 0) {
        c.alive = false;
        epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
        c.fd.Reset();
        bool any = false;
        for (int cj : p.conns) any |= conns_[cj].alive;
        if (!any) PeerGone(c.peer, "rank " + std::to_string(c.peer) + " closed its communicator");
      } else {
        ConnFailed(ci, "connection closed by " + Label(c), true);
      }
      return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      ConnFailed(ci, c.link ? c.link->error_text() : std::string("recv: ") + strerror(errno));
      return;
    }
    budget -= std::min(budget, static_cast<size_t>(n));
    if (!c.in_payload) {
      c.hdr_got += static_cast<size_t>(n);
      if (c.hdr_got == kHdr) OnHeader(ci);
    } else {
      c.payload_got += static_cast<size_t>(n);
      if (c.payload_got == c.hdr.length) OnPayloadDone(ci);
    }
  }
}

void TcpTransport::OnHeader(int ci) {
  Conn& c = conns_[ci];
  c.hdr_got = 0;
  const wire::FrameHeader& h = c.hdr;
  if (!wire::HeaderValid(h) || h.comm_id != comm_id_ || h.length > kMaxFrame) {
    st_crc_++;
    LOG_WARN("NET/TCP", "corrupt frame header from %s: dropping the connection", Label(c).c_str());
    ConnFailed(ci, "corrupt frame header");
    return;
  }
  Peer& p = peers_[c.peer];
  auto type = static_cast<wire::FrameType>(h.type);
  c.dst = nullptr;
  c.msg.reset();
  c.text.clear();
  c.payload_got = 0;
  switch (type) {
    case wire::FrameType::kAck:
      HandleAck(c.peer, h.chunk_seq, h.offset, ci);
      if (h.length > 0 && h.length <= wire::kMaxSackRanges * 16) {
        c.text.assign(h.length, '\0');  // the selective ranges, read as a payload
        c.in_payload = true;
      } else if (h.length > 0) {
        ConnFailed(ci, "malformed acknowledgement");
      }
      return;
    case wire::FrameType::kPing: {
      // Answer on the same connection: the answer proves this path works.
      TxItem pong;
      pong.hdr = wire::MakeHeader(wire::FrameType::kPong, comm_id_);
      pong.hdr.chunk_seq = h.chunk_seq;
      wire::Seal(&pong.hdr, nullptr);
      c.ctrl.push_back(std::move(pong));
      Flush(ci);
      return;
    }
    case wire::FrameType::kPong: {
      const auto now = Clock::now();
      Progress(c, now);
      if (h.chunk_seq == c.ping_nonce) {
        RttSample(c, std::chrono::duration<double, std::milli>(now - c.last_ping).count());
        c.ping_outstanding_since = {};
      }
      if (c.suspect) c.up_since_down = true;
      // An answer returns a suspect path to use once its hold-down is over; until then it is
      // probed on (CheckTimers) and the first answer after the hold-down brings it back.
      // Damping never leaves a peer without a path: when no other path to it works, a path
      // that answers is taken back at once.
      bool alone = true;
      for (int cj : p.conns) alone &= cj == ci || !conns_[cj].alive || conns_[cj].suspect;
      if (c.suspect && h.chunk_seq == c.ping_nonce && (now >= c.hold_until || alone) &&
          (c.rail >= static_cast<int>(rail_up_.size()) || rail_up_[c.rail])) {
        c.suspect = false;
        if (c.relay) {
          if (!c.relay_on) {
            c.relay_on = true;
            const std::string via =
                c.relay_initiator
                    ? (c.relay_via == c.peer ? std::string("over a Unix socket on this host")
                                             : "through rank " + std::to_string(c.relay_via))
                    : std::string("relayed by rank ") + std::to_string(c.peer) + "'s host";
            LOG_WARN("NET/TCP", "%s works: traffic to rank %d goes %s", Label(c).c_str(), c.peer,
                     via.c_str());
            Emit(EventKind::kRelayOn, c.peer, c.rail, c.channel,
                 c.relay_reason.empty() ? via : c.relay_reason + ": " + via);
          }
          Kick(c.peer);
          return;
        }
        c.failback_pending = true;
        const size_t flaps = c.downs.size();
        LOG_WARN("NET/TCP", "%s answers again: back in use", Label(c).c_str());
        Emit(EventKind::kPathUp, c.peer, c.rail, c.channel,
             "answers probes again (" + std::to_string(flaps) + " down in the last " +
                 std::to_string(options_.flap_window.count()) + " ms)");
        Kick(c.peer);
      }
      return;
    }
    case wire::FrameType::kPathDown: {
      const int rail = static_cast<int>(h.tag >> 16), ch = static_cast<int>(h.tag & 0xFFFF);
      for (int cj : p.conns) {
        Conn& o = conns_[cj];
        if (o.relay || o.rail != rail || o.channel != ch) continue;
        // A notice that waited out an outage in some queue may be about a connection that has
        // since been replaced: it names the connection by its connecting end's port.
        if (h.offset != 0 && o.conn_port != 0 && h.offset != o.conn_port) continue;
        MarkDown(cj, Clock::now(), "rank " + std::to_string(c.peer) + " reports its end down");
      }
      return;
    }
    case wire::FrameType::kRedial: {
      const int rail = static_cast<int>(h.tag >> 16), ch = static_cast<int>(h.tag & 0xFFFF);
      for (int cj : p.conns) {
        Conn& o = conns_[cj];
        if (o.relay || o.rail != rail || o.channel != ch) continue;
        if (o.alive && o.suspect) {
          Redial(cj, "rank " + std::to_string(c.peer) + "'s end is up again");
        } else if (!o.alive && o.reconnect) {
          // A connect still waiting on a SYN sent into the outage backs off too: start over.
          if (o.connecting.valid()) {
            epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, o.connecting.get(), nullptr);
            o.connecting.Reset();
          }
          StartReconnect(cj, Clock::now());
        }
      }
      return;
    }
    case wire::FrameType::kNack:
      HandleNack(c.peer, h.chunk_seq);
      return;
    case wire::FrameType::kBye:
      HandleAck(c.peer, h.chunk_seq, h.offset, ci);
      p.closing = true;
      return;
    case wire::FrameType::kAbort:
      if (h.length == 0) {
        OnPayloadDone(ci);
        return;
      }
      c.text.assign(h.length, '\0');
      c.in_payload = true;
      return;
    case wire::FrameType::kData:
      break;
    default:
      ConnFailed(ci, "unexpected frame type " + std::to_string(h.type));
      return;
  }
  if (h.offset + h.length > h.msg_len) {
    st_crc_++;
    ConnFailed(ci, "data frame outside its message");
    return;
  }
  const uint64_t seq = h.chunk_seq;
  bool dup = seq < p.cum || p.above.count(seq) > 0;
  if (!dup && p.inflight.count(seq) > 0) {
    // An earlier copy is still being read on another connection, typically one stalled on a
    // broken path: this copy takes over and the rest of the old one goes to the discard buffer
    // (whatever it wrote is overwritten by this complete copy).
    for (int cj : p.conns) {
      Conn& o = conns_[cj];
      if (cj != ci && o.in_payload && o.msg && o.hdr.chunk_seq == seq) {
        o.msg.reset();
        o.dst = nullptr;
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
      if (h.msg_len > 0) msg->staging.reset(new uint8_t[h.msg_len]);
      LOG_DEBUG("NET/TCP", "unexpected message from rank %d: collective #%lu tag %08x, %lu bytes",
                c.peer, static_cast<unsigned long>(h.coll_seq), h.tag,
                static_cast<unsigned long>(h.msg_len));
      it = p.rx.emplace(key, std::move(msg)).first;
    } else if (!(it->second->sig == sig) || it->second->len != h.msg_len) {
      FailLocked(MismatchStatus(h.coll_seq, c.peer, it->second->sig, sig), h.coll_seq);
    }
    if (!Dead(h.coll_seq)) {
      c.msg = it->second;
      c.into_staging = !c.msg->recv;
      c.dst = (c.into_staging ? c.msg->staging.get() : c.msg->recv->buf) + h.offset;
      p.inflight.insert(seq);
    }
  } else if (dup) {
    // Acknowledge again: the sender resends only what it believes lost, so its earlier
    // acknowledgement may have been lost with a path.
    st_dups_++;
    p.ack_dirty = true;
    p.ack_conn = ci;
  }
  if (h.length == 0) {
    OnPayloadDone(ci);
    return;
  }
  c.in_payload = true;
}

void TcpTransport::OnPayloadDone(int ci) {
  Conn& c = conns_[ci];
  c.in_payload = false;
  const wire::FrameHeader h = c.hdr;
  Peer& p = peers_[c.peer];
  if (h.type == static_cast<uint8_t>(wire::FrameType::kAck)) {
    if (Crc32c(c.text.data(), h.length) == h.payload_crc) {
      std::vector<uint64_t> r(h.length / 8);
      std::memcpy(r.data(), c.text.data(), r.size() * 8);
      for (size_t i = 0; i + 1 < r.size(); i += 2) {
        const auto now = Clock::now();
        for (auto it = p.unacked.lower_bound(r[i]); it != p.unacked.end() && it->first < r[i + 1];
             ++it) {
          Credit(it->second, now);
        }
      }
    }
    c.text.clear();
    return;
  }
  if (h.type == static_cast<uint8_t>(wire::FrameType::kAbort)) {
    uint32_t crc = h.length ? Crc32c(c.text.data(), h.length) : 0;
    std::string reason = crc == h.payload_crc ? c.text : std::string("(corrupt reason)");
    c.text.clear();
    auto code = static_cast<Code>(h.tag);
    if (code == Code::kOk || static_cast<int>(code) > static_cast<int>(Code::kInternal)) {
      code = Code::kAborted;
    }
    if (code == Code::kTimeout || code == Code::kInternal) code = Code::kAborted;
    FailLocked(Status(code, "rank " + std::to_string(c.peer) + " aborted collective #" +
                                std::to_string(h.coll_seq) + ": " + reason),
               h.coll_seq);
    return;
  }
  auto msg = std::move(c.msg);
  uint8_t* dst = c.dst;
  c.dst = nullptr;
  if (!msg) return;  // discarded (duplicate or after failure)
  const uint64_t seq = h.chunk_seq;
  p.inflight.erase(seq);
  st_frames_recv_++;
  uint32_t crc = h.length ? Crc32c(dst, h.length) : 0;
  if (crc != h.payload_crc) {
    st_crc_++;
    LOG_WARN("NET/TCP", "CRC mismatch on chunk %lu from %s: dropped, asking for a resend",
             static_cast<unsigned long>(seq), Label(c).c_str());
    TxItem nack;
    nack.hdr = wire::MakeHeader(wire::FrameType::kNack, comm_id_);
    nack.hdr.chunk_seq = seq;
    wire::Seal(&nack.hdr, nullptr);
    st_nacks_++;
    EnqueueCtrl(c.peer, std::move(nack));
    return;
  }
  // Accepted: advance the cumulative acknowledgement.
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
  // A chunk of a collective this rank has not begun yet is kept but not acknowledged.
  if (!begun_ || h.coll_seq > cur_seq_) p.held.emplace(seq, h.coll_seq);
  p.ack_dirty = true;
  p.ack_conn = ci;
  msg->any_chunk = true;
  msg->bytes_done += h.length;
  if (c.into_staging) {
    st_staged_ += h.length;
    if (msg->recv) {
      std::memcpy(msg->recv->buf + h.offset, dst, h.length);
    } else {
      msg->staged.emplace_back(h.offset, h.length);
    }
  }
  if (msg->bytes_done == msg->len && msg->recv) {
    p.rx.erase(msg->key);
    Complete(msg->recv, Status::Ok());
  }
}

void TcpTransport::HandleAck(int peer, uint64_t cum, uint64_t delivered, int from_ci) {
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
  p.delivered = upto;
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

void TcpTransport::Credit(TxChunk& ch, Clock::time_point now) {
  if (ch.delivered) return;
  ch.delivered = true;
  if (ch.conn >= 0 && ch.tx_count > 0) Progress(conns_[ch.conn], now);
  Count(ch, -1);
  if (ch.conn < 0 || ch.tx_count == 0) return;
  Conn& c = conns_[ch.conn];
  c.credited += ch.len;
  // Karn: a chunk sent more than once gives no unambiguous sample.
  if (ch.tx_count == 1)
    RttSample(c, std::chrono::duration<double, std::milli>(now - ch.sent_at).count());
}

void TcpTransport::Count(TxChunk& ch, int ci) {
  if (ch.counted == ci) return;
  if (ch.counted >= 0) {
    Conn& o = conns_[ch.counted];
    o.outstanding -= std::min<uint64_t>(o.outstanding, ch.len);
    if (o.outstanding == 0 && o.busy_since != Clock::time_point{}) {
      o.busy += Clock::now() - o.busy_since;
      o.busy_since = {};
    }
  }
  ch.counted = ci;
  if (ci >= 0) {
    Conn& c = conns_[ci];
    if (c.outstanding == 0) c.busy_since = Clock::now();
    c.outstanding += ch.len;
  }
}

uint64_t TcpTransport::Window(const Conn& c) const {
  if (options_.path_queue.count() == 0 || c.rate <= 0) return UINT64_MAX;
  const double w = c.rate * std::chrono::duration<double>(options_.path_queue).count();
  return std::max<uint64_t>(2 * options_.chunk_bytes, static_cast<uint64_t>(w));
}

void TcpTransport::SampleRates(int peer, Clock::time_point now) {
  // Periods long enough to see past the bursts a token bucket lets through, an average slow
  // enough not to follow every burst: a tenfold slowdown shows within about 200 ms.
  constexpr auto kPeriod = std::chrono::milliseconds(100);
  constexpr double kWeight = 0.3;
  Peer& p = peers_[peer];
  bool updated = false;
  for (int ci : p.conns) {
    Conn& c = conns_[ci];
    if (c.sample_start == Clock::time_point{} || !c.alive) {
      c.sample_start = now;
      c.sample_bytes = c.credited;
      c.saturated = false;
      c.busy = {};
      continue;
    }
    if (now - c.sample_start < kPeriod) continue;
    c.max_gap_ms *= 0.8;  // halves in about a third of a second
    // Throughput while it had something to carry: idle time (the algorithm reducing, waiting
    // for a peer) says nothing about the path.
    if (c.busy_since != Clock::time_point{}) {
      c.busy += now - c.busy_since;
      c.busy_since = now;
    }
    const double secs = std::chrono::duration<double>(c.busy).count();
    c.busy = {};
    if (secs < 0.02) {
      c.sample_start = now;
      c.sample_bytes = c.credited;
      c.saturated = false;
      continue;
    }
    const double sample = static_cast<double>(c.credited - c.sample_bytes) / secs;
    // A period in which the path had more to carry than it took measures its capacity; any
    // other only shows that it can carry at least that much.
    if (c.saturated && !c.suspect) {
      // A sharp change (a throttled path, a healed one) is followed faster.
      const double w = sample < c.rate / 2 || sample > c.rate * 2 ? 0.5 : kWeight;
      c.rate = c.rate <= 0 ? sample : (1 - w) * c.rate + w * sample;
      updated = true;
    } else if (sample > c.rate) {
      c.rate = sample;
      updated = true;
    }
    c.sample_start = now;
    c.sample_bytes = c.credited;
    c.saturated = false;
  }
  if (!updated) return;
  // The striping that results: shares of the measured throughput over the paths in use.
  double total = 0;
  for (int ci : p.conns) {
    const Conn& c = conns_[ci];
    if (c.alive && !c.suspect) total += c.rate;
  }
  if (total <= 0) return;
  std::map<int, double> shares;
  for (int ci : p.conns) {
    const Conn& c = conns_[ci];
    if (c.alive && !c.suspect && c.rate > 0) shares[ci] = c.rate / total;
  }
  if (p.shares.empty()) {
    p.shares = std::move(shares);
    return;
  }
  int moved = -1;
  double most = 0;
  for (const auto& [ci, share] : shares) {
    auto old = p.shares.find(ci);
    const double d = std::abs(share - (old == p.shares.end() ? 0.0 : old->second));
    if (d > most) {
      most = d;
      moved = ci;
    }
  }
  // Only a real shift is news: 15% of the traffic or more.
  if (most < 0.15) return;
  std::string reason = "striping by measured throughput:";
  for (const auto& [ci, share] : shares) {
    const Conn& c = conns_[ci];
    reason += " rail " + std::to_string(c.rail) + " " +
              std::to_string(static_cast<int>(share * 100 + 0.5)) + "% (" +
              std::to_string(static_cast<int>(c.rate * 8 / 1e6)) + " Mbps)";
  }
  LOG_INFO("NET/TCP", "rank %d: %s", peer, reason.c_str());
  Emit(EventKind::kRebalanced, peer, conns_[moved].rail, conns_[moved].channel, reason);
  p.shares = std::move(shares);
}

void TcpTransport::RttSample(Conn& c, double ms) {
  if (ms < 0) return;
  if (!c.have_rtt) {
    c.srtt_ms = ms;
    c.rttvar_ms = ms / 2;
    c.have_rtt = true;
  } else {
    c.rttvar_ms = 0.75 * c.rttvar_ms + 0.25 * std::abs(c.srtt_ms - ms);
    c.srtt_ms = 0.875 * c.srtt_ms + 0.125 * ms;
  }
}

void TcpTransport::Progress(Conn& c, Clock::time_point now) {
  const bool busy =
      c.busy_since != Clock::time_point{} || c.ping_outstanding_since != Clock::time_point{};
  if (busy && c.last_progress != Clock::time_point{}) {
    Clock::time_point from = c.last_progress;
    if (c.busy_since != Clock::time_point{}) from = std::max(from, c.busy_since);
    const double gap = std::chrono::duration<double, std::milli>(now - from).count();
    c.max_gap_ms = std::max(c.max_gap_ms, gap);
  }
  c.last_progress = now;
}

Clock::duration TcpTransport::SuspectTimeout(const Conn& c) const {
  const double floor = static_cast<double>(options_.suspect_floor.count());
  const double ceiling = static_cast<double>(options_.suspect_ceiling.count());
  // The round-trip estimate (as TCP's RTO), twice the longest wait for progress seen lately,
  // and this host's own recent lateness: whichever is largest, within [floor, ceiling].
  double ms = c.have_rtt ? c.srtt_ms + 4 * c.rttvar_ms : 0;
  ms = std::max(ms, 2 * c.max_gap_ms) + 4 * tick_lag_ms_;
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(std::clamp(ms, floor, ceiling)));
}

void TcpTransport::RecordDown(Conn& c, Clock::time_point now) {
  while (!c.downs.empty() && now - c.downs.front() > options_.flap_window) c.downs.pop_front();
  c.downs.push_back(now);
  auto hold = options_.failback_holddown;
  for (size_t i = 1; i < c.downs.size() && hold < options_.failback_holddown_max; ++i) hold *= 2;
  hold = std::min(hold, options_.failback_holddown_max);
  c.hold_until = std::max(c.hold_until, now + std::chrono::duration_cast<Clock::duration>(hold));
}

void TcpTransport::HandleNack(int peer, uint64_t seq) {
  Peer& p = peers_[peer];
  auto it = p.unacked.find(seq);
  if (it == p.unacked.end() || it->second.in_ready) return;
  st_retx_++;
  Requeue(p, {seq});
  Kick(peer);
}

void TcpTransport::DetachInflight(int peer, uint64_t seq) {
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

void TcpTransport::Requeue(Peer& p, std::vector<uint64_t> seqs) {
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

Status TcpTransport::MismatchStatus(uint64_t coll_seq, int peer, const Signature& mine,
                                    const Signature& theirs) const {
  return Mismatch("collective #" + std::to_string(coll_seq) + ": rank " + std::to_string(rank_) +
                  " called " + mine.ToString() + " but rank " + std::to_string(peer) + " called " +
                  theirs.ToString());
}

uint64_t TcpTransport::AckValue(const Peer& p) const {
  return p.held.empty() ? p.cum : std::min(p.cum, p.held.begin()->first);
}

void TcpTransport::OnBegin(uint64_t coll_seq, const Signature& sig) {
  begun_ = true;
  cur_seq_ = coll_seq;
  cur_sig_ = sig;
  if (failed_) return;
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

void TcpTransport::ConnFailed(int ci, const std::string& reason, bool peer_closed) {
  Conn& c = conns_[ci];
  if (!c.alive) return;
  if (c.relay) {
    RelayFailed(ci, reason);
    return;
  }
  c.alive = false;
  c.blocked = false;
  c.hdr_got = 0;
  c.text.clear();
  const int peer = c.peer;
  Peer& p = peers_[peer];
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
  c.fd.Reset();
  if (c.link && c.link->fatal() && !stopping_) FailLocked(Internal("RDMA failure on " + reason), 0);
  if (c.in_payload && c.msg) p.inflight.erase(c.hdr.chunk_seq);
  c.in_payload = false;
  c.msg.reset();
  c.dst = nullptr;
  c.cur.reset();
  c.ctrl.clear();
  std::vector<uint64_t> lost;
  for (auto& [seq, ch] : p.unacked) {
    if (ch.conn == ci && !ch.in_ready) lost.push_back(seq);
  }
  bool any = false;
  for (int cj : p.conns) any |= conns_[cj].alive;
  if (stopping_) return;
  const auto now = Clock::now();
  // A connection that broke under a live process (reset, timeout) is re-established by the
  // higher rank; the peer is given up on only when it refuses that or after abort_timeout.
  // (A failed queue pair is not recreated: its chunks move to the other rails.)
  const bool again = !peer_closed && !p.closing && !p.gone && !c.link;
  if (again) {
    // A path already down (suspect, not up since) whose socket now fails too, e.g. closed by
    // the peer to connect afresh, is the same down: it does not count again for damping.
    if (!c.suspect || c.up_since_down) RecordDown(c, now);
    c.up_since_down = false;
    c.reconnect = rank_ > peer;
    c.next_connect = now;
  } else if (!any) {
    PeerGone(peer, reason);
    return;
  }
  LOG_WARN("NET/TCP", "%s failed (%s): resending %zu unacknowledged chunks on the other paths%s",
           ConnLabel(peer, c.rail, c.channel).c_str(), reason.c_str(), lost.size(),
           again ? "; reconnecting" : "");
  Emit(EventKind::kPathDown, peer, c.rail, c.channel, reason);
  Emit(EventKind::kMigrated, peer, c.rail, c.channel,
       std::to_string(lost.size()) + " unacknowledged chunks moved to the other paths");
  p.resume_pending = true;
  st_retx_ += lost.size();
  Requeue(p, std::move(lost));
  p.ack_dirty = true;
  if (c.link) {
    // The peer's end of a failed QP may stay up until it sends into it: tell it now.
    TxItem notice;
    notice.hdr = wire::MakeHeader(wire::FrameType::kPathDown, comm_id_);
    notice.hdr.tag = static_cast<uint32_t>(c.rail << 16 | c.channel);
    notice.hdr.offset = c.conn_port;
    notice.hdr.offset = c.conn_port;
    wire::Seal(&notice.hdr, nullptr);
    EnqueueCtrl(peer, std::move(notice));
  }
  Kick(peer);
}

void TcpTransport::StartReconnect(int ci, Clock::time_point now) {
  Conn& c = conns_[ci];
  c.next_connect = now + options_.reconnect_interval;
  if (RailQuiet(c.rail)) return;  // a SYN out of a dead port: see SendPing
  auto fd = net::StartConnect(peer_eps_[c.peer][c.rail], rail_ips_[c.rail]);
  if (!fd.ok()) {
    LOG_DEBUG("NET/TCP", "reconnecting %s: %s", Label(c).c_str(), fd.status().ToString().c_str());
    return;
  }
  epoll_event e{};
  e.events = EPOLLOUT;
  e.data.u64 = kConnectId + static_cast<uint64_t>(ci);
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd->get(), &e) != 0) return;
  c.connecting = std::move(fd.value());
  c.connect_deadline = now + ConnectTimeout(c);
}

Clock::duration TcpTransport::ConnectTimeout(const Conn& c) const {
  // A lost SYN or SYN-ACK (queued behind an ARP resolution after an outage, sent before a
  // switch port forwards) costs the kernel's initial retransmission timeout, 1 s. On a path
  // whose round trip is known, an attempt that has not completed in twice its suspicion
  // timeout is given up, and the next one sends a fresh SYN at once.
  return std::clamp<Clock::duration>(2 * SuspectTimeout(c), kConnectFloor, kConnectTimeout);
}

void TcpTransport::OnConnectDone(int ci) {
  Conn& c = conns_[ci];
  if (!c.connecting.valid()) return;
  net::Fd fd = std::move(c.connecting);
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd.get(), nullptr);
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err == ECONNREFUSED) {
    // The peer's listener is gone: its process is.
    Peer& p = peers_[c.peer];
    bool any = false;
    for (int cj : p.conns) any |= conns_[cj].alive;
    c.reconnect = false;
    if (!any) PeerGone(c.peer, "rank " + std::to_string(c.peer) + " refuses connections");
    return;
  }
  if (err != 0) return;  // tried again at next_connect
  wire::FrameHeader h = wire::MakeHeader(wire::FrameType::kHello, comm_id_);
  h.root = rank_;
  h.tag = static_cast<uint32_t>(c.rail << 16 | c.channel);
  wire::Seal(&h, nullptr);
  // A fresh socket's send buffer takes the 80 bytes at once.
  if (send(fd.get(), &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(sizeof(h)))
    return;
  if (!ApplySocketOptions(fd.get(), options_).ok()) return;
  Install(ci, std::move(fd));
}

void TcpTransport::OnAccept(int rail) {
  for (;;) {
    int fd = accept4(listeners_[rail].get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    Pending pd;
    pd.fd = net::Fd(fd);
    pd.rail = rail;
    pd.deadline = Clock::now() + kHelloTimeout;
    const uint64_t id = kPendingId + next_pending_++;
    epoll_event e{};
    e.events = EPOLLIN | EPOLLRDHUP;
    e.data.u64 = id;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &e) != 0) continue;
    pending_.emplace(id, std::move(pd));
  }
}

void TcpTransport::OnPendingReadable(uint64_t id) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  Pending& pd = it->second;
  ssize_t n = recv(pd.fd.get(), reinterpret_cast<uint8_t*>(&pd.hello) + pd.got, kHdr - pd.got,
                   MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    pending_.erase(it);
    return;
  }
  pd.got += static_cast<size_t>(n);
  if (pd.got < kHdr) return;
  const wire::FrameHeader& h = pd.hello;
  const int peer = h.root;
  const int rail = static_cast<int>(h.tag >> 16), channel = static_cast<int>(h.tag & 0xFFFF);
  int slot = -1;
  const bool valid = wire::HeaderValid(h) &&
                     h.type == static_cast<uint8_t>(wire::FrameType::kHello) &&
                     h.comm_id == comm_id_ && peer >= 0 && peer < size_ && peer != rank_ &&
                     !peers_[peer].gone && options_.transport == "tcp";
  const bool relayed = valid && static_cast<uint32_t>(rail) == kRelayHelloRail && channel == 0;
  if (relayed) {
    // A rank that lost its rails, through a rank of its host (or, from this host, directly).
    slot = relay_slot_[peer];
    if (slot >= 0 && conns_[slot].alive && conns_[slot].relay_initiator && peer > rank_) {
      slot = -2;  // both ends opened one at once: the lower rank's stays
    }
  } else if (valid && peer > rank_ && rail == pd.rail) {
    for (int ci : peers_[peer].conns) {
      if (conns_[ci].rail == rail && conns_[ci].channel == channel && !conns_[ci].relay) slot = ci;
    }
  }
  const int listener_rail = pd.rail;
  net::Fd fd = std::move(pd.fd);
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd.get(), nullptr);
  pending_.erase(it);
  if (slot < 0) {
    if (slot == -1) {
      LOG_WARN("NET/TCP", "rejected a connection %s: not a hello of this communicator",
               listener_rail < 0 ? "from this host"
                                 : ("on rail " + std::to_string(listener_rail)).c_str());
    }
    return;
  }
  if (listener_rail >= 0 && !ApplySocketOptions(fd.get(), options_).ok()) return;
  if (relayed) {
    if (conns_[slot].alive)
      RelayFailed(slot, "replaced by a new relay from rank " + std::to_string(peer));
    if (failed_ && fail_done_) return;
    Install(slot, std::move(fd));
    Conn& c = conns_[slot];
    c.relay_initiator = false;
    c.relay_on = false;
    c.relay_reason = "rank " + std::to_string(peer) + " lost its own rails";
    LOG_WARN("NET/TCP", "rank %d relays to this rank (%s): its rails are down", peer,
             listener_rail < 0 ? "over a Unix socket on this host" : "through a rank of its host");
    // The relay says the peer's own rails are down: stop sending into them now rather than
    // after their timeout.
    const auto now = Clock::now();
    for (int cj : peers_[peer].conns) {
      if (!conns_[cj].relay && conns_[cj].alive && !conns_[cj].suspect) {
        MarkDown(cj, now, "rank " + std::to_string(peer) + " relays: its rails are down");
      }
    }
    return;
  }
  // The peer has given up on the old connection, whatever state this end believes it is in.
  if (conns_[slot].alive && conns_[slot].suspect) DropQuietly(slot);
  if (conns_[slot].alive)
    ConnFailed(slot, "replaced by a new connection from rank " + std::to_string(peer));
  if (failed_ && fail_done_) return;
  Install(slot, std::move(fd));
}

void TcpTransport::Install(int ci, net::Fd fd) {
  Conn& c = conns_[ci];
  const auto now = Clock::now();
  epoll_event e{};
  e.events = EPOLLIN | EPOLLRDHUP;
  e.data.u64 = static_cast<uint64_t>(ci);
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd.get(), &e) != 0) return;
  c.conn_port = c.relay ? 0 : ConnectorPort(fd.get(), rank_ > c.peer);
  c.fd = std::move(fd);
  c.link.reset();
  c.alive = true;
  c.blocked = false;
  c.half_closed = false;
  c.reconnect = false;
  c.hdr_got = 0;
  c.in_payload = false;
  c.payload_got = 0;
  c.dst = nullptr;
  c.msg.reset();
  c.text.clear();
  c.cur.reset();
  c.ctrl.clear();
  c.ping_outstanding_since = {};
  c.last_progress = now;
  c.outstanding = 0;
  c.busy_since = {};
  c.busy = {};
  c.rate = 0;
  c.sample_start = {};
  // In use again once it answers a probe after its hold-down, like any path that came back.
  c.suspect = true;
  c.up_since_down = true;
  c.failback_pending = false;
  peers_[c.peer].no_path_since = {};
  if (!c.relay) LOG_WARN("NET/TCP", "%s re-established", Label(c).c_str());
  SendPing(ci, now);
  Kick(c.peer);
}

void TcpTransport::PeerGone(int peer, const std::string& reason) {
  Peer& p = peers_[peer];
  if (p.gone) return;
  p.gone = true;
  if (stopping_) return;
  bool pending = !p.unacked.empty();
  for (auto& [key, msg] : p.rx) pending |= static_cast<bool>(msg->recv);
  if (p.closing && !pending) {
    LOG_INFO("NET/TCP", "rank %d closed its communicator", peer);
    return;
  }
  FailLocked(
      PeerLost("lost every connection to rank " + std::to_string(peer) + " (" + reason + ")"), 0);
}

void TcpTransport::SendAcks() {
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
    int ci = p.ack_conn >= 0 && conns_[p.ack_conn].alive && !conns_[p.ack_conn].suspect
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

bool TcpTransport::RailQuiet(int rail) const {
  if (rail < 0 || rail >= static_cast<int>(rail_up_.size())) return false;
  return !rail_up_[rail] || rail_settle_at_[rail] != Clock::time_point{};
}

void TcpTransport::SendPing(int ci, Clock::time_point now) {
  Conn& c = conns_[ci];
  // Nothing goes out of a port whose link is down (or not yet settled): it could not arrive,
  // and it would start an ARP resolution that holds the path back for a second after the heal.
  if (RailQuiet(c.rail)) return;
  c.last_ping = now;
  if (c.ping_outstanding_since == Clock::time_point{}) c.ping_outstanding_since = now;
  TxItem ping;
  ping.hdr = wire::MakeHeader(wire::FrameType::kPing, comm_id_);
  ping.hdr.chunk_seq = ++c.ping_nonce;
  wire::Seal(&ping.hdr, nullptr);
  c.ctrl.push_back(std::move(ping));
  Flush(ci);
}

void TcpTransport::MarkDown(int ci, Clock::time_point now, const std::string& reason) {
  Conn& c = conns_[ci];
  Peer& p = peers_[c.peer];
  if (!c.alive) return;
  if (c.suspect) {
    // Down again after it had come up, before it was back in use (a flapping link): the
    // hold-down grows. A second report of the same down (the peer's notice) does not count.
    if (c.up_since_down) {
      c.up_since_down = false;
      RecordDown(c, now);
    }
    return;
  }
  c.suspect = true;
  c.up_since_down = false;
  c.failback_pending = false;
  RecordDown(c, now);
  std::vector<uint64_t> moved;
  for (auto& [seq, ch] : p.unacked) {
    if (ch.conn == ci && !ch.in_ready && !ch.delivered && seq >= p.delivered) moved.push_back(seq);
  }
  LOG_WARN("NET/TCP", "%s down (%s): resending %zu chunks on the other paths", Label(c).c_str(),
           reason.c_str(), moved.size());
  Emit(EventKind::kPathDown, c.peer, c.rail, c.channel, reason);
  Emit(EventKind::kMigrated, c.peer, c.rail, c.channel,
       std::to_string(moved.size()) + " unacknowledged chunks moved to the other paths");
  p.resume_pending = true;
  st_retx_ += moved.size();
  for (uint64_t seq : moved) p.unacked[seq].sent_at = now;
  Requeue(p, std::move(moved));
  SendPing(ci, now);
  // Tell the peer over a path that works, so it stops sending into this one at once instead
  // of waiting for its own timeout.
  TxItem notice;
  notice.hdr = wire::MakeHeader(wire::FrameType::kPathDown, comm_id_);
  notice.hdr.tag = static_cast<uint32_t>(c.rail << 16 | c.channel);
  notice.hdr.offset = c.conn_port;
  wire::Seal(&notice.hdr, nullptr);
  EnqueueCtrl(c.peer, std::move(notice));
  Kick(c.peer);
}

void TcpTransport::Emit(EventKind kind, int peer, int rail, int channel, std::string reason) {
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

std::vector<Event> TcpTransport::DrainEvents() {
  std::lock_guard<std::mutex> lock(events_mu_);
  std::vector<Event> out;
  out.swap(events_);
  return out;
}

Status TcpTransport::OpenLinkWatch() {
  // Subscribe first, then read the state: a transition in between is then both in the state
  // read and in a notification, never in neither.
  net::Fd fd(socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!fd.valid()) return ErrnoStatus("socket(NETLINK_ROUTE)", errno);
  // Room for a burst of notifications (a flapping link, every interface of a host changing);
  // what still overruns it is caught by ResyncLinks.
  const int rcvbuf = 1 << 20;
  (void)setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = RTMGRP_LINK;
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    return ErrnoStatus("bind(RTMGRP_LINK)", errno);
  }
  // The interface of every rail, from its local address.
  rail_ifindex_.assign(num_rails_, 0);
  rail_up_.assign(num_rails_, true);
  rail_down_at_.assign(num_rails_, Clock::time_point{});
  rail_settle_at_.assign(num_rails_, Clock::time_point{});
  rail_settle_long_.assign(num_rails_, false);
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return ErrnoStatus("getifaddrs", errno);
  for (int r = 0; r < num_rails_; ++r) {
    for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
      if (reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr != rail_ips_[r]) continue;
      rail_ifindex_[r] = static_cast<int>(if_nametoindex(i->ifa_name));
      rail_up_[r] = (i->ifa_flags & IFF_UP) && (i->ifa_flags & IFF_RUNNING);
      break;
    }
  }
  freeifaddrs(list);
  uint64_t mask = ~0ull;
  for (int r = 0; r < num_rails_ && r < 64; ++r) {
    if (!rail_up_[r]) mask &= ~(1ull << r);
  }
  rails_up_mask_ = mask;
  link_watch_ = std::move(fd);
  return Status::Ok();
}

void TcpTransport::OnLinkMessages() {
  alignas(nlmsghdr) char buf[16384];
  for (;;) {
    ssize_t n = recv(link_watch_.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && errno == ENOBUFS) {
      // The kernel dropped notifications (the socket's buffer overran while this thread was
      // busy): the transitions in them are lost, so read every rail's state afresh.
      LOG_WARN("NET/TCP", "link notifications overran: reading the rails' link state again");
      ResyncLinks();
      if (failed_) return;
      continue;
    }
    if (n <= 0) return;
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, static_cast<unsigned>(n));
         h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_DELLINK) continue;
      auto* ifi = static_cast<ifinfomsg*>(NLMSG_DATA(h));
      const bool up = h->nlmsg_type == RTM_NEWLINK && (ifi->ifi_flags & IFF_UP) &&
                      (ifi->ifi_flags & IFF_RUNNING);
      for (int r = 0; r < num_rails_; ++r) {
        if (rail_ifindex_[r] != ifi->ifi_index) continue;
        SetRailLink(r, up);
        if (failed_) return;
      }
    }
  }
}

void TcpTransport::ResyncLinks() {
  net::Fd fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return;
  for (int r = 0; r < num_rails_; ++r) {
    if (rail_ifindex_[r] == 0) continue;
    ifreq req{};
    bool up = false;
    if (if_indextoname(static_cast<unsigned>(rail_ifindex_[r]), req.ifr_name) != nullptr &&
        ioctl(fd.get(), SIOCGIFFLAGS, &req) == 0) {
      up = (req.ifr_flags & IFF_UP) && (req.ifr_flags & IFF_RUNNING);
    }  // else the interface is gone: down
    SetRailLink(r, up);
    if (failed_) return;
  }
}

void TcpTransport::SetRailLink(int r, bool up) {
  if (rail_up_[r] == up) return;
  const auto now = Clock::now();
  rail_up_[r] = up;
  const bool long_down = up && now - rail_down_at_[r] >= kRedialOnUp;
  if (!up) rail_down_at_[r] = now;
  if (r < 64) {
    if (up) {
      rails_up_mask_.fetch_or(1ull << r);
    } else {
      rails_up_mask_.fetch_and(~(1ull << r));
    }
  }
  rail_settle_at_[r] = {};
  if (up && options_.link_settle.count() > 0) {
    // The port is up, but the switch port behind it may not forward yet: the first packet
    // would start an address resolution whose request is lost, and the kernel asks again only
    // after a second (retrans_time). Probe once the fabric has had time to follow.
    rail_settle_at_[r] = now + std::chrono::duration_cast<Clock::duration>(options_.link_settle);
    rail_settle_long_[r] = long_down;
    return;
  }
  RailLinkChanged(r, up, long_down, now);
}

void TcpTransport::RailLinkChanged(int r, bool up, bool long_down, Clock::time_point now) {
  for (size_t ci = 0; ci < conns_.size(); ++ci) {
    Conn& c = conns_[ci];
    if (c.rail != r || !c.alive) continue;
    if (!up) {
      MarkDown(static_cast<int>(ci), now, "rail " + std::to_string(r) + " link down");
    } else if (c.suspect) {
      c.up_since_down = true;
      if (long_down && !c.link) {
        // Its socket has been retransmitting into a dead link and backs off for seconds:
        // a fresh connection comes back at once.
        if (rank_ > c.peer) {
          Redial(static_cast<int>(ci), "rail " + std::to_string(r) + " is up again");
        } else {
          TxItem redial;
          redial.hdr = wire::MakeHeader(wire::FrameType::kRedial, comm_id_);
          redial.hdr.tag = static_cast<uint32_t>(c.rail << 16 | c.channel);
          wire::Seal(&redial.hdr, nullptr);
          EnqueueCtrl(c.peer, std::move(redial));
          SendPing(static_cast<int>(ci), now);
        }
      } else {
        SendPing(static_cast<int>(ci), now);  // back up: an answer returns it to use
      }
    }
    if (failed_) return;
  }
}

void TcpTransport::CheckTimers() {
  auto now = Clock::now();
  // If this thread itself did not run for a while, the silence it sees may be its own: judge
  // no path on this tick (what arrived meanwhile has been read by the time of the next one).
  const bool starved = last_check_ != Clock::time_point{} && now - last_check_ > 5 * kTick;
  if (last_check_ != Clock::time_point{}) {
    const double lag = std::chrono::duration<double, std::milli>(now - last_check_ - kTick).count();
    tick_lag_ms_ = std::max(lag, tick_lag_ms_ * 0.98);  // halves in about 35 ticks
  }
  last_check_ = now;
  for (int r = 0; r < static_cast<int>(rail_settle_at_.size()); ++r) {
    if (rail_settle_at_[r] == Clock::time_point{} || now < rail_settle_at_[r]) continue;
    rail_settle_at_[r] = {};
    if (rail_up_[r]) RailLinkChanged(r, true, rail_settle_long_[r], now);
    if (failed_) return;
  }
  for (auto it = pending_.begin(); it != pending_.end();) {
    it = now >= it->second.deadline ? pending_.erase(it) : std::next(it);
  }
  const auto heartbeat = std::chrono::duration_cast<Clock::duration>(options_.heartbeat_interval);
  const auto probe_every =
      heartbeat.count() > 0 ? heartbeat
                            : std::chrono::duration_cast<Clock::duration>(options_.suspect_ceiling);
  for (int peer = 0; peer < size_; ++peer) {
    Peer& p = peers_[peer];
    SampleRates(peer, now);
    // A chunk that reached the peer is never resent (its acknowledgement may be held back
    // until the peer begins its collective). A path with a chunk or a probe outstanding that
    // shows no progress within its suspicion timeout is suspect: its chunks move to the others.
    std::map<int, Clock::time_point> oldest;  // connection -> oldest chunk outstanding on it
    std::vector<uint64_t> resend;
    for (auto it = p.unacked.lower_bound(p.delivered); it != p.unacked.end(); ++it) {
      TxChunk& ch = it->second;
      if (ch.tx_count == 0 || ch.in_ready || ch.conn < 0 || ch.delivered) continue;
      Conn& c = conns_[ch.conn];
      if (c.cur && c.cur->seq == it->first) continue;  // still being written
      if (c.alive && !c.suspect) {
        auto [o, fresh] = oldest.emplace(ch.conn, ch.sent_at);
        if (!fresh) o->second = std::min(o->second, ch.sent_at);
      } else if (now - ch.sent_at >= SuspectTimeout(c)) {
        // Its path is already suspect (or gone): resend it on whatever works.
        ch.sent_at = now;
        resend.push_back(it->first);
      }
    }
    for (int ci : p.conns) {
      if (failed_) return;
      Conn& c = conns_[ci];
      if (!c.alive) {
        if (c.connecting.valid() && now >= c.connect_deadline) {
          epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.connecting.get(), nullptr);
          c.connecting.Reset();
        }
        if (c.reconnect && !c.connecting.valid() && now >= c.next_connect && !p.gone)
          StartReconnect(ci, now);
        continue;
      }
      if (c.suspect) {
        if (!c.relay && !c.link && rank_ > peer &&
            c.ping_outstanding_since != Clock::time_point{} &&
            now - c.ping_outstanding_since >= kRedialAfter && now - c.last_dial >= kRedialAfter) {
          Redial(
              ci,
              "no answer for " +
                  std::to_string(
                      std::chrono::duration_cast<Millis>(now - c.ping_outstanding_since).count()) +
                  " ms");
          continue;
        }
        if (now - c.last_ping >= probe_every) SendPing(ci, now);
        continue;
      }
      Clock::time_point since = Clock::time_point::max();
      if (auto o = oldest.find(ci); o != oldest.end()) since = o->second;
      if (c.ping_outstanding_since != Clock::time_point{})
        since = std::min(since, c.ping_outstanding_since);
      if (since != Clock::time_point::max()) {
        since = std::max(since, c.last_progress);
        const auto timeout = SuspectTimeout(c);
        // Silence on one path while the peer is heard on another is that path's fault: it is
        // suspect after its timeout. Silence on every path is the peer's (slow, paused) or a
        // total partition: only the ceiling makes the paths suspect then, since moving data
        // to another path cannot help.
        Clock::time_point heard_elsewhere{};
        for (int cj : p.conns) {
          if (cj != ci && conns_[cj].alive)
            heard_elsewhere = std::max(heard_elsewhere, conns_[cj].last_progress);
        }
        const bool relative = now - since >= timeout && heard_elsewhere > since;
        if (!starved && (relative || now - since >= options_.suspect_ceiling)) {
          MarkDown(ci, now,
                   "no progress within " +
                       std::to_string(std::chrono::duration_cast<Millis>(timeout).count()) +
                       " ms (srtt " + std::to_string(static_cast<int>(c.srtt_ms)) + " ms)");
          continue;
        }
      }
      // Heartbeat: a path that showed no progress lately is probed, so a silent failure is
      // noticed before data is entrusted to it.
      if (heartbeat.count() > 0 && c.ping_outstanding_since == Clock::time_point{} &&
          now - std::max(c.last_progress, c.last_ping) >= heartbeat) {
        SendPing(ci, now);
      }
    }
    if (failed_) return;
    if (!resend.empty()) {
      st_retx_ += resend.size();
      Requeue(p, std::move(resend));
      Kick(peer);
    }
    if (failed_) return;
    CheckRelay(peer, now);
    if (failed_) return;
    bool any_alive = false, any_working = false;
    for (int ci : p.conns) {
      Conn& c = conns_[ci];
      if (!c.alive) continue;
      any_alive = true;
      any_working |= !c.suspect;
    }
    // No working path to a peer for the abort timeout: fail cleanly instead of waiting for
    // every operation's deadline.
    // (Also while every connection is down and being re-established.)
    (void)any_alive;
    if (!p.conns.empty() && !any_working && !p.closing && !p.gone) {
      if (p.no_path_since == Clock::time_point{}) {
        p.no_path_since = now;
      } else if (now - p.no_path_since >= options_.abort_timeout) {
        FailLocked(PeerLost("no working path to rank " + std::to_string(peer) + " for " +
                            std::to_string(options_.abort_timeout.count()) + " ms"),
                   0);
        return;
      }
    } else {
      p.no_path_since = {};
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Intra-host relay (relay.h).

void TcpTransport::Redial(int ci, const std::string& why) {
  Conn& c = conns_[ci];
  if (!c.alive || c.link || c.relay || rank_ < c.peer || stopping_) return;
  if (RailQuiet(c.rail)) return;  // redialled once its link is up and settled
  LOG_INFO("NET/TCP", "%s: connecting afresh (%s)", Label(c).c_str(), why.c_str());
  const auto now = Clock::now();
  c.last_dial = now;
  DropQuietly(ci);
  c.reconnect = true;
  c.next_connect = now;
  StartReconnect(ci, now);
}

size_t TcpTransport::DropQuietly(int ci) {
  Conn& c = conns_[ci];
  Peer& p = peers_[c.peer];
  if (!c.alive) return 0;
  c.alive = false;
  c.blocked = false;
  c.hdr_got = 0;
  c.text.clear();
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
  c.fd.Reset();
  if (c.in_payload && c.msg) p.inflight.erase(c.hdr.chunk_seq);
  c.in_payload = false;
  c.msg.reset();
  c.dst = nullptr;
  c.cur.reset();
  c.ctrl.clear();
  if (stopping_) return 0;
  std::vector<uint64_t> lost;
  for (auto& [seq, ch] : p.unacked) {
    if (ch.conn == ci && !ch.in_ready && !ch.delivered) lost.push_back(seq);
  }
  const size_t n = lost.size();
  if (n > 0) {
    st_retx_ += n;
    Requeue(p, std::move(lost));
    Kick(c.peer);
  }
  return n;
}

std::string TcpTransport::Label(const Conn& c) const {
  if (c.relay) return "rank " + std::to_string(c.peer) + " relay";
  return ConnLabel(c.peer, c.rail, c.channel);
}

bool TcpTransport::OwnRailsLost() const {
  // Only the link state says that a rail is gone for every peer (a NIC or its ports down); a
  // silent path could as well be the peer's or the fabric's.
  if (!link_watch_.valid() || rail_up_.empty()) return false;
  for (bool up : rail_up_) {
    if (up) return false;
  }
  return true;
}

void TcpTransport::CheckRelay(int peer, Clock::time_point now) {
  const int ci = relay_slot_.empty() ? -1 : relay_slot_[peer];
  if (ci < 0) return;
  Conn& c = conns_[ci];
  Peer& p = peers_[peer];
  bool direct = false;
  for (int cj : p.conns) direct |= !conns_[cj].relay && conns_[cj].alive && !conns_[cj].suspect;
  if (!c.alive) {
    if (c.connecting.valid()) c.connecting.Reset();
    const bool reachable = hosts_[peer] == hosts_[rank_] || !neighbours_.empty();
    if (!direct && reachable && !p.gone && !p.closing && now >= c.next_connect && OwnRailsLost()) {
      StartRelay(ci, now);
    }
    return;
  }
  if (!c.relay_initiator) return;  // the peer closes what it opened
  if (!direct || OwnRailsLost()) {
    c.relay_drain_since = {};
    return;
  }
  // A rail of this rank works again and the peer answers on it: the relay gets no new data
  // (PullData) and closes once what it carries is acknowledged.
  if (c.relay_drain_since == Clock::time_point{}) c.relay_drain_since = now;
  if (c.outstanding == 0 || now - c.relay_drain_since >= kRelayDrain) {
    CloseRelay(ci, "a direct path to rank " + std::to_string(peer) + " works again");
  }
}

void TcpTransport::StartRelay(int ci, Clock::time_point now) {
  Conn& c = conns_[ci];
  c.next_connect = now + options_.reconnect_interval;
  int via = c.peer;
  if (hosts_[c.peer] != hosts_[rank_]) {
    // Through the host's other ranks in turn: one whose rails are gone too refuses, and the
    // next attempt goes to the next one.
    via = neighbours_[c.relay_pick++ % neighbours_.size()];
    if (via == c.peer) via = neighbours_[c.relay_pick++ % neighbours_.size()];
  }
  auto fd = ConnectRelay(comm_id_, via);
  if (!fd.ok()) {
    LOG_DEBUG("NET/TCP", "relay to rank %d through rank %d: %s", c.peer, via,
              fd.status().ToString().c_str());
    return;
  }
  struct {
    RelayRequest req;
    wire::FrameHeader hello;
  } first;
  first.req.comm_id = comm_id_;
  first.req.src = rank_;
  first.req.dst = c.peer;
  SealRelayRequest(&first.req);
  first.hello = wire::MakeHeader(wire::FrameType::kHello, comm_id_);
  first.hello.root = rank_;
  first.hello.tag = kRelayHelloRail << 16;
  wire::Seal(&first.hello, nullptr);
  // A fresh socket's buffer takes these bytes at once.
  if (send(fd->get(), &first, sizeof(first), MSG_NOSIGNAL | MSG_DONTWAIT) !=
      static_cast<ssize_t>(sizeof(first))) {
    return;
  }
  Install(ci, std::move(fd.value()));
  c.relay_initiator = true;
  c.relay_on = false;
  c.relay_via = via;
  c.relay_drain_since = {};
  c.relay_reason = "every rail of this rank is down";
  LOG_WARN("NET/TCP", "every rail of this rank is down: relaying to rank %d %s", c.peer,
           via == c.peer ? "over a Unix socket on this host"
                         : ("through rank " + std::to_string(via)).c_str());
}

void TcpTransport::CloseRelay(int ci, const std::string& why) {
  Conn& c = conns_[ci];
  // Orderly: the peer reads everything sent so far, then the end of the stream.
  if (!c.cur && c.ctrl.empty()) ::shutdown(c.fd.get(), SHUT_WR);
  RelayFailed(ci, why);
}

void TcpTransport::RelayFailed(int ci, const std::string& reason) {
  Conn& c = conns_[ci];
  Peer& p = peers_[c.peer];
  c.relay_drain_since = {};
  const size_t moved = DropQuietly(ci);
  if (stopping_) return;
  const bool was_on = c.relay_on;
  c.relay_on = false;
  c.next_connect = Clock::now() + options_.reconnect_interval;
  if (was_on) {
    LOG_WARN("NET/TCP", "relay to rank %d ends (%s): %zu chunks go back to the direct paths",
             c.peer, reason.c_str(), moved);
    Emit(EventKind::kRelayOff, c.peer, c.rail, c.channel, reason);
  } else {
    LOG_DEBUG("NET/TCP", "relay to rank %d failed before it worked (%s)", c.peer, reason.c_str());
  }
  if (moved > 0) p.resume_pending = true;
  p.ack_dirty = true;
  // Whether the peer is still reachable is the abort timeout's call (no working path), not
  // the relay's: its end may simply have been closed because a direct path works again.
  Kick(c.peer);
}

void TcpTransport::AdoptLocal(net::Fd fd) {
  if (stopping_ || (failed_ && fail_done_)) return;
  Pending pd;
  pd.fd = std::move(fd);
  pd.rail = -1;
  pd.deadline = Clock::now() + kHelloTimeout;
  const uint64_t id = kPendingId + next_pending_++;
  epoll_event e{};
  e.events = EPOLLIN | EPOLLRDHUP;
  e.data.u64 = id;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, pd.fd.get(), &e) != 0) return;
  pending_.emplace(id, std::move(pd));
  OnPendingReadable(id);  // the hello may be there already
}

// ---------------------------------------------------------------------------------------------
// Fault hook (transport/fault_target.h).

Result<PathFaultState> TcpTransport::QueryPath(int peer, int rail, Deadline deadline) {
  auto s = HookPath(peer, rail, std::nullopt, deadline);
  if (s.ok() && options_.transport == "verbs") s->qp_state = FirstQpState(peer, rail);
  return s;
}

Result<PathFaultState> TcpTransport::CorruptNextFrame(int peer, int rail, FramePart part,
                                                      Deadline deadline) {
  return HookPath(peer, rail, part, deadline);
}

Result<PathFaultState> TcpTransport::HookPath(int peer, int rail, std::optional<FramePart> arm,
                                              Deadline deadline) {
  if (peer < 0 || peer >= size_ || peer == rank_ || rail < 0 || rail >= num_rails_) {
    return InvalidArgument("no connection to rank " + std::to_string(peer) + " on rail " +
                           std::to_string(rail));
  }
  struct Reply {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<Result<PathFaultState>> r;
  };
  auto reply = std::make_shared<Reply>();
  Post([this, reply, peer, rail, arm] {
    PathFaultState s;
    s.corrupt_frames_sent = 0;
    int target = -1;
    for (int ci : peers_[peer].conns) {
      const Conn& c = conns_[ci];
      if (c.rail != rail) continue;
      *s.corrupt_frames_sent += c.corrupt_sent;
      s.applied_ns = std::max(s.applied_ns, c.corrupt_last_ns);
      s.corrupt_pending |= c.corrupt_next.has_value();
      if (c.alive && (target < 0 || (conns_[target].suspect && !c.suspect))) target = ci;
    }
    Result<PathFaultState> r = s;
    if (arm && target < 0) {
      r = PeerLost("no live connection to rank " + std::to_string(peer) + " on rail " +
                   std::to_string(rail));
    } else if (arm) {
      conns_[target].corrupt_next = *arm;
      r->corrupt_pending = true;
    }
    std::lock_guard<std::mutex> lock(reply->mu);
    reply->r = std::move(r);
    reply->cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(reply->mu);
  if (!reply->cv.wait_until(lock, deadline, [&] { return reply->r.has_value(); })) {
    return Timeout("the transport's progress thread did not answer the fault hook in time");
  }
  return std::move(*reply->r);
}

void TcpTransport::DamageForHook(Conn& c, TxItem* item) {
  if (*c.corrupt_next == FramePart::kHeader) {
    item->hdr.length ^= 0x40;  // the header no longer matches its checksum
  } else {
    item->hdr.payload_crc ^= 0x5A5A5A5A;  // a well-formed header whose payload fails its check
    item->hdr.header_crc = wire::HeaderCrc(item->hdr);
  }
  c.corrupt_next.reset();
  c.corrupt_sent++;
  c.corrupt_last_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

}  // namespace tcp
}  // namespace ftccl::transport
