#include "transport/tcp/setup.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "log.h"
#include "transport/tcp/link.h"
#include "transport/transport.h"

namespace ftccl::transport::tcp {
namespace {

constexpr size_t kHdr = sizeof(wire::FrameHeader);
// An accepted connection that has not sent its hello within this is dropped.
constexpr auto kHelloTimeout = std::chrono::seconds(1);
// Initial mesh: a connect unanswered for this long is dialled afresh (a SYN lost while a link
// was down is otherwise retransmitted only after the kernel's 1 s, then 3 s...); one that
// failed (no route, refused) is tried again after kDialRetry; the loop wakes every kSetupTick.
constexpr auto kDialAttempt = std::chrono::milliseconds(500);
constexpr auto kDialRetry = std::chrono::milliseconds(50);
constexpr auto kSetupTick = std::chrono::milliseconds(20);
// Ids in the backend's epoll.
constexpr uint64_t kDialId = 1ull << 32;     // + slot: a dial in progress
constexpr uint64_t kListenId = 2ull << 32;   // + rail: the rail's listener
constexpr uint64_t kPendingId = 3ull << 32;  // + n: an accepted socket waiting for its hello
constexpr uint64_t kInboxId = UINT64_MAX;    // relays for this rank from the relay service

}  // namespace

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

uint16_t ConnectorPort(int fd, bool i_connected) {
  sockaddr_in sa{};
  socklen_t len = sizeof(sa);
  const int rc = i_connected ? getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len)
                             : getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  if (rc != 0 || sa.sin_family != AF_INET) return 0;
  return ntohs(sa.sin_port);
}

Result<std::vector<std::pair<net::Fd, net::Endpoint>>> OpenListeners(
    const std::vector<uint32_t>& rail_ips) {
  std::vector<std::pair<net::Fd, net::Endpoint>> out;
  for (size_t r = 0; r < rail_ips.size(); ++r) {
    auto l = net::Listen(rail_ips[r], 0);
    if (!l.ok()) return l.status().WithContext("rail " + std::to_string(r));
    out.push_back(std::move(l.value()));
  }
  return out;
}

