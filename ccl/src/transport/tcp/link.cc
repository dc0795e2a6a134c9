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

std::optional<SocketLink::Acks> SocketLink::ReadAcks(Clock::time_point now) {
  const auto info = TcpInfo(fd_);
  if (!info) return std::nullopt;
  Acks a{info->tcpi_unacked,
         info->tcpi_rtt,
         info->tcpi_rttvar,
         sampled_at_,
         info->tcpi_bytes_acked != bytes_acked_,
         info->tcpi_delivery_rate};
  if (a.grew || sampled_at_ == Clock::time_point{}) {
    bytes_acked_ = info->tcpi_bytes_acked;
    unchanged_since_ = now;  // it grew after the last reading, no later than now
  }
  // For AcknowledgedWithin, whoever reads: a growth is dated by this reading and the one
  // before it (the gap, how precisely); nothing outstanding counts as acknowledged now. (Kept
  // here, not in AcknowledgedWithin: the engine's hedge check reads every millisecond, and a
  // growth it saw first was then never seen by AcknowledgedWithin, which read a busy socket as
  // silent and let a working path be suspected, fault-free.)
  if (a.grew && sampled_at_ != Clock::time_point{}) {
    acked_at_ = now;
    acked_gap_ = now - sampled_at_;
  }
  if (a.unacked == 0) {
    acked_at_ = now;
    acked_gap_ = Clock::duration::zero();
  }
  // Delivery, for ReadTransportAcks: segments acknowledged in order or selectively
  // (tcpi_delivered counts SACKed ones too, so a loss being repaired is not silence).
  const bool delivered = info->tcpi_delivered != delivered_;
  delivered_ = info->tcpi_delivered;
  if (a.grew || delivered || a.unacked == 0 || quiet_since_ == Clock::time_point{}) {
    quiet_since_ = now;
  }
  sampled_at_ = now;
  return a;
}

bool SocketLink::AwaitingRetransmission() {
  const auto now = Clock::now();
  const auto a = ReadAcks(now);
  if (!a || a->unacked == 0) return false;
  // tcpi_bytes_acked, not tcpi_last_ack_recv: the peer's segments that acknowledge nothing
  // new refresh the latter too (those TCP takes off its fast path, e.g. once this end
  // retransmits), on a connection whose other direction loses everything.
  const auto quiet = std::chrono::milliseconds(std::max<uint32_t>(20, 8 * (a->rtt_us / 1000)));
  return now - unchanged_since_ >= quiet;
}

bool SocketLink::AcknowledgedWithin(std::chrono::milliseconds window) {
  const auto now = Clock::now();
  const auto a = ReadAcks(now);
  if (!a) return false;
  if (a->unacked == 0) return true;
  // The last growth any reading saw, if the reading before it was recent enough to date it.
  return acked_at_ != Clock::time_point{} && acked_gap_ <= window && now - acked_at_ < window;
}

std::optional<Link::TransportAcks> SocketLink::ReadTransportAcks() {
  const auto a = ReadAcks(Clock::now());
  if (!a) return std::nullopt;
  return TransportAcks{a->unacked, quiet_since_, std::chrono::microseconds(a->rtt_us),
                       std::chrono::microseconds(a->rttvar_us), a->delivery_rate};
}

}  // namespace ftccl::transport::tcp
