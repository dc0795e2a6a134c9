#include "injector/sock_diag.h"

#include <optional>
#include <arpa/inet.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "base/fd.h"
#include "injector/netns.h"

namespace faultline {
namespace {

constexpr uint32_t kConnStates =
    ((1u << 12) - 1) & ~(1u << TCP_LISTEN) & ~(1u << TCP_TIME_WAIT) & ~1u;

struct DiagRequest {
  nlmsghdr nlh;
  inet_diag_req_v2 req;
};

Result<UniqueFd> OpenDiag(std::string_view netns) {
  std::optional<ScopedNetns> in;  // "": the caller's own namespace
  if (!netns.empty()) {
    FL_ASSIGN_OR_RETURN(ScopedNetns entered, ScopedNetns::Enter(netns));
    in.emplace(std::move(entered));
  }
  int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return ErrnoStatus("socket(NETLINK_SOCK_DIAG)", errno);
  return UniqueFd(fd);
}

Status Send(int fd, const DiagRequest& r) {
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  if (::sendto(fd, &r, sizeof(r), 0, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) < 0) {
    return ErrnoStatus("sock_diag send", errno);
  }
  return Status::Ok();
}

std::string AddrString(int family, const uint32_t* a) {
  char buf[INET6_ADDRSTRLEN];
  ::inet_ntop(family, a, buf, sizeof(buf));
  return buf;
}

Status DumpFamily(int fd, int family, std::vector<TcpSocketInfo>* out) {
  DiagRequest r{};
  r.nlh.nlmsg_len = sizeof(r);
  r.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  r.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  r.nlh.nlmsg_seq = 1;
  r.req.sdiag_family = static_cast<uint8_t>(family);
  r.req.sdiag_protocol = IPPROTO_TCP;
  r.req.idiag_states = kConnStates;
  FL_RETURN_IF_ERROR(Send(fd, r));
  alignas(nlmsghdr) char buf[32768];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("sock_diag recv", errno);
    }
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, static_cast<unsigned>(n));
         h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type == NLMSG_DONE) return Status::Ok();
      if (h->nlmsg_type == NLMSG_ERROR) {
        auto* e = static_cast<nlmsgerr*>(NLMSG_DATA(h));
        return ErrnoStatus("sock_diag dump", -e->error);
      }
      auto* m = static_cast<inet_diag_msg*>(NLMSG_DATA(h));
      TcpSocketInfo s;
      s.family = m->idiag_family;
      s.src = AddrString(m->idiag_family, m->id.idiag_src);
      s.dst = AddrString(m->idiag_family, m->id.idiag_dst);
      s.sport = ntohs(m->id.idiag_sport);
      s.dport = ntohs(m->id.idiag_dport);
      s.state = m->idiag_state;
      s.id = m->id;
      out->push_back(s);
    }
  }
}

}  // namespace

bool TcpFilter::Matches(const TcpSocketInfo& s) const {
  auto addr_eq = [](const std::string& want, const std::string& have) {
    if (want.empty()) return true;
    if (want == have) return true;
    return have == "::ffff:" + want;  // IPv4-mapped on a dual-stack socket
  };
  return addr_eq(src, s.src) && addr_eq(dst, s.dst) && (sport == 0 || sport == s.sport) &&
         (dport == 0 || dport == s.dport);
}

Result<std::vector<TcpSocketInfo>> ListTcpConnections(std::string_view netns) {
  FL_ASSIGN_OR_RETURN(UniqueFd fd, OpenDiag(netns));
  std::vector<TcpSocketInfo> out;
  FL_RETURN_IF_ERROR(DumpFamily(fd.get(), AF_INET, &out));
  FL_RETURN_IF_ERROR(DumpFamily(fd.get(), AF_INET6, &out));
  return out;
}

Result<int> DestroyTcpSockets(std::string_view netns, const std::vector<TcpSocketInfo>& socks) {
  FL_ASSIGN_OR_RETURN(UniqueFd fd, OpenDiag(netns));
  int destroyed = 0;
  uint32_t seq = 100;
  for (const TcpSocketInfo& s : socks) {
    DiagRequest r{};
    r.nlh.nlmsg_len = sizeof(r);
    r.nlh.nlmsg_type = SOCK_DESTROY;
    r.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    r.nlh.nlmsg_seq = seq++;
    r.req.sdiag_family = static_cast<uint8_t>(s.family);
    r.req.sdiag_protocol = IPPROTO_TCP;
    r.req.idiag_states = ~0u;
    r.req.id = s.id;
    FL_RETURN_IF_ERROR(Send(fd.get(), r));
    alignas(nlmsghdr) char buf[4096];
    ssize_t n;
    do {
      n = ::recv(fd.get(), buf, sizeof(buf), 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return ErrnoStatus("sock_diag recv", errno);
    auto* h = reinterpret_cast<nlmsghdr*>(buf);
    if (!NLMSG_OK(h, static_cast<unsigned>(n)) || h->nlmsg_type != NLMSG_ERROR) {
      return Internal("unexpected reply to SOCK_DESTROY");
    }
    int err = -static_cast<nlmsgerr*>(NLMSG_DATA(h))->error;
    if (err == 0) {
      ++destroyed;
    } else if (err == ENOENT) {
      continue;  // closed meanwhile
    } else if (err == EOPNOTSUPP) {
      return Unavailable("the kernel cannot destroy sockets (CONFIG_INET_DIAG_DESTROY missing)");
    } else {
      return ErrnoStatus("SOCK_DESTROY " + s.src + ":" + std::to_string(s.sport) + " -> " + s.dst +
                             ":" + std::to_string(s.dport),
                         err);
    }
  }
  return destroyed;
}

}  // namespace faultline
