// TCP sockets of a network namespace through NETLINK_SOCK_DIAG: list (inet_diag dump) and
// destroy (SOCK_DESTROY, needs CONFIG_INET_DIAG_DESTROY). Destroying a socket resets the
// connection: the peer receives a RST and the local owner gets ECONNABORTED.
// Thread-compatible.
#pragma once

#include <linux/inet_diag.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace faultline {

struct TcpSocketInfo {
  int family = 0;   // AF_INET or AF_INET6
  std::string src;  // local address
  uint16_t sport = 0;
  std::string dst;  // remote address
  uint16_t dport = 0;
  int state = 0;  // TCP_ESTABLISHED, ...
  inet_diag_sockid id{};
};

// Matches when every given field is equal ("" / 0 = any).
struct TcpFilter {
  std::string src;
  std::string dst;
  uint16_t sport = 0;
  uint16_t dport = 0;
  bool Matches(const TcpSocketInfo& s) const;
};

// Connection sockets (every state but LISTEN and TIME_WAIT) in `netns` ("": the caller's own).
Result<std::vector<TcpSocketInfo>> ListTcpConnections(std::string_view netns);
// Destroys each socket; returns how many were destroyed (ones that vanished meanwhile are
// skipped). Unavailable when the kernel lacks SOCK_DESTROY.
Result<int> DestroyTcpSockets(std::string_view netns, const std::vector<TcpSocketInfo>& socks);

}  // namespace faultline
