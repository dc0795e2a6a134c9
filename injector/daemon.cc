#include "injector/daemon.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/clock.h"
#include "base/exec_args.h"
#include "base/fd.h"
#include "injector/journal.h"
#include "injector/netns.h"

namespace faultline {
namespace fs = std::filesystem;
namespace {

// Closes every descriptor from `from` on except `keep`.
void CloseFrom(int from, int keep) {
  if (keep > from) ::syscall(SYS_close_range, from, keep - 1, 0);
  ::syscall(SYS_close_range, std::max(from, keep + 1), ~0U, 0);
}

bool WaitGone(int pid, int64_t timeout_ns) {
  const char s = WaitProcessState(pid, 'X', timeout_ns);
  return s == 'X' || s == 'Z';
}

}  // namespace

Result<StartedDaemon> StartDaemon(Journal& journal, const DaemonSpec& spec) {
  if (spec.argv.empty()) return InvalidArgument("daemon '" + spec.name + "': empty argv");
  UniqueFd netns_fd;
  if (!spec.netns.empty()) {
    auto fd = OpenNetns(spec.netns);
    if (!fd.ok()) return fd.status().WithContext("daemon '" + spec.name + "'");
    netns_fd = std::move(fd).value();
  }
  int go[2], err[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  UniqueFd go_r(go[0]), go_w(go[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  UniqueFd err_r(err[0]), err_w(err[1]);
  // Everything the child needs, prepared before fork (no allocation after it).
  const ExecArgs exec(spec.argv, spec.env);
  const std::string log = spec.log_path.empty() ? "/dev/null" : spec.log_path;

  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork", errno);
  if (pid == 0) {
    // The child: wait until the parent has journaled us, then become the daemon.
    auto fail = [&](int e) {
      (void)!::write(err_w.get(), &e, sizeof e);
      ::_exit(127);
    };
    char b = 0;
    if (::read(go_r.get(), &b, 1) != 1) ::_exit(127);
    ::setsid();
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);
    if (netns_fd.valid()) {
      if (::setns(netns_fd.get(), CLONE_NEWNET) != 0) fail(errno);
      // As `ip netns exec` does: a mount namespace of its own whose /sys is that network
      // namespace's, so that the daemon and what it starts read their own interfaces there
      // (/sys/class/net/<dev>/speed). It goes with the last process in it.
      if (::unshare(CLONE_NEWNS) != 0) fail(errno);
      if (::mount("", "/", "none", MS_SLAVE | MS_REC, nullptr) != 0) fail(errno);
      if (::umount2("/sys", MNT_DETACH) != 0 && errno != EINVAL) fail(errno);
      if (::mount(spec.netns.c_str(), "/sys", "sysfs", 0, nullptr) != 0) fail(errno);
    }
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (in < 0 || out < 0) fail(errno);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    CloseFrom(3, err_w.get());
    ::execvpe(exec.argv()[0], exec.argv(), exec.envp());
    fail(errno);
  }
  go_r.Reset();
  err_w.Reset();
  auto kill_child = [&] {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  };
  auto ref = LookupProcess(pid);
  if (!ref.ok()) {
    kill_child();
    return ref.status();
  }
  auto id = journal.Append("daemon", {{"pid", ref->pid},
                                      {"start_time", ref->start_time},
                                      {"name", spec.name}});
  if (!id.ok()) {
    kill_child();
    return id.status().WithContext("daemon '" + spec.name + "'");
  }
  char b = 1;
  if (::write(go_w.get(), &b, 1) != 1) {
    kill_child();
    journal.Remove(*id).IgnoreError();
    return ErrnoStatus("starting daemon '" + spec.name + "'", errno);
  }
  go_w.Reset();
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(err_r.get(), &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  if (n == sizeof child_errno) {
    ::waitpid(pid, nullptr, 0);
    journal.Remove(*id).IgnoreError();
    return Status(Code::kUnavailable, "cannot start " + spec.name + " (" + spec.argv[0] +
                                                 "): " + std::strerror(child_errno));
  }
  // The daemon outlives this process; its parent becomes init, which reaps it.
  return StartedDaemon{*ref, *id};
}

Status StopDaemon(const ProcessRef& ref, int64_t grace_ns) {
  Status st = SignalProcess(ref, SIGTERM);
  if (st.code() == Code::kNotFound) return Status::Ok();
  FL_RETURN_IF_ERROR(st);
  // A child of this process must be reaped to be gone.
  ::waitpid(ref.pid, nullptr, WNOHANG);
  if (WaitGone(ref.pid, grace_ns)) return Status::Ok();
  st = SignalProcess(ref, SIGKILL);
  if (st.code() == Code::kNotFound) return Status::Ok();
  FL_RETURN_IF_ERROR(st);
  ::waitpid(ref.pid, nullptr, WNOHANG);
  if (WaitGone(ref.pid, 2'000'000'000)) return Status::Ok();
  return Status(Code::kInternal, "process " + std::to_string(ref.pid) + " survived SIGKILL");
}

Result<int> KillNetnsProcesses(const std::string& netns) {
  auto ino = NetnsInode(netns);
  if (!ino.ok()) return ino.status().code() == Code::kNotFound ? Result<int>(0) : ino.status();
  std::vector<ProcessRef> victims;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const int pid = std::stoi(name);
    if (pid == ::getpid()) continue;
    auto pino = ProcessNetnsInode(pid);
    if (!pino.ok() || *pino != *ino) continue;
    auto ref = LookupProcess(pid);
    if (ref.ok()) victims.push_back(*ref);
  }
  for (const auto& v : victims) SignalProcess(v, SIGKILL).IgnoreError();
  const int64_t deadline = MonoNow() + 2'000'000'000;
  for (const auto& v : victims) {
    ::waitpid(v.pid, nullptr, WNOHANG);
    if (!WaitGone(v.pid, std::max<int64_t>(0, deadline - MonoNow()))) {
      return Status(Code::kInternal, "process " + std::to_string(v.pid) + " in namespace " +
                                         netns + " survived SIGKILL");
    }
  }
  return static_cast<int>(victims.size());
}

Result<std::string> CreateOwnedDir(Journal& journal, const std::string& path, unsigned mode) {
  if (path.empty() || path[0] != '/') return InvalidArgument("not an absolute path: " + path);
  std::error_code ec;
  if (fs::exists(path, ec)) return AlreadyExists(path + " exists");
  FL_ASSIGN_OR_RETURN(std::string id, journal.Append("dir", {{"path", path}}));
  fs::create_directories(path, ec);
  if (ec) {
    journal.Remove(id).IgnoreError();
    return Status(Code::kUnavailable, "cannot create " + path + ": " + ec.message());
  }
  ::chmod(path.c_str(), mode);
  std::ofstream(path + "/" + kOwnedDirMarker) << "created by faultline\n";
  return id;
}

Status UndoDaemon(const nlohmann::json& undo) {
  ProcessRef ref;
  ref.pid = undo.value("pid", 0);
  ref.start_time = undo.value("start_time", uint64_t{0});
  if (ref.pid <= 1) return InvalidArgument("daemon entry without a valid pid");
  return StopDaemon(ref);
}

Status UndoNetnsProcs(const nlohmann::json& undo) {
  auto n = KillNetnsProcesses(undo.value("netns", ""));
  return n.ok() ? Status::Ok() : n.status();
}

Status UndoOwnedDir(const nlohmann::json& undo) {
  const std::string path = undo.value("path", "");
  std::error_code ec;
  if (path.empty() || path[0] != '/') return InvalidArgument("dir entry without an absolute path");
  if (!fs::exists(path, ec)) return Status::Ok();
  if (!fs::exists(path + "/" + kOwnedDirMarker, ec)) {
    return Status(Code::kUnavailable,
                  "not removing " + path + ": it has no " + kOwnedDirMarker + " marker");
  }
  fs::remove_all(path, ec);
  if (ec) return Status(Code::kInternal, "removing " + path + ": " + ec.message());
  return Status::Ok();
}

}  // namespace faultline
