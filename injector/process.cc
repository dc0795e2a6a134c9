#include "injector/process.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>

#include "base/clock.h"
#include "base/fd.h"
#include "injector/netns.h"
#include "injector/policy.h"

namespace faultline {
namespace {

// Fields after the ")" of the comm field: state is the first, start time the 20th.
Result<std::vector<std::string>> StatFields(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return NotFound("no process " + std::to_string(pid));
  std::string line;
  std::getline(in, line);
  size_t close = line.rfind(')');
  if (close == std::string::npos)
    return Internal("malformed /proc/" + std::to_string(pid) + "/stat");
  std::stringstream ss(line.substr(close + 2));
  std::vector<std::string> f;
  std::string x;
  while (ss >> x) f.push_back(x);
  if (f.size() < 20) return Internal("short /proc/" + std::to_string(pid) + "/stat");
  return f;
}

}  // namespace

Result<char> ProcessState(int pid) {
  FL_ASSIGN_OR_RETURN(std::vector<std::string> f, StatFields(pid));
  return f[0][0];
}

Result<ProcessRef> LookupProcess(int pid) {
  if (pid <= 0) return InvalidArgument("invalid pid " + std::to_string(pid));
  FL_ASSIGN_OR_RETURN(std::vector<std::string> f, StatFields(pid));
  ProcessRef ref;
  ref.pid = pid;
  ref.start_time = std::stoull(f[19]);
  return ref;
}

Status SignalProcess(const ProcessRef& ref, int sig) {
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, ref.pid, 0));
  if (fd < 0) {
    if (errno == ESRCH) return NotFound("process " + std::to_string(ref.pid) + " is gone");
    return ErrnoStatus("pidfd_open " + std::to_string(ref.pid), errno);
  }
  UniqueFd pidfd(fd);
  // The pidfd pins the process: if the start time matches now, the signal reaches it.
  auto now = LookupProcess(ref.pid);
  if (!now.ok() || now->start_time != ref.start_time) {
    return NotFound("process " + std::to_string(ref.pid) + " is gone (pid reused)");
  }
  if (::syscall(SYS_pidfd_send_signal, pidfd.get(), sig, nullptr, 0) != 0) {
    if (errno == ESRCH) return NotFound("process " + std::to_string(ref.pid) + " is gone");
    return ErrnoStatus("signal " + std::to_string(sig) + " to " + std::to_string(ref.pid), errno);
  }
  return Status::Ok();
}

char WaitProcessState(int pid, char want, int64_t timeout_ns) {
  MonoNs deadline = MonoNow() + timeout_ns;
  char last = 'X';
  for (;;) {
    auto st = ProcessState(pid);
    last = st.ok() ? *st : 'X';
    bool stopped = last == 'T' || last == 't';
    bool gone = last == 'X' || last == 'Z';
    if ((want == 'T' && stopped) || (want == 'R' && !stopped) || (want == 'X' && gone)) {
      return last;
    }
    if (MonoNow() >= deadline) return last;
    ::usleep(200);
  }
}

Status CheckProcessTarget(int pid, const std::string& netns, const TargetPolicy& policy) {
  if (pid <= 1 || pid == ::getpid()) {
    return InvalidArgument("refusing to signal pid " + std::to_string(pid));
  }
  FL_RETURN_IF_ERROR(policy.CheckNetns(netns));
  FL_ASSIGN_OR_RETURN(uint64_t ns_inode, NetnsInode(netns));
  auto proc_inode = ProcessNetnsInode(pid);
  if (!proc_inode.ok()) return NotFound("no process " + std::to_string(pid));
  if (*proc_inode != ns_inode) {
    return PermissionDenied("process " + std::to_string(pid) +
                            " does not run in network namespace '" + netns + "'");
  }
  return Status::Ok();
}

}  // namespace faultline
