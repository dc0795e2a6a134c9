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

}  // namespace faultline