Result<std::vector<MeshConn>> ConnectMesh(const CommOptions& options, const BootstrapTable& table,
                                          const std::vector<net::Fd>& listeners,
                                          const std::vector<uint32_t>& rail_ips,
                                          Clock::time_point deadline) {
  const int rank = options.rank;
  const int size = options.size;
  const int nr = table.num_rails;
  const int nch = options.channels_per_rail;
  auto slot = [&](int peer, int rail, int ch) {
    return (static_cast<size_t>(peer) * static_cast<size_t>(nr) + static_cast<size_t>(rail)) *
               static_cast<size_t>(nch) +
           static_cast<size_t>(ch);
  };
  std::vector<std::optional<MeshConn>> done(static_cast<size_t>(size) * nr * nch);
  const size_t need = static_cast<size_t>(size - 1) * nr * nch;
  size_t have = 0;
  auto add = [&](net::Fd fd, int peer, int rail, int channel) -> Status {
    FTCCL_RETURN_IF_ERROR(ApplySocketOptions(fd.get(), options));
    FTCCL_RETURN_IF_ERROR(net::SetNonBlocking(fd.get()));
    MeshConn c;
    c.conn_port = ConnectorPort(fd.get(), rank > peer);
    c.fd = std::move(fd);
    c.peer = peer;
    c.rail = rail;
    c.channel = channel;
    std::optional<MeshConn>& d = done[slot(peer, rail, channel)];
    if (!d) ++have;
    d = std::move(c);  // a second connection for the same path replaces the first
    return Status::Ok();
  };
  // Outgoing: to every lower rank, every rail and channel, all dialled at once.
  struct Dial {
    int peer = -1, rail = 0, ch = 0;
    net::Fd fd;                       // a connect in progress
    Clock::time_point attempt_end{};  // given up and dialled afresh then
    Clock::time_point next_try{};     // after a failed attempt
    std::string last_error = "no answer";
  };
  std::vector<Dial> dials;
  for (int peer = 0; peer < rank; ++peer) {
    for (int rail = 0; rail < nr; ++rail) {
      for (int ch = 0; ch < nch; ++ch) {
        Dial d;
        d.peer = peer;
        d.rail = rail;
        d.ch = ch;
        dials.push_back(std::move(d));
      }
    }
  }
  // Incoming: accepted on a rail's listener, until its hello names the path.
  struct Pending {
    net::Fd fd;
    int rail = 0;
    wire::FrameHeader hello{};
    size_t got = 0;
    Clock::time_point deadline{};
  };
  std::vector<Pending> pending;
  // A rail down at start (a NIC port, a cable) must not keep the job from starting on the
  // others: once every peer has a connection, the rest get init_path_grace more, then the engine
  // sets them up when it can (the higher rank redials, as after any failure). Verbs upgrades
  // every connection of the mesh at once and never redials: it waits for all of them.
  const bool tolerate = options.init_path_grace.count() > 0 && options.transport == "tcp";
  std::optional<Clock::time_point> grace_end;
  auto every_peer_has_one = [&] {
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      bool any = false;
      for (int rail = 0; rail < nr && !any; ++rail) {
        for (int ch = 0; ch < nch && !any; ++ch) any = done[slot(peer, rail, ch)].has_value();
      }
      if (!any) return false;
    }
    return true;
  };
  std::vector<pollfd> pfds;
  std::vector<std::pair<int, size_t>> who;  // per pollfd: 0 dial, 1 listener, 2 pending; index
  for (;;) {
    auto now = Clock::now();
    if (have == need) break;
    if (tolerate && !grace_end && every_peer_has_one()) {
      grace_end = now + std::chrono::duration_cast<Clock::duration>(options.init_path_grace);
    }
    if (grace_end && now >= *grace_end) break;
    if (now >= deadline) {
      // The first path missing names the failure, as a serial setup would have.
      for (const Dial& d : dials) {
        if (!done[slot(d.peer, d.rail, d.ch)]) {
          return Timeout("connecting to " + ConnLabel(d.peer, d.rail, d.ch) + ": " + d.last_error +
                         ": deadline passed");
        }
      }
      for (int rail = 0; rail < nr; ++rail) {
        for (int peer = rank + 1; peer < size; ++peer) {
          for (int ch = 0; ch < nch; ++ch) {
            if (done[slot(peer, rail, ch)]) continue;
            return Timeout("waiting for connections from higher ranks on rail " +
                           std::to_string(rail) + " (" + ConnLabel(peer, rail, ch) +
                           "): accept: deadline passed");
          }
        }
      }
      return Timeout("connection setup: deadline passed");
    }
    for (Dial& d : dials) {
      if (done[slot(d.peer, d.rail, d.ch)] || d.fd.valid() || now < d.next_try) continue;
      auto fd = net::StartConnect(table.rails[d.peer][d.rail], rail_ips[d.rail]);
      if (!fd.ok()) {
        d.last_error = fd.status().ToString();  // e.g. no route while the link is down
        d.next_try = now + kDialRetry;
        continue;
      }
      d.fd = std::move(fd.value());
      d.attempt_end = now + kDialAttempt;
    }
    pfds.clear();
    who.clear();
    for (size_t i = 0; i < dials.size(); ++i) {
      if (!dials[i].fd.valid()) continue;
      pfds.push_back({dials[i].fd.get(), POLLOUT, 0});
      who.emplace_back(0, i);
    }
    for (size_t r = 0; r < listeners.size() && rank + 1 < size; ++r) {
      pfds.push_back({listeners[r].get(), POLLIN, 0});
      who.emplace_back(1, r);
    }
    for (size_t i = 0; i < pending.size(); ++i) {
      pfds.push_back({pending[i].fd.get(), POLLIN, 0});
      who.emplace_back(2, i);
    }
    const int rc = ::poll(pfds.data(), pfds.size(), static_cast<int>(kSetupTick.count()));
    if (rc < 0 && errno != EINTR) return ErrnoStatus("connection setup: poll", errno);
    now = Clock::now();
    for (size_t k = 0; rc > 0 && k < pfds.size(); ++k) {
      if (pfds[k].revents == 0) continue;
      const auto [kind, i] = who[k];
      if (kind == 0) {
        Dial& d = dials[i];
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(d.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        wire::FrameHeader h = wire::MakeHeader(wire::FrameType::kHello, table.comm_id);
        h.root = rank;
        h.tag = static_cast<uint32_t>(d.rail << 16 | d.ch);
        wire::Seal(&h, nullptr);
        // A fresh socket's send buffer takes the hello at once.
        if (err == 0 && send(d.fd.get(), &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT) !=
                            static_cast<ssize_t>(sizeof(h))) {
          err = errno != 0 ? errno : EIO;
        }
        if (err == ECONNREFUSED) {
          // Its listener is open as long as its communicator: the peer's process is gone.
          return ErrnoStatus("connecting to " + ConnLabel(d.peer, d.rail, d.ch) + ": connect " +
                                 table.rails[d.peer][d.rail].ToString(),
                             err);
        }
        if (err != 0) {
          d.last_error =
              ErrnoStatus("connect " + table.rails[d.peer][d.rail].ToString(), err).ToString();
          d.fd.Reset();
          d.next_try = now + kDialRetry;
          continue;
        }
        net::Fd fd = std::move(d.fd);
        FTCCL_RETURN_IF_ERROR(add(std::move(fd), d.peer, d.rail, d.ch));
      } else if (kind == 1) {
        // One per readiness: the listener blocks (the next round's poll reports any other).
        const int fd = accept4(listeners[i].get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
          pending.push_back(Pending{net::Fd(fd), static_cast<int>(i), {}, 0, now + kHelloTimeout});
        }
      } else {
        Pending& pd = pending[i];
        const ssize_t n = recv(pd.fd.get(), reinterpret_cast<uint8_t*>(&pd.hello) + pd.got,
                               kHdr - pd.got, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0) {
          pd.fd.Reset();  // closed before its hello: the dialer tries again
          continue;
        }
        pd.got += static_cast<size_t>(n);
        if (pd.got < kHdr) continue;
        const wire::FrameHeader& h = pd.hello;
        if (!wire::HeaderValid(h) || h.type != static_cast<uint8_t>(wire::FrameType::kHello) ||
            h.comm_id != table.comm_id || h.root <= rank || h.root >= size ||
            static_cast<int>(h.tag >> 16) != pd.rail || static_cast<int>(h.tag & 0xFFFF) >= nch) {
          return Corrupt("unexpected hello on rail " + std::to_string(pd.rail) +
                         " (foreign communicator or corrupt frame)");
        }
        net::Fd fd = std::move(pd.fd);
        FTCCL_RETURN_IF_ERROR(
            add(std::move(fd), h.root, pd.rail, static_cast<int>(h.tag & 0xFFFF)));
      }
    }
    for (Dial& d : dials) {
      if (d.fd.valid() && now >= d.attempt_end) {
        d.last_error = "connect " + table.rails[d.peer][d.rail].ToString() + ": no answer";
        d.fd.Reset();  // a SYN lost in a dead link: a fresh one at once
      }
    }
    pending.erase(
        std::remove_if(pending.begin(), pending.end(),
                       [&](const Pending& pd) { return !pd.fd.valid() || now >= pd.deadline; }),
        pending.end());
  }
  // Every path, in (peer, rail, channel) order; one not connected has no fd.
  std::vector<MeshConn> out;
  std::string missing;
  for (int peer = 0; peer < size; ++peer) {
    for (int rail = 0; rail < nr && peer != rank; ++rail) {
      for (int ch = 0; ch < nch; ++ch) {
        std::optional<MeshConn>& d = done[slot(peer, rail, ch)];
        if (d) {
          out.push_back(std::move(*d));
          continue;
        }
        MeshConn c;
        c.peer = peer;
        c.rail = rail;
        c.channel = ch;
        out.push_back(std::move(c));
        missing += (missing.empty() ? "" : ", ") + ConnLabel(peer, rail, ch);
      }
    }
  }
  if (have < need) {
    LOG_WARN("NET/TCP",
             "starting without %zu of %zu connections after a grace of %ld ms (%s): "
             "set up when their paths work",
             need - have, need, static_cast<long>(options.init_path_grace.count()),
             missing.c_str());
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// TcpBackend

TcpBackend::TcpBackend(const CommOptions& options, const BootstrapTable& table,
                       const std::vector<uint32_t>& rail_ips)
    : options_(options),
      rank_(options.rank),
      comm_id_(table.comm_id),
      rail_ips_(rail_ips),
      peer_eps_(table.rails),
      hosts_(table.hosts) {
  hosts_.resize(options.size, 0);
}

Result<std::unique_ptr<TcpBackend>> TcpBackend::Create(const CommOptions& options,
                                                       const BootstrapTable& table,
                                                       std::vector<net::Fd> listeners,
                                                       const std::vector<uint32_t>& rail_ips) {
  std::unique_ptr<TcpBackend> b(new TcpBackend(options, table, rail_ips));
  b->epoll_ = net::Fd(epoll_create1(EPOLL_CLOEXEC));
  if (!b->epoll_.valid()) return ErrnoStatus("epoll_create1", errno);
  b->inbox_wake_ = net::Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!b->inbox_wake_.valid()) return ErrnoStatus("eventfd", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kInboxId;
  if (epoll_ctl(b->epoll_.get(), EPOLL_CTL_ADD, b->inbox_wake_.get(), &ev) != 0) {
    return ErrnoStatus("epoll_ctl(eventfd)", errno);
  }
  b->listeners_ = std::move(listeners);
  for (size_t r = 0; r < b->listeners_.size(); ++r) {
    if (!b->listeners_[r].valid()) continue;
    FTCCL_RETURN_IF_ERROR(net::SetNonBlocking(b->listeners_[r].get()));
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u64 = kListenId + r;
    if (epoll_ctl(b->epoll_.get(), EPOLL_CTL_ADD, b->listeners_[r].get(), &e) != 0) {
      return ErrnoStatus("epoll_ctl(listener)", errno);
    }
  }
  return b;
}

TcpBackend::~TcpBackend() { StopRelays(std::chrono::milliseconds(0)); }

std::vector<SetupEvent> TcpBackend::Poll(Clock::time_point now) {
  std::vector<SetupEvent> out;
  epoll_event events[32];
  for (;;) {
    const int n = epoll_wait(epoll_.get(), events, 32, 0);
    if (n <= 0) break;
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kInboxId) {
        uint64_t v;
        (void)!read(inbox_wake_.get(), &v, sizeof(v));
        std::vector<net::Fd> fds;
        {
          std::lock_guard<std::mutex> lock(inbox_mu_);
          fds.swap(inbox_);
        }
        for (auto& fd : fds) {
          const uint64_t pid = kPendingId + next_pending_;
          AddPending(std::move(fd), -1, now);
          OnPendingReadable(pid, &out);  // the hello may be there already
        }
      } else if (id >= kPendingId) {
        OnPendingReadable(id, &out);
      } else if (id >= kListenId) {
        OnAccept(static_cast<int>(id - kListenId), now);
      } else if (id >= kDialId) {
        OnDialDone(static_cast<int>(id - kDialId), &out);
      }
    }
    if (n < 32) break;
  }
  for (auto it = pending_.begin(); it != pending_.end();) {
    it = now >= it->second.deadline ? pending_.erase(it) : std::next(it);
  }
  for (auto it = dials_.begin(); it != dials_.end();) {
    if (now >= it->second.deadline) {
      epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.fd.get(), nullptr);
      it = dials_.erase(it);  // tried again at the engine's next attempt
    } else {
      ++it;
    }
  }
  return out;
}

