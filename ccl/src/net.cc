#include "net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ftccl::net {
namespace {

int RemainingMs(Clock::time_point deadline) {
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left < 0) return 0;
  if (left > 1000000) return 1000000;
  return static_cast<int>(left);
}

Status WaitFd(int fd, short events, Clock::time_point deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int ms = RemainingMs(deadline);
    int rc = ::poll(&p, 1, ms);
    if (rc > 0) return Status::Ok();
    if (rc == 0) return Timeout(std::string(what) + ": deadline passed");
    if (errno != EINTR) return ErrnoStatus(std::string(what) + ": poll", errno);
  }
}

}  // namespace

void Fd::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

sockaddr_in Endpoint::ToSockaddr() const {
  sockaddr_in sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = ip;
  sa.sin_port = htons(port);
  return sa;
}

std::string Endpoint::ToString() const {
  char buf[INET_ADDRSTRLEN] = {0};
  in_addr a{ip};
  inet_ntop(AF_INET, &a, buf, sizeof(buf));
  return std::string(buf) + ":" + std::to_string(port);
}

Result<Endpoint> ParseEndpoint(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos) {
    return InvalidArgument("address '" + s + "' is not of the form a.b.c.d:port");
  }
  std::string host = s.substr(0, colon);
  std::string port = s.substr(colon + 1);
  in_addr a;
  if (inet_pton(AF_INET, host.c_str(), &a) != 1) {
    return InvalidArgument("address '" + s + "': '" + host + "' is not an IPv4 address");
  }
  char* end = nullptr;
  errno = 0;
  long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || errno != 0 || p < 0 || p > 65535) {
    return InvalidArgument("address '" + s + "': bad port '" + port + "'");
  }
  Endpoint ep;
  ep.ip = a.s_addr;
  ep.port = static_cast<uint16_t>(p);
  return ep;
}

Result<uint32_t> ResolveRailAddress(const std::string& rail) {
  in_addr a;
  if (inet_pton(AF_INET, rail.c_str(), &a) == 1) return static_cast<uint32_t>(a.s_addr);
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return ErrnoStatus("getifaddrs", errno);
  uint32_t found = 0;
  bool exists = false;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_name == nullptr || rail != i->ifa_name) continue;
    exists = true;
    if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET) {
      found = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
      break;
    }
  }
  freeifaddrs(list);
  if (found != 0) return found;
  if (exists) return InvalidArgument("rail '" + rail + "': interface has no IPv4 address");
  return InvalidArgument("rail '" + rail + "': neither an IPv4 address nor a local interface");
}

Status SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return ErrnoStatus("fcntl(O_NONBLOCK)", errno);
  }
  return Status::Ok();
}

Status SetNoDelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return ErrnoStatus("setsockopt(TCP_NODELAY)", errno);
  }
  return Status::Ok();
}

void BindToDeviceOf(int fd, uint32_t ip) {
  if (ip == 0) return;
  char dev[IF_NAMESIZE] = {};
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if (reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr != ip) continue;
    if ((i->ifa_flags & IFF_LOOPBACK) == 0) std::strncpy(dev, i->ifa_name, sizeof(dev) - 1);
    break;
  }
  freeifaddrs(list);
  if (dev[0] == '\0') return;
  // Without the privilege the socket still works, routed by the tables alone.
  setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, dev, static_cast<socklen_t>(std::strlen(dev)));
}

Result<std::pair<Fd, Endpoint>> Listen(uint32_t ip, uint16_t port) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket", errno);
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  Endpoint want{ip, port};
  sockaddr_in sa = want.ToSockaddr();
  BindToDeviceOf(fd.get(), ip);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    return ErrnoStatus("bind " + want.ToString(), errno);
  }
  if (::listen(fd.get(), 4096) != 0) return ErrnoStatus("listen " + want.ToString(), errno);
  auto local = LocalEndpoint(fd.get());
  if (!local.ok()) return local.status();
  return std::make_pair(std::move(fd), local.value());
}

Result<Endpoint> LocalEndpoint(int fd) {
  sockaddr_in sa;
  socklen_t len = sizeof(sa);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    return ErrnoStatus("getsockname", errno);
  }
  Endpoint ep;
  ep.ip = sa.sin_addr.s_addr;
  ep.port = ntohs(sa.sin_port);
  return ep;
}

Result<Fd> StartConnect(const Endpoint& to, uint32_t from_ip) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return ErrnoStatus("socket", errno);
  if (from_ip != 0) {
    Endpoint from{from_ip, 0};
    sockaddr_in sa = from.ToSockaddr();
    BindToDeviceOf(fd.get(), from_ip);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
      return ErrnoStatus("bind " + from.ToString(), errno);
    }
  }
  sockaddr_in sa = to.ToSockaddr();
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 &&
      errno != EINPROGRESS) {
    return ErrnoStatus("connect " + to.ToString(), errno);
  }
  return fd;
}

Result<Fd> Connect(const Endpoint& to, uint32_t from_ip, Clock::time_point deadline) {
  auto started = StartConnect(to, from_ip);
  if (!started.ok()) return started.status();
  Fd fd = std::move(started).value();
  FTCCL_RETURN_IF_ERROR(WaitFd(fd.get(), POLLOUT, deadline, ("connect " + to.ToString()).c_str()));
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return ErrnoStatus("connect " + to.ToString(), err);
  int flags = fcntl(fd.get(), F_GETFL, 0);
  fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

Result<Fd> Accept(int listen_fd, Clock::time_point deadline) {
  FTCCL_RETURN_IF_ERROR(WaitFd(listen_fd, POLLIN, deadline, "accept"));
  int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return ErrnoStatus("accept", errno);
  return Fd(fd);
}

Status ReadFull(int fd, void* buf, size_t len, Clock::time_point deadline) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    FTCCL_RETURN_IF_ERROR(WaitFd(fd, POLLIN, deadline, "read"));
    ssize_t n = ::recv(fd, p, len, MSG_DONTWAIT);
    if (n == 0) return NetworkError("connection closed by peer");
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ErrnoStatus("recv", errno);
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status WriteFull(int fd, const void* buf, size_t len, Clock::time_point deadline) {
  auto* p = static_cast<const char*>(buf);
  while (len > 0) {
    FTCCL_RETURN_IF_ERROR(WaitFd(fd, POLLOUT, deadline, "write"));
    ssize_t n = ::send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ErrnoStatus("send", errno);
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace ftccl::net
