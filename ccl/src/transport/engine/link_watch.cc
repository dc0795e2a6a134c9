#include "transport/engine/link_watch.h"

#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cerrno>

namespace ftccl::transport::engine {

Result<std::unique_ptr<LinkWatch>> LinkWatch::Open(const std::vector<uint32_t>& rail_ips) {
  std::unique_ptr<LinkWatch> w(new LinkWatch());
  w->fd_ = net::Fd(socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!w->fd_.valid()) return ErrnoStatus("socket(NETLINK_ROUTE)", errno);
  // Room for a burst of notifications (a flapping link, every interface of a host changing);
  // what still overruns it is caught by Resync.
  const int rcvbuf = 1 << 20;
  (void)setsockopt(w->fd_.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = RTMGRP_LINK;
  if (bind(w->fd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    return ErrnoStatus("bind(RTMGRP_LINK)", errno);
  }
  const size_t n = rail_ips.size();
  w->ifindex_.assign(n, 0);
  w->initial_.assign(n, true);
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return ErrnoStatus("getifaddrs", errno);
  for (size_t r = 0; r < n; ++r) {
    for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
      if (reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr != rail_ips[r]) continue;
      w->ifindex_[r] = static_cast<int>(if_nametoindex(i->ifa_name));
      w->initial_[r] = (i->ifa_flags & IFF_UP) && (i->ifa_flags & IFF_RUNNING);
      break;
    }
  }
  freeifaddrs(list);
  return w;
}

LinkWatch::ReadResult LinkWatch::Read(const OnChange& on_change) {
  alignas(nlmsghdr) char buf[16384];
  for (;;) {
    ssize_t n = recv(fd_.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && errno == ENOBUFS) return ReadResult::kOverrun;
    if (n <= 0) return ReadResult::kDone;
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, static_cast<unsigned>(n));
         h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_DELLINK) continue;
      auto* ifi = static_cast<ifinfomsg*>(NLMSG_DATA(h));
      const bool up = h->nlmsg_type == RTM_NEWLINK && (ifi->ifi_flags & IFF_UP) &&
                      (ifi->ifi_flags & IFF_RUNNING);
      for (size_t r = 0; r < ifindex_.size(); ++r) {
        if (ifindex_[r] != ifi->ifi_index) continue;
        if (!on_change(static_cast<int>(r), up)) return ReadResult::kStopped;
      }
    }
  }
}

bool LinkWatch::Resync(const OnChange& on_change) {
  net::Fd fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return true;
  for (size_t r = 0; r < ifindex_.size(); ++r) {
    if (ifindex_[r] == 0) continue;
    ifreq req{};
    bool up = false;
    if (if_indextoname(static_cast<unsigned>(ifindex_[r]), req.ifr_name) != nullptr &&
        ioctl(fd.get(), SIOCGIFFLAGS, &req) == 0) {
      up = (req.ifr_flags & IFF_UP) && (req.ifr_flags & IFF_RUNNING);
    }  // else the interface is gone: down
    if (!on_change(static_cast<int>(r), up)) return false;
  }
  return true;
}

}  // namespace ftccl::transport::engine
