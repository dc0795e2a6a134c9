#include "transport/tcp/link.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

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

}  // namespace ftccl::transport::tcp
