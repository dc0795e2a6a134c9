#include "injector/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace faultline {

Status ValidateNetnsName(std::string_view name) {
  if (name.empty() || name == ".." || name.find('/') != std::string_view::npos ||
      name.size() > 200) {
    return InvalidArgument("invalid network namespace name '" + std::string(name) + "'");
  }
  return Status::Ok();
}

std::string NetnsPath(std::string_view name) {
  if (name == kOwnNetns) return "/proc/self/ns/net";
  return std::string(kNetnsRunDir) + "/" + std::string(name);
}

bool NetnsExists(std::string_view name) {
  if (!ValidateNetnsName(name).ok()) return false;
  struct stat st;
  return ::stat(NetnsPath(name).c_str(), &st) == 0;
}

Result<UniqueFd> OpenNetns(std::string_view name) {
  FL_RETURN_IF_ERROR(ValidateNetnsName(name));
  int fd = ::open(NetnsPath(name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) {
      return NotFound("network namespace '" + std::string(name) + "' does not exist (no " +
                      NetnsPath(name) + ")");
    }
    return ErrnoStatus("open " + NetnsPath(name), err);
  }
  return UniqueFd(fd);
}

namespace {
Result<uint64_t> InodeOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat " + path, errno);
  return static_cast<uint64_t>(st.st_ino);
}

// iproute2 makes /run/netns a shared mount so that namespace mounts propagate.
Status PrepareRunDir() {
  if (::mkdir(kNetnsRunDir, 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus(std::string("mkdir ") + kNetnsRunDir, errno);
  }
  bool made_mount = false;
  while (::mount("", kNetnsRunDir, "none", MS_SHARED | MS_REC, nullptr) != 0) {
    if (errno != EINVAL || made_mount) {
      return ErrnoStatus(std::string("mount --make-rshared ") + kNetnsRunDir, errno);
    }
    if (::mount(kNetnsRunDir, kNetnsRunDir, "none", MS_BIND | MS_REC, nullptr) != 0) {
      return ErrnoStatus(std::string("mount --bind ") + kNetnsRunDir, errno);
    }
    made_mount = true;
  }
  return Status::Ok();
}
}  // namespace

Result<uint64_t> NetnsInode(std::string_view name) {
  FL_RETURN_IF_ERROR(ValidateNetnsName(name));
  auto r = InodeOf(NetnsPath(name));
  if (!r.ok() && r.status().code() == Code::kNotFound) {
    return NotFound("network namespace '" + std::string(name) + "' does not exist");
  }
  return r;
}

std::string NameOfOwnNetns() {
  auto own = InodeOf(NetnsPath(kOwnNetns));
  if (!own.ok()) return kOwnNetns;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(kNetnsRunDir, ec)) {
    const std::string name = e.path().filename().string();
    auto ino = InodeOf(e.path().string());
    if (ino.ok() && *ino == *own && ValidateNetnsName(name).ok()) return name;
  }
  return kOwnNetns;
}

Result<uint64_t> ProcessNetnsInode(int pid) {
  return InodeOf("/proc/" + std::to_string(pid) + "/ns/net");
}

Status CreateNetns(std::string_view name) {
  FL_RETURN_IF_ERROR(ValidateNetnsName(name));
  if (name == kOwnNetns) return InvalidArgument("'.' is this process's own network namespace");
  FL_RETURN_IF_ERROR(PrepareRunDir());
  std::string path = NetnsPath(name);
  int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
  if (fd < 0) {
    int err = errno;
    if (err == EEXIST) {
      return AlreadyExists("network namespace '" + std::string(name) + "' already exists");
    }
    return ErrnoStatus("create " + path, err);
  }
  ::close(fd);
  int original = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (original < 0) {
    int err = errno;
    ::unlink(path.c_str());
    return ErrnoStatus("open /proc/thread-self/ns/net", err);
  }
  UniqueFd original_fd(original);
  if (::unshare(CLONE_NEWNET) != 0) {
    int err = errno;
    ::unlink(path.c_str());
    return ErrnoStatus("unshare(CLONE_NEWNET)", err);
  }
  Status st;
  if (::mount("/proc/thread-self/ns/net", path.c_str(), "none", MS_BIND, nullptr) != 0) {
    st = ErrnoStatus("bind mount namespace at " + path, errno);
  }
  if (::setns(original_fd.get(), CLONE_NEWNET) != 0) {
    // The thread is stranded in the new namespace: an invariant of every caller is broken.
    FL_CHECK(false && "cannot return to the original network namespace");
  }
  if (!st.ok()) ::unlink(path.c_str());
  return st;
}

Status DeleteNetns(std::string_view name) {
  FL_RETURN_IF_ERROR(ValidateNetnsName(name));
  if (name == kOwnNetns) return InvalidArgument("'.' is this process's own network namespace");
  std::string path = NetnsPath(name);
  if (!NetnsExists(name)) {
    return NotFound("network namespace '" + std::string(name) + "' does not exist");
  }
  if (::umount2(path.c_str(), MNT_DETACH) != 0 && errno != EINVAL) {
    return ErrnoStatus("umount " + path, errno);
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("unlink " + path, errno);
  return Status::Ok();
}

Result<ScopedNetns> ScopedNetns::Enter(std::string_view name) {
  FL_ASSIGN_OR_RETURN(UniqueFd target, OpenNetns(name));
  return EnterFd(target.get());
}

Result<ScopedNetns> ScopedNetns::EnterFd(int netns_fd) {
  int original = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (original < 0) return ErrnoStatus("open /proc/thread-self/ns/net", errno);
  UniqueFd original_fd(original);
  if (::setns(netns_fd, CLONE_NEWNET) != 0) return ErrnoStatus("setns", errno);
  return ScopedNetns(std::move(original_fd));
}

ScopedNetns::~ScopedNetns() {
  if (original_.valid() && ::setns(original_.get(), CLONE_NEWNET) != 0) {
    std::perror("faultline: cannot return to the original network namespace");
    std::abort();
  }
}

Result<OwnedNetns> OwnedNetns::Create(std::string name) {
  FL_RETURN_IF_ERROR(CreateNetns(name));
  return OwnedNetns(std::move(name));
}

OwnedNetns::~OwnedNetns() {
  if (!name_.empty()) DeleteNetns(name_).IgnoreError();
}

}  // namespace faultline
