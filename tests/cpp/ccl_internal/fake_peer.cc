#include "fake_peer.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bootstrap.h"
#include "net.h"
#include "transport/tcp/link.h"
#include "transport/tcp/setup.h"

namespace ftccl::testing {
namespace {

constexpr uint8_t kCanary = 0xA5;
constexpr size_t kPage = 4096;

// A connected TCP pair over 127.0.0.1: sv[0] dialled sv[1], which listened on *port.
bool TcpPair(int sv[2], int* port, std::string* why) {
  const int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(l, 1) != 0 ||
      getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    *why = std::string("listen: ") + strerror(errno);
    if (l >= 0) close(l);
    return false;
  }
  *port = ntohs(a.sin_port);
  sv[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sv[0] < 0 || connect(sv[0], reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    *why = std::string("connect: ") + strerror(errno);
    close(l);
    return false;
  }
  sv[1] = accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
  close(l);
  if (sv[1] < 0) {
    *why = std::string("accept: ") + strerror(errno);
    return false;
  }
  const int one = 1;
  for (int i = 0; i < 2; ++i) setsockopt(sv[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return true;
}

}  // namespace

GuardedBuffer::GuardedBuffer(size_t len, bool trap) : len_(len), trap_(trap) {
  const size_t pages = (len + kPage - 1) / kPage;
  map_len_ = (pages + 2) * kPage;
  void* m = mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    map_ = nullptr;
    return;
  }
  map_ = static_cast<uint8_t*>(m);
  std::memset(map_, kCanary, map_len_);
  // The buffer ends exactly where the upper guard page begins.
  data_ = map_ + (pages + 1) * kPage - len;
  std::memset(data_, 0, len);
  if (trap) {
    mprotect(map_, kPage, PROT_NONE);
    mprotect(map_ + (pages + 1) * kPage, kPage, PROT_NONE);
  }
}

GuardedBuffer::~GuardedBuffer() {
  if (map_ != nullptr) munmap(map_, map_len_);
}

bool GuardedBuffer::Intact() const {
  if (map_ == nullptr) return false;
  const size_t pages = (len_ + kPage - 1) / kPage;
  const uint8_t* lo = trap_ ? map_ + kPage : map_;
  for (const uint8_t* p = lo; p < data_; ++p) {
    if (*p != kCanary) return false;
  }
  if (!trap_) {
    for (const uint8_t* p = data_ + len_; p < map_ + map_len_; ++p) {
      if (*p != kCanary) return false;
    }
  }
  (void)pages;
  return true;
}

std::unique_ptr<FakePeer> FakePeer::Start(int conns, std::string* why, int rails) {
  return Start(conns, why, rails, Setup{});
}

std::unique_ptr<FakePeer> FakePeer::Start(int conns, std::string* why, int rails,
                                          const Setup& setup) {
  std::unique_ptr<FakePeer> fp(new FakePeer());
  CommOptions options;
  options.rank = 0;
  options.size = 2;
  options.channels_per_rail = conns;
  options.relay = false;
  options.watch_links = false;
  options.suspect_floor = setup.suspect_floor;
  options.suspect_ceiling = setup.suspect_ceiling;
  options.hedge_floor = setup.hedge_floor;
  BootstrapTable table;
  table.comm_id = kCommId;
  table.size = 2;
  table.num_rails = rails;
  const uint32_t loopback = htonl(INADDR_LOOPBACK);
  table.rails.assign(2, std::vector<net::Endpoint>(rails, net::Endpoint{loopback, 1}));
  table.hosts = {1, 2};  // different hosts: no intra-host relay
  std::vector<transport::engine::InitialConn> initial;
  for (int i = 0; i < conns * rails; ++i) {
    int sv[2];
    int port = 0;
    if (setup.tcp) {
      if (!TcpPair(sv, &port, why)) return nullptr;
    } else if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      *why = std::string("socketpair: ") + strerror(errno);
      return nullptr;
    }
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);  // the engine's end
    auto end = std::make_unique<End>();
    end->fd = sv[1];
    end->port = port;
    fp->ends_.push_back(std::move(end));
    transport::engine::InitialConn ic;
    ic.link = std::make_unique<transport::tcp::SocketLink>(net::Fd(sv[0]));
    ic.peer = 1;
    ic.rail = i / conns;
    ic.channel = i % conns;
    initial.push_back(std::move(ic));
  }
  // The backend as the factory makes it; no listeners (rank 0 never dials rank 1).
  const std::vector<uint32_t> rail_ips(rails, loopback);
  auto backend = transport::tcp::TcpBackend::Create(options, table, {}, rail_ips);
  if (!backend.ok()) {
    *why = backend.status().ToString();
    return nullptr;
  }
  fp->engine_ = std::make_unique<transport::engine::Engine>(
      options, table, std::move(backend.value()), std::move(initial), rail_ips);
  if (Status st = fp->engine_->Start(); !st.ok()) {
    *why = st.ToString();
    return nullptr;
  }
  fp->pump_ = std::thread([p = fp.get()] { p->Pump(); });
  return fp;
}

