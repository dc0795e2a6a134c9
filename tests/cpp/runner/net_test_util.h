// Shared helpers of the topology and launcher tests. Everything is observed with independent
// tools (ip, tc, nft, /proc) rather than the builder's own netlink code. Every fixture removes
// what it created, also when a test fails.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "runner/exec/topology.h"

namespace faultline::runner::testing {

// Runs a shell command and returns its stdout; *rc gets the exit status.
std::string Sh(const std::string& cmd, int* rc = nullptr);
// Runs a command that prints JSON (ip -j, tc -j); null when it fails or prints nothing.
nlohmann::json ShJson(const std::string& cmd);
// In `ip -j link`/`ip -j addr` output: the device named `ifname` (nullptr when absent), whether
// a device has `flag` ("UP", ...), and its IPv4 addresses as "a.b.c.d/len".
const nlohmann::json* FindIf(const nlohmann::json& list, const std::string& ifname);
bool HasFlag(const nlohmann::json& link, const char* flag);
std::set<std::string> V4Addrs(const nlohmann::json& link);
// /proc/sys/net/ipv4/<key> as seen inside `netns` ("conf/all/rp_filter",
// "neigh/r0/retrans_time_ms"), without the trailing newline.
std::string Sysctl(const std::string& netns, const std::string& key);
// Names from `ip netns list` that start with `prefix`.
std::vector<std::string> NetnsWithPrefix(const std::string& prefix);

// A private journal directory, removed with everything in it on destruction.
class TempDir final {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Builds a topology into `journal_dir`; *skip gets a reason when namespaces cannot be
// created here (the caller skips), otherwise a failure is a test failure.
std::unique_ptr<NetTopology> BuildOrSkip(TopologyOptions o, const std::string& journal_dir,
                                         std::string* skip);

// A TCP listener created inside `netns` on addr:0; port() is the port the kernel chose.
class Listener final {
 public:
  Listener(const std::string& netns, const std::string& addr);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  bool ok() const { return fd_ >= 0; }
  uint16_t port() const { return port_; }
  // Accepts one connection within `timeout_ms`, reads until EOF; returns the bytes read (-1 on
  // timeout) and sets *peer to the connecting address. *elapsed_s: accept to EOF.
  int64_t AcceptAndDrain(int timeout_ms, std::string* peer, std::string* first_bytes,
                         double* elapsed_s = nullptr);

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// The state letter of /proc/PID/stat ('X' when the process is gone).
char ProcState(int pid);

}  // namespace faultline::runner::testing
