#include "transport/tcp/relay.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <map>

#include "crc32c.h"
#include "log.h"

namespace ftccl::transport::tcp {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kBufBytes = 256 * 1024;
constexpr uint64_t kListenId = UINT64_MAX;
constexpr uint64_t kWakeId = UINT64_MAX - 1;
constexpr auto kRequestTimeout = std::chrono::seconds(1);
// How long a relay may take to reach its destination, over all of this rank's rails, and how
// long one rail's connect is waited for before the next rail is tried too: a rail whose
// address resolution is pending (the destination's port just came back and the kernel repeats
// ARP only every second) must not hold a relay that another rail would carry at once. The
// rails are tried in turn again until the whole timeout is spent.
constexpr auto kConnectTimeout = std::chrono::milliseconds(500);
constexpr auto kRailConnectTimeout = std::chrono::milliseconds(100);
constexpr int kMaxSessions = 1024;
constexpr uint32_t kUnregistered = UINT32_MAX;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

sockaddr_un AbstractAddress(const std::string& name, socklen_t* len) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  // Abstract namespace: a leading NUL, then the name (not NUL-terminated).
  const size_t n = std::min(name.size(), sizeof(sa.sun_path) - 1);
  std::memcpy(sa.sun_path + 1, name.data(), n);
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return sa;
}

// A byte queue of fixed capacity.
struct Buf {
  std::unique_ptr<uint8_t[]> data{new uint8_t[kBufBytes]};
  size_t head = 0, tail = 0;
  size_t size() const { return tail - head; }
  size_t space() const { return kBufBytes - tail; }
  void Compact() {
    if (head == tail) {
      head = tail = 0;
    } else if (head > kBufBytes / 2) {
      std::memmove(data.get(), data.get() + head, tail - head);
      tail -= head;
      head = 0;
    }
  }
};

}  // namespace

void SealRelayRequest(RelayRequest* r) { r->crc = Crc32c(r, offsetof(RelayRequest, crc)); }

bool RelayRequestValid(const RelayRequest& r) {
  return r.magic == RelayRequest::kMagic && r.version == 1 &&
         r.crc == Crc32c(&r, offsetof(RelayRequest, crc));
}

std::string RelaySocketName(uint64_t comm_id, int rank) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "ftccl-relay-%016lx-%d", static_cast<unsigned long>(comm_id),
                rank);
  return buf;
}

Result<net::Fd> ConnectRelay(uint64_t comm_id, int rank) {
  net::Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket(AF_UNIX)", errno);
  socklen_t len = 0;
  sockaddr_un sa = AbstractAddress(RelaySocketName(comm_id, rank), &len);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    return ErrnoStatus("connect to the relay service of rank " + std::to_string(rank), errno);
  }
  return fd;
}

struct RelayService::Session {
  enum class State { kRequest, kConnecting, kSplice };
  uint64_t id = 0;
  State state = State::kRequest;
  net::Fd a;  // the Unix socket of the rank being relayed
  net::Fd b;  // the TCP connection to the destination
  RelayRequest req;
  size_t req_got = 0;
  std::vector<int> order;  // the rails to try, in order
  std::vector<int> rails;  // still to try in this round
  int rail = -1;
  Clock::time_point deadline;          // of the current step (request, or one rail's connect)
  Clock::time_point connect_deadline;  // of reaching the destination at all
  Buf ab, ba;
  bool a_eof = false, b_eof = false, a_shut = false, b_shut = false;
  uint32_t a_events = kUnregistered, b_events = kUnregistered;  // registered interest
};

