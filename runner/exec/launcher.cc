#include "runner/exec/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/clock.h"
#include "injector/netns.h"

extern char** environ;

namespace faultline::runner {
namespace {

// What a child reports through its close-on-exec pipe when it cannot exec.
struct ChildError {
  int stage = 0;  // kStage*
  int err = 0;    // errno
};
constexpr int kStageSetns = 1;
constexpr int kStageExec = 2;
constexpr int kStageParentGone = 3;

std::string EnvKey(const std::string& entry) { return entry.substr(0, entry.find('=')); }

// The launcher's environment with `overrides` ("K=V") replacing entries of the same key.
std::vector<std::string> MergeEnv(const std::vector<std::string>& overrides) {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    bool replaced = false;
    for (const std::string& o : overrides) {
      if (EnvKey(o) == EnvKey(entry)) replaced = true;
    }
    if (!replaced) out.push_back(std::move(entry));
  }
  out.insert(out.end(), overrides.begin(), overrides.end());
  return out;
}

// A program path: as given when it contains '/', else the first executable in $PATH.
Result<std::string> ResolveProgram(const std::string& prog) {
  if (prog.empty()) return InvalidArgument("empty program name");
  if (prog.find('/') != std::string::npos) {
    if (::access(prog.c_str(), X_OK) != 0) return ErrnoStatus("program " + prog, errno);
    return prog;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + prog;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return NotFound("program '" + prog + "' not found in $PATH");
}

Result<UniqueFd> OpenLog(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("open log " + path, errno);
  return UniqueFd(fd);
}

ExitStatus FromSiginfo(const siginfo_t& info) {
  ExitStatus s;
  if (info.si_code == CLD_EXITED) {
    s.state = ExitStatus::State::kExited;
    s.code = info.si_status;
  } else {
    s.state = ExitStatus::State::kSignaled;
    s.signal = info.si_status;
  }
  return s;
}

// What the child of a launch is given; everything is prepared before fork.
struct ChildPlan {
  pid_t parent = 0;
  int netns_fd = -1;
  int in_fd = -1;
  int out_fd = -1;  // -1: keep the parent's stdout
  int err_fd = -1;  // -1: keep the parent's stderr
  int report_fd = -1;
  // Exec launch.
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  // Fork launch.
  const RankBody* body = nullptr;
  int channel_fd = -1;
  // The launcher's descriptors of other ranks, closed in a forked body's child.
  const std::vector<int>* launcher_fds = nullptr;
};

// The child side of a start: only async-signal-safe calls until exec or the body.
[[noreturn]] void Child(const ChildPlan& plan) {
  const int report_fd = plan.report_fd;
  auto fail = [report_fd](int stage, int err) {
    ChildError e{stage, err};
    ssize_t n = ::write(report_fd, &e, sizeof(e));
    (void)n;
    ::_exit(127);
  };
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != plan.parent) fail(kStageParentGone, 0);
  if (plan.body == nullptr) {
    // A signal mask and ignored signals survive exec: give the program a clean slate. A body
    // is this program and keeps this process's signal state.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);
    }
  }
  if (plan.netns_fd >= 0 && ::setns(plan.netns_fd, CLONE_NEWNET) != 0) fail(kStageSetns, errno);
  // dup2 onto itself would keep close-on-exec: clear the flag instead.
  const int redirects[3][2] = {
      {plan.in_fd, STDIN_FILENO}, {plan.out_fd, STDOUT_FILENO}, {plan.err_fd, STDERR_FILENO}};
  for (const auto& [from, to] : redirects) {
    if (from < 0) continue;
    if (from == to) {
      ::fcntl(to, F_SETFD, 0);
    } else {
      ::dup2(from, to);
    }
  }
  if (plan.body == nullptr) {
    ::execve(plan.path, plan.argv, plan.envp);
    fail(kStageExec, errno);
  }
  // Fork launch: past setup, so the start report is done (its pipe closes here); the rank
  // keeps none of the launcher's descriptors of other ranks (pidfds, channels).
  for (int fd : *plan.launcher_fds) ::close(fd);
  for (int fd : {plan.netns_fd, plan.in_fd, plan.out_fd, plan.err_fd, report_fd}) {
    if (fd > STDERR_FILENO) ::close(fd);
  }
  const int code = (*plan.body)(plan.channel_fd);
  std::fflush(nullptr);
  ::_exit(code);
}

}  // namespace