Status TcpBackend::StartDial(int slot, int peer, int rail, const wire::FrameHeader& hello,
                             Clock::time_point deadline) {
  CancelDial(slot);
  auto fd = net::StartConnect(peer_eps_[peer][rail], rail_ips_[rail]);
  if (!fd.ok()) return fd.status();
  epoll_event e{};
  e.events = EPOLLOUT;
  e.data.u64 = kDialId + static_cast<uint64_t>(slot);
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd->get(), &e) != 0) {
    return ErrnoStatus("epoll_ctl(connect)", errno);
  }
  dials_[slot] = Dial{std::move(fd.value()), hello, deadline};
  return Status::Ok();
}

void TcpBackend::CancelDial(int slot) {
  auto it = dials_.find(slot);
  if (it == dials_.end()) return;
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.fd.get(), nullptr);
  dials_.erase(it);
}

void TcpBackend::OnDialDone(int slot, std::vector<SetupEvent>* out) {
  auto it = dials_.find(slot);
  if (it == dials_.end()) return;
  net::Fd fd = std::move(it->second.fd);
  const wire::FrameHeader hello = it->second.hello;
  dials_.erase(it);
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd.get(), nullptr);
  SetupEvent ev;
  ev.slot = slot;
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err == ECONNREFUSED) {
    ev.kind = SetupEvent::Kind::kRefused;  // the peer's listener is gone: its process is
    out->push_back(std::move(ev));
    return;
  }
  ev.kind = SetupEvent::Kind::kDialFailed;
  // A fresh socket's send buffer takes the 80 bytes at once.
  if (err != 0 ||
      send(fd.get(), &hello, sizeof(hello), MSG_NOSIGNAL | MSG_DONTWAIT) !=
          static_cast<ssize_t>(sizeof(hello)) ||
      !ApplySocketOptions(fd.get(), options_).ok()) {
    out->push_back(std::move(ev));
    return;
  }
  ev.kind = SetupEvent::Kind::kDialed;
  ev.conn_port = ConnectorPort(fd.get(), true);
  ev.link = std::make_unique<SocketLink>(std::move(fd));
  out->push_back(std::move(ev));
}

