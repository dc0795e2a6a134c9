#include "transport/tcp/link.h"

#include <netinet/in.h>
#include <linux/tcp.h>  // tcp_info with tcpi_bytes_acked, which glibc's lacks
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "transport/fault_target.h"

namespace ftccl::transport::tcp {

ssize_t SocketLink::Writev(const iovec* iov, int iovcnt) {
  msghdr mh{};
  mh.msg_iov = const_cast<iovec*>(iov);
  mh.msg_iovlen = static_cast<size_t>(iovcnt);
  const ssize_t n = ::sendmsg(fd_.get(), &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    const int err = errno;
    error_ = std::string("send: ") + std::strerror(err);
    errno = err;
  }
  return n;
}

ssize_t SocketLink::Read(void* buf, size_t len) {
  const ssize_t n = ::recv(fd_.get(), buf, len, MSG_DONTWAIT);
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    const int err = errno;
    error_ = std::string("recv: ") + std::strerror(err);
    errno = err;
  }
  return n;
}

void SocketLink::ShutdownWrite() {
  if (fd_.valid()) ::shutdown(fd_.get(), SHUT_WR);
}

Status SocketLink::ForceError() { return Unsupported(); }

void SocketLink::Reset() {
  if (!fd_.valid()) return;
  const linger abort_now{1, 0};  // close() sends a reset and drops what is queued
  ::setsockopt(fd_.get(), SOL_SOCKET, SO_LINGER, &abort_now, sizeof abort_now);
  fd_.Reset();
}

namespace {
// The socket's TCP_INFO; nothing for a Unix socket (a relay on this host), which has none and
// so never backs off or retransmits.
std::optional<tcp_info> TcpInfo(const net::Fd& fd) {
  if (!fd.valid()) return std::nullopt;
  tcp_info info{};
  socklen_t len = sizeof info;
  if (::getsockopt(fd.get(), IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return std::nullopt;
  return info;
}
}  // namespace

bool SocketLink::BackingOff() const {
  const auto info = TcpInfo(fd_);
  return info && info->tcpi_backoff > 0;
}

bool SocketLink::AwaitingRetransmission() const {
  const auto info = TcpInfo(fd_);
  if (!info) return false;
  const uint32_t rtt_ms = info->tcpi_rtt / 1000;
  return info->tcpi_unacked > 0 && info->tcpi_last_ack_recv >= std::max<uint32_t>(20, 8 * rtt_ms);
}

bool SocketLink::AcknowledgedWithin(std::chrono::milliseconds window) {
  const auto info = TcpInfo(fd_);
  if (!info) return false;
  const auto now = std::chrono::steady_clock::now();
  // Whether the last reading is recent enough to date a change seen now.
  const bool dated = sampled_at_ != std::chrono::steady_clock::time_point{} &&
                     now - sampled_at_ <= window;
  sampled_at_ = now;
  if (info->tcpi_unacked == 0) {
    bytes_acked_ = info->tcpi_bytes_acked;
    acked_at_ = now;
    return true;
  }
  if (info->tcpi_bytes_acked != bytes_acked_) {
    bytes_acked_ = info->tcpi_bytes_acked;
    acked_at_ = dated ? now : std::chrono::steady_clock::time_point{};
  }
  return acked_at_ != std::chrono::steady_clock::time_point{} && now - acked_at_ < window;
}

}  // namespace ftccl::transport::tcp
