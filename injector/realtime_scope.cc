#include "injector/realtime_scope.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace faultline {

RealtimeScope::RealtimeScope(int priority) {
  tid_ = static_cast<pid_t>(syscall(SYS_gettid));
  old_policy_ = sched_getscheduler(tid_);
  if (old_policy_ < 0 || sched_getparam(tid_, &old_param_) != 0) {
    old_policy_ = SCHED_OTHER;
    old_param_ = sched_param{};
  }
  old_policy_ &= ~SCHED_RESET_ON_FORK;
  sched_param p{};
  p.sched_priority = priority;
  if (sched_setscheduler(tid_, SCHED_FIFO | SCHED_RESET_ON_FORK, &p) == 0) {
    raised_ = true;
    description_ = "SCHED_FIFO " + std::to_string(priority);
  } else {
    description_ = std::string("SCHED_OTHER (SCHED_FIFO refused: ") + std::strerror(errno) + ")";
  }
}

RealtimeScope::~RealtimeScope() {
  if (raised_) sched_setscheduler(tid_, old_policy_, &old_param_);
}

}  // namespace faultline