std::string ExitStatus::ToString() const {
  switch (state) {
    case State::kRunning:
      return "running";
    case State::kExited:
      return "exited " + std::to_string(code);
    case State::kSignaled: {
      const char* abbrev = ::sigabbrev_np(signal);
      std::string s = "killed by " + (abbrev != nullptr ? "SIG" + std::string(abbrev)
                                                        : "signal " + std::to_string(signal));
      return killed_by_watchdog ? s + " (watchdog)" : s;
    }
  }
  return "unknown";
}

Result<std::unique_ptr<LocalNetnsLauncher>> LocalNetnsLauncher::Create(
    std::vector<std::string> host_netns, std::string log_dir) {
  if (!log_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(log_dir, ec);
    if (ec) return ErrnoStatus("create log directory " + log_dir, ec.value());
  }
  for (const std::string& ns : host_netns) {
    if (!ns.empty()) FL_RETURN_IF_ERROR(ValidateNetnsName(ns));
  }
  return std::unique_ptr<LocalNetnsLauncher>(
      new LocalNetnsLauncher(std::move(host_netns), std::move(log_dir)));
}

LocalNetnsLauncher::~LocalNetnsLauncher() {
  for (Rank& r : ranks_) {
    if (!TryReap(r)) KillAndReap(r);
  }
}

Status LocalNetnsLauncher::CheckHandle(int handle) const {
  if (handle < 0 || handle >= size()) {
    return InvalidArgument("unknown rank handle " + std::to_string(handle));
  }
  return Status::Ok();
}

Result<int> Launcher::Start(const LaunchSpec& spec) {
  FL_ASSIGN_OR_RETURN(std::vector<int> handles, StartWorld({spec}));
  return handles.front();
}

Result<std::vector<int>> LocalNetnsLauncher::StartWorld(const std::vector<LaunchSpec>& specs) {
  const size_t before = ranks_.size();
  for (const LaunchSpec& spec : specs) {
    Status st = StartOne(spec);
    if (!st.ok()) {
      // All or nothing: the ranks of this call go again.
      while (ranks_.size() > before) {
        KillAndReap(ranks_.back());
        ranks_.pop_back();
      }
      return st;
    }
  }
  std::vector<int> handles;
  for (size_t h = before; h < ranks_.size(); ++h) handles.push_back(static_cast<int>(h));
  return handles;
}