void TcpBackend::OnAccept(int rail, Clock::time_point now) {
  for (;;) {
    int fd = accept4(listeners_[rail].get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    AddPending(net::Fd(fd), rail, now);
  }
}

void TcpBackend::AddPending(net::Fd fd, int rail, Clock::time_point now) {
  Pending pd;
  pd.fd = std::move(fd);
  pd.rail = rail;
  pd.deadline = now + kHelloTimeout;
  const uint64_t id = kPendingId + next_pending_++;
  epoll_event e{};
  e.events = EPOLLIN | EPOLLRDHUP;
  e.data.u64 = id;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, pd.fd.get(), &e) != 0) return;
  pending_.emplace(id, std::move(pd));
}

void TcpBackend::OnPendingReadable(uint64_t id, std::vector<SetupEvent>* out) {
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
  net::Fd fd = std::move(pd.fd);
  SetupEvent ev;
  ev.kind = SetupEvent::Kind::kHello;
  ev.rail = pd.rail;
  ev.hello = pd.hello;
  pending_.erase(it);
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd.get(), nullptr);
  if (ev.rail >= 0) {
    if (!ApplySocketOptions(fd.get(), options_).ok()) return;
    ev.conn_port = ConnectorPort(fd.get(), false);
  }
  ev.link = std::make_unique<SocketLink>(std::move(fd));
  out->push_back(std::move(ev));
}

