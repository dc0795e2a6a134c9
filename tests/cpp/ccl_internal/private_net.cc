#include "private_net.h"

#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ftccl::testing {

bool EnterPrivateNet(std::string* why) {
  if (::unshare(CLONE_NEWNET) != 0) {
    *why = "cannot create a private network namespace (unshare: " +
           std::string(std::strerror(errno)) + ")";
    return false;
  }
  const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  bool ok = s >= 0 && ::ioctl(s, SIOCGIFFLAGS, &ifr) == 0;
  ifr.ifr_flags |= IFF_UP;
  ok = ok && ::ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
  if (!ok) *why = std::string("bringing lo up: ") + std::strerror(errno);
  if (s >= 0) ::close(s);
  return ok;
}

bool Nft(const std::string& rules, std::string* why) {
  FILE* p = ::popen("nft -f - 2>&1", "w");
  if (p == nullptr) {
    *why = std::string("popen nft: ") + std::strerror(errno);
    return false;
  }
  std::fputs(rules.c_str(), p);
  const int rc = ::pclose(p);
  if (rc != 0) *why = "nft -f - failed (exit status " + std::to_string(rc) + ") for: " + rules;
  return rc == 0;
}

}  // namespace ftccl::testing
