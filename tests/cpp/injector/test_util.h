// Shared fixtures of the injector tests: namespaces, veth pairs, sockets and independent
// observers (the iproute2 / nft command-line tools, /proc), never the injector's own
// bookkeeping. Everything a fixture creates is removed when it is destroyed, also on failure.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "injector/journal.h"
#include "injector/netlink.h"
#include "injector/netns.h"
#include "injector/policy.h"

namespace faultline::testing {

// Runs a shell command, returns stdout; *rc gets the exit status.
std::string Sh(const std::string& cmd, int* rc = nullptr);
// `ip -j link show` of one device (null when absent).
nlohmann::json IpLink(const std::string& netns, const std::string& dev);
// `tc -j qdisc show dev` text (stable for comparison: no statistics).
std::string TcQdiscs(const std::string& netns, const std::string& dev);
// Sum of the "dropped" named counters in faultline_* tables, read with `nft -j`.
int64_t NftDroppedPackets(const std::string& netns);
// Names of faultline_* nft tables in the namespace.
std::string NftTables(const std::string& netns);
// State letter from /proc/PID/stat ('X' when gone).
char ProcState(int pid);

// Two namespaces A and B joined by veth va (A, 198.18.200.1/24) <-> vb (B, .2/24), both up,
// plus a private journal directory. Skips the test when namespaces cannot be created.
class TwoHosts {
 public:
  // Returns nullptr (and the caller must GTEST_SKIP) when namespaces are not permitted.
  static std::unique_ptr<TwoHosts> Create(std::string* skip_reason);
  ~TwoHosts();

  const std::string& a() const { return a_->name(); }
  const std::string& b() const { return b_->name(); }
  static constexpr const char* kAddrA = "198.18.200.1";
  static constexpr const char* kAddrB = "198.18.200.2";
  Journal& journal() { return *journal_; }
  const std::string& journal_dir() const { return journal_dir_; }
  TargetPolicy policy() const;

 private:
  TwoHosts() = default;
  std::optional<OwnedNetns> a_;
  std::optional<OwnedNetns> b_;
  std::string journal_dir_;
  std::unique_ptr<Journal> journal_;
};

// A new namespace name with the project prefix, unique per process.
std::string UniqueNetnsName(const std::string& tag);

// Sockets created inside a namespace (a socket keeps its namespace for life).
int TcpListen(const std::string& netns, const char* addr, uint16_t port);
int TcpConnect(const std::string& netns, const char* addr, uint16_t port, int timeout_ms = 2000);
int UdpSocket(const std::string& netns, const char* bind_addr, uint16_t port);
sockaddr_in Addr(const char* ip, uint16_t port);

#define FL_SKIP_WITHOUT_NETNS(topo)                                  \
  std::string _skip_reason;                                          \
  auto topo = ::faultline::testing::TwoHosts::Create(&_skip_reason); \
  if (!topo) GTEST_SKIP() << _skip_reason

}  // namespace faultline::testing