Result<std::unique_ptr<RelayService>> RelayService::Start(Config config) {
  std::unique_ptr<RelayService> s(new RelayService(std::move(config)));
  s->listener_ = net::Fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s->listener_.valid()) return ErrnoStatus("socket(AF_UNIX)", errno);
  socklen_t len = 0;
  const std::string name = RelaySocketName(s->cfg_.comm_id, s->cfg_.rank);
  sockaddr_un sa = AbstractAddress(name, &len);
  if (bind(s->listener_.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    return ErrnoStatus("bind the relay service @" + name, errno);
  }
  if (listen(s->listener_.get(), 64) != 0) return ErrnoStatus("listen(relay)", errno);
  s->epoll_ = net::Fd(epoll_create1(EPOLL_CLOEXEC));
  s->wake_ = net::Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!s->epoll_.valid() || !s->wake_.valid()) return ErrnoStatus("relay epoll/eventfd", errno);
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u64 = kListenId;
  if (epoll_ctl(s->epoll_.get(), EPOLL_CTL_ADD, s->listener_.get(), &e) != 0) {
    return ErrnoStatus("epoll_ctl(relay listener)", errno);
  }
  e.data.u64 = kWakeId;
  if (epoll_ctl(s->epoll_.get(), EPOLL_CTL_ADD, s->wake_.get(), &e) != 0) {
    return ErrnoStatus("epoll_ctl(relay eventfd)", errno);
  }
  RelayService* self = s.get();
  s->thread_ = std::thread([self] { self->Loop(); });
  return s;
}

RelayService::~RelayService() { Stop(std::chrono::milliseconds(0)); }

void RelayService::Stop(std::chrono::milliseconds grace) {
  if (!thread_.joinable()) return;
  int64_t at = NowNs() + std::chrono::duration_cast<std::chrono::nanoseconds>(grace).count();
  int64_t expected = 0;
  if (!stop_at_ns_.compare_exchange_strong(expected, at)) {
    // Already stopping: only ever bring the end forward.
    while (at < expected && !stop_at_ns_.compare_exchange_weak(expected, at)) {
    }
  }
  uint64_t one = 1;
  (void)!write(wake_.get(), &one, sizeof(one));
  thread_.join();
}