Status LocalNetnsLauncher::StartOne(const LaunchSpec& spec) {
  const bool forked_body = static_cast<bool>(spec.body);
  if (!forked_body && spec.argv.empty()) return InvalidArgument("empty argv");
  const int host = spec.placement.host;
  if (host < 0 || host >= static_cast<int>(host_netns_.size())) {
    return InvalidArgument("placement on host " + std::to_string(host) + " (the launcher has " +
                           std::to_string(host_netns_.size()) + " hosts)");
  }
  std::string name =
      spec.name.empty() ? "rank" + std::to_string(spec.placement.global_rank) : spec.name;
  if (name.find('/') != std::string::npos) return InvalidArgument("rank name with '/'");
  std::string path;
  if (!forked_body) {
    FL_ASSIGN_OR_RETURN(path, ResolveProgram(spec.argv[0]));
  }

  // Everything the child needs is prepared here: after fork it may only make system calls.
  ChildPlan plan;
  plan.parent = ::getpid();
  UniqueFd netns_fd;
  if (!host_netns_[host].empty()) {
    FL_ASSIGN_OR_RETURN(netns_fd, OpenNetns(host_netns_[host]));
  }
  plan.netns_fd = netns_fd.get();
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) return ErrnoStatus("open /dev/null", errno);
  UniqueFd in_fd(null_fd);
  plan.in_fd = in_fd.get();
  UniqueFd out_fd, err_fd;
  if (!log_dir_.empty()) {
    FL_ASSIGN_OR_RETURN(out_fd, OpenLog(log_dir_ + "/" + name + ".out"));
    FL_ASSIGN_OR_RETURN(err_fd, OpenLog(log_dir_ + "/" + name + ".err"));
  }
  plan.out_fd = out_fd.get();
  plan.err_fd = err_fd.get();
  std::vector<std::string> args = spec.argv;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = forked_body ? std::vector<std::string>{} : MergeEnv(spec.env);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  plan.path = path.c_str();
  plan.argv = argv.data();
  plan.envp = envp.data();
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", errno);
  UniqueFd report_rd(report[0]);
  UniqueFd report_wr(report[1]);
  plan.report_fd = report_wr.get();
  UniqueFd channel_rd, channel_wr;
  std::vector<int> launcher_fds;
  if (forked_body) {
    int channel[2];
    if (::pipe2(channel, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", errno);
    channel_rd.Reset(channel[0]);
    channel_wr.Reset(channel[1]);
    plan.body = &spec.body;
    plan.channel_fd = channel_wr.get();
    for (const Rank& r : ranks_) {
      if (r.pidfd.valid()) launcher_fds.push_back(r.pidfd.get());
      if (r.channel.valid()) launcher_fds.push_back(r.channel.get());
    }
    launcher_fds.push_back(report_rd.get());
    launcher_fds.push_back(channel_rd.get());
    // Whatever this process has buffered must not be written twice by the rank.
    std::fflush(nullptr);
  }
  plan.launcher_fds = &launcher_fds;

  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork", errno);
  if (pid == 0) Child(plan);
  report_wr.Reset();
  channel_wr.Reset();
  Rank rank;
  rank.pid = pid;
  rank.name = name;
  rank.channel = std::move(channel_rd);
  // The pipe closes at exec or before the body (success) or carries the reason the child
  // could not start.
  ChildError child_error;
  ssize_t n;
  do {
    n = ::read(report_rd.get(), &child_error, sizeof(child_error));
  } while (n < 0 && errno == EINTR);
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0) rank.pidfd.Reset(fd);
  const int pidfd_err = errno;
  if (n != 0 || fd < 0) {
    KillAndReap(rank);
    if (n < 0) return ErrnoStatus("read the start report of " + name, errno);
    if (n == 0) return ErrnoStatus("pidfd_open of " + name, pidfd_err);
    switch (child_error.stage) {
      case kStageSetns:
        return ErrnoStatus(name + ": setns into " + host_netns_[host], child_error.err);
      case kStageExec:
        return ErrnoStatus(name + ": exec " + path, child_error.err);
      default:
        return Internal(name + ": the launcher's thread went away during start");
    }
  }
  ranks_.push_back(std::move(rank));
  return Status::Ok();
}

bool LocalNetnsLauncher::TryReap(Rank& r) {
  if (!r.status.running()) return true;
  siginfo_t info;
  std::memset(&info, 0, sizeof(info));
  int rc;
  do {
    rc = ::waitid(P_PID, r.pid, &info, WEXITED | WNOHANG);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    // ECHILD: reaped behind our back (SIGCHLD ignored); the exit status is lost.
    r.status.state = ExitStatus::State::kExited;
    r.status.code = -1;
  } else if (info.si_pid == 0) {
    return false;
  } else {
    r.status = FromSiginfo(info);
  }
  r.pidfd.Reset();
  return true;
}

void LocalNetnsLauncher::KillAndReap(Rank& r) noexcept {
  if (!r.status.running()) return;
  // The group first (helpers the rank started), then the rank itself through its pidfd in
  // case it left its group.
  ::kill(-r.pid, SIGKILL);
  if (r.pidfd.valid()) {
    ::syscall(SYS_pidfd_send_signal, r.pidfd.get(), SIGKILL, nullptr, 0);
  } else {
    ::kill(r.pid, SIGKILL);
  }
  siginfo_t info;
  std::memset(&info, 0, sizeof(info));
  int rc;
  do {
    rc = ::waitid(P_PID, r.pid, &info, WEXITED);
  } while (rc != 0 && errno == EINTR);
  if (rc == 0) {
    r.status = FromSiginfo(info);
  } else {
    r.status.state = ExitStatus::State::kExited;
    r.status.code = -1;
  }
  r.pidfd.Reset();
}