Status TcpBackend::ServeRelays(RelayHooks hooks) {
  RelayService::Config rc;
  rc.comm_id = comm_id_;
  rc.rank = rank_;
  rc.hosts = hosts_;
  rc.rail_ips = rail_ips_;
  rc.peer_eps = peer_eps_;
  rc.rail_up = std::move(hooks.rail_up);
  const CommOptions opts = options_;
  rc.prepare_tcp = [opts](int fd) { ApplySocketOptions(fd, opts).ok(); };
  rc.deliver_local = [this](net::Fd fd, int /*src*/) {
    {
      std::lock_guard<std::mutex> lock(inbox_mu_);
      inbox_.push_back(std::move(fd));
    }
    uint64_t one = 1;
    (void)!write(inbox_wake_.get(), &one, sizeof(one));
  };
  auto svc = RelayService::Start(std::move(rc));
  if (!svc.ok()) return svc.status();
  relay_service_ = std::move(svc.value());
  return Status::Ok();
}

Result<std::unique_ptr<Link>> TcpBackend::DialRelay(int via, int dst,
                                                    const wire::FrameHeader& hello) {
  auto fd = ConnectRelay(comm_id_, via);
  if (!fd.ok()) return fd.status();
  struct {
    RelayRequest req;
    wire::FrameHeader hello;
  } first;
  first.req.comm_id = comm_id_;
  first.req.src = rank_;
  first.req.dst = dst;
  SealRelayRequest(&first.req);
  first.hello = hello;
  // A fresh socket's buffer takes these bytes at once.
  if (send(fd->get(), &first, sizeof(first), MSG_NOSIGNAL | MSG_DONTWAIT) !=
      static_cast<ssize_t>(sizeof(first))) {
    return ErrnoStatus("sending the relay request", errno);
  }
  return std::unique_ptr<Link>(new SocketLink(std::move(fd.value())));
}

void TcpBackend::StopRelays(std::chrono::milliseconds grace) {
  if (relay_service_) relay_service_->Stop(grace);
}

uint64_t TcpBackend::relay_bytes_forwarded() const {
  return relay_service_ ? relay_service_->bytes_forwarded() : 0;
}

}  // namespace ftccl::transport::tcp
