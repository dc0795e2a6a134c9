#include "fault_hook.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "fault_hook_request.h"
#include "log.h"

namespace ftccl {
namespace {

using SteadyClock = std::chrono::steady_clock;

Status Bad(const std::string& path, const std::string& why) {
  return InvalidArgument("fault hook path '" + path + "': " + why);
}

}  // namespace

Result<std::unique_ptr<FaultHookServer>> FaultHookServer::Open(const std::string& path) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.empty()) return Bad(path, "empty");
  if (path.size() >= sizeof(sa.sun_path)) {
    return Bad(path, std::to_string(path.size()) + " bytes, but a Unix socket path holds at most " +
                         std::to_string(sizeof(sa.sun_path) - 1));
  }
  std::memcpy(sa.sun_path, path.data(), path.size());
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Bad(path, "exists and is not a socket");
    // A socket left by an earlier process is replaced; one that is served is not taken over.
    net::Fd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe.valid()) return ErrnoStatus("socket(AF_UNIX)", errno);
    if (::connect(probe.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
      return Bad(path, "another process serves a socket there");
    }
    if (::unlink(path.c_str()) != 0)
      return Bad(path, std::string("stale socket: ") + std::strerror(errno));
  }
  std::unique_ptr<FaultHookServer> s(new FaultHookServer(path));
  s->listen_ = net::Fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s->listen_.valid()) return ErrnoStatus("socket(AF_UNIX)", errno);
  if (::bind(s->listen_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    return Bad(path, std::string("cannot bind: ") + std::strerror(errno));
  }
  // From here on the path is ours: the destructor removes it.
  if (::chmod(path.c_str(), 0600) != 0 || ::stat(path.c_str(), &st) != 0) {
    Status err = ErrnoStatus("chmod 0600 " + path, errno);
    ::unlink(path.c_str());
    return err;
  }
  s->dev_ = st.st_dev;
  s->ino_ = st.st_ino;
  if (::listen(s->listen_.get(), 16) != 0) return ErrnoStatus("listen " + path, errno);
  s->stop_ = net::Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!s->stop_.valid()) return ErrnoStatus("eventfd", errno);
  return s;
}

FaultHookServer::~FaultHookServer() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!::write(stop_.get(), &one, sizeof(one));
    thread_.join();
  }
  listen_.Reset();
  struct stat st {};
  if (dev_ != 0 || ino_ != 0) {
    if (::lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) {
      ::unlink(path_.c_str());
    }
  }
}

Status FaultHookServer::Start(transport::FaultTarget* target, int rank, int size, int num_rails) {
  FTCCL_CHECK(target != nullptr && !thread_.joinable());
  target_ = target;
  rank_ = rank;
  size_ = size;
  num_rails_ = num_rails;
  thread_ = std::thread([this] { Serve(); });
  LOG_INFO("HOOK", "serving the fault hook at %s (%s transport)", path_.c_str(),
           target_->TransportName());
  return Status::Ok();
}

std::string FaultHookServer::Handle(const std::string& line) {
  return AnswerHookRequest(line, HookContext{target_, rank_, size_, num_rails_});
}

void FaultHookServer::Serve() {
  struct Client {
    net::Fd fd;
    std::string buf;
    SteadyClock::time_point deadline;
  };
  std::vector<Client> clients;
  // Best effort: the response is one short line into an empty socket buffer. A client that
  // does not read it loses it; the server never waits on one.
  auto answer = [](Client& c, const std::string& text) {
    const std::string line = text + "\n";
    (void)!::send(c.fd.get(), line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    c.fd.Reset();
  };
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({stop_.get(), POLLIN, 0});
    fds.push_back(
        {listen_.get(), static_cast<short>(clients.size() < kMaxClients ? POLLIN : 0), 0});
    int timeout_ms = -1;
    const auto now = SteadyClock::now();
    for (const Client& c : clients) {
      fds.push_back({c.fd.get(), POLLIN, 0});
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - now);
      const int ms = static_cast<int>(std::max<int64_t>(0, left.count()) + 1);
      timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
    }
    int n = ::poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) {
      LOG_WARN("HOOK", "poll: %s; the fault hook at %s stops serving", std::strerror(errno),
               path_.c_str());
      return;
    }
    if (fds[0].revents != 0) return;
    for (size_t i = 0; i < clients.size(); ++i) {
      Client& c = clients[i];
      if (n > 0 && fds[2 + i].revents != 0) {
        char buf[1024];
        ssize_t got = ::recv(c.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
          c.fd.Reset();  // gone before a whole request: nobody to answer
          continue;
        }
        if (got > 0) c.buf.append(buf, static_cast<size_t>(got));
        const HookInput in = TakeHookRequestLine(c.buf);
        if (in.kind == HookInput::kLine) {
          answer(c, Handle(in.line));
        } else if (in.kind == HookInput::kTooLong) {
          answer(c, HookFailureLine("request line longer than " + std::to_string(kMaxLine) +
                                    " bytes"));
        }
        if (!c.fd.valid()) continue;
      }
      if (SteadyClock::now() >= c.deadline) {
        answer(c, HookFailureLine("no complete request line within " +
                                  std::to_string(kClientTimeout.count()) + " ms"));
      }
    }
    std::erase_if(clients, [](const Client& c) { return !c.fd.valid(); });
    // Accepted last: fds[2 + i] above belongs to the clients polled this round.
    if (n > 0 && (fds[1].revents & POLLIN)) {
      int fd = ::accept4(listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) clients.push_back({net::Fd(fd), {}, SteadyClock::now() + kClientTimeout});
    }
  }
}

}  // namespace ftccl
