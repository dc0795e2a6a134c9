#include "tests/cpp/injector/test_util.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace faultline::testing {
namespace {
std::atomic<int> g_seq{0};
}  // namespace

std::string Sh(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) {
    if (rc) *rc = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int st = ::pclose(p);
  if (rc) *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

nlohmann::json IpLink(const std::string& netns, const std::string& dev) {
  int rc = 0;
  std::string out = Sh("ip -n " + netns + " -j link show dev " + dev, &rc);
  if (rc != 0) return nullptr;
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (!j.is_array() || j.empty()) return nullptr;
  return j[0];
}

std::string TcQdiscs(const std::string& netns, const std::string& dev) {
  return Sh("tc -n " + netns + " -j qdisc show dev " + dev);
}

int64_t NftDroppedPackets(const std::string& netns) {
  auto j =
      nlohmann::json::parse(Sh("ip netns exec " + netns + " nft -j list counters"), nullptr, false);
  int64_t total = 0;
  if (!j.is_object()) return -1;
  for (const auto& item : j.value("nftables", nlohmann::json::array())) {
    if (!item.contains("counter")) continue;
    const auto& c = item["counter"];
    if (c.value("name", "") == "dropped" && c.value("table", "").rfind("faultline_", 0) == 0) {
      total += c.value("packets", int64_t{0});
    }
  }
  return total;
}

std::string NftTables(const std::string& netns) {
  std::string all = Sh("ip netns exec " + netns + " nft list tables");
  std::stringstream ss(all);
  std::string line, out;
  while (std::getline(ss, line)) {
    if (line.find("faultline_") != std::string::npos) out += line + "\n";
  }
  return out;
}

char ProcState(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 'X';
  size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return 'X';
  return line[close + 2];
}

std::string UniqueNetnsName(const std::string& tag) {
  return std::string(kProjectNetnsPrefix) + "t" + std::to_string(::getpid()) + "-" +
         std::to_string(g_seq++) + tag;
}

std::unique_ptr<TwoHosts> TwoHosts::Create(std::string* skip_reason) {
  std::unique_ptr<TwoHosts> t(new TwoHosts());
  auto a = OwnedNetns::Create(UniqueNetnsName("a"));
  if (!a.ok()) {
    *skip_reason = "cannot create network namespaces here: " + a.status().ToString();
    return nullptr;
  }
  t->a_.emplace(std::move(a).value());
  auto b = OwnedNetns::Create(UniqueNetnsName("b"));
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  if (!b.ok()) return nullptr;
  t->b_.emplace(std::move(b).value());
  auto sa = NlSock::ConnectInNetns(t->a());
  auto sb = NlSock::ConnectInNetns(t->b());
  EXPECT_TRUE(sa.ok() && sb.ok());
  auto fd_b = OpenNetns(t->b());
  EXPECT_TRUE(fd_b.ok());
  Status st = CreateVeth(*sa, "va", "vb", fd_b->get());
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto la = GetLink(*sa, "va");
  auto lb = GetLink(*sb, "vb");
  EXPECT_TRUE(la.ok() && lb.ok());
  if (!la.ok() || !lb.ok()) return nullptr;
  EXPECT_TRUE(AddAddress(*sa, la->ifindex, "198.18.200.1/24").ok());
  EXPECT_TRUE(AddAddress(*sb, lb->ifindex, "198.18.200.2/24").ok());
  EXPECT_TRUE(SetLinkUp(*sa, "va", true).ok());
  EXPECT_TRUE(SetLinkUp(*sb, "vb", true).ok());
  EXPECT_TRUE(SetLinkUp(*sa, "lo", true).ok());
  EXPECT_TRUE(SetLinkUp(*sb, "lo", true).ok());
  // Static neighbours: the data path must not depend on ARP, which faults may drop.
  std::string mac_a = IpLink(t->a(), "va").value("address", "");
  std::string mac_b = IpLink(t->b(), "vb").value("address", "");
  int rc1 = 0, rc2 = 0;
  Sh("ip -n " + t->a() + " neigh replace " + kAddrB + " lladdr " + mac_b + " dev va nud permanent",
     &rc1);
  Sh("ip -n " + t->b() + " neigh replace " + kAddrA + " lladdr " + mac_a + " dev vb nud permanent",
     &rc2);
  EXPECT_EQ(rc1 + rc2, 0);
  char tmpl[] = "/tmp/fl-journal-XXXXXX";
  char* dir = ::mkdtemp(tmpl);
  EXPECT_NE(dir, nullptr);
  t->journal_dir_ = dir ? dir : "";
  auto j = Journal::Open(t->journal_dir_);
  EXPECT_TRUE(j.ok());
  if (!j.ok()) return nullptr;
  t->journal_ = std::move(j).value();
  return t;
}

TwoHosts::~TwoHosts() {
  a_.reset();
  b_.reset();
  if (!journal_dir_.empty()) Sh("rm -rf " + journal_dir_);
}

TargetPolicy TwoHosts::policy() const {
  auto p = TargetPolicy::Create({}, journal_.get(), /*use_env=*/false);
  return std::move(p).value();
}

sockaddr_in Addr(const char* ip, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, ip, &sa.sin_addr);
  return sa;
}

namespace {
int SocketIn(const std::string& netns, int type) {
  auto in = ScopedNetns::Enter(netns);
  if (!in.ok()) return -1;
  return ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
}
}  // namespace

int TcpListen(const std::string& netns, const char* addr, uint16_t port) {
  int fd = SocketIn(netns, SOCK_STREAM);
  if (fd < 0) return -1;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa = Addr(addr, port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(fd, 16) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int TcpConnect(const std::string& netns, const char* addr, uint16_t port, int timeout_ms) {
  int fd = SocketIn(netns, SOCK_STREAM);
  if (fd < 0) return -1;
  int fl = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  sockaddr_in sa = Addr(addr, port);
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, timeout_ms) == 1) {
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
    }
  }
  if (rc != 0) {
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, fl);
  return fd;
}

int UdpSocket(const std::string& netns, const char* bind_addr, uint16_t port) {
  int fd = SocketIn(netns, SOCK_DGRAM);
  if (fd < 0) return -1;
  if (bind_addr != nullptr) {
    sockaddr_in sa = Addr(bind_addr, port);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
      ::close(fd);
      return -1;
    }
  }
  return fd;
}

}  // namespace faultline::testing