FakePeer::~FakePeer() {
  Stop();
  engine_.reset();
  for (auto& e : ends_) {
    if (e->fd >= 0) close(e->fd);
  }
}

void FakePeer::Stop() {
  if (engine_) engine_->Shutdown();
  stop_pump_ = true;
  if (pump_.joinable()) pump_.join();
}

bool FakePeer::WriteAll(int conn, const void* a, size_t alen, const void* b, size_t blen) {
  End& e = *ends_[conn];
  std::lock_guard<std::mutex> lock(e.write_mu);
  const uint8_t* parts[2] = {static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b)};
  size_t lens[2] = {alen, blen};
  for (int i = 0; i < 2; ++i) {
    size_t off = 0;
    while (off < lens[i]) {
      ssize_t n = send(e.fd, parts[i] + off, lens[i] - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
  }
  return true;
}

bool FakePeer::WriteFrame(int conn, wire::FrameHeader h, const void* payload, bool seal) {
  if (seal && payload != nullptr) wire::Seal(&h, payload);
  if (seal && payload == nullptr) h.header_crc = wire::HeaderCrc(h);  // a header without payload
  return WriteAll(conn, &h, sizeof(h), payload, payload ? h.length : 0);
}

bool FakePeer::WriteRaw(int conn, const void* data, size_t len) {
  return WriteAll(conn, data, len, nullptr, 0);
}

wire::FrameHeader FakePeer::DataHeader(const transport::MsgKey& key,
                                       const transport::Signature& sig, uint64_t chunk_seq,
                                       uint64_t offset, uint32_t len, uint64_t msg_len) {
  wire::FrameHeader h = wire::MakeHeader(wire::FrameType::kData, kCommId);
  h.coll_kind = static_cast<uint8_t>(sig.kind);
  h.dtype = static_cast<uint8_t>(sig.dtype);
  h.redop = static_cast<uint8_t>(sig.op);
  h.root = sig.root;
  h.count = sig.count;
  h.coll_seq = key.coll_seq;
  h.tag = key.tag;
  h.chunk_seq = chunk_seq;
  h.offset = offset;
  h.msg_len = msg_len;
  h.length = len;
  return h;
}

bool FakePeer::SendMessage(int conn, const transport::MsgKey& key,
                           const transport::Signature& sig, const uint8_t* data, size_t len,
                           size_t chunk, uint64_t* seq) {
  size_t off = 0;
  do {
    const size_t n = std::min(chunk, len - off);
    auto h = DataHeader(key, sig, (*seq)++, off, static_cast<uint32_t>(n), len);
    if (!WriteFrame(conn, h, data + off)) return false;
    off += n;
  } while (off < len);
  return true;
}

void FakePeer::Pump() {
  std::vector<pollfd> pfds;
  std::vector<int> which;
  while (!stop_pump_) {
    pfds.clear();
    which.clear();
    for (size_t i = 0; i < ends_.size(); ++i) {
      if (ends_[i]->closed) continue;
      pfds.push_back({ends_[i]->fd, POLLIN, 0});
      which.push_back(static_cast<int>(i));
    }
    if (pfds.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    if (poll(pfds.data(), pfds.size(), 5) <= 0) continue;
    for (size_t k = 0; k < pfds.size(); ++k) {
      if (pfds[k].revents == 0) continue;
      End& e = *ends_[which[k]];
      uint8_t* to;
      size_t want;
      if (e.got < sizeof(e.hdr)) {
        to = reinterpret_cast<uint8_t*>(&e.hdr) + e.got;
        want = sizeof(e.hdr) - e.got;
      } else {
        to = e.payload.data() + e.payload_got;
        want = e.payload.size() - e.payload_got;
      }
      ssize_t n = recv(e.fd, to, want, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) {
        // The engine closed (or half-closed, shutting down): close this side in order too.
        shutdown(e.fd, SHUT_WR);
        e.closed = true;
        continue;
      }
      if (e.got < sizeof(e.hdr)) {
        e.got += static_cast<size_t>(n);
        if (e.got == sizeof(e.hdr)) {
          e.payload.assign(e.hdr.length, 0);
          e.payload_got = 0;
          if (e.hdr.length == 0) OnFrame(which[k]);
        }
      } else {
        e.payload_got += static_cast<size_t>(n);
        if (e.payload_got == e.payload.size()) OnFrame(which[k]);
      }
    }
  }
}

void FakePeer::OnFrame(int conn) {
  End& e = *ends_[conn];
  const wire::FrameHeader h = e.hdr;
  e.got = 0;
  {
    std::lock_guard<std::mutex> lock(seen_mu_);
    if (h.type < seen_.size()) seen_[h.type]++;
    if (h.type == static_cast<uint8_t>(wire::FrameType::kAck)) {
      if (acks_by_conn_.size() <= static_cast<size_t>(conn)) acks_by_conn_.resize(conn + 1, 0);
      acks_by_conn_[conn]++;
      last_ack_ = h.chunk_seq;
    }
    if (h.type == static_cast<uint8_t>(wire::FrameType::kData)) e.data_seen++;
  }
  if (h.type == static_cast<uint8_t>(wire::FrameType::kPing) && !e.muted) {
    auto pong = wire::MakeHeader(wire::FrameType::kPong, kCommId);
    pong.chunk_seq = h.chunk_seq;
    WriteFrame(conn, pong, nullptr);
  }
}

size_t FakePeer::FramesSeen(wire::FrameType type) const {
  std::lock_guard<std::mutex> lock(seen_mu_);
  return seen_[static_cast<size_t>(type)];
}

size_t FakePeer::AcksSeen(int conn) const {
  std::lock_guard<std::mutex> lock(seen_mu_);
  return static_cast<size_t>(conn) < acks_by_conn_.size() ? acks_by_conn_[conn] : 0;
}

size_t FakePeer::DataSeen(int conn) const {
  std::lock_guard<std::mutex> lock(seen_mu_);
  return ends_[conn]->data_seen;
}

uint64_t FakePeer::LastAck() const {
  std::lock_guard<std::mutex> lock(seen_mu_);
  return last_ack_;
}

void FakePeer::Hangup(int conn) { shutdown(ends_[conn]->fd, SHUT_RDWR); }

bool FakePeer::Closed(int conn, std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  while (!ends_[conn]->closed && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return ends_[conn]->closed;
}

void FakePeer::Drain(int conn, std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  while (!ends_[conn]->closed && std::chrono::steady_clock::now() < until) {
    int outq = 0;
    if (ioctl(ends_[conn]->fd, SIOCOUTQ, &outq) != 0 || outq == 0) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

const std::vector<Event>& FakePeer::Events() {
  for (auto& e : engine_->DrainEvents()) events_.push_back(std::move(e));
  return events_;
}

const Event* FakePeer::PathDown(int conn, std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  for (;;) {
    for (const Event& e : Events()) {
      if (e.kind == EventKind::kPathDown && e.peer == 1 && e.channel == conn) return &e;
    }
    if (std::chrono::steady_clock::now() >= until) return nullptr;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace ftccl::testing
