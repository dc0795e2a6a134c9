#include "base/link_watch.h"

#include <linux/if.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace faultline {
namespace {

constexpr size_t kAnswerBytes = 32768;

}  // namespace

Result<LinkWatch> LinkWatch::Open() {
  UniqueFd fd(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!fd.valid()) return ErrnoStatus("rtnetlink socket", errno);
  sockaddr_nl local{};
  local.nl_family = AF_NETLINK;
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&local), sizeof(local)) != 0) {
    return ErrnoStatus("bind rtnetlink socket", errno);
  }
  timeval tv{2, 0};  // the kernel answers at once; a bound on the wait all the same
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return LinkWatch(std::move(fd));
}

Result<PortState> LinkWatch::Get(const std::string& name) {
  if (name.empty() || name.size() >= IFNAMSIZ) {
    return Status(Code::kInvalidArgument, "bad interface name '" + name + "'");
  }
  struct {
    nlmsghdr nh;
    ifinfomsg ifi;
    char attrs[RTA_SPACE(IFNAMSIZ)];
  } req{};
  req.nh.nlmsg_type = RTM_GETLINK;
  req.nh.nlmsg_flags = NLM_F_REQUEST;
  req.nh.nlmsg_seq = ++seq_;
  req.ifi.ifi_family = AF_UNSPEC;
  auto* rta = reinterpret_cast<rtattr*>(req.attrs);
  rta->rta_type = IFLA_IFNAME;
  rta->rta_len = static_cast<unsigned short>(RTA_LENGTH(name.size() + 1));
  std::memcpy(RTA_DATA(rta), name.c_str(), name.size() + 1);
  req.nh.nlmsg_len =
      static_cast<uint32_t>(NLMSG_LENGTH(sizeof(ifinfomsg)) + RTA_SPACE(name.size() + 1));
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(fd_.get(), &req, req.nh.nlmsg_len, 0, reinterpret_cast<const sockaddr*>(&kernel),
             sizeof(kernel)) < 0) {
    return ErrnoStatus("RTM_GETLINK " + name, errno);
  }
  alignas(nlmsghdr) static thread_local char buf[kAnswerBytes];
  for (;;) {
    const ssize_t n = recv(fd_.get(), buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("RTM_GETLINK " + name, errno);
    int left = static_cast<int>(n);
    for (auto* nh = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(nh, left);
         nh = NLMSG_NEXT(nh, left)) {
      if (nh->nlmsg_seq != seq_) continue;  // an answer to an earlier request
      if (nh->nlmsg_type == NLMSG_ERROR) {
        const auto* err = static_cast<const nlmsgerr*>(NLMSG_DATA(nh));
        if (err->error == -ENODEV) return Status(Code::kNotFound, "no link named " + name);
        return ErrnoStatus("RTM_GETLINK " + name, -err->error);
      }
      if (nh->nlmsg_type != RTM_NEWLINK) continue;
      const auto* ifi = static_cast<const ifinfomsg*>(NLMSG_DATA(nh));
      PortState s;
      s.running = (ifi->ifi_flags & IFF_RUNNING) != 0;
      int attr_left = static_cast<int>(IFLA_PAYLOAD(nh));
      for (const rtattr* a = IFLA_RTA(ifi); RTA_OK(a, attr_left); a = RTA_NEXT(a, attr_left)) {
        if (a->rta_type == IFLA_CARRIER_CHANGES && RTA_PAYLOAD(a) >= sizeof(uint32_t)) {
          std::memcpy(&s.carrier_changes, RTA_DATA(a), sizeof(uint32_t));
        }
      }
      return s;
    }
  }
}

}  // namespace faultline
