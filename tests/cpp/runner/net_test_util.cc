#include "tests/cpp/runner/net_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/clock.h"
#include "injector/netns.h"

namespace faultline::runner::testing {

std::string Sh(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    if (rc != nullptr) *rc = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  if (rc != nullptr) *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::string Sysctl(const std::string& netns, const std::string& key) {
  std::string v = Sh("ip netns exec " + netns + " cat /proc/sys/net/ipv4/" + key);
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  return v;
}

nlohmann::json ShJson(const std::string& cmd) {
  int rc = 0;
  std::string out = Sh(cmd, &rc);
  if (rc != 0 || out.empty()) return nullptr;
  return nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
}

std::vector<std::string> NetnsWithPrefix(const std::string& prefix) {
  std::vector<std::string> out;
  nlohmann::json list = ShJson("ip -j netns list");
  if (!list.is_array()) return out;
  for (const auto& ns : list) {
    std::string name = ns.value("name", "");
    if (name.rfind(prefix, 0) == 0) out.push_back(name);
  }
  return out;
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/fl-runner-test-XXXXXX";
  if (::mkdtemp(tmpl) != nullptr) path_ = tmpl;
}

TempDir::~TempDir() {
  if (!path_.empty()) Sh("rm -rf '" + path_ + "'");
}

std::unique_ptr<NetTopology> BuildOrSkip(TopologyOptions o, const std::string& journal_dir,
                                         std::string* skip) {
  o.journal_dir = journal_dir;
  auto t = NetTopology::Build(o);
  if (!t.ok()) {
    if (t.status().code() == Code::kPermissionDenied) {
      *skip = "cannot create network namespaces here: " + t.status().ToString();
    } else {
      ADD_FAILURE() << "build " << o.hosts << "x" << o.rails << ": " << t.status().ToString();
    }
    return nullptr;
  }
  return std::move(t).value();
}

Listener::Listener(const std::string& netns, const std::string& addr) {
  auto in = ScopedNetns::Enter(netns);
  if (!in.ok()) {
    ADD_FAILURE() << in.status().ToString();
    return;
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  ::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
  socklen_t len = sizeof(sa);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      ::listen(fd, 4) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    ADD_FAILURE() << "listen on " << addr << " in " << netns << ": " << std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return;
  }
  fd_ = fd;
  port_ = ntohs(sa.sin_port);
}

Listener::~Listener() {
  if (fd_ >= 0) ::close(fd_);
}

int64_t Listener::AcceptAndDrain(int timeout_ms, std::string* peer, std::string* first_bytes,
                                 double* elapsed_s) {
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) != 1) return -1;
  sockaddr_in sa{};
  socklen_t len = sizeof(sa);
  int c = ::accept4(fd_, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_CLOEXEC);
  if (c < 0) return -1;
  MonoNs start = MonoNow();
  char ip[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
  *peer = ip;
  int64_t total = 0;
  std::vector<char> buf(1 << 16);
  const MonoNs give_up = MonoNow() + int64_t{timeout_ms} * 1'000'000;
  for (;;) {
    pollfd q{c, POLLIN, 0};
    int left_ms = static_cast<int>((give_up - MonoNow()) / 1'000'000);
    if (left_ms <= 0 || ::poll(&q, 1, left_ms) != 1) {
      total = -1;
      break;
    }
    ssize_t n = ::read(c, buf.data(), buf.size());
    if (n <= 0) break;
    if (first_bytes != nullptr && first_bytes->size() < 64) {
      first_bytes->append(buf.data(), std::min<size_t>(static_cast<size_t>(n), 64));
    }
    total += n;
  }
  if (elapsed_s != nullptr) *elapsed_s = static_cast<double>(MonoNow() - start) / 1e9;
  ::close(c);
  return total;
}

char ProcState(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  if (!std::getline(f, s)) return 'X';
  size_t paren = s.rfind(')');
  if (paren == std::string::npos || paren + 2 >= s.size()) return 'X';
  return s[paren + 2];
}

const nlohmann::json* FindIf(const nlohmann::json& list, const std::string& ifname) {
  if (!list.is_array()) return nullptr;
  for (const auto& l : list) {
    if (l.value("ifname", "") == ifname) return &l;
  }
  return nullptr;
}

bool HasFlag(const nlohmann::json& link, const char* flag) {
  for (const auto& f : link.value("flags", nlohmann::json::array())) {
    if (f == flag) return true;
  }
  return false;
}

std::set<std::string> V4Addrs(const nlohmann::json& link) {
  std::set<std::string> out;
  for (const auto& a : link.value("addr_info", nlohmann::json::array())) {
    if (a.value("family", "") == "inet") {
      out.insert(a.value("local", "") + "/" + std::to_string(a.value("prefixlen", 0)));
    }
  }
  return out;
}

}  // namespace faultline::runner::testing
