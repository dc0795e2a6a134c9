// Small socket helpers used during setup (bootstrap, connection establishment). Every call that
// can wait takes an absolute deadline; none blocks past it.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "ftccl/status.h"

namespace ftccl::net {

using Clock = std::chrono::steady_clock;

// Owns a file descriptor; closes it on destruction.
class Fd final {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() { return std::exchange(fd_, -1); }
  void Reset();

 private:
  int fd_ = -1;
};

struct Endpoint {
  uint32_t ip = 0;    // network byte order
  uint16_t port = 0;  // host byte order
  sockaddr_in ToSockaddr() const;
  std::string ToString() const;
};

// "a.b.c.d:port" -> Endpoint.
Result<Endpoint> ParseEndpoint(const std::string& s);
// An IPv4 address, or an interface name resolved to its first IPv4 address.
Result<uint32_t> ResolveRailAddress(const std::string& rail);

Status SetNonBlocking(int fd);
Status SetNoDelay(int fd);

// Ties a socket to the interface that holds `ip` (SO_BINDTODEVICE; not for loopback), so its
// traffic never leaves through another port of the same subnet when that interface is down, as
// NCCL ties its sockets to NCCL_SOCKET_IFNAME. Listen and StartConnect call it.
void BindToDeviceOf(int fd, uint32_t ip);

// Binds to `ip`:`port` (0 = ephemeral) and listens. Returns the socket and the bound endpoint.
Result<std::pair<Fd, Endpoint>> Listen(uint32_t ip, uint16_t port);
// Returns the local endpoint of a bound socket.
Result<Endpoint> LocalEndpoint(int fd);

// Connects to `to` (optionally from `from_ip`, 0 = any) before `deadline`. The socket returned
// is blocking.
Result<Fd> Connect(const Endpoint& to, uint32_t from_ip, Clock::time_point deadline);
// Starts a non-blocking connect from `from_ip` (0: any) to `to`: the socket becomes writable
// when it completes; SO_ERROR then says how. The socket stays non-blocking.
Result<Fd> StartConnect(const Endpoint& to, uint32_t from_ip);
// Accepts one connection before `deadline`.
Result<Fd> Accept(int listen_fd, Clock::time_point deadline);

// Reads/writes exactly `len` bytes before `deadline` (EOF before that is kNetwork).
Status ReadFull(int fd, void* buf, size_t len, Clock::time_point deadline);
Status WriteFull(int fd, const void* buf, size_t len, Clock::time_point deadline);

}  // namespace ftccl::net