void RelayService::Loop() {
  std::map<uint64_t, std::unique_ptr<Session>> sessions;
  uint64_t next_id = 1;
  const int my_host_rank = cfg_.rank;
  const int nranks = static_cast<int>(cfg_.hosts.size());
  const int nrails = static_cast<int>(cfg_.rail_ips.size());

  auto set_interest = [&](Session& s) {
    // `have`: the registered interest, kUnregistered before the first registration.
    auto update = [&](net::Fd& fd, uint32_t want, uint32_t* have, uint64_t side) {
      if (!fd.valid() || want == *have) return;
      epoll_event e{};
      e.events = want;
      e.data.u64 = s.id << 1 | side;
      epoll_ctl(epoll_.get(), *have == kUnregistered ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd.get(), &e);
      *have = want;
    };
    uint32_t a = 0, b = 0;
    switch (s.state) {
      case Session::State::kRequest:
        a = EPOLLIN;
        break;
      case Session::State::kConnecting:
        // The relayed rank's hello waits in its socket meanwhile: only its hang-up matters.
        a = EPOLLRDHUP;
        b = EPOLLOUT;
        break;
      case Session::State::kSplice:
        if (!s.a_eof && s.ab.space() > 0) a |= EPOLLIN;
        if (s.ba.size() > 0) a |= EPOLLOUT;
        if (!s.b_eof && s.ba.space() > 0) b |= EPOLLIN;
        if (s.ab.size() > 0) b |= EPOLLOUT;
        break;
    }
    update(s.a, a, &s.a_events, 0);
    update(s.b, b, &s.b_events, 1);
  };

  auto close_session = [&](uint64_t id, const char* why) {
    auto it = sessions.find(id);
    if (it == sessions.end()) return;
    Session& s = *it->second;
    LOG_DEBUG("RELAY", "relay %d -> %d ends: %s", s.req.src, s.req.dst, why);
    if (s.a.valid()) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.a.get(), nullptr);
    if (s.b.valid()) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.b.get(), nullptr);
    sessions.erase(it);
  };

  // Starts a connect on the next rail to try. False: none left.
  // `timed_out`: the last rail did not answer in time, and another round of every rail may
  // follow while the whole timeout lasts; a refusal only moves on to the next rail of the round
  // (when the last one refuses, the relay ends).
  auto next_connect = [&](Session& s, bool timed_out) {
    const auto now = Clock::now();
    if (s.state != Session::State::kConnecting) {
      s.connect_deadline = now + kConnectTimeout;
    } else if (timed_out && s.rails.empty() && now < s.connect_deadline) {
      s.rails = s.order;
    }
    while (!s.rails.empty() && now < s.connect_deadline) {
      const int r = s.rails.front();
      s.rails.erase(s.rails.begin());
      if (cfg_.rail_up && !cfg_.rail_up(r)) continue;
      auto fd = net::StartConnect(cfg_.peer_eps[s.req.dst][r], cfg_.rail_ips[r]);
      if (!fd.ok()) continue;
      if (s.b.valid()) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.b.get(), nullptr);
      s.b = std::move(fd.value());
      s.b_events = kUnregistered;
      s.rail = r;
      s.state = Session::State::kConnecting;
      s.deadline = std::min(now + kRailConnectTimeout, s.connect_deadline);
      set_interest(s);
      return true;
    }
    return false;
  };

  // Moves bytes both ways until every socket would block. False: the session is over.
  auto pump = [&](Session& s) {
    bool progress = true;
    while (progress) {
      progress = false;
      auto move = [&](net::Fd& from, net::Fd& to, Buf& buf, bool* from_eof, bool* to_shut) {
        if (!*from_eof && buf.space() > 0) {
          ssize_t n = recv(from.get(), buf.data.get() + buf.tail, buf.space(), MSG_DONTWAIT);
          if (n > 0) {
            buf.tail += static_cast<size_t>(n);
            progress = true;
          } else if (n == 0) {
            *from_eof = true;
            progress = true;
          } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            return false;
          }
        }
        if (buf.size() > 0) {
          ssize_t n =
              send(to.get(), buf.data.get() + buf.head, buf.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
          if (n > 0) {
            buf.head += static_cast<size_t>(n);
            bytes_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
            buf.Compact();
            progress = true;
          } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            return false;
          }
        }
        if (*from_eof && buf.size() == 0 && !*to_shut) {
          ::shutdown(to.get(), SHUT_WR);
          *to_shut = true;
        }
        return true;
      };
      if (!move(s.a, s.b, s.ab, &s.a_eof, &s.b_shut)) return false;
      if (!move(s.b, s.a, s.ba, &s.b_eof, &s.a_shut)) return false;
    }
    return !(s.a_shut && s.b_shut);
  };

  auto on_request = [&](Session& s) {
    ssize_t n = recv(s.a.get(), reinterpret_cast<uint8_t*>(&s.req) + s.req_got,
                     sizeof(s.req) - s.req_got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
      close_session(s.id, "closed before its request");
      return;
    }
    s.req_got += static_cast<size_t>(n);
    if (s.req_got < sizeof(s.req)) return;
    const RelayRequest& q = s.req;
    const bool ok = RelayRequestValid(q) && q.comm_id == cfg_.comm_id && q.src >= 0 &&
                    q.src < nranks && q.dst >= 0 && q.dst < nranks && q.src != q.dst &&
                    q.src != my_host_rank && cfg_.hosts[q.src] == cfg_.hosts[my_host_rank];
    if (!ok) {
      LOG_WARN("RELAY",
               "rejected a relay request (malformed, foreign communicator or not from this host)");
      close_session(s.id, "bad request");
      return;
    }
    if (q.dst == my_host_rank) {
      // A path to this rank itself: the progress thread takes the socket and reads its hello.
      epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.a.get(), nullptr);
      s.a_events = kUnregistered;
      const int src = q.src;
      cfg_.deliver_local(std::move(s.a), src);
      sessions_.fetch_add(1, std::memory_order_relaxed);
      close_session(s.id, "handed to this rank");
      return;
    }
    // Through one of this rank's own rails, starting at a rail that depends on the pair so that
    // several relayed peers spread over the rails.
    for (int i = 0; i < nrails; ++i) s.order.push_back((q.src + q.dst + i) % nrails);
    s.rails = s.order;
    if (!next_connect(s, false)) {
      LOG_WARN("RELAY", "cannot relay rank %d to rank %d: no rail of this rank is up", q.src,
               q.dst);
      close_session(s.id, "no rail up");
    }
  };

  auto on_connected = [&](Session& s) {
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(s.b.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      if (!next_connect(s, false)) close_session(s.id, "every rail refused");
      return;
    }
    if (cfg_.prepare_tcp) cfg_.prepare_tcp(s.b.get());
    s.state = Session::State::kSplice;
    sessions_.fetch_add(1, std::memory_order_relaxed);
    LOG_INFO("RELAY", "relaying rank %d to rank %d over rail %d", s.req.src, s.req.dst, s.rail);
    if (!pump(s)) {
      close_session(s.id, "ended");
      return;
    }
    set_interest(s);
  };

  epoll_event events[64];
  for (;;) {
    const int64_t stop_at = stop_at_ns_.load();
    if (stop_at != 0) {
      if (listener_.valid()) {
        epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, listener_.get(), nullptr);
        listener_.Reset();
      }
      if (sessions.empty() || NowNs() >= stop_at) break;
    }
    int n = epoll_wait(epoll_.get(), events, 64, 50);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kWakeId) {
        uint64_t v;
        (void)!read(wake_.get(), &v, sizeof(v));
        continue;
      }
      if (id == kListenId) {
        for (;;) {
          int fd = accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (fd < 0) break;
          if (static_cast<int>(sessions.size()) >= kMaxSessions) {
            close(fd);
            continue;
          }
          auto s = std::make_unique<Session>();
          s->id = next_id++;
          s->a = net::Fd(fd);
          s->deadline = Clock::now() + kRequestTimeout;
          Session& ref = *s;
          sessions.emplace(ref.id, std::move(s));
          set_interest(ref);
        }
        continue;
      }
      auto it = sessions.find(id >> 1);
      if (it == sessions.end()) continue;
      Session& s = *it->second;
      const uint32_t ev = events[i].events;
      switch (s.state) {
        case Session::State::kRequest:
          on_request(s);
          break;
        case Session::State::kConnecting:
          if ((id & 1) == 1) {
            on_connected(s);
          } else if (ev & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
            close_session(s.id, "the relayed rank went away while connecting");
          }
          break;
        case Session::State::kSplice: {
          const bool alive = pump(s);
          if (!alive || (ev & (EPOLLERR | EPOLLHUP))) {
            // A socket that failed or closed for good ends the relay; the ends see it close and
            // resend what was not acknowledged on another path.
            if (s.a.valid() && !s.a_shut) ::shutdown(s.a.get(), SHUT_WR);
            if (s.b.valid() && !s.b_shut) ::shutdown(s.b.get(), SHUT_WR);
            close_session(s.id, alive ? "a socket hung up" : "ended");
          } else {
            set_interest(s);
          }
          break;
        }
      }
    }
    // Timeouts: requests that never came, connects that never completed.
    const auto now = Clock::now();
    std::vector<uint64_t> expired;
    for (auto& [sid, s] : sessions) {
      if (s->state != Session::State::kSplice && now >= s->deadline) expired.push_back(sid);
    }
    for (uint64_t sid : expired) {
      Session& s = *sessions[sid];
      if (s.state == Session::State::kConnecting && next_connect(s, true)) continue;
      close_session(sid, "timed out");
    }
  }
  for (auto& [sid, s] : sessions) {
    if (s->a.valid()) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s->a.get(), nullptr);
    if (s->b.valid()) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s->b.get(), nullptr);
  }
  sessions.clear();
}

}  // namespace ftccl::transport::tcp