Result<ExitStatus> LocalNetnsLauncher::Wait(int handle, int64_t deadline_ns) {
  FL_RETURN_IF_ERROR(CheckHandle(handle));
  Rank& r = ranks_[handle];
  while (!TryReap(r)) {
    int64_t left = deadline_ns - MonoNow();
    if (left <= 0) break;
    pollfd p{r.pidfd.get(), POLLIN, 0};
    int ms = static_cast<int>(std::min<int64_t>((left + 999'999) / 1'000'000, INT_MAX));
    if (::poll(&p, 1, ms) < 0 && errno != EINTR) return ErrnoStatus("poll pidfd", errno);
  }
  return r.status;
}

Status LocalNetnsLauncher::Kill(int handle, int sig) {
  FL_RETURN_IF_ERROR(CheckHandle(handle));
  Rank& r = ranks_[handle];
  if (TryReap(r)) return Status::Ok();
  // Unreaped, so the pid (and the group it leads) cannot have been reused.
  if (::kill(-r.pid, sig) != 0 && errno != ESRCH) {
    return ErrnoStatus("kill " + r.name + " (group " + std::to_string(r.pid) + ")", errno);
  }
  if (::syscall(SYS_pidfd_send_signal, r.pidfd.get(), sig, nullptr, 0) != 0 && errno != ESRCH) {
    return ErrnoStatus("signal " + r.name, errno);
  }
  return Status::Ok();
}

WaitAllReport LocalNetnsLauncher::WaitAll(int64_t deadline_ns) {
  for (;;) {
    std::vector<pollfd> fds;
    for (Rank& r : ranks_) {
      if (!TryReap(r)) fds.push_back({r.pidfd.get(), POLLIN, 0});
    }
    if (fds.empty()) break;
    int64_t left = deadline_ns - MonoNow();
    if (left <= 0) break;
    int ms = static_cast<int>(std::min<int64_t>((left + 999'999) / 1'000'000, INT_MAX));
    if (::poll(fds.data(), fds.size(), ms) < 0 && errno != EINTR) break;
  }
  WaitAllReport report;
  for (int h = 0; h < size(); ++h) {
    Rank& r = ranks_[h];
    if (!TryReap(r)) {
      KillAndReap(r);
      // A rank that exited on its own in the last instant is not reported as hung.
      if (r.status.state == ExitStatus::State::kSignaled && r.status.signal == SIGKILL) {
        r.status.killed_by_watchdog = true;
        report.killed.push_back(h);
      }
    }
    report.statuses.push_back(r.status);
  }
  return report;
}

ExitStatus LocalNetnsLauncher::status(int handle) const {
  if (!CheckHandle(handle).ok()) return {};
  return ranks_[handle].status;
}

std::optional<pid_t> LocalNetnsLauncher::LocalPid(int handle) const {
  if (!CheckHandle(handle).ok()) return std::nullopt;
  return ranks_[handle].pid;
}

int LocalNetnsLauncher::ChannelFd(int handle) const {
  if (!CheckHandle(handle).ok()) return -1;
  return ranks_[handle].channel.valid() ? ranks_[handle].channel.get() : -1;
}

std::string LocalNetnsLauncher::StdoutPath(int handle) const {
  if (!CheckHandle(handle).ok() || log_dir_.empty()) return "";
  return log_dir_ + "/" + ranks_[handle].name + ".out";
}

std::string LocalNetnsLauncher::StderrPath(int handle) const {
  if (!CheckHandle(handle).ok() || log_dir_.empty()) return "";
  return log_dir_ + "/" + ranks_[handle].name + ".err";
}

}  // namespace faultline::runner
