#include "base/ifaddr.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cerrno>

namespace faultline {

Result<std::string> InterfaceIpv4(const std::string& dev) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return ErrnoStatus("getifaddrs", errno);
  std::string found;
  bool exists = false;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_name == nullptr || dev != i->ifa_name) continue;
    exists = true;
    if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET && found.empty()) {
      char buf[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
      found = buf;
    }
  }
  ::freeifaddrs(list);
  if (!found.empty()) return found;
  return NotFound("interface '" + dev + "' " +
                  (exists ? "has no IPv4 address" : "does not exist in this network namespace"));
}

Result<std::string> InterfaceWithIpv4(const std::string& addr) {
  in_addr want{};
  if (::inet_pton(AF_INET, addr.c_str(), &want) != 1) {
    return InvalidArgument("'" + addr + "' is not an IPv4 address");
  }
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return ErrnoStatus("getifaddrs", errno);
  std::string found;
  for (ifaddrs* i = list; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_name != nullptr && i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET &&
        reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == want.s_addr) {
      found = i->ifa_name;
    }
  }
  ::freeifaddrs(list);
  if (!found.empty()) return found;
  return NotFound("no interface holds " + addr + " in this network namespace");
}

}  // namespace faultline
