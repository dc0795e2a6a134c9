// Named network namespaces (iproute2 convention: a bind mount at /run/netns/NAME).
//
// setns() changes the namespace of the calling thread only, so ScopedNetns is per thread: it
// enters a namespace and returns the thread to where it was when destroyed. Sockets (netlink,
// nftables, sock_diag) stay bound to the namespace they were created in.
// OwnedNetns creates a namespace and deletes it on destruction (RAII for tests and topology).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/fd.h"
#include "base/status.h"

namespace faultline {

inline constexpr const char* kNetnsRunDir = "/run/netns";
// Namespaces the project creates carry this prefix (see injector/README.md, policy).
inline constexpr const char* kProjectNetnsPrefix = "fl-";
// The name "." stands for the network namespace this process runs in (that of its main
// thread, /proc/self/ns/net): a real host's own interfaces, which have no /run/netns name
// (fleet mode on an inventory topology). It can be opened, entered and named in an allowlist
// ("./DEV"); it is never created or deleted.
inline constexpr const char* kOwnNetns = ".";

// Checks that `name` is a usable namespace name (non-empty, no '/', not ".."; "." is
// kOwnNetns).
Status ValidateNetnsName(std::string_view name);
// /run/netns/NAME; /proc/self/ns/net for kOwnNetns.
std::string NetnsPath(std::string_view name);
bool NetnsExists(std::string_view name);
// The /run/netns name of the namespace this process runs in, or kOwnNetns when none names it
// (a host's initial namespace).
std::string NameOfOwnNetns();

// Opens /run/netns/NAME. NotFound with a clear message when it does not exist.
Result<UniqueFd> OpenNetns(std::string_view name);
// The inode of a namespace file (identifies a namespace across paths: /proc/PID/ns/net).
Result<uint64_t> NetnsInode(std::string_view name);
Result<uint64_t> ProcessNetnsInode(int pid);

// Creates /run/netns/NAME exactly like `ip netns add` (AlreadyExists if present;
// InvalidArgument for kOwnNetns, as DeleteNetns).
Status CreateNetns(std::string_view name);
// Unmounts and removes /run/netns/NAME (NotFound if absent). Links inside are destroyed by
// the kernel with the namespace (veth peers elsewhere vanish with them).
Status DeleteNetns(std::string_view name);

// Moves the calling thread into a namespace until destruction. Move-only.
class ScopedNetns final {
 public:
  static Result<ScopedNetns> Enter(std::string_view name);
  static Result<ScopedNetns> EnterFd(int netns_fd);
  ScopedNetns(ScopedNetns&&) noexcept = default;
  ScopedNetns& operator=(ScopedNetns&&) = delete;
  ScopedNetns(const ScopedNetns&) = delete;
  ~ScopedNetns();

 private:
  explicit ScopedNetns(UniqueFd original) : original_(std::move(original)) {}
  UniqueFd original_;
};

// A namespace this process created; deleted on destruction (noexcept).
class OwnedNetns final {
 public:
  static Result<OwnedNetns> Create(std::string name);
  OwnedNetns(OwnedNetns&& other) noexcept : name_(std::move(other.name_)) { other.name_.clear(); }
  OwnedNetns& operator=(OwnedNetns&&) = delete;
  OwnedNetns(const OwnedNetns&) = delete;
  ~OwnedNetns();
  const std::string& name() const { return name_; }

 private:
  explicit OwnedNetns(std::string name) : name_(std::move(name)) {}
  std::string name_;
};

}  // namespace faultline
