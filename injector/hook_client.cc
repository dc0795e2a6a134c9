#include "injector/hook_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/fd.h"
#include "injector/fault_hook.h"

namespace faultline {
namespace {

Status WaitFd(int fd, short events, MonoNs deadline, const std::string& path) {
  for (;;) {
    int64_t left_ms = (deadline - MonoNow()) / 1'000'000;
    if (left_ms <= 0) return Unavailable("fault hook at " + path + " did not answer in time");
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(left_ms));
    if (rc > 0) return Status::Ok();
    if (rc < 0 && errno != EINTR) return ErrnoStatus("poll fault hook " + path, errno);
  }
}

}  // namespace

Result<nlohmann::json> HookCall(const std::string& path, nlohmann::json request,
                                int64_t timeout_ns) {
  MonoNs deadline = MonoNow() + timeout_ns;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(sa.sun_path)) {
    return InvalidArgument("fault hook path '" + path + "' is empty or too long");
  }
  std::memcpy(sa.sun_path, path.c_str(), path.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket(AF_UNIX)", errno);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    int err = errno;
    if (err == ENOENT || err == ECONNREFUSED || err == ENOTSOCK) {
      return Unavailable("nothing listens at fault hook path " + path + " (" + std::strerror(err) +
                         "): is the rank running with its fault hook enabled at that path?");
    }
    return ErrnoStatus("connect to fault hook " + path, err);
  }
  request["v"] = hook::kProtocolVersion;
  std::string line = request.dump() + "\n";
  size_t off = 0;
  while (off < line.size()) {
    FL_RETURN_IF_ERROR(WaitFd(fd.get(), POLLOUT, deadline, path));
    ssize_t n = ::send(fd.get(), line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ErrnoStatus("send to fault hook " + path, errno);
    }
    off += static_cast<size_t>(n);
  }
  std::string reply;
  char buf[512];
  while (reply.find('\n') == std::string::npos) {
    FL_RETURN_IF_ERROR(WaitFd(fd.get(), POLLIN, deadline, path));
    ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("recv from fault hook " + path, errno);
    }
    if (n == 0) return Internal("fault hook at " + path + " closed without a response");
    reply.append(buf, static_cast<size_t>(n));
    if (reply.size() > hook::kHookMaxLine) {
      return Internal("fault hook at " + path + " sent an over-long response");
    }
  }
  reply.resize(reply.find('\n'));
  nlohmann::json j = nlohmann::json::parse(reply, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ok") || !j["ok"].is_boolean()) {
    return Internal("malformed fault hook response from " + path + ": " + reply);
  }
  if (!j["ok"].get<bool>()) {
    return KernelError("fault hook at " + path + " refused " + request.value("op", "?") + ": " +
                       j.value("error", std::string("no reason given")));
  }
  return j;
}

}  // namespace faultline
